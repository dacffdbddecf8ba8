"""The streamed commands and the interrupt that stops them (real processes)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

from rocmgraph.common.errors import GraphToolError
from rocmgraph.outside import proc
from rocmgraph.outside.docker import Client, DockerEngine

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


# A run started with SIGINT ignored: its streamed `sleep` (no handler of its own, as a
# shell script's commands) still ends on the interrupt, by SIGINT, not by the grace's kill.
STARTED_IGNORING = """
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
from rocmgraph.outside import proc
codes = []
thread = threading.Thread(target=lambda: codes.append(proc.stream(["sleep", "60"], print)))
thread.start()
while not proc._STREAMING:
    time.sleep(0.05)
time.sleep(0.3)
proc.interrupt_all(grace=10)
thread.join()
print(codes)
"""


def test_a_command_gets_sigint_back_when_the_run_was_started_ignoring_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", STARTED_IGNORING],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.stdout == f"[{-signal.SIGINT}]\n", result.stderr


# The child takes SIGINT's default action back, as the docker client (Go) does: a run
# started in the background of a script inherits SIGINT ignored, and so would a Python child.
STREAMS_A_CHILD = """
import sys
from rocmgraph.outside import proc
child = ("import os, signal, time; signal.signal(signal.SIGINT, signal.default_int_handler);"
         " print(os.getpid(), flush=True); time.sleep(60)")
proc.stream([sys.executable, "-c", child], lambda line: print(line, flush=True))
"""


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_streamed_command_ends_when_the_run_is_killed() -> None:
    run = subprocess.Popen([sys.executable, "-c", STREAMS_A_CHILD], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert run.stdout is not None
    child = int(run.stdout.readline())
    assert running(child)
    run.kill()  # kill -9: no handler of the run's own runs
    run.communicate()
    deadline = time.monotonic() + 10
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child)


SLOW_PUSH = """#!/bin/sh
[ "$1" = push ] || exit 1
echo "The push refers to repository [$2]"
exec sleep 60
"""


def test_a_push_is_streamed_and_stopped_by_the_interrupt(tmp_path: Path) -> None:
    """Ctrl-C waited for every queued push (each with a 600 s limit, which also cut a pull
    of a large stage image): a transfer is a streamed command now, as a build is."""
    client = tmp_path / "docker"
    client.write_text(SLOW_PUSH)
    client.chmod(0o755)
    engine = DockerEngine(Client(str(client), "26.1.5", "0.13.1"), tmp_path)
    failed: list[GraphToolError] = []

    def push() -> None:
        try:
            engine.push("127.0.0.1:28473/verl/x:1")
        except GraphToolError as exc:
            failed.append(exc)

    thread = threading.Thread(target=push, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not proc._STREAMING and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the script has printed its line
    proc.interrupt_all(grace=5)
    thread.join(10)
    assert not thread.is_alive()
    assert [str(exc) for exc in failed] == [
        f"`{client} push 127.0.0.1:28473/verl/x:1` failed with exit code -2: The push refers "
        "to repository [127.0.0.1:28473/verl/x:1]"
    ]
