"""Benchmark: a generated graph of 200 stages, planned and no-op built through doit.

The graph is the real one (pins.toml) widened: beside vLLM, ``--stages`` minus 14
more source stages, each a copy of the vLLM stage under its own name, all installed
by assemble. Every stage renders and keys as the real ones do. For the no-op, one
small local image is tagged with every stage's ref (and the final tag), so the
engine holds the whole graph as built; the tags are removed at the end.

    python3 benchmarks/scale.py [--stages 200] [--runs 5]   (a running engine)

It prints the median seconds of `doit plan` and of a no-op `doit build:image`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import usershell  # noqa: E402

import stages  # noqa: E402
from rocmgraph.graph.dag import Graph, make_graph  # noqa: E402
from rocmgraph.graph.invocation import Options, Run  # noqa: E402

DOCKER = "/usr/bin/docker"
STAGES_ENV = "VERL_GRAPH_SCALE_STAGES"  # how scale_dodo.py learns the size


def graph(size: int) -> Graph:
    """The real graph, widened to ``size`` stages by copies of the vLLM stage."""
    real = stages.graph()
    extra = size - len(real.order)
    if extra < 0:
        raise SystemExit(f"--stages must be at least {len(real.order)}")
    copies = [
        dataclasses.replace(real["vllm"], name=f"vllm_{n:03d}", reads=real["vllm"].reads)
        for n in range(1, extra + 1)
    ]
    # A copy reads sources.vllm (its reads name the source, not the stage).
    assemble = dataclasses.replace(
        real["assemble"], parents=(*real["assemble"].parents, *(c.name for c in copies))
    )
    return make_graph([*(s for s in real if s.name != "assemble"), assemble, *copies])


def doit(*args: str, size: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = usershell.environ(**{STAGES_ENV: str(size)})
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(HERE / "scale_dodo.py"), "-d", str(ROOT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    return time.monotonic() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    run = Run(Options(pins=str(ROOT / "pins.toml")), graph(args.stages))
    refs = [run.ref(stage.name) for stage in run.graph] + [run.friendly_tag()]
    small = subprocess.run(
        [DOCKER, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    source = next((ref for ref in small if not ref.startswith("<none>")), None)
    if source is None:
        raise SystemExit("no local image to tag: build the demo first (doit demo profile=demo)")
    for ref in refs:
        subprocess.run([DOCKER, "tag", source, ref], check=True)
    try:
        rows = []
        # hermetic=0: the stand-in images have no closures (a hermetic run would refuse them)
        for name, command in (("plan", ["plan"]), ("no-op build", ["build:image", "hermetic=0"])):
            doit(*command, size=args.stages)  # first: writes .doit.db, compiles templates
            times = []
            for _ in range(args.runs):
                seconds, result = doit(*command, size=args.stages)
                if result.returncode != 0:
                    raise SystemExit(result.stdout[-2000:] + result.stderr[-2000:])
                times.append(seconds)
            rows.append((name, statistics.median(times)))
            if command[0] == "build:image" and re.search(r"^\.  build:", result.stdout, re.M):
                raise SystemExit(f"not a no-op: {result.stdout[-2000:]}")
    finally:
        subprocess.run([DOCKER, "image", "rm", *refs], capture_output=True, check=False)
    print(f"| {args.stages} stages | median of {args.runs} |")
    print("| --- | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} s |")


if __name__ == "__main__":
    main()
