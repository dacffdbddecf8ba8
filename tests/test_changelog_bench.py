"""The change-log benchmark's readings (benchmarks/changelog.py): the engine's CPU, the
demo's cost shape beside the real image's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import changelog


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


@pytest.mark.docker
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


def test_each_stage_is_set_beside_its_real_figure_at_the_scale() -> None:
    # vLLM's hour at 0.25 s per real minute; aiter is the demo base's (it only checks
    # versions); a stage with no figure is left out.
    shape = changelog.cost_shape(
        {"vllm": 16.04, "aiter": 0.4, "manifest": 2.1, "nothing": 3.0}, 0.25, {"aiter"}
    )
    assert shape == {
        "aiter": {"demo": 0.4, "scaled_reference": None},
        "manifest": {"demo": 2.1, "scaled_reference": 0.002},  # pip freeze's half second
        "vllm": {"demo": 16.0, "scaled_reference": 15.0},
    }


def test_the_cost_shape_table_gives_each_stage_its_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shape: changelog.Shape = {
        "aiter": {"demo": 0.4, "scaled_reference": None},
        "manifest": {"demo": 2.1, "scaled_reference": 0.002},
        "vllm": {"demo": 16.0, "scaled_reference": 15.0},
    }
    changelog.report_shape(shape, 0.25)
    assert capsys.readouterr().out.splitlines() == [
        "",
        "| stage, the graph's cold build | demo | the real figure x 0.25 | demo / real |",
        "| --- | ---: | ---: | ---: |",
        "| aiter | 0.4 s | checks only | |",
        "| manifest | 2.1 s | 0.002 s | 1050.0 |",
        "| vllm | 16.0 s | 15 s | 1.1 |",
    ]
