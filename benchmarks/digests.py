"""Benchmark: the same pins built on two engines, one keeping its images in the classic
store and one in containerd's: which stages get the same layer digests, and which at least
the same files.

    python3 benchmarks/digests.py [--json PATH]

Both engines build the demo's image cold (the second is started for the run). For each
stage: the diff ids of its layers on both engines; where they differ, its files compared
(path, type, mode, owner, size, content; not times), as `doit verify stage=` compares a
rebuild.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from changelog import NAMESPACE, cold_world, doit_build, prepare_demo

import stages
from rocmgraph.common import filetree
from rocmgraph.common.engine import ImageStore
from rocmgraph.demo.machine import second_engine
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.docker import DockerEngine

ARCH = "gfx942"


@dataclass(frozen=True)
class Stage:
    """One stage on both engines."""

    name: str
    layers: int  # how many layers its image has
    same_layers: int  # of them, bottom up, with the same diff id on both engines
    files_differ: list[str]  # the paths whose facts differ (not their times); [] if none


def compare(name: str, ref: str, first: DockerEngine, second: DockerEngine) -> Stage:
    mine, theirs = first.layers(ref), second.layers(ref)
    same = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                min(len(mine), len(theirs)))  # fmt: skip
    if mine == theirs:
        return Stage(name, len(mine), same, [])
    differences = filetree.compare(first.files(ref), second.files(ref))
    return Stage(name, len(mine), same, [d.path for d in differences])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    args = parser.parse_args()
    _, template, source_archs = prepare_demo()
    with (
        cold_world(template, source_archs) as (work, pins),
        second_engine(ImageStore.CONTAINERD) as other,
    ):
        doit_build(pins, ARCH)
        doit_build(pins, ARCH, env=other)
        run = Run(Options(pins=str(pins), arch=ARCH, network="host"), stages.graph())
        first = DockerEngine.connect(work / "logs")
        second = DockerEngine.connect(work / "logs", host=other["DOCKER_HOST"])
        rows = [compare(name, run.ref(name), first, second) for name in run.graph.order]
    print(f"| stage ({NAMESPACE}) | layers | the same on both stores | files that differ |")
    print("| --- | ---: | ---: | --- |")
    for row in rows:
        shown = ", ".join(row.files_differ[:3]) + (" ..." if len(row.files_differ) > 3 else "")
        print(f"| {row.name} | {row.layers} | {row.same_layers} | {shown or 'none'} |")
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")


if __name__ == "__main__":
    main()
