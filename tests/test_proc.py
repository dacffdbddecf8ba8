"""The streamed commands and the interrupt that stops them (real processes)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator

import pytest

from rocmgraph.outside import proc

IGNORES_SIGINT = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True);"
    " time.sleep(60)"
)
STOPS_ON_SIGINT = "import time; print('ready', flush=True); time.sleep(60)"


@pytest.fixture(autouse=True)
def _fresh_run() -> Iterator[None]:
    yield
    proc._INTERRUPTED.clear()  # one interrupt per process: a run ends after it


def _streamed(code: str) -> tuple[threading.Thread, list[int], threading.Event]:
    """Start ``python -c code`` streamed in a thread; return when it printed its first line."""
    ready, codes = threading.Event(), []

    def run() -> None:
        codes.append(proc.stream([sys.executable, "-c", code], lambda line: ready.set()))

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(30)
    return thread, codes, ready


def test_an_interrupt_stops_every_streamed_command_and_waits_for_it() -> None:
    thread, codes, _ = _streamed(STOPS_ON_SIGINT)
    proc.interrupt_all(grace=20)
    thread.join(5)
    assert not thread.is_alive()
    assert codes != [0]  # ended by the interrupt, not by finishing


def test_a_command_that_ignores_the_interrupt_is_killed_after_the_grace() -> None:
    thread, codes, _ = _streamed(IGNORES_SIGINT)
    proc.interrupt_all(grace=0.5)
    thread.join(5)
    assert codes == [-signal.SIGKILL]


def test_no_streamed_command_starts_after_an_interrupt() -> None:
    proc.interrupt_all()
    with pytest.raises(proc.Interrupted) as raised:
        proc.stream(["true"], print)
    assert str(raised.value) == "`true` was not started: the run is interrupted"
