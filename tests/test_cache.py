"""The shared stage cache when its registry does not answer (a real closed port)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import PINS
from servers import closed_url

import stages
from rocmgraph.building import execute
from rocmgraph.building.session import Session
from rocmgraph.common.errors import CacheError
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run


def run_with(tmp_path: Path, required: bool = False) -> tuple[Run, Outside, str]:
    pins = tmp_path / "pins.toml"
    pins.write_text(PINS.read_text())
    host = closed_url().removeprefix("http://")
    cache = f"{host}/silent-{time.time_ns()}"  # a cache no other test said was silent
    options = Options(pins=str(pins), arch="gfx942", cache=cache, cache_required=required)
    run = Run(options, stages.graph())
    return run, Outside(cache=tmp_path / "cache", logs=tmp_path / "logs"), cache


def test_a_cache_that_does_not_answer_is_said_once_and_counts_as_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, outside, cache = run_with(tmp_path)
    session = Session()
    assert not execute.is_cached(run, outside, session, "base")
    assert not execute.is_cached(run, outside, session, "vllm")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"warning: the stage cache {cache} does not answer (GET http://")
    assert lines[0].endswith(": cannot connect (1 attempts)); building here")


def test_cache_required_fails_the_run_when_the_cache_does_not_answer(tmp_path: Path) -> None:
    run, outside, cache = run_with(tmp_path, required=True)
    with pytest.raises(CacheError) as caught:
        execute.is_cached(run, outside, Session(), "base")
    url = f"http://{cache.split('/')[0]}/v2/{cache.split('/', 1)[1]}/verl-rocm/base/manifests/"
    assert str(caught.value) == (
        f"the stage cache {cache} does not answer (GET {url}{run.keys['base'].key}: cannot "
        "connect (1 attempts)); cache_required=1 forbids building past it: check the registry, "
        "or drop cache_required"
    )
