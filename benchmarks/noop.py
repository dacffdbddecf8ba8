"""Benchmark: a no-op `doit build:image` and `doit plan` of the demo, beside the floor.

The floor is what any doit run pays on this machine before the project's own code: Python
starting (`python3 -c pass`) and doit with a dodo.py of one task that is up to date. The rest
of a no-op is the project's: its imports, the keys of every stage, one question to the
engine. The cases take turns run by run, round after round, so that each meets the machine
in the same state (it is shared: the same code measures 20 to 40% apart from one hour to
the next, and drifts within a minute).

    python3 benchmarks/noop.py [--runs 15] [--rounds 2] [--beside CHECKOUT]   (a running engine)

It builds the demo first (`doit build:image profile=demo hermetic=0`, a no-op when built)
and prints, per round, the median and the fastest of each case. ``--beside`` adds the same
no-op in another checkout of the project (say, a `git worktree` of the commit before a
change), timed in the same turns. Give that checkout's demo another image name
(``[image].name`` in its demo/pins.toml): two checkouts that tag the same friendly name each
tag it back in turn, which is no no-op.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import usershell

ROOT = Path(__file__).resolve().parent.parent
DEMO = ("build:image", "profile=demo", "arch=gfx942", "hermetic=0")
PLAN = ("plan", "profile=demo", "arch=gfx942", "hermetic=0")
ONE_TASK = 'def task_x():\n    return {"actions": ["true"], "uptodate": [True]}\n'


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        argv, cwd=cwd, env=usershell.environ(), capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{result.stdout[-2000:]}{result.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beside", type=Path, help="another checkout, its no-op timed too")
    args = parser.parse_args()

    python = sys.executable
    with tempfile.TemporaryDirectory() as floor:
        (Path(floor) / "dodo.py").write_text(ONE_TASK)
        cases = {
            "python3 -c pass": ([python, "-c", "pass"], Path(floor)),
            "doit, a dodo.py of one task": ([python, "-m", "doit", "x"], Path(floor)),
            "no-op build of the demo": ([python, "-m", "doit", *DEMO], ROOT),
            "plan of the demo": ([python, "-m", "doit", *PLAN], ROOT),
        }
        if args.beside:
            beside = args.beside.resolve()
            cases[f"no-op build of the demo in {beside}"] = ([python, "-m", "doit", *DEMO], beside)
            cases[f"plan of the demo in {beside}"] = ([python, "-m", "doit", *PLAN], beside)
        for argv, cwd in cases.values():
            timed(argv, cwd)  # first: builds the demo if need be, writes the bytecode
        print("| round | case | median | fastest |")
        print("| ---: | --- | ---: | ---: |")
        for round_ in range(1, args.rounds + 1):
            times: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.runs):
                for name, (argv, cwd) in cases.items():
                    times[name].append(timed(argv, cwd))
            for name, found in times.items():
                print(f"| {round_} | {name} | {statistics.median(found):.3f} s "
                      f"| {min(found):.3f} s |")  # fmt: skip


if __name__ == "__main__":
    main()
