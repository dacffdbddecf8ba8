"""doit's task list and the build entry points."""

from __future__ import annotations

from conftest import run_doit

import stages


def test_doit_list_shows_every_task_with_a_one_line_doc() -> None:
    result = run_doit("list")
    assert result.returncode == 0, result.stderr
    docs = dict(line.split(None, 1) for line in result.stdout.splitlines())
    expected = {"plan", "lock", "patches", "build", "render", "build:image"}
    for stage in stages.graph():
        expected |= {f"build:{stage.name}", f"render:{stage.name}"}
    assert set(docs) == expected
    assert docs["build:vllm"] == stages.graph()["vllm"].doc
    assert all(doc.strip() for doc in docs.values())


def test_build_stops_with_one_line_until_an_engine_is_configured() -> None:
    result = run_doit("build:image", "arch=gfx942")
    assert result.returncode == 1
    assert result.stderr == (
        "error: stage base: building needs a container engine executor, which this version "
        "does not have yet; `doit plan` shows what would build\n"
    )
    assert "Traceback" not in result.stdout


def test_build_runs_parents_first() -> None:
    result = run_doit("info", "build:vllm")
    assert "build:wheels" in result.stdout
