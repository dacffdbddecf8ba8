"""doit's task list and the build entry points."""

from __future__ import annotations

from pathlib import Path

from conftest import run_doit

import stages


def test_doit_list_shows_every_task_with_a_one_line_doc() -> None:
    result = run_doit("list")
    assert result.returncode == 0, result.stderr
    docs = dict(line.split(None, 1) for line in result.stdout.splitlines())
    expected = {"plan", "lock", "patches", "demo", "render", "audit", "build", "dockerfile", "bump"}
    expected |= {"build:image", "bump:base", "bump:all"}
    for stage in stages.graph():
        expected |= {f"build:{stage.name}", f"dockerfile:{stage.name}"}
        expected |= {f"bump:{source}" for source in stage.sources}
    assert set(docs) == expected
    assert docs["build:vllm"] == stages.graph()["vllm"].doc
    assert all(doc.strip() for doc in docs.values())


def test_no_working_docker_client_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "docker"
    result = run_doit("build:base", env={"VERL_GRAPH_DOCKER": str(missing)})
    assert result.returncode == 1
    assert result.stderr == (
        f"error: no docker client can build with BuildKit: {missing}: not a working docker client\n"
    )


def test_the_plan_still_shows_keys_without_an_engine(tmp_path: Path) -> None:
    result = run_doit("plan", env={"VERL_GRAPH_DOCKER": str(tmp_path / "docker")})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == (
        f"engine: no docker client can build with BuildKit: {tmp_path / 'docker'}: "
        "not a working docker client"
    )
    assert "unknown    unknown: no engine to ask" in lines[3]


def test_build_runs_parents_first() -> None:
    result = run_doit("info", "build:vllm")
    assert "build:wheels" in result.stdout
