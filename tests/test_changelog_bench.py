"""The change-log benchmark's readings (benchmarks/changelog.py): the engine's CPU, the
demo's cost shape beside the real image's, and bake's targets linked either way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PINS, need_docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bake
import bake_contexts
import changelog

import stages
from rocmgraph.common.engine import ImageStore
from rocmgraph.demo.machine import second_engine
from rocmgraph.graph.invocation import Options, Run


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
def test_the_engine_cpu_is_its_own_dockerd_s_and_its_containerd_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine DOCKER_HOST names, found by the pid file beside its socket (an engine of
    the test's own: another dockerd may run on the machine for another reason)."""
    need_docker()
    with second_engine() as env:
        monkeypatch.setenv("DOCKER_HOST", env["DOCKER_HOST"])
        pidfile = Path(env["DOCKER_HOST"].removeprefix("unix://")).with_name("docker.pid")
        pid = changelog.engine_pid()
        assert pid == int(pidfile.read_text())
        before = changelog.engine_cpu()
        own = ps_seconds(str(pid))  # ps truncates to the second
        after = changelog.engine_cpu()
        assert before is not None
        assert after is not None
        assert before <= after
        assert own - 1 <= after  # dockerd's, and its containerd's besides
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert changelog.engine_cpu() is None


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


@pytest.mark.parametrize("contexts", [True, False])
def test_bake_links_each_target_to_its_parents_by_contexts_or_by_the_dockerfile(
    contexts: bool,
) -> None:
    """Either way every stage is a target of the monolith's file; ``contexts`` adds the
    ``target:`` links whose steps miss the registry cache on a fresh runner."""
    run = Run(Options(pins=str(PINS)), stages.graph())  # a clean clone has no demo pins yet
    secrets = {"pip.conf": Path("/dev/null")}
    text = bake.bake_file(run, Path("/ctx"), secrets, "ns", contexts=contexts)
    services = json.loads(text)["services"]
    assert {name: service["build"]["target"] for name, service in services.items()} == {
        stage.name: stage.name for stage in run.graph
    }
    linked = {name: s["build"].get("additional_contexts", {}) for name, s in services.items()}
    assert linked == {
        stage.name: {p: f"target:{p}" for p in stage.parents} if contexts else {}
        for stage in run.graph
    }


def test_the_reduced_bake_files_differ_only_in_their_contexts() -> None:
    """benchmarks/bake_contexts.py's two bake files: the same targets and caches."""
    cache = "127.0.0.1:1/x"
    linked, plain = (
        json.loads(bake_contexts.bake_file(Path("/c"), cache, ImageStore.CONTAINERD, contexts=c))
        for c in (True, False)
    )
    links = {n: s["build"].pop("additional_contexts", None) for n, s in linked["services"].items()}
    assert links == {
        "a": None,
        "b": {"a": "target:a"},
        "c": {"b": "target:b"},
        "d": {"c": "target:c"},
    }
    assert linked == plain
    assert plain["services"]["d"]["build"]["cache_to"] == [
        f"type=registry,ref={cache}/d:buildcache,mode=max,image-manifest=true,oci-mediatypes=true"
    ]
