"""What a plan will cost: each stage's build time, the total, and the time on N builders.

A stage's estimate is the seconds its last build here took (its record), whatever
key that was: a rebuild of vLLM costs about what the last one did. A stage never
built here takes the real image's reference figure (docker/durations.toml, each
figure cited), or has no estimate. A stage the base image provides only checks versions:
it has no build to cost. Every estimate says which it is, so a plan never
passes a guess off as a measurement.

The time on N builders is a list schedule (Graham's): whenever a builder is free it
takes the ready stage with the longest path still ahead of it. Stages that need no
build cost nothing and are ready at once. Pure functions: no engine, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import tomli

from rocmgraph.common.errors import PinsError
from rocmgraph.common.layout import ROOT

REFERENCE_FILE = ROOT / "docker" / "durations.toml"


class Source(StrEnum):
    RECORDED = "recorded"  # this machine's last build of the stage
    REFERENCE = "reference"  # the real image's figure, from docker/durations.toml
    CHECK = "check"  # only checks what the base image provides: no build to cost
    NONE = "none"  # never built here, and no reference figure


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: Source

    def text(self) -> str:
        if self.source is Source.NONE:
            return "?"
        if self.source is Source.CHECK:
            return "check only"
        suffix = " (ref)" if self.source is Source.REFERENCE else ""
        return f"{duration(self.seconds)}{suffix}"


@dataclass(frozen=True)
class Reference:
    """A stage's build time on the real image, and where the figure comes from."""

    stage: str
    seconds: float
    source: str  # a URL
    says: str  # the words the figure is read from


@dataclass(frozen=True)
class Total:
    stages: int  # how many stages to build
    work: float  # their seconds, one after another
    wall: float  # seconds on ``builders`` builders
    builders: int
    recorded: int
    reference: int
    unknown: int
    checks: int = 0
    critical: tuple[str, ...] = ()  # the longest chain of stages to build, by their seconds

    def text(self) -> str:
        if not self.stages:
            return "nothing to build"
        plural = "" if self.stages == 1 else "s"
        sources = [
            f"{count} {word}"
            for count, word in (
                (self.recorded, "recorded"),
                (
                    self.reference,
                    f"reference figure{'' if self.reference == 1 else 's'} of the real image",
                ),
                (self.unknown, "without an estimate"),
                (self.checks, f"{'a check' if self.checks == 1 else 'checks'} only"),
            )
            if count
        ]
        many = "builder" if self.builders == 1 else "builders"
        return (
            f"{self.stages} stage{plural} to build: {duration(self.work)} of work, "
            f"{duration(self.wall)} on {self.builders} {many} ({', '.join(sources)})"
        )


def duration(seconds: float) -> str:
    """``~42 s``, ``~3 min 05 s``, ``~1 h 05 min``: rounded as an estimate deserves."""
    whole = round(seconds)
    if whole < 60:
        return f"~{whole} s"
    if whole < 3600:
        return f"~{whole // 60} min {whole % 60:02d} s"
    minutes = round(seconds / 60)
    return f"~{minutes // 60} h {minutes % 60:02d} min"


def estimate(
    stage: str,
    recorded: float | None,
    references: Mapping[str, Reference],
    check_only: bool = False,
) -> Estimate:
    if recorded is not None:
        return Estimate(recorded, Source.RECORDED)
    if check_only:
        return Estimate(0.0, Source.CHECK)
    if stage in references:
        return Estimate(references[stage].seconds, Source.REFERENCE)
    return Estimate(0.0, Source.NONE)


def makespan(
    seconds: Mapping[str, float], parents: Mapping[str, Iterable[str]], builders: int
) -> float:
    """How long the stages of ``seconds`` take on ``builders`` builders, each after its
    parents (``parents`` may name stages outside ``seconds``: those are done already)."""
    if builders < 1:
        raise ValueError("builders must be at least 1")
    todo = set(seconds)
    waits = {name: {p for p in parents.get(name, ()) if p in todo} for name in todo}
    children: dict[str, list[str]] = {name: [] for name in todo}
    for name, before in waits.items():
        for parent in before:
            children[parent].append(name)
    ahead = _longest_path_ahead(seconds, children)
    ready = [(-ahead[name], name) for name in sorted(todo) if not waits[name]]
    heapq.heapify(ready)
    running: list[tuple[float, str]] = []  # (finish time, stage)
    now = 0.0
    while ready or running:
        while ready and len(running) < builders:
            _, name = heapq.heappop(ready)
            heapq.heappush(running, (now + seconds[name], name))
        now, done = heapq.heappop(running)
        for child in children[done]:
            waits[child].discard(done)
            if not waits[child]:
                heapq.heappush(ready, (-ahead[child], child))
    return now


def _longest_path_ahead(
    seconds: Mapping[str, float], children: Mapping[str, list[str]]
) -> dict[str, float]:
    """Each stage's seconds plus the longest chain of its descendants (its priority)."""
    ahead: dict[str, float] = {}

    def walk(name: str) -> float:
        if name not in ahead:
            ahead[name] = seconds[name] + max((walk(c) for c in children[name]), default=0.0)
        return ahead[name]

    for name in sorted(seconds):
        walk(name)
    return ahead


def critical_path(
    seconds: Mapping[str, float], parents: Mapping[str, Iterable[str]]
) -> tuple[str, ...]:
    """The chain of the stages of ``seconds``, each a parent of the next, whose seconds add
    up to the most: no number of builders finishes them sooner. Parents outside ``seconds``
    are done already; a tie goes to the name first in sorted order, so that a plan and a
    build's trace of the same figures name the same chain."""
    longest: dict[str, tuple[float, str]] = {}  # name -> (its chain's seconds, its parent)

    def walk(name: str) -> float:
        if name not in longest:
            before = sorted(p for p in parents.get(name, ()) if p in seconds)
            best = max(before, key=walk, default="")  # max keeps the first of equals
            longest[name] = (seconds[name] + (walk(best) if best else 0.0), best)
        return longest[name][0]

    end = max(sorted(seconds), key=walk, default="")
    chain: list[str] = []
    while end:
        chain.append(end)
        end = longest[end][1]
    return tuple(reversed(chain))


def total(
    estimates: Mapping[str, Estimate], parents: Mapping[str, Iterable[str]], builders: int
) -> Total:
    """The price of building the stages of ``estimates``."""
    seconds = {name: e.seconds for name, e in estimates.items()}
    counts = dict.fromkeys(Source, 0)
    for e in estimates.values():
        counts[e.source] += 1
    return Total(
        stages=len(estimates),
        work=sum(seconds.values()),
        wall=makespan(seconds, parents, builders),
        builders=builders,
        recorded=counts[Source.RECORDED],
        reference=counts[Source.REFERENCE],
        unknown=counts[Source.NONE],
        checks=counts[Source.CHECK],
        critical=critical_path(seconds, parents),
    )


def load_references(path: Path = REFERENCE_FILE) -> dict[str, Reference]:
    """The real image's reference build times: ``[<stage>] minutes, source, says``."""
    fix = "each [<stage>] has minutes (a positive number), source (a URL) and says (a quote)"
    try:
        data = tomli.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PinsError(str(path), "", f"cannot be read ({exc.strerror})", fix) from None
    except tomli.TOMLDecodeError as exc:
        raise PinsError(str(path), "", f"not valid TOML ({exc})", fix) from None
    references = {}
    for stage, entry in data.items():
        if not isinstance(entry, dict):
            raise PinsError(str(path), f"[{stage}]", "is not a table", fix)
        minutes = entry.get("minutes")
        if isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes <= 0:
            raise PinsError(str(path), f"{stage}.minutes", "is not a positive number", fix)
        for field in ("source", "says"):
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                raise PinsError(str(path), f"{stage}.{field}", "is missing or empty", fix)
        references[stage] = Reference(stage, float(minutes) * 60, entry["source"], entry["says"])
    return references
