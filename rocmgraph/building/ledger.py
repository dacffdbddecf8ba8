"""What becomes of each stage in this run, in one place: the console's views (rocmgraph.
progress), the run's last words and ``.build/run.json`` all read it.

One run has one ledger, on its session (rocmgraph.building.session); threads building
stages at once (``doit -n N``) write to it under a lock, and whoever watches it hears of
each change after the lock is let go.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from rocmgraph.common.fsutil import atomic_write_text


class Status(StrEnum):
    BUILDING = "building"
    BUILT = "built"  # built in this run
    REUSED = "reused"  # its image was there already
    CACHED = "cached"  # the shared cache holds it, and no build here needed it
    PULLED = "pulled"  # taken from the shared cache for a build, or for the final tag
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # its build had begun when Ctrl-C (or SIGTERM) stopped it
    NOT_STARTED = "not started"  # stopped while it waited for its parents


@dataclass
class Entry:
    status: Status
    seconds: float = 0.0  # of its build
    builder: str = ""  # the engine that built it, with builders=
    compiled: str = ""  # what ccache did, as the build's line says it
    shared: bool | None = None  # pushed to the shared cache; False: its push failed
    key: str = ""  # its key, short
    network: str = ""  # a build's: "off" (hermetic, from its locked closure) or "on"
    started: float = 0.0  # time.monotonic() when its build was asked for
    began: float = 0.0  # when its first own step began; 0.0: waiting for its parents
    ended: float = 0.0  # when its build ended (built, failed or stopped)
    step: str = ""  # the BuildKit step it is on: "[5/7] RUN pip wheel …"
    expected: float | None = None  # seconds, from its last build's record
    image: str = ""  # the digest of the image its build made, as BuildKit's metadata says


@dataclass(frozen=True)
class Final:
    """The image the run is about: its friendly tag, and the final stage's ref and key."""

    alias: str
    ref: str
    key: str
    manifest: str = ""  # where the image keeps its manifest
    report: str = ""  # where this run's run.json is


class Watcher(Protocol):
    def changed(self, stage: str, entry: Entry) -> None: ...

    def output(self, stage: str, line: str) -> None: ...


# A BuildKit step as --progress=plain starts it: "#9 [vllm_build 5/7] RUN --mount=... pip ..."
_STEP = re.compile(r"^#\d+ \[(?:[\w.-]+ )?(\d+/\d+)\] (.*)$")
_FLAG = re.compile(r"--mount=\S+\s*|\\\s*")
STEP_WIDTH = 60
# Each stage's last step, its image written and tagged: its own even when BuildKit's cache
# held all the others, which another build of the solve may then print after it ended.
EXPORT = "exporting to image"
_EXPORT = re.compile(rf"^#\d+ {EXPORT}$")


def step_of(line: str) -> str | None:
    """The step a BuildKit line begins, shortened for one line of a screen; else None."""
    found = _STEP.match(line)
    if not found:
        return EXPORT if _EXPORT.match(line) else None
    what = " ".join(_FLAG.sub("", found.group(2)).split())
    if len(what) > STEP_WIDTH:
        what = what[: STEP_WIDTH - 1] + "…"
    return f"[{found.group(1)}] {what}"


class Ledger:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._watchers: list[Watcher] = []
        self.parents: Mapping[str, tuple[str, ...]] = {}  # the image's stages: set by know()
        self.final: Final | None = None
        self._interrupted = False

    @property
    def stages(self) -> int:
        """How many stages the image has (0 until the run knows its graph)."""
        return len(self.parents)

    def know(self, parents: Mapping[str, tuple[str, ...]]) -> None:
        """The image's stages and each one's parents: who waits for whom."""
        self.parents = dict(parents)

    def watch(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.append(watcher)

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.remove(watcher)

    def start(self, stage: str, key: str, expected: float | None, builder: str = "") -> None:
        self.record(
            stage,
            Entry(Status.BUILDING, builder=builder, key=key, started=time.monotonic(),
                  expected=expected),
        )  # fmt: skip

    def saw(self, stage: str, line: str) -> None:
        """A line of the stage's build output: told to the watchers, and kept as its step."""
        step = step_of(line)
        with self._lock:
            entry = self._entries.get(stage)
            if step and entry is not None and entry.status is Status.BUILDING:
                entry.step = step
                # a step another build of the solve tells after this one ended is no start
                entry.began = entry.began or time.monotonic()
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.output(stage, line)

    def record(self, stage: str, entry: Entry) -> None:
        """What became of ``stage``. What is known of its build is kept: whether it was shared
        (its push may end first), its key and builder."""
        with self._lock:
            known = self._entries.get(stage)
            if known is not None:
                entry = dataclasses.replace(
                    entry,
                    shared=known.shared if entry.shared is None else entry.shared,
                    key=entry.key or known.key,
                    builder=entry.builder or known.builder,
                    expected=known.expected if entry.expected is None else entry.expected,
                    started=entry.started or known.started,
                    # a build begun again waits for its first step anew
                    began=entry.began or (0.0 if entry.status is Status.BUILDING else known.began),
                )
            if self._interrupted and known is not None and known.status in _STOPPED:
                entry.status = known.status  # the interrupt failed it, not its own step
            if entry.started and entry.status is not Status.BUILDING:
                entry.ended = entry.ended or time.monotonic()
            self._entries[stage] = entry
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.changed(stage, dataclasses.replace(entry))

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM stopped the run: each stage building is not started if it still
        waited for its parents, else interrupted (its build was under way, BuildKit's own
        steps too); and it stays so as the stopped builds end, failed."""
        with self._lock:
            self._interrupted = True
            now = time.monotonic()
            waiting = {stage for stage in self._entries if self._waits(stage)}
            for stage, entry in self._entries.items():
                if entry.status is Status.BUILDING:
                    stopped = Status.NOT_STARTED if stage in waiting else Status.INTERRUPTED
                    entry.status, entry.ended = stopped, now

    def waiting_for(self, stage: str) -> tuple[str, ...]:
        """The parents of ``stage`` still building, while it has begun no step of its own."""
        with self._lock:
            return self._waits(stage)

    def _waits(self, stage: str) -> tuple[str, ...]:
        entry = self._entries.get(stage)
        if entry is None or entry.status is not Status.BUILDING or entry.began:
            return ()
        return tuple(
            parent
            for parent in self.parents.get(stage, ())
            if (known := self._entries.get(parent)) is not None and known.status is Status.BUILDING
        )

    def shared(self, stage: str, pushed: bool) -> None:
        with self._lock:
            entry = self._entries.setdefault(stage, Entry(Status.REUSED))
            entry.shared = pushed

    def entries(self) -> dict[str, Entry]:
        with self._lock:
            return {stage: dataclasses.replace(entry) for stage, entry in self._entries.items()}

    def not_shared(self) -> list[str]:
        """The stages built or pushed in this run that the shared cache did not take."""
        return sorted(stage for stage, entry in self.entries().items() if entry.shared is False)

    def did_something(self) -> bool:
        """Whether anything was built, pulled or failed (else the run was a no-op)."""
        busy = {Status.BUILDING, Status.BUILT, Status.PULLED, Status.FAILED, *_STOPPED}
        return any(entry.status in busy for entry in self.entries().values())

    def write(self, path: Path, cache: str, hermetic: bool) -> None:
        """``.build/run.json``: the image, how it was built (``hermetic``: false when
        hermetic=0 let every stage reach the network), and what became of each stage on
        the way."""
        stages = {
            stage: {
                name: value
                for name, value in dataclasses.asdict(entry).items()
                if name in _REPORTED and value not in ("", None)
            }
            for stage, entry in sorted(self.entries().items())
        }
        final = self.final
        report = {
            "image": final.alias if final else "",
            "key": final.key if final else "",
            "cache": cache,
            "hermetic": hermetic,
            "not_shared": self.not_shared(),
            "stages": stages,
        }
        atomic_write_text(path, json.dumps(report, indent=1) + "\n")


_STOPPED = (Status.INTERRUPTED, Status.NOT_STARTED)


_REPORTED = {"status", "seconds", "builder", "compiled", "shared", "key", "network", "image"}
