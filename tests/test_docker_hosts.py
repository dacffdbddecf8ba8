"""An engine named by its DOCKER_HOST (builders=) and builds on a buildx builder (builder=):
what the docker client is run with. (The runner is patched to record argv and environment;
two real engines build in test_fleet.)"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rocmgraph.common.engine import BuildJob
from rocmgraph.outside import proc
from rocmgraph.outside.docker import Client, DockerEngine

HOST = "ssh://builder@build-2"


class Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None], **kw: Any) -> int:
        self.calls.append((list(argv), dict(kw["env"])))
        on_line("#1 DONE 0.0s")
        return 0

    def run(self, argv: Sequence[str], **kw: Any) -> Any:
        self.calls.append((list(argv), dict(kw["env"])))
        return type("Done", (), {"stdout": "{}"})()


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    calls = Recorded()
    monkeypatch.setattr(proc, "stream", calls.stream)
    monkeypatch.setattr(proc, "run", calls.run)
    return calls


def job(tmp_path: Path) -> BuildJob:
    return BuildJob(stage="vllm", ref="ns/vllm:" + "a" * 64, context=tmp_path)


def engine(tmp_path: Path, **where: str) -> DockerEngine:
    client = Client("/usr/bin/docker", "26.1.5", "0.13.1")
    return DockerEngine(client, tmp_path / "logs", out=io.StringIO(), **where)


def only_host(env: Mapping[str, str]) -> str:
    return env.get("DOCKER_HOST", "")


def test_a_builder_host_reaches_every_call_and_the_log_says_where(
    tmp_path: Path, recorded: Recorded
) -> None:
    on_b = engine(tmp_path, host=HOST)
    on_b.build(job(tmp_path))
    on_b.tag("ns/vllm:x", "ns/vllm:y")
    (build_argv, build_env), (tag_argv, tag_env) = recorded.calls
    assert build_argv[:5] == ["/usr/bin/docker", "buildx", "build", "--load", "--progress=plain"]
    assert only_host(build_env) == HOST
    assert (tag_argv, only_host(tag_env)) == (
        ["/usr/bin/docker", "tag", "ns/vllm:x", "ns/vllm:y"],
        HOST,
    )
    log = (tmp_path / "logs" / "vllm-aaaaaaaaaaaa.log").read_text().splitlines()
    assert log[0].startswith(
        f"$ DOCKER_HOST={HOST} /usr/bin/docker buildx build --load --progress=plain "
    )
    assert on_b.name == HOST


def test_the_local_engine_leaves_docker_host_as_it_is(
    tmp_path: Path, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    local = engine(tmp_path)
    local.build(job(tmp_path))
    assert "DOCKER_HOST" not in recorded.calls[0][1]
    assert local.name == "local"


def test_a_buildx_builder_is_passed_to_buildx(tmp_path: Path, recorded: Recorded) -> None:
    engine(tmp_path, builder="k8s").build(job(tmp_path))
    argv = recorded.calls[0][0]
    assert argv[:6] == ["/usr/bin/docker", "buildx", "build", "--builder", "k8s", "--load"]


def test_an_image_name_on_docker_hub_is_found_as_the_cli_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over ssh no socket answers: `docker image ls` prints Docker Hub's names without
    docker.io/ (and library/), and a stage of image.name docker.io/amd/verl is built."""
    listed = "amd/verl/vllm:k sha256:1\nx:1 sha256:2\nlocalhost:5000/y:2 sha256:3\n"

    def run(argv: Sequence[str], **kw: Any) -> Any:
        return type("Done", (), {"stdout": listed})()

    monkeypatch.setattr(proc, "run", run)
    remote = engine(tmp_path, host=HOST)
    assert remote.image_ids(
        ["docker.io/amd/verl/vllm:k", "docker.io/library/x:1", "localhost:5000/y:2", "z:1"]
    ) == {
        "docker.io/amd/verl/vllm:k": "sha256:1",
        "docker.io/library/x:1": "sha256:2",
        "localhost:5000/y:2": "sha256:3",
        "z:1": None,
    }
