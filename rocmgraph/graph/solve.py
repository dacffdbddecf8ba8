"""Several stages in one BuildKit solve: the pure parts (which stages go together, and whose
line is whose).

The stages a run must build go to BuildKit together: one Dockerfile holds them all (a parent
built before enters as its image) and one ``docker build --target <stage>`` per stage starts
at once. BuildKit merges the steps the builds share, so each runs once; stages that do not
need each other run side by side; each stage's image is exported as soon as it is done,
while the stages after it build on. A one-stage solve is a stage built alone.

A squashed stage takes the configuration of the image it squashes, which the engine can
only tell once that image exists: such a stage waits for the next solve (``waves``). So does
a sealed stage (built with the network off) after an open one it needs, and the other way
round: a build's network is one for all its steps, its parents' in the file included.

The builds' outputs interleave, and a step two builds share prints its output in whichever
build ran it: ``Router`` gives each stage's log the lines of its own steps, and tells whose
step failed a build (the build of one stage may fail at a step of another it is built on).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Mapping

from rocmgraph.graph.dag import Graph


def waves(
    graph: Graph, todo: Collection[str], sealed: Collection[str] = ()
) -> list[tuple[str, ...]]:
    """``todo`` as solves to run one after the other, each in build order and either all
    ``sealed`` or none: one, unless a squashed stage must wait for the image whose
    configuration it takes, or a stage for one it needs that is built with another network."""
    remaining = set(todo)
    found = []
    while remaining:
        first = _first(graph, remaining, set(sealed))
        for part in (first & set(sealed), first - set(sealed)):
            if part:
                found.append(tuple(name for name in graph.order if name in part))
        remaining -= first
    return found


def _first(graph: Graph, todo: set[str], sealed: set[str]) -> set[str]:
    """The stages of ``todo`` that can be solved now: all, unless a squashed stage's first
    parent is among them, or a stage needs one of them sealed otherwise than itself; then
    what those need from ``todo``."""
    needed: set[str] = set()
    for name in todo:
        stage = graph[name]
        if stage.squash and stage.parents and stage.parents[0] in todo:
            parent = stage.parents[0]
            needed |= ({parent} | graph.ancestors(parent)) & todo
        for other in graph.ancestors(name) & todo:
            if (other in sealed) != (name in sealed):
                needed |= ({other} | graph.ancestors(other)) & todo
    return _first(graph, needed, sealed) if needed else todo


# A step as --progress=plain starts it ("#9 [vllm_build 5/7] RUN ...", "#3 [internal] load
# ...", "#4 [1/4] FROM ..." in a file of one stage), and any later line of it ("#9 0.52
# Collecting ...", "#9 DONE 1.4s").
_STEP = re.compile(r"^#(\d+) (\[(?:([\w.-]+)\s*)?(?:\d+/\d+)?\] .*)$")
_LINE = re.compile(r"^#(\d+) (.*)$")
_ENDS = ("DONE", "CACHED", "ERROR")
# BuildKit's summary of the step that failed a build, at the end of its output: a line of
# dashes, then " > [vllm_build 3/5] RUN pip install ...:" (its last lines follow). A step of
# no stage ("[internal] load build context") is the build's own.
_DASHES = "------"
_SUMMARY = re.compile(r"^ > \[([\w.-]+)\s+\d+/\d+\] ")


class Router:
    """The lines of a solve's builds, each told to the stage whose step it is: a step of
    ``owners``' BuildKit stages (``vllm_build`` -> vllm) to that stage, anything else (the
    build's own lines, its error's summary) to the stage the build is of. A step two builds
    share is told once: one header, renumbered in the stage's log, one copy of its output,
    and one end (``CACHED`` only as the stage's own build says it: another build says so of
    a step it merely waited for)."""

    def __init__(self, owners: Mapping[str, str], tell: Callable[[str, str], None]) -> None:
        self._owners = owners
        self._tell = tell
        self._lock = threading.Lock()
        self._steps: dict[tuple[str, str], tuple[str, int]] = {}  # (build, #n) -> stage, #m
        self._numbers: dict[str, dict[str, int]] = {}  # stage -> step title -> #m
        self._said: dict[str, set[tuple[int, str]]] = {}  # stage -> (#m, line) told
        self._ended: set[tuple[str, int]] = set()
        # (stage, #m) -> the build whose copy of the step's output is told: buildx gives every
        # build that shares a step all of its output (docker 20.10 gave it to one)
        self._voices: dict[tuple[str, int], str] = {}
        self._dashes: set[str] = set()  # the builds whose last line was a line of dashes
        self._failed: dict[str, str] = {}  # build -> the stage whose step failed it

    def feed(self, build: str, line: str) -> None:
        """A line of the build of stage ``build``."""
        with self._lock:
            told = self._route(build, line)
        if told is not None:
            self._tell(*told)

    def failed(self, build: str) -> str:
        """The stage whose step failed the build of stage ``build``: the owner of the step
        BuildKit's summary names, else ``build`` itself."""
        with self._lock:
            return self._failed.get(build, build)

    def _route(self, build: str, line: str) -> tuple[str, str] | None:
        self._summary(build, line)
        if not line.strip():
            return None  # BuildKit's blank lines between steps: each log gets its own
        if step := _STEP.match(line):
            number, title, name = step.groups()
            owner = self._owners.get(name or "", build)  # "internal": the build's own
            numbers = self._numbers.setdefault(owner, {})
            first = title not in numbers
            mine = numbers.setdefault(title, len(numbers) + 1)
            self._steps[build, number] = (owner, mine)
            return (owner, f"#{mine} {title}") if first else None
        found = _LINE.match(line)
        if found is None:
            return build, line
        if (build, found.group(1)) not in self._steps:  # "#12 exporting to image": its own
            numbers = self._numbers.setdefault(build, {})
            mine = numbers.setdefault(f"{build}#{found.group(1)}", len(numbers) + 1)
            self._steps[build, found.group(1)] = (build, mine)
        owner, mine = self._steps[build, found.group(1)]
        rest = found.group(2)
        if rest[:1].isdigit():  # the step's output: one build's copy, whole
            if self._voices.setdefault((owner, mine), build) != build:
                return None
        elif not self._first(build, owner, mine, rest):
            return None
        return owner, f"#{mine} {rest}"

    def _summary(self, build: str, line: str) -> None:
        """Note the stage whose step failed the build, should ``line`` name the step."""
        after_dashes = build in self._dashes
        self._dashes.discard(build)
        if line == _DASHES:
            self._dashes.add(build)
        elif after_dashes and (summary := _SUMMARY.match(line)):
            self._failed.setdefault(build, self._owners.get(summary.group(1), build))

    def _first(self, build: str, owner: str, mine: int, rest: str) -> bool:
        """Whether a line of a step that is not its output is news to the stage's log."""
        said = self._said.setdefault(owner, set())
        if (mine, rest) in said or (rest.startswith(_ENDS) and (owner, mine) in self._ended):
            return False  # what another build told already: its header, its end
        if rest == "CACHED" and build != owner:
            return False  # merged into the build that runs it, which tells how it ended
        said.add((mine, rest))
        if rest.startswith(_ENDS):
            self._ended.add((owner, mine))
        return True
