"""The change-log benchmark's reading of the engine's CPU (benchmarks/changelog.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import changelog

pytestmark = pytest.mark.docker


def ps_seconds(pid: str) -> int:
    """``ps``'s CPU time of ``pid`` ([[dd-]hh:]mm:ss), in whole seconds."""
    text = subprocess.run(
        ["ps", "-o", "cputime=", "-p", pid], capture_output=True, text=True, check=True
    ).stdout.strip()
    days, _, clock = text.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


def test_the_engine_cpu_is_dockerd_s_user_and_system_time() -> None:
    need_docker()
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True, check=False)
    pids = found.stdout
    if len(pids.split()) != 1:
        assert changelog.engine_cpu() is None  # none, or two engines: not one to read
        return
    before = changelog.engine_cpu()
    expected = ps_seconds(pids.split()[0])  # ps truncates to the second
    after = changelog.engine_cpu()
    assert before is not None
    assert after is not None
    assert before <= after
    assert expected - 1 <= after
    assert before < expected + 1
