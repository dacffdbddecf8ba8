"""A build's timeline, in the Chrome trace-event format that Bazel's ``--profile`` writes:
Perfetto (ui.perfetto.dev) and chrome://tracing open it.

- A track per builder (this engine, or each host of ``builders=``), in as many lanes as it
  ran stages at once; a span per stage, from when it was asked for to when it ended, and
  inside it the time it waited for its parents and each of its BuildKit steps.
- A track of pulls and pushes.
- The critical path: the longest chain of stage builds by their seconds
  (rocmgraph.graph.estimate.critical_path, as ``doit plan`` names it from the same
  records), marked on its spans and drawn again on a track of its own.

The ledger gives the stages (asked for, first step, end); the Timeline, watching it, gives
the steps as their lines arrive and the transfers as execute.py tells them.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from rocmgraph.building.ledger import Entry, Ledger, Status, step_of
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.graph.estimate import critical_path

THIS_ENGINE = "this engine"  # the track of a stage built without builders=
_LINE = re.compile(r"^#(\d+) (.*)$")
_END = re.compile(r"^(DONE|CACHED|ERROR|CANCELED)\b")


class Transfer(StrEnum):
    PULL = "pull"
    PUSH = "push"


@dataclass(frozen=True)
class Span:
    name: str
    start: float  # time.monotonic()
    end: float


@dataclass
class _Step:
    name: str
    start: float
    end: float | None = None


class Timeline:
    """The steps of each stage and the pulls and pushes of one run, as they happen (a ledger
    watcher)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[str, dict[int, _Step]] = {}  # stage -> its step #n -> the step
        self._transfers: list[tuple[Transfer, Span]] = []

    def changed(self, stage: str, entry: Entry) -> None:
        if entry.status is Status.BUILDING:  # begun again: its steps are the new build's
            with self._lock:
                self._steps.pop(stage, None)

    def output(self, stage: str, line: str) -> None:
        """A line of the stage's log, as the solve's router tells it: numbered per stage,
        each step's header and end once."""
        found = _LINE.match(line)
        if found is None:
            return
        number, rest = int(found.group(1)), found.group(2)
        now = time.monotonic()
        with self._lock:
            steps = self._steps.setdefault(stage, {})
            step = steps.get(number)
            if step is None:
                title = step_of(line)
                if title is not None:  # a step of its own (not BuildKit's internal ones)
                    steps[number] = _Step(title, now)
            elif step.end is None and _END.match(rest):
                step.end = now

    def transfer(self, kind: Transfer, stage: str, start: float, end: float) -> None:
        with self._lock:
            self._transfers.append((kind, Span(stage, start, end)))

    def steps(self, stage: str) -> list[Span]:
        """The steps of ``stage``'s build, one after the other (a step still open ends
        with the stage, at ``time.monotonic()`` if that is not known)."""
        with self._lock:
            steps = sorted(self._steps.get(stage, {}).values(), key=lambda step: step.start)
        return [Span(step.name, step.start, step.end or 0.0) for step in steps]

    def transfers(self) -> list[tuple[Transfer, Span]]:
        with self._lock:
            return sorted(self._transfers, key=lambda item: item[1].start)


def document(ledger: Ledger, timeline: Timeline, title: str, now: float) -> dict[str, Any]:
    """The trace of the run so far, as a JSON object (``now``: the end of what has not
    ended)."""
    entries = {s: e for s, e in ledger.entries().items() if e.started}  # built here, or tried
    ended = {s: e.ended or now for s, e in entries.items()}
    transfers = timeline.transfers()
    origin = min([e.started for e in entries.values()] + [s.start for _, s in transfers],
                 default=now)  # fmt: skip
    events = _Events(origin)
    events.meta("process_name", 0, title)
    seconds = {s: e.seconds for s, e in entries.items() if e.status is Status.BUILT}
    chain = critical_path(seconds, ledger.parents)
    lanes: dict[str, list[float]] = {}  # builder -> when each of its lanes is free
    for stage, entry in sorted(entries.items(), key=lambda item: item[1].started):
        tid = events.track(_lane(lanes, entry.builder or THIS_ENGINE, entry.started, ended[stage]))
        args = {"key": entry.key, "status": str(entry.status), "seconds": entry.seconds}
        events.span(tid, "stage", Span(stage, entry.started, ended[stage]),
                    args | ({"critical_path": True} if stage in chain else {}))  # fmt: skip
        # the parents still building when it was asked for; none: BuildKit readies its solve
        waited = [p for p in ledger.parents.get(stage, ()) if ended.get(p, 0) > entry.started]
        first = min(entry.began or ended[stage], ended[stage])
        if first > entry.started:
            why = f"waiting for {', '.join(waited)}" if waited else "starting"
            events.span(tid, "wait", Span(why, entry.started, first))
        for step in _nested(timeline.steps(stage), first, ended[stage]):
            events.span(tid, "step", step)
    if transfers:
        tid = events.track("pulls and pushes")
        for kind, span in transfers:
            events.span(tid, str(kind), Span(f"{kind} {span.name}", span.start, span.end))
    if chain:  # drawn again on its own track, each from when it began its work
        tid, after = events.track("critical path"), origin
        for stage in chain:
            start = max(entries[stage].began or entries[stage].started, after)
            events.span(tid, "critical", Span(stage, start, ended[stage]),
                        {"seconds": seconds[stage]})  # fmt: skip
            after = ended[stage]
    return {
        "traceEvents": events.list,
        "displayTimeUnit": "ms",
        "otherData": {
            "title": title,
            "critical_path": list(chain),
            "critical_seconds": round(sum(seconds[s] for s in chain), 3),
        },
    }


def _lane(lanes: dict[str, list[float]], builder: str, start: float, end: float) -> str:
    """The track of a span on ``builder``: its first lane free at ``start``, taken until
    ``end`` (a builder runs several stages at once; spans of one track must nest)."""
    free = lanes.setdefault(builder, [])
    lane = next((i for i, at in enumerate(free) if at <= start), len(free))
    if lane == len(free):
        free.append(end)
    free[lane] = end
    return f"{builder} · {lane + 1}" if lane else builder


def _nested(steps: list[Span], first: float, end: float) -> list[Span]:
    """A stage's steps within its span, one after the other (an open step ends with it)."""
    nested, after = [], first
    for step in steps:
        start, stop = max(step.start, after), min(step.end or end, end)
        if stop > start:
            nested.append(Span(step.name, start, stop))
            after = stop
    return nested


def write(path: Path, ledger: Ledger, timeline: Timeline, title: str) -> None:
    atomic_write_text(
        path, json.dumps(document(ledger, timeline, title, time.monotonic()), indent=0) + "\n"
    )


class _Events:
    """Trace events in microseconds since ``origin``, on tracks made as they are named."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.list: list[dict[str, Any]] = []
        self._tracks: dict[str, int] = {}

    def meta(self, name: str, tid: int, value: str) -> None:
        self.list.append({"ph": "M", "pid": 1, "tid": tid, "name": name, "args": {"name": value}})

    def _us(self, moment: float) -> int:
        """Microseconds since the origin: a span's end is its rounded end, so that spans
        nested in time stay nested after rounding."""
        return round((moment - self.origin) * 1e6)

    def track(self, name: str) -> int:
        if name not in self._tracks:
            tid = self._tracks[name] = len(self._tracks) + 1
            self.meta("thread_name", tid, name)
            self.list.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index",
                              "args": {"sort_index": tid}})  # fmt: skip
        return self._tracks[name]

    def span(
        self, tid: int, cat: str, span: Span, args: Mapping[str, object] | None = None
    ) -> None:
        start, end = span.start, span.end
        event: dict[str, Any] = {
            "ph": "X", "pid": 1, "tid": tid, "name": span.name, "cat": cat,
            "ts": self._us(start), "dur": max(self._us(end) - self._us(start), 0),
        }  # fmt: skip
        if args:
            event["args"] = dict(args)
        self.list.append(event)
