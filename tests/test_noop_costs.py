"""What a run that builds nothing pays for, kept small: the client probe remembered, the
engine asked over its socket, the templates compiled once (each with its fallback)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import need_docker

import stages
from rocmgraph.common.errors import EngineError, GraphToolError
from rocmgraph.graph import recipe
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside import dockerapi
from rocmgraph.outside.docker import Client, DockerEngine, remembered_client

# ------------------------------------------------------------ the client probe


def stub_client(
    folder: Path, version: str = "26.1.5+dfsg1", buildx: str = "0.13.1+ds1 0.13.1+ds1-3"
) -> tuple[Path, Path]:
    """A docker client that only knows --version and ``buildx version`` (none where
    ``buildx`` is empty), and counts its calls."""
    calls = folder / "calls"
    client = folder / "docker"
    client.write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\n'
        f'[ "$1" = "--version" ] && echo "Docker version {version}, build 297e128" && exit 0\n'
        + (f'[ "$1" = buildx ] && echo "github.com/docker/buildx {buildx}" && exit 0\n'
           if buildx else "")
        + "exit 1\n"
    )  # fmt: skip
    client.chmod(0o755)
    return client, calls


def test_the_client_choice_is_remembered_until_the_client_changes(tmp_path: Path) -> None:
    client, calls = stub_client(tmp_path)
    memo = tmp_path / "cache" / "docker-client.json"
    assert remembered_client([str(client)], memo) == Client(str(client), "26.1.5", "0.13.1")
    assert calls.read_text().splitlines() == ["--version", "buildx version"]
    assert json.loads(memo.read_text())["client"]["version"] == "26.1.5"

    assert remembered_client([str(client)], memo) == Client(str(client), "26.1.5", "0.13.1")
    assert len(calls.read_text().splitlines()) == 2  # not asked again

    client, calls = stub_client(tmp_path, "29.1.2", "v0.30.1 9e667ae")  # a new client: asked again
    os.utime(client, ns=(1, 1))
    assert remembered_client([str(client)], memo) == Client(str(client), "29.1.2", "0.30.1")
    assert len(calls.read_text().splitlines()) == 4


def test_a_memo_that_cannot_be_kept_only_costs_the_probe(tmp_path: Path) -> None:
    client, calls = stub_client(tmp_path)
    (tmp_path / "file").write_text("")
    memo = tmp_path / "file" / "docker-client.json"  # under a file: never writable
    for _ in range(2):
        assert remembered_client([str(client)], memo).path == str(client)
    assert len(calls.read_text().splitlines()) == 4
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    assert remembered_client([str(client)], garbled).version == "26.1.5"
    # A memo of a client chosen before buildx was required names no buildx version.
    stale = tmp_path / "stale.json"
    remembered_client([str(client)], stale)
    known = json.loads(stale.read_text())
    stale.write_text(json.dumps({**known, "client": {**known["client"], "buildx": False}}))
    assert remembered_client([str(client)], stale).buildx == "0.13.1"


def test_a_client_without_buildx_is_refused_in_one_line_that_names_the_fix(
    tmp_path: Path,
) -> None:
    client, _ = stub_client(tmp_path, "20.10.24+dfsg1", buildx="")
    with pytest.raises(EngineError) as caught:
        remembered_client([str(client), "/nonexistent/docker"], tmp_path / "memo.json")
    assert str(caught.value) == (
        f"no docker client can build with buildx: {client} 20.10.24 has no buildx; "
        "/nonexistent/docker: not a working docker client; install Docker 26 or later with "
        "docker-buildx (bash bootstrap.sh does)"
    )


# ------------------------------------------------------------ the engine's socket


@pytest.mark.parametrize(
    ("environ", "config", "expected"),
    [
        ({}, None, dockerapi.DEFAULT_SOCKET),
        ({"DOCKER_HOST": "unix:///run/other.sock"}, None, Path("/run/other.sock")),
        ({"DOCKER_HOST": "tcp://10.0.0.1:2376"}, None, None),
        ({"DOCKER_HOST": "ssh://build-2"}, None, None),
        ({"DOCKER_CONTEXT": "remote"}, None, None),
        ({}, {"currentContext": "remote"}, None),
        ({}, {"currentContext": "default"}, dockerapi.DEFAULT_SOCKET),
        ({}, "not json", dockerapi.DEFAULT_SOCKET),
    ],
)
def test_the_socket_is_the_one_the_cli_would_use(
    tmp_path: Path, environ: dict[str, str], config: object, expected: Path | None
) -> None:
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        (tmp_path / "config.json").write_text(text)
    assert dockerapi.local_socket({**environ, "DOCKER_CONFIG": str(tmp_path)}) == expected


def test_no_engine_behind_the_socket_is_no_answer(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    for path in (tmp_path / "missing.sock", tmp_path / "plain"):
        with pytest.raises(dockerapi.NoAnswer):
            dockerapi.inspect(path, "any:tag", timeout=2)
        with pytest.raises(dockerapi.NoAnswer):
            dockerapi.tag(path, "any:tag", "other:tag", timeout=2)
        with pytest.raises(dockerapi.NoAnswer):
            dockerapi.disk_usage(path, timeout=2)


def docker_cli(*argv: str, stdin: bytes | None = None) -> str:
    return subprocess.run(
        ["/usr/bin/docker", *argv], input=stdin, capture_output=True, check=True
    ).stdout.decode()


@pytest.fixture
def small_images(tmp_path: Path) -> Iterator[list[str]]:
    """Nine one-file images of this test's own (not whatever the engine holds), removed
    after it."""
    need_docker()
    tags = [f"rocmgraph-test/small-{uuid.uuid4().hex[:12]}:{n}" for n in range(9)]
    folder = tmp_path / "small-images"
    folder.mkdir()
    for n, tag in enumerate(tags):
        (folder / "file").write_text(f"image {n}\n")
        archive = folder / "image.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(folder / "file", arcname="file")
        docker_cli("import", "-", tag, stdin=archive.read_bytes())
    yield tags
    docker_cli("image", "rm", *tags)


@pytest.mark.docker
def test_the_socket_inspects_as_the_cli_does(small_images: list[str]) -> None:
    socket = dockerapi.local_socket()
    assert socket is not None
    tag = small_images[0]
    found = dockerapi.inspect(socket, tag)
    assert found == json.loads(docker_cli("image", "inspect", tag))[0]
    assert dockerapi.inspect(socket, "verl-nothing/here:0123") is None


@pytest.mark.docker
def test_the_engine_asks_the_socket_and_the_cli_alike(
    tmp_path: Path, small_images: list[str]
) -> None:
    """The same answers with the socket as without it (DOCKER_HOST=tcp://: the CLI)."""
    tag = small_images[0]
    by_socket = DockerEngine.connect(tmp_path)
    by_cli = DockerEngine.connect(tmp_path)
    by_cli._socket = None  # as where DOCKER_HOST names no local socket
    for engine in (by_socket, by_cli):
        assert engine.image_exists(tag)
        assert not engine.image_exists("verl-nothing/here:0123")
    assert by_socket.image_id(tag) == by_cli.image_id(tag)
    assert by_socket.size(tag) == by_cli.size(tag) == int(docker_cli(
        "image", "inspect", "--format", "{{.Size}}", tag
    ))  # fmt: skip
    assert by_socket.layers(tag) == by_cli.layers(tag) != []
    assert by_socket.config(tag) == by_cli.config(tag)
    assert by_cli._tags is not None  # the CLI's list, asked once
    assert by_socket._tags is None  # never listed: asked one image at a time


@pytest.mark.docker
def test_images_asked_together_answer_as_one_by_one(
    tmp_path: Path, small_images: list[str]
) -> None:
    """Several connections side by side, each kept for its share: the same answers."""
    socket = dockerapi.local_socket()
    assert socket is not None
    tags = small_images
    # A connection asks on after a 404; a ref twice is asked once.
    refs = ["verl-nothing/here:0123", *tags, tags[0]]
    together = dockerapi.inspect_many(socket, refs, threads=4)
    assert together == {ref: dockerapi.inspect(socket, ref) for ref in refs}
    assert together["verl-nothing/here:0123"] is None
    with pytest.raises(dockerapi.NoAnswer):
        dockerapi.inspect_many(tmp_path / "missing.sock", refs, timeout=2)

    by_socket, by_cli = DockerEngine.connect(tmp_path), DockerEngine.connect(tmp_path)
    by_cli._socket = None
    assert by_socket.image_ids(refs) == by_cli.image_ids(refs)
    assert set(by_socket._inspected) == set(refs)  # kept: image_id asks no more


@pytest.mark.docker
def test_a_tag_over_the_socket_is_the_clis_and_a_missing_image_gets_the_clis_words(
    tmp_path: Path, small_images: list[str]
) -> None:
    image = docker_cli("image", "inspect", "--format", "{{.Id}}", small_images[0]).strip()
    by_socket, by_cli = DockerEngine.connect(tmp_path), DockerEngine.connect(tmp_path)
    by_socket.client = Client("/nonexistent/docker", "26.1.5", "0.13.1")  # socket alone
    by_cli._socket = None

    def image_of(ref: str) -> str:
        return docker_cli("image", "inspect", "--format", "{{.Id}}", ref).strip()

    # As the CLI reads a name: no tag is latest, a registry's port is no tag.
    aliases = [
        (by_socket, "verl-tagtest/socket:one", "verl-tagtest/socket:one"),
        (by_cli, "verl-tagtest/cli:one", "verl-tagtest/cli:one"),
        (by_socket, "verl-tagtest/socket", "verl-tagtest/socket:latest"),
        (by_socket, "127.0.0.1:5999/verl-tagtest/port", "127.0.0.1:5999/verl-tagtest/port:latest"),
    ]
    try:
        for engine, alias, tagged in aliases:
            engine.tag(image, alias)
            assert image_of(tagged) == image_of(image)
        with pytest.raises(GraphToolError, match="No such image: verl-nothing/here:0123"):
            DockerEngine.connect(tmp_path).tag("verl-nothing/here:0123", "verl-tagtest/x:two")
    finally:
        subprocess.run(["/usr/bin/docker", "image", "rm", *[tag for _, _, tag in aliases]],
                       capture_output=True, check=False)  # fmt: skip


# ------------------------------------------------------------ compiled templates


def keys_of(pins: str) -> dict[str, str]:
    run = Run(Options(pins=pins, arch="gfx942"), stages.graph())
    return {name: key.key for name, key in run.keys.items()}


def test_compiled_templates_are_kept_and_change_no_key(tmp_path: Path) -> None:
    recipe.keep_compiled(None)
    recipe._TEMPLATES.fresh()  # a fresh process: nothing compiled yet
    plain = keys_of("pins.toml")
    try:
        recipe._TEMPLATES.fresh()
        recipe.keep_compiled(tmp_path / "templates")
        assert keys_of("pins.toml") == plain
        kept = sorted((tmp_path / "templates").glob("*.cache"))
        assert len(kept) >= len(list(Path("docker").glob("*.j2")))
        recipe._TEMPLATES.fresh()
        recipe.keep_compiled(tmp_path / "templates")
        assert keys_of("pins.toml") == plain  # from the kept ones
        for path in kept:
            path.write_bytes(b"garbage")
        recipe._TEMPLATES.fresh()
        recipe.keep_compiled(tmp_path / "templates")
        assert keys_of("pins.toml") == plain  # unreadable: compiled again
        (tmp_path / "file").write_text("")
        recipe._TEMPLATES.fresh()
        recipe.keep_compiled(tmp_path / "file" / "templates")  # never writable
        assert keys_of("pins.toml") == plain
    finally:
        recipe._TEMPLATES.fresh()
        recipe.keep_compiled(None)


@pytest.mark.docker
def test_a_file_of_an_image_is_read_from_a_container_never_started(tmp_path: Path) -> None:
    """The SBOM every run that tags its image keeps beside its record: read over the socket
    from a container made and removed, never started (a start costs a third of a second),
    and from the CLI (`docker cp`) alike, symbolic links followed; an image with no `cat`
    in it is read too."""
    need_docker()
    text = '{"bomFormat": "CycloneDX", "specVersion": "1.6"}\n'
    (tmp_path / "root" / "doc" / "dir").mkdir(parents=True)
    (tmp_path / "root" / "doc" / "sbom.json").write_text(text)
    (tmp_path / "root" / "etc").mkdir()
    (tmp_path / "root" / "etc" / "os-release").symlink_to("../doc/link.json")  # as Debian's
    (tmp_path / "root" / "doc" / "link.json").symlink_to("/doc/sbom.json")
    with tarfile.open(tmp_path / "root.tar", "w") as tar:
        tar.add(tmp_path / "root", arcname=".")
    ref = f"verl-read/file:{time.time_ns()}"
    docker_cli("import", str(tmp_path / "root.tar"), ref)
    try:
        by_socket, by_cli = DockerEngine.connect(tmp_path), DockerEngine.connect(tmp_path)
        by_cli._socket = None  # as where DOCKER_HOST names no local socket
        for engine in (by_socket, by_cli):
            assert engine.read(ref, "/doc/sbom.json") == text
            assert engine.read(ref, "/etc/os-release") == text  # through two links, as cat
            with pytest.raises(GraphToolError) as folder:
                engine.read(ref, "/doc/dir")
            assert str(folder.value) == f"/doc/dir in {ref} is a folder, not a file"
            with pytest.raises(GraphToolError) as missing:  # in the CLI's words, 26's or 28's
                engine.read(ref, "/doc/none.json")
            words = (
                r"(No such container:path: [0-9a-f]{64}:/doc/none.json"
                r"|Could not find the file /doc/none.json in container [0-9a-f]{64})$"
            )
            assert re.search(words, str(missing.value)), missing.value
        assert docker_cli("ps", "-aq", "--filter", f"ancestor={ref}") == ""  # each removed
    finally:
        docker_cli("image", "rm", ref)
