"""An engine named by its DOCKER_HOST (builders=) and builds on a buildx builder (builder=):
what the docker client is run with (the runner patched to record argv and environment), and
a docker context's builder building on its own engine for real (two real engines build in
test_fleet too)."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from demo_e2e import DOCKER, built, copy_of_demo, prepare

from rocmgraph.common.engine import BuildJob, ImageStore
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


def engine(tmp_path: Path, store: ImageStore = ImageStore.CLASSIC, **where: str) -> DockerEngine:
    client = Client("/usr/bin/docker", "26.1.5", "0.13.1")
    return DockerEngine(client, tmp_path / "logs", out=io.StringIO(), store=store, **where)


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
    engine(tmp_path, ImageStore.CONTAINERD, builder="k8s").build(job(tmp_path))
    argv = recorded.calls[0][0]
    assert argv[:6] == ["/usr/bin/docker", "buildx", "build", "--builder", "k8s", "--load"]


def test_on_the_containerd_store_new_layers_are_compressed_with_zstd(
    tmp_path: Path, recorded: Recorded
) -> None:
    engine(tmp_path, ImageStore.CONTAINERD).build(job(tmp_path))
    argv = recorded.calls[0][0]
    assert argv[:5] == ["/usr/bin/docker", "buildx", "build", "--output",
                        "type=image,compression=zstd,compression-level=1"]  # fmt: skip


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


@pytest.mark.docker
def test_a_docker_context_named_as_builder_builds_and_keeps_its_images_on_its_engine(
    tmp_path: Path, containerd_engine: dict[str, str]
) -> None:
    """builder=<a docker context>: buildx's builder of that name has the docker driver, which
    builds on the context's engine and keeps the images there; the run asks that engine
    what is built, so the next run builds nothing."""
    prepare("demo")
    env = {**os.environ, "DOCKER_CONFIG": str(tmp_path / "docker-config")}  # the test's own
    host = containerd_engine["DOCKER_HOST"]
    subprocess.run([DOCKER, "context", "create", "vrg-b", "--docker", f"host={host}"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    world = copy_of_demo(tmp_path / "world", name="verl-builder")
    first = world.build("gfx942", "builder=vrg-b", target="build:rocm", env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert built(first) == {"base", "rocm"}
    plan = world.plan(env={"DOCKER_HOST": host})
    for stage in ("base", "rocm"):  # on the context's engine, not on the default one
        image = str(plan[stage]["image"])
        assert on(host, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", image) == image
        assert on("", "image", "ls", "--quiet", image) == ""
    again = world.build("gfx942", "builder=vrg-b", target="build:rocm", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert built(again) == set()


def on(host: str, *args: str) -> str:
    """What the docker CLI prints of ``args`` on the engine at ``host`` ("": the default)."""
    env = {**os.environ, "DOCKER_HOST": host} if host else os.environ
    done = subprocess.run([DOCKER, *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()
