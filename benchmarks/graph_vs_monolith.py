"""Benchmark: the build graph against one monolithic Dockerfile, on the demo profile.

Both build the same image from the same pins (the monolith is the graph rendered
as one multi-stage Dockerfile, rocmgraph/monolith.py) through the same four
changes: cold, no-op, one pin changed (the sglang commit), arch switch (gfx942 ->
gfx950). The graph decides by content keys and image tags; the monolith relies on
plain `docker build` and BuildKit's layer cache. Each cold start prunes the
BuildKit cache and the previous images, so neither inherits the other's work.

    python3 benchmarks/graph_vs_monolith.py      (needs what bootstrap.sh sets up)

It prints one table (markdown); the README keeps the last one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import stages
from rocmgraph import monolith, pinsedit
from rocmgraph.build import pip_secret
from rocmgraph.demo.profile import DEMO_ROOT, Demo, pins_path
from rocmgraph.engine import BuildJob
from rocmgraph.layout import ROOT
from rocmgraph.outside import Outside
from rocmgraph.recipe import PIP_SECRET
from rocmgraph.run import Options, Run

NAMESPACE = "verl-bench"
DOCKER = "/usr/bin/docker"


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout


def forget_everything() -> None:
    """No images of the benchmark, and an empty BuildKit cache: a cold start."""
    names = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}").split()
    ours = [
        n for n in names if n.startswith((f"{NAMESPACE}/", f"{NAMESPACE}:", f"{NAMESPACE}-mono:"))
    ]
    if ours:
        docker("image", "rm", "--force", *ours)
    docker("builder", "prune", "--all", "--force")


def doit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "doit", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def edit(pins: Path, path: list[str], value: str) -> None:
    pinsedit.write(pins, [pinsedit.Change(tuple(path), "", value)])


def image_mb(ref: str) -> str:
    return f"{int(docker('image', 'inspect', '--format', '{{.Size}}', ref)) / 1e6:.0f} MB"


def graph_build(pins: Path, arch: str) -> tuple[float, int]:
    started = time.monotonic()
    # -n 2: independent stages build at once, as BuildKit runs a monolith's stages
    result = doit("-n", "2", "build:image", "profile=demo", f"pins={pins}", f"arch={arch}")
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(result.stdout[-2000:] + result.stderr)
    built = set(re.findall(r"^\.  build:(\w+)$", result.stdout, re.MULTILINE)) - {"image"}
    return elapsed, len(built)


def monolith_build(pins: Path, arch: str, work: Path) -> tuple[float, int]:
    started = time.monotonic()
    run = Run(Options(pins=str(pins), arch=arch, network="host"), stages.graph())
    outside = Outside(logs=work / "logs", network="host")
    context = monolith.prepare(run, outside.engine, outside, work / "context")
    log = work / "monolith.out"
    with log.open("w") as out, pip_secret(run.pins.python.index) as pip_conf:
        engine = outside.docker
        engine.out = out
        engine.build(
            BuildJob(
                stage="monolith",
                ref=f"{NAMESPACE}-mono:{arch}",
                context=context,
                secrets={PIP_SECRET: pip_conf},
            )
        )
    elapsed = time.monotonic() - started
    return elapsed, len(executed_stages((work / "logs" / "monolith.log").read_text()))


def executed_stages(log: str) -> set[str]:
    """Stages of a plain-progress BuildKit log with a step that ran (not CACHED)."""
    stage_of: dict[str, str] = {}
    cached: set[str] = set()
    done: set[str] = set()
    for line in log.splitlines():
        if match := re.match(r"#(\d+) \[(\w+)\s+\d+/\d+\] (\w+)", line):
            if match.group(3) != "FROM":  # resolving a base is no build
                stage_of[match.group(1)] = match.group(2)
        elif match := re.match(r"#(\d+) CACHED", line):
            cached.add(match.group(1))
        elif match := re.match(r"#(\d+) DONE", line):
            done.add(match.group(1))
    return {stage_of[step] for step in done - cached if step in stage_of}


def main() -> None:
    prepared = doit("demo", "profile=demo")
    if prepared.returncode != 0:
        raise SystemExit(prepared.stdout + prepared.stderr)
    second_sglang = _second_commit("sglang")
    scenarios: list[tuple[str, str, Callable[[Path], None]]] = [
        ("cold build", "gfx942", lambda _pins: None),
        ("no-op", "gfx942", lambda _pins: None),
        ("one pin changed (sglang commit)", "gfx942",
         lambda pins: edit(pins, ["sources", "sglang", "commit"], second_sglang)),
        ("arch switch (gfx942 -> gfx950)", "gfx950", lambda _pins: None),
    ]  # fmt: skip
    rows: dict[str, list[str]] = {name: [] for name, _, _ in scenarios}
    with tempfile.TemporaryDirectory() as scratch:
        for kind in ("graph", "monolith"):
            pins = Path(scratch) / kind / "pins.toml"
            pins.parent.mkdir()
            pins.write_text(pins_path("demo").read_text())
            edit(pins, ["image", "name"], NAMESPACE)
            forget_everything()
            demo = Demo(stages.graph())
            if kind == "monolith":  # doit serves the demo for the graph; here, we do
                demo.start(Outside(logs=pins.parent / "logs", network="host"))
            try:
                for name, arch, change in scenarios:
                    change(pins)
                    if kind == "graph":
                        seconds, count = graph_build(pins, arch)
                        image = f"{NAMESPACE}:{arch}"
                    else:
                        seconds, count = monolith_build(pins, arch, pins.parent)
                        image = f"{NAMESPACE}-mono:{arch}"
                    rows[name] += [f"{seconds:.1f} s", str(count), image_mb(image)]
                    print(f"{kind}: {name}: {seconds:.1f} s, {count} stages", file=sys.stderr)
            finally:
                demo.stop()
    print(
        "| change | graph: time | stages built | image | monolith: time | stages rebuilt | image |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, cells in rows.items():
        print(f"| {name} | {' | '.join(cells)} |")


def _second_commit(source: str) -> str:
    import json

    built = json.loads((DEMO_ROOT / "fixtures" / "built.json").read_text())
    return str(built["commits"][source][1])


if __name__ == "__main__":
    main()
