"""The console of a build: what a person watching it sees.

- In a terminal, a live view (rich): a header (``[5/13] stages, 2 running, ~14 min
  left (from records)``), a line for each finished stage, and one for each running
  stage with its time and the BuildKit step it is on.
- Elsewhere (CI, a pipe), whole lines, one per event (``building``, ``built``,
  ``pulled``, ``failed``), and a heartbeat for a stage still building after a minute.
- ``progress=plain`` streams every stage's BuildKit output as well, each line tagged
  ``[stage]``; ``progress=quiet`` prints only the summary and the errors.

Every view reads the ledger (rocmgraph.building.ledger); the full output of each build is in
its log either way. At the end, a table of the stages and the image, or for a run
that had nothing to do one line: ``nothing to build: verl-rocm:gfx942 is <key>``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from rocmgraph.building.ledger import Entry, Ledger, Status, step_of
from rocmgraph.graph.estimate import critical_path, duration

MODES = ("auto", "plain", "quiet")
HEARTBEAT_ENV = "VERL_GRAPH_HEARTBEAT"  # seconds between a stage's heartbeats; 60
MARKS = {
    Status.BUILT: "✓", Status.REUSED: "=", Status.CACHED: "=", Status.PULLED: "↓",
    Status.FAILED: "✗", Status.BUILDING: "…", Status.INTERRUPTED: "■", Status.NOT_STARTED: "·",
}  # fmt: skip
TIMED = (Status.BUILT, Status.FAILED, Status.INTERRUPTED)  # a build that ran: its time says


def elapsed(seconds: float) -> str:
    """``42.0 s``, ``3 min 05 s``, ``1 h 05 min``: a time that was measured."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return duration(seconds).removeprefix("~")


def size(count: int | None) -> str:
    if count is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return (
                f"{count / scale:.0f} {unit}"
                if count >= 10 * scale
                else f"{count / scale:.1f} {unit}"
            )
    return f"{count} B"


def event(stage: str, entry: Entry) -> str | None:
    """The line an event is, or None for one that is not said as it happens."""
    where = f" on {entry.builder}" if entry.builder else ""
    if entry.status is Status.BUILDING:
        # A second or less is no forecast worth a word.
        last = entry.expected or 0.0
        expect = f" ({duration(last)}, as last time)" if last >= 1 else ""
        return f"building {stage} {entry.key}{where}{expect}"
    if entry.status is Status.BUILT:
        how = f" ({entry.compiled})" if entry.compiled else ""
        return f"built {stage} {entry.key} in {entry.seconds:.1f} s{where}{how}"
    if entry.status is Status.PULLED:
        return f"pulled {stage} {entry.key}".rstrip()
    if entry.status is Status.FAILED:
        return f"failed {stage} {entry.key} after {elapsed(entry.seconds)}{where}"
    return None  # reused, cached: the summary says


_BUILT = re.compile(r"^built (\w+) [0-9a-f]{12} in ", re.MULTILINE)


def built_stages(text: str) -> set[str]:
    """The stages a run's lines (as a pipe gets them) say it built."""
    return set(_BUILT.findall(text))


def left(ledger: Ledger, expected: Mapping[str, float], now: float) -> float | None:
    """Seconds until the run ends: the longest chain of the stages not finished, each at
    what its record says is left of it (stages side by side do not add up). None when a
    stage building has no record, or when the stages running are past their records: no
    forecast is worth a word then."""
    entries = ledger.entries()
    remaining: dict[str, float] = {}
    for stage, entry in entries.items():
        if entry.status is Status.BUILDING:
            if stage not in expected:
                return None
            spent = now - entry.began if entry.began else 0.0  # waiting: all of it is left
            remaining[stage] = max(expected[stage] - spent, 0.0)
    remaining |= {stage: s for stage, s in expected.items() if stage not in entries}
    chain = critical_path(remaining, ledger.parents)
    total = sum(remaining[stage] for stage in chain)
    return total if total >= 1 else None


def _beat(stage: str, entry: Entry, waiting: tuple[str, ...], now: float) -> str:
    """A heartbeat: what a stage still building is at, or which parents it waits for."""
    if waiting:
        since = elapsed(now - entry.started)
        return f"still waiting for {', '.join(waiting)}: {stage} {entry.key}, {since}"
    at = f", at {entry.step}" if entry.step else ""
    return (
        f"still building {stage} {entry.key}: {elapsed(now - (entry.began or entry.started))}{at}"
    )


class Lines:
    """Whole lines, one per event: for a pipe, a CI log, or ``progress=plain``."""

    def __init__(self, ledger: Ledger, out: TextIO, *, echo: bool, heartbeat: float) -> None:
        self.ledger, self.out, self.echo, self.heartbeat = ledger, out, echo, heartbeat
        self._lock = threading.Lock()
        self._beats: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._thread.start()

    def say(self, text: str) -> None:
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    def changed(self, stage: str, entry: Entry) -> None:
        line = event(stage, entry)
        if line:
            self.say(line)

    def output(self, stage: str, line: str) -> None:
        if self.echo:
            self.say(f"[{stage}] {line}")

    def _beat(self) -> None:
        while not self._stop.wait(min(self.heartbeat / 4, 1.0)):
            now = time.monotonic()
            for stage, entry in self.ledger.entries().items():
                last = self._beats.get(stage, entry.started)
                if entry.status is Status.BUILDING and now - last >= self.heartbeat:
                    self._beats[stage] = now
                    self.say(_beat(stage, entry, self.ledger.waiting_for(stage), now))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class Live:
    """A terminal's live view: redrawn four times a second, and at once when a stage
    changes or begins a step (a step shorter than a tick still shows); printed lines above."""

    def __init__(self, ledger: Ledger, out: TextIO, expected: Mapping[str, float]) -> None:
        # startup: rich only for a terminal that watches a build
        from rich.console import Console as Terminal
        from rich.live import Live as RichLive

        self.ledger, self.expected = ledger, expected
        self.terminal = Terminal(file=out, highlight=False, soft_wrap=False)
        self.live = RichLive(
            get_renderable=self._render, console=self.terminal, refresh_per_second=4,
            transient=True, redirect_stdout=True, redirect_stderr=True,  # warnings go above it
        )  # fmt: skip
        self.live.start()

    def say(self, text: str) -> None:
        # startup: rich only for a terminal that watches a build
        from rich.text import Text

        self.terminal.print(Text(text))

    def changed(self, stage: str, entry: Entry) -> None:
        self.live.refresh()

    def output(self, stage: str, line: str) -> None:
        if step_of(line):  # the ledger keeps it as the stage's step; the rest is in the log
            self.live.refresh()

    def _render(self) -> Any:
        # startup: rich only for a terminal that watches a build
        from rich.text import Text

        now = time.monotonic()
        entries = self.ledger.entries()
        busy = {s: e for s, e in entries.items() if e.status is Status.BUILDING}
        waiting = {s: w for s in busy if (w := self.ledger.waiting_for(s))}
        done = len(entries) - len(busy)
        header = f"[{done}/{self.ledger.stages or len(entries)}] stages, "
        header += f"{len(busy) - len(waiting)} running"
        header += f", {len(waiting)} waiting" if waiting else ""
        remaining = left(self.ledger, self.expected, now)
        if remaining is not None:
            header += f", {duration(remaining)} left (from records)"
        lines = [header]
        for stage, entry in entries.items():
            if entry.status is Status.BUILDING:
                continue
            took = elapsed(entry.seconds) if entry.status in TIMED else ""
            lines.append(f"{MARKS[entry.status]} {stage:<20} {entry.status:<8} {took}".rstrip())
        for stage, entry in busy.items():
            if stage in waiting:
                lines.append(
                    f"{MARKS[Status.BUILDING]} {stage:<20} waiting for {', '.join(waiting[stage])}"
                )
                continue
            spent = now - (entry.began or entry.started)
            ahead = (
                f"  {duration(entry.expected - spent)} left"
                if entry.expected and entry.expected > spent
                else ""
            )
            lines.append(
                f"{MARKS[Status.BUILDING]} {stage:<20} {elapsed(spent):<10} {entry.step}{ahead}"
            )
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")

    def close(self) -> None:
        self.live.stop()


class Quiet:
    def say(self, text: str) -> None:
        pass

    def changed(self, stage: str, entry: Entry) -> None:
        pass

    def output(self, stage: str, line: str) -> None:
        pass

    def close(self) -> None:
        pass


View = Lines | Live | Quiet
Sizes = Callable[[str], "int | None"]  # an image's size, by ref; None if the engine has none


class Console:
    """The console of one run (its session's): opened by the first build, ended by the
    reporter."""

    def __init__(self, ledger: Ledger, out: TextIO | None = None) -> None:
        self.ledger = ledger
        self.out = out
        self.view: View | None = None
        self._sizes: Sizes = lambda ref: None
        self._refs: Mapping[str, str] = {}
        self._lock = threading.Lock()
        self._quiet = False

    def _stdout(self) -> TextIO:
        return self.out or sys.stdout

    def begin(
        self, mode: str, expected: Mapping[str, float], refs: Mapping[str, str], sizes: Sizes
    ) -> None:
        """Open the view (once): ``mode`` auto, plain or quiet; ``expected`` the seconds each
        stage to build took last time, ``refs`` each stage's image, for the summary."""
        with self._lock:
            if self.view is not None:
                return
            self._sizes, self._refs = sizes, refs
            out = self._stdout()
            if mode == "quiet":
                self._quiet, self.view = True, Quiet()
            elif mode == "auto" and out.isatty() and os.environ.get("TERM", "dumb") != "dumb":
                self.view = Live(self.ledger, out, expected)
            else:
                beat = float(os.environ.get(HEARTBEAT_ENV) or 60)
                self.view = Lines(self.ledger, out, echo=mode == "plain", heartbeat=beat)
            self.ledger.watch(self.view)

    def say(self, text: str) -> None:
        """One line of what the run did (a push, a tag), whole, wherever the view is."""
        view = self.view
        if view is not None:
            view.say(text)
        elif not self._quiet:
            with self._lock:
                self._stdout().write(text + "\n")
                self._stdout().flush()

    def stop(self) -> None:
        """Close the view: the terminal is the shell's again."""
        with self._lock:
            view, self.view = self.view, None
        if view is not None:
            self.ledger.unwatch(view)
            view.close()

    def end(self) -> None:
        """The last words of a build: the table of its stages and the image; or one line
        for a run that had nothing to do."""
        self.stop()
        final = self.ledger.final
        out = self._stdout()
        if not self.ledger.did_something():
            if final is not None:
                out.write(f"nothing to build: {final.alias} is {final.key[:12]}\n")
            return
        out.write("\n".join(summary(self.ledger, self._refs, self._sizes)) + "\n")
        out.flush()


def summary(ledger: Ledger, refs: Mapping[str, str], sizes: Sizes) -> list[str]:
    """The stages (status, time, image size, builder) and the image, as a table."""
    rows = [("stage", "status", "time", "size", "builder")]
    for stage, entry in ledger.entries().items():
        took = elapsed(entry.seconds) if entry.status in TIMED else "-"
        ref = refs.get(stage)
        shown = size(sizes(ref)) if ref and entry.status not in TIMED[1:] else "-"
        rows.append((stage, str(entry.status), took, shown, entry.builder or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[4]
             for row in rows]  # fmt: skip
    final = ledger.final
    if final is not None:
        lines.append(f"image {final.alias} ({size(sizes(final.alias))}) = {final.ref}")
        lines.append(f"its manifest: {final.manifest} in the image; this run: {final.report}")
    return lines
