"""What one run of the tool shares across its builds, on one object the task layer makes
and passes down: the ledger of what becomes of each stage, the console a person watches,
the shared caches that stopped answering, and the pushes to them under way.

Nothing of it lives at module level: two runs in one process (a test, a benchmark) each
have their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rocmgraph.building import trace
from rocmgraph.building.ledger import Ledger
from rocmgraph.building.progress import Console

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor


@dataclass
class Session:
    """One run's ledger and console, its silent caches and its pushes."""

    ledger: Ledger = field(default_factory=Ledger)
    console: Console = field(init=False)
    timeline: trace.Timeline = field(default_factory=trace.Timeline)
    trace: Path | None = None  # where the run's timeline goes, once it builds
    title: str = ""  # what the trace is of: the command and its image
    _silent: set[str] = field(default_factory=set)  # caches that did not answer: said once
    _pushes: dict[str, Future[None]] = field(default_factory=dict)  # by the ref they push
    _pusher: ThreadPoolExecutor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.console = Console(self.ledger)
        self.ledger.watch(self.timeline)

    def end(self) -> None:
        """The run is over: its trace written (if it built), then its console's last words.
        A trace that cannot be written is said, and fails nothing."""
        if self.trace is not None and self.ledger.did_something():
            try:
                trace.write(self.trace, self.ledger, self.timeline, self.title)
            except OSError as exc:
                self.console.say(f"warning: no trace written to {self.trace} ({exc.strerror})")
        self.console.end()

    def silence(self, cache: str) -> bool:
        """Ask ``cache`` nothing more in this run; True the first time (to say why)."""
        with self._lock:
            said = cache in self._silent
            self._silent.add(cache)
        return not said

    def answers(self, cache: str) -> bool:
        """Whether ``cache`` is set and has not failed to answer in this run."""
        with self._lock:
            return bool(cache) and cache not in self._silent

    def push_soon(self, ref: str, push: Callable[[], None]) -> None:
        """Run ``push`` of ``ref`` in the background, one push at a time: the stages after
        it build meanwhile."""
        with self._lock:
            if self._pusher is None:
                # startup: the push thread only for a run that shares what it builds
                from concurrent.futures import ThreadPoolExecutor

                self._pusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="push")
            self._pushes[ref] = self._pusher.submit(push)

    def pushed(self, ref: str) -> None:
        """Wait for this run's push of ``ref``, if one was begun."""
        with self._lock:
            push = self._pushes.get(ref)
        if push is not None:
            push.result()

    def pushes_done(self) -> None:
        """Wait for every push begun so far (each says its own failure: none is raised)."""
        with self._lock:
            pending = list(self._pushes.values())
            self._pushes.clear()
        for push in pending:
            push.result()
