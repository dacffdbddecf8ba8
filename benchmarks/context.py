"""Benchmark: a patch edit's build context at the size of vLLM's tree, as the graph made it
before and as it makes it now, side by side.

vLLM's tree at its pin has 5,460 files, 77.5 MB (without .git). A patch edit moves the vLLM
stage's key, and its context is made again:

- before: the tree copied (shutil.copytree) into a folder named by the new key, built, and
  removed once built: BuildKit had never read that path, so it was sent and hashed whole;
- now: the tree hard-linked (fsutil.link_tree) into the stage's own folder, kept between
  builds: BuildKit sends and hashes only the files whose size, mode or mtime changed.

The tree here is made up to vLLM's shape (its count of files and bytes, in folders of about
twenty), the same on every run. Each round edits one file, as a patch does (a new file in
place of the old), and builds `COPY src/vllm /src/vllm` from scratch, the way the source
stage's recipe takes its tree: host seconds (making the folder), build seconds and the
engine's CPU seconds (dockerd's, from /proc). The two ways take turns, round after round;
medians, with each way's first build (from a path BuildKit had not read) not counted.

    python3 benchmarks/context.py [--rounds 5]     (a running engine, as root)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from changelog import DOCKER, engine_cpu

from rocmgraph.common.fsutil import link_tree

FILES, BYTES = 5460, 77_518_697  # vLLM's tree at 18d87a87 (pins.toml), without .git
RECIPE = "FROM scratch\nCOPY src/vllm /src/vllm\n"


def vllm_shaped(root: Path) -> Path:
    """A tree of vLLM's count of files and bytes: sizes drawn from one seed, most files
    small and a few large, as a source tree's are."""
    draw = random.Random(18)
    weights = [draw.lognormvariate(8, 1.5) for _ in range(FILES)]
    scale = BYTES / sum(weights)
    for number, weight in enumerate(weights):
        path = root / f"d{number // 400}" / f"e{number // 20}" / f"f{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(draw.randbytes(max(1, round(weight * scale))))
    return root


def edit(tree: Path, cached: Path, number: int) -> None:
    """One file replaced, as git apply replaces what a patch changes."""
    changed = tree / "d0" / "e0" / "f0.py"
    changed.unlink()
    changed.write_bytes((cached / "d0" / "e0" / "f0.py").read_bytes() + b"# edit %d\n" % number)


def build(context: Path) -> tuple[float, float]:
    (context / "Dockerfile").write_text(RECIPE)
    cpu, started = engine_cpu(), time.monotonic()
    argv = [DOCKER, "build", "--quiet", "--tag", "rocmgraph-bench-context", str(context)]
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    subprocess.run(argv, check=True, capture_output=True, env=env)
    seconds, now = time.monotonic() - started, engine_cpu()
    return seconds, (now - cpu) if cpu is not None and now is not None else float("nan")


def before(cached: Path, work: Path, number: int) -> tuple[float, float, float]:
    started = time.monotonic()
    folder = work / f"vllm-{number:012x}"
    shutil.copytree(cached, folder / "src" / "vllm", symlinks=True)
    edit(folder / "src" / "vllm", cached, number)
    host = time.monotonic() - started
    seconds, cpu = build(folder)
    started = time.monotonic()
    shutil.rmtree(folder)  # gone once built
    return host + time.monotonic() - started, seconds, cpu


def now(cached: Path, work: Path, number: int) -> tuple[float, float, float]:
    started = time.monotonic()
    folder = work / "vllm"
    shutil.rmtree(folder, ignore_errors=True)  # what prepare_many does first
    link_tree(cached, folder / "src" / "vllm")
    edit(folder / "src" / "vllm", cached, number)
    host = time.monotonic() - started
    return (host, *build(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ways: dict[str, Callable[[Path, Path, int], tuple[float, float, float]]] = {
        "before: a copy, a folder per key": before,
        "now: links, the stage's folder": now,
    }
    with tempfile.TemporaryDirectory(dir=Path.home()) as scratch:
        work = Path(scratch)
        cached = vllm_shaped(work / "cache")
        subprocess.run([DOCKER, "builder", "prune", "--all", "--force"], check=True,
                       capture_output=True)  # fmt: skip
        for way in ways.values():
            way(cached, work, 0)  # each path read once: a stage built before the edit
        figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
        for number in range(1, args.rounds + 1):
            for name, way in ways.items() if number % 2 else reversed(ways.items()):
                figures[name].append(way(cached, work, number))
    print(f"A patch edit's context, vLLM's size ({FILES} files, {BYTES / 1e6:.1f} MB), "
          f"median of {args.rounds}:\n")  # fmt: skip
    print("| | host: the folder | build | engine CPU |")
    print("| --- | ---: | ---: | ---: |")
    for name, rows in figures.items():
        cells = (statistics.median(row[i] for row in rows) for i in range(3))
        print(f"| {name} | " + " | ".join(f"{cell:.2f} s" for cell in cells) + " |")


if __name__ == "__main__":
    main()
