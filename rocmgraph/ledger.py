"""What became of each stage in this run, in one place: the build's last words and
``.build/build.json`` read it, and whatever shows a build's progress should too.

A doit process builds one image, so its ledger is one per process (``LEDGER``);
threads building stages at once (``doit -n N``) write to it under a lock.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from rocmgraph.fsutil import atomic_write_text


class Status(StrEnum):
    BUILT = "built"  # built in this run
    REUSED = "reused"  # its image was there already
    CACHED = "cached"  # the shared cache holds it, and no build here needed it
    PULLED = "pulled"  # taken from the shared cache for a build, or for the final tag
    FAILED = "failed"


@dataclass
class Entry:
    status: Status
    seconds: float = 0.0  # of its build
    builder: str = ""  # the engine that built it, with builders=
    compiled: str = ""  # what ccache did, as the build's line says it
    shared: bool | None = None  # pushed to the shared cache; False: its push failed


class Ledger:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    def record(self, stage: str, entry: Entry) -> None:
        """What became of ``stage`` (whether it was shared is kept: its push may end first)."""
        with self._lock:
            known = self._entries.get(stage)
            if known is not None and entry.shared is None:
                entry = dataclasses.replace(entry, shared=known.shared)
            self._entries[stage] = entry

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

    def write(self, path: Path, image: str, key: str, cache: str) -> None:
        """``.build/build.json``: the image, and what became of each stage on the way."""
        stages = {
            stage: {k: v for k, v in dataclasses.asdict(entry).items() if v not in ("", None)}
            for stage, entry in sorted(self.entries().items())
        }
        report = {
            "image": image,
            "key": key,
            "cache": cache,
            "not_shared": self.not_shared(),
            "stages": stages,
        }
        atomic_write_text(path, json.dumps(report, indent=1) + "\n")


LEDGER = Ledger()
