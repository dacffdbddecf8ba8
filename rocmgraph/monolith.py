"""The graph as one multi-stage Dockerfile, for people who only run `docker build`.

Each stage becomes a named stage of one file: a parent that came in as a build
arg (``FROM ${WHEELS_IMAGE}``) becomes the stage of that name, and one build
context holds every stage's context. It builds the same image with plain
BuildKit and its layer cache, without this tool's keys: the benchmark sets the
two side by side.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from rocmgraph import context
from rocmgraph.engine import Engine
from rocmgraph.outside import Outside
from rocmgraph.recipe import parent_arg, render
from rocmgraph.run import Run

_ARG = re.compile(r"^ARG ([A-Z0-9_]+)_IMAGE\n", re.MULTILINE)


HEADER = (
    "# The verl ROCm image as one Dockerfile, rendered from the pins by `doit render`.\n"
    "# Pins: {pins}; arch: {archs}. Build with BuildKit:\n"
    "#   DOCKER_BUILDKIT=1 docker build --secret id=pip.conf,src=<a pip.conf> <context>\n"
    "# where the context holds src/<source> (patched), wheels/ and the recipe files:\n"
    "# `doit build` assembles it, checked by hash; this file cannot do that for you.\n"
)


def dockerfile(run: Run) -> str:
    """Every stage, in build order, as one Dockerfile whose final stage is the image."""
    header = HEADER.format(pins=Path(run.pins.file).name, archs=",".join(run.archs))
    return "\n".join([header, *stage_texts(run).values()])


def stage_texts(run: Run) -> dict[str, str]:
    """Each stage's part of the file, in build order: ``FROM <parent> AS <stage>`` and its
    steps (a stage with no parent keeps its image reference)."""
    parts = {}
    for stage in run.graph:
        # No squash here: no engine gives a FROM scratch stage its configuration back.
        text = _ARG.sub("", render(stage, run.pins, run.archs, squash=False))
        for parent in stage.parents:
            variable = "${" + parent_arg(parent) + "}"
            # an alias of a parent (for --mount from=) is the parent's own stage here
            text = text.replace(f"FROM {variable} AS {parent}\n", "")
            text = text.replace(f"FROM {variable} AS ", f"FROM {parent} AS ")
            text = text.replace(f"FROM {variable}\n", f"FROM {parent} AS {stage.name}\n")
        if not stage.parents:
            text = re.sub(
                r"^(FROM \S+)$", rf"\1 AS {stage.name}", text, count=1, flags=re.MULTILINE
            )
        parts[stage.name] = text
    return parts


def prepare(run: Run, engine: Engine, outside: Outside, dest: Path) -> Path:
    """One build context for the whole file: every stage's context, merged."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as scratch:
        for stage in run.graph:
            part = context.prepare(run, engine, outside, stage.name, Path(scratch) / stage.name)
            (part / "Dockerfile").unlink()
            shutil.copytree(part, dest, dirs_exist_ok=True, symlinks=True)
    (dest / "Dockerfile").write_text(dockerfile(run), encoding="utf-8")
    return dest
