"""The graph as one multi-stage Dockerfile, for people who only run `docker build`.

Each stage becomes a named stage of one file: a parent that came in as a build
arg (``FROM ${WHEELS_IMAGE}``) becomes the stage of that name, and one build
context holds every stage's context. It builds the same image with plain
BuildKit and its layer cache, without this tool's keys: the benchmark sets the
two side by side.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from rocmgraph.building import context
from rocmgraph.common.engine import Engine
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.recipe import parent_arg, render

_ARG = re.compile(r"^ARG ([A-Z0-9_]+)_IMAGE\n", re.MULTILINE)
_FROM = re.compile(r"^FROM [^\n]*", re.MULTILINE)
_AS = re.compile(r"^FROM \S+ AS (\S+)$", re.MULTILINE)


HEADER = (
    "# The verl ROCm image as one Dockerfile, rendered from the pins by `doit render`.\n"
    "# Pins: {pins}; arch: {archs}. Build with BuildKit:\n"
    "#   docker buildx build --secret id=pip.conf,src=<a pip.conf> <context>\n"
    "# where the context holds src/<source> (patched), wheels/ and the recipe files:\n"
    "# `doit build` assembles it, checked by hash; this file cannot do that for you.\n"
)


def dockerfile(run: Run, configs: Mapping[str, Sequence[str]] | None = None) -> str:
    """Every stage, in build order, as one Dockerfile whose final stage is the image.
    ``configs``: the squashed stages squash, as the graph builds them, each ending with the
    configuration given (stage -> its lines); None: nothing squashes."""
    if configs is not None:  # FROM scratch has none: the image would lose its own
        missing = [s.name for s in run.graph if s.squash and s.name not in configs]
        if missing:
            raise ValueError(f"no configuration given for the squashed stage {', '.join(missing)}")
    header = HEADER.format(pins=Path(run.pins.file).name, archs=",".join(run.archs))
    parts = stage_texts(run, squash=configs is not None, configs=configs)
    return "\n".join([header, *parts.values()])


def owners(parts: Mapping[str, str]) -> dict[str, str]:
    """Each named BuildKit stage of ``parts`` (``stage_texts``): the stage it is part of (a
    squashed stage names the image it squashes too)."""
    return {alias: name for name, text in parts.items() for alias in _AS.findall(text)}


def stage_texts(
    run: Run,
    names: Collection[str] | None = None,
    *,
    images: Mapping[str, str] | None = None,
    squash: bool = False,
    configs: Mapping[str, Sequence[str]] | None = None,
    sealed: Collection[str] = (),
) -> dict[str, str]:
    """Each stage's part of the file, in build order: ``FROM <parent> AS <stage>`` and its
    steps (a stage with no parent keeps its image reference). Of ``names`` (default: every
    stage); a parent not among them enters as its image (``images``: stage -> ref).
    ``squash``: a squashed stage squashes, and ends with the configuration ``configs`` gives
    it (only an engine can tell the configuration of the image it squashes). ``sealed``: the
    stages that build with the network off, from their closures."""
    chosen = set(run.graph.order if names is None else names)
    parts = {}
    for stage in run.graph:
        if stage.name not in chosen:
            continue
        rendered = render(stage, run.pins, run.archs, squash=squash, sealed=stage.name in sealed)
        text = _ARG.sub("", rendered)
        for parent in stage.parents:
            variable = "${" + parent_arg(parent) + "}"
            if parent not in chosen:
                text = text.replace(variable, (images or {})[parent])
                continue
            # an alias of a parent (for --mount from=) is the parent's own stage here
            text = text.replace(f"FROM {variable} AS {parent}\n", "")
            text = text.replace(f"FROM {variable}", f"FROM {parent}")
        # The stage is its last FROM (a squashed stage's FROM scratch): named after it.
        unnamed = [m for m in _FROM.finditer(text) if " AS " not in m.group(0)]
        if unnamed:
            end = unnamed[-1].end()
            text = f"{text[:end]} AS {stage.name}{text[end:]}"
        configuration = (configs or {}).get(stage.name)
        if configuration:
            text = f"{text.rstrip()}\n\n# The configuration of the image it squashes:\n" + "".join(
                f"{line}\n" for line in configuration
            )
        parts[stage.name] = text
    return parts


def prepare(run: Run, engine: Engine, outside: Outside, dest: Path) -> Path:
    """One build context for the whole file: every stage's context, merged (as a solve's)."""
    return context.prepare_whole(run, outside, run.graph.order, dest, recipe=dockerfile(run))
