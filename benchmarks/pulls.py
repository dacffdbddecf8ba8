"""Benchmark: a wave's parents pulled one after the other, or side by side (execute.py's
pull_side_by_side), on an empty engine.

A vLLM bump on a fresh runner needs two big parents: the wheels' image to compile on and
verl's to assemble on (the demo's: 601 and 583 MB, no layer in common). This pushes the
demo's two to a registry on 127.0.0.1, then pulls them into an empty second dockerd
(rocmgraph/demo/machine.py), one after the other or both at once, the two ways taking
turns round by round, the engine emptied before each.

    python3 benchmarks/pulls.py [--rounds N]

The demo must be built first (`doit build:image profile=demo`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import stages
from rocmgraph.demo.machine import DOCKER, second_engine
from rocmgraph.demo.profile import pins_path
from rocmgraph.demo.serve import Registry
from rocmgraph.graph.invocation import Options, Run

PORT = 28477
PARENTS = ("wheels", "verl")  # what a vLLM bump's wave pulls
WAYS = {False: "one after the other", True: "side by side"}


def docker(env: dict[str, str], *args: str) -> str:
    return subprocess.run([DOCKER, *args], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def timed_pulls(env: dict[str, str], refs: list[str], side_by_side: bool) -> float:
    for ref in refs:  # an empty engine: none of the images, none of their layers
        subprocess.run([DOCKER, "image", "rm", ref], env={"PATH": "/usr/bin:/bin", **env},
                       capture_output=True, check=False)  # fmt: skip
    docker(env, "image", "prune", "--force")
    started = time.monotonic()
    if side_by_side:
        with ThreadPoolExecutor(len(refs)) as pool:
            list(pool.map(lambda ref: docker(env, "pull", "--quiet", ref), refs))
    else:
        for ref in refs:
            docker(env, "pull", "--quiet", ref)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run = Run(Options(pins=str(pins_path("demo")), arch="gfx942"), stages.graph())
    with tempfile.TemporaryDirectory() as scratch:
        registry = Registry(Path(scratch), PORT)
        try:
            refs = []
            for name in PARENTS:
                ref = f"127.0.0.1:{PORT}/pulls/{name}:bench"
                docker({}, "tag", run.ref(name), ref)
                docker({}, "push", ref)
                docker({}, "image", "rm", ref)
                refs.append(ref)
            seconds: dict[bool, list[float]] = {False: [], True: []}
            with second_engine() as env:
                for number in range(args.rounds):
                    for way in (False, True) if number % 2 == 0 else (True, False):
                        seconds[way].append(timed_pulls(env, refs, way))
                        said = f"round {number + 1}: {WAYS[way]}: {seconds[way][-1]:.1f} s"
                        print(said, file=sys.stderr)
        finally:
            registry.stop()
    print("| the wheels' and verl's images, an empty engine | median | each round |")
    print("| --- | ---: | --- |")
    for way, label in WAYS.items():
        each = ", ".join(f"{s:.1f}" for s in seconds[way])
        print(f"| {label} | {statistics.median(seconds[way]):.1f} s | {each} s |")


if __name__ == "__main__":
    main()
