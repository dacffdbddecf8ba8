"""Benchmark: another machine, after the first built: the graph with `cache=` against the
monolith with the registry cache docker 20.10 offers, side by side.

Machine A is the engine here, B a second dockerd (rocmgraph/demo/machine.py), both
reaching Debian's docker-registry on 127.0.0.1. Two rows each way:

- B after A built (B empty);
- then one pin changed on B (verl moved to its other commit).

- graph: A runs `doit build:image cache=<registry>` (it pushes every stage); B runs the
  same command. Stages built: its `built <stage> ...` lines.
- monolith: A builds the graph as one Dockerfile (rocmgraph/building/dockerfiles.py) with
  `BUILDKIT_INLINE_CACHE=1` and pushes the final image; B builds the same file with
  `--cache-from` that image. That cache holds the final stage's layers only (mode=min):
  stages built are the stages with a step BuildKit ran.

For each row: seconds, stages built, and the bytes of layers B's engine gained (what it
pulled, and built). The demo's upstreams are served here for both ways, from the start.

    python3 benchmarks/fleet.py [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from changelog import executed_stages

import stages
from rocmgraph.building import dockerfiles, progress
from rocmgraph.building.execute import private_files, secret_texts
from rocmgraph.common.layout import ROOT
from rocmgraph.config import pinsedit
from rocmgraph.config.pins import load
from rocmgraph.demo.machine import DOCKER, second_engine
from rocmgraph.demo.profile import DEMO_ROOT, Demo, pins_path
from rocmgraph.demo.serve import Registry
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.graph.recipe import PIP_SECRET
from rocmgraph.outside.dockerapi import disk_usage

NAMESPACE = "verl-fleet"
PORT = 28473


def layer_bytes(env: dict[str, str]) -> int:
    return disk_usage(Path(env["DOCKER_HOST"].removeprefix("unix://")))


def graph(pins: Path, cache: str, env: dict[str, str]) -> tuple[float, int]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "doit", "-n", "2", "build:image", "network=host", f"pins={pins}",
         "arch=gfx942", f"cache={cache}", "hermetic=0"],
        cwd=ROOT, capture_output=True, text=True, check=False, env={**os.environ, **env},
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(result.stdout[-3000:] + result.stderr)
    return time.monotonic() - started, len(progress.built_stages(result.stdout))


def monolith_build(
    pins: Path, ref: str, env: dict[str, str], work: Path, *flags: str
) -> tuple[float, int]:
    run = Run(Options(pins=str(pins), arch="gfx942", network="host"), stages.graph())
    outside = Outside(logs=work / "logs", network="host")
    context = dockerfiles.prepare(run, outside.engine, outside, work / "context")
    started = time.monotonic()
    with private_files(secret_texts(run, run.pins.python.index), work / "secrets") as files:
        result = subprocess.run(
            [DOCKER, "build", "--progress=plain", "--network=host", "--tag", ref,
             "--secret", f"id={PIP_SECRET},src={files[PIP_SECRET]}", *flags, str(context)],
            capture_output=True, text=True, check=False,
            env={**os.environ, "DOCKER_BUILDKIT": "1", **env},
        )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(result.stdout[-3000:] + result.stderr[-3000:])
    return time.monotonic() - started, executed_stages(result.stderr + result.stdout)


Build = Callable[[dict[str, str]], tuple[float, int]]  # on an engine: seconds, stages built
HEADER = "| another machine | graph s | stages | MB | monolith s | stages | MB |"


def on_b(way: str, build: Build, pins: Path, other: str) -> list[dict[str, float | int]]:
    """The two rows of one way, on a fresh second engine."""
    rows: list[dict[str, float | int]] = []
    with second_engine() as b:
        for name, change in (("B after A built", ""), ("then one pin changed", other)):
            if change:
                pinsedit.write(pins, [pinsedit.Change(VERL, "", change)])
            before = layer_bytes(b)
            seconds, built = build(b)
            gained = layer_bytes(b) - before
            rows.append({"seconds": round(seconds, 1), "stages": built, "layer_bytes": gained})
            print(f"{way}: {name}: {seconds:.1f} s, {built} stages", file=sys.stderr)
    return rows


VERL = ("sources", "verl", "commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        pins = work / "pins.toml"
        pins.write_text(pins_path("demo").read_text())
        pinsedit.write(pins, [pinsedit.Change(("image", "name"), "", NAMESPACE)])
        pinned = load(pins).sources["verl"].commit
        commits = json.loads((DEMO_ROOT / "fixtures" / "built.json").read_text())["commits"]
        other = next(commit for commit in commits["verl"] if commit != pinned)
        registry = Registry(work / "registry", PORT)
        cache = f"127.0.0.1:{PORT}/bench-{time.time_ns()}"
        demo = Demo(stages.graph())
        demo.start(Outside(logs=work / "logs", network="host"))
        try:
            graph(pins, cache, {})  # A builds (or finds built) and pushes every stage
            rows = {"graph": on_b("graph", lambda b: graph(pins, cache, b), pins, other)}
            pinsedit.write(pins, [pinsedit.Change(VERL, "", pinned)])
            ref = f"{cache}/monolith:gfx942"
            inline = ("--build-arg", "BUILDKIT_INLINE_CACHE=1")
            monolith_build(pins, ref, {}, work, *inline)
            subprocess.run([DOCKER, "push", ref], check=True, capture_output=True)
            rows["monolith"] = on_b(
                "monolith",
                lambda b: monolith_build(pins, ref, b, work, "--cache-from", ref, *inline),
                pins,
                other,
            )
        finally:
            demo.stop()
            registry.stop()
    print(HEADER)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    names = ("B after A built", "then one pin changed")
    for name, g, m in zip(names, rows["graph"], rows["monolith"], strict=True):
        cells = [g["seconds"], g["stages"], f"{g['layer_bytes'] / 1e6:.0f}"]
        cells += [m["seconds"], m["stages"], f"{m['layer_bytes'] / 1e6:.0f}"]
        print(f"| {name} | " + " | ".join(map(str, cells)) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
