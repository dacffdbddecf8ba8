"""Build once, reuse everywhere: stage images shared through a real registry, between two
real Docker engines (the second one as another machine: rocmgraph/demo/machine.py)."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from conftest import need, run_doit
from demo_e2e import (
    E2E,
    built,
    copy_of_demo,
    docker,
    empty_namespace,
    nothing_to_build,
    unbuilt_max_jobs,
)
from test_e2e import psutil_like
from test_faults import other_verl_commit

import stages
from rocmgraph.common import failpoints
from rocmgraph.common.engine import ImageStore
from rocmgraph.common.layout import ROOT
from rocmgraph.demo.machine import DOCKER, compile_cache, images, second_engine
from rocmgraph.demo.profile import DEMO_ROOT
from rocmgraph.demo.serve import Registry
from rocmgraph.outside.http import Http
from rocmgraph.outside.registry import Client, Reference

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("e2e")]
GRAPH = stages.graph()
PORT = 28472  # below the ephemeral range, as the demo's ports (demo/profile.py)
REDIS_PORT = 28473
LOCAL = "unix:///var/run/docker.sock"  # engine A, as bootstrap.sh starts it


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    served = Registry(tmp_path_factory.mktemp("fleet-registry"), PORT)
    try:
        yield f"127.0.0.1:{PORT}/fleet-{time.time_ns()}"  # a cache no run filled before
    finally:
        served.stop()


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's redis-server on 127.0.0.1: the shared compile cache."""
    need("redis-server")
    with compile_cache(tmp_path_factory.mktemp("redis"), REDIS_PORT) as location:
        yield location


@pytest.fixture(scope="module")
def machine_b() -> Iterator[dict[str, str]]:
    with second_engine() as env:
        yield env


@pytest.fixture(scope="module")
def machine_b_containerd() -> Iterator[dict[str, str]]:
    """Another machine that keeps its images in containerd's store (Docker 29's default)."""
    with second_engine(ImageStore.CONTAINERD) as env:
        yield env


def pushed(result: subprocess.CompletedProcess[str]) -> set[str]:
    return set(re.findall(r"^pushed (\w+) [0-9a-f]{12} to ", result.stdout, re.MULTILINE))


def ours(env: dict[str, str]) -> set[str]:
    """The images of the build's namespace on the engine ``env`` points at."""
    return {ref for ref in images(env) if ref.startswith(("verl-e2e/", "verl-e2e:"))}


def on_b(env: dict[str, str], *args: str) -> str:
    return subprocess.run([DOCKER, *args], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


@pytest.mark.parametrize("b_store", list(ImageStore), ids=[f"b-{s.value}" for s in ImageStore])
def test_a_second_machine_pulls_what_the_first_built_and_builds_only_what_changed(
    tmp_path: Path, registry: str, b_store: ImageStore, request: pytest.FixtureRequest
) -> None:
    """B keeps its images in either store; A, in the default engine's."""
    fixture = "machine_b_containerd" if b_store is ImageStore.CONTAINERD else "machine_b"
    machine_b: dict[str, str] = request.getfixturevalue(fixture)
    world = copy_of_demo(tmp_path)
    registry = f"{registry}-{b_store.value}"  # a cache of its own: A shares every stage
    cache = f"cache={registry}"
    # A built every stage before the cache was set: the run shares them all, builds nothing.
    first = world.build("gfx942", cache)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert pushed(first) == set(GRAPH.order)
    assert nothing_to_build(world.build("gfx942", cache))

    # B, empty: the plan says every stage is cached; the build pulls the final image alone.
    plan = world.plan(env=machine_b, variables=(cache,))
    assert {stage["status"] for stage in plan.values()} == {"cached"}
    second = world.build("gfx942", cache, "push=1", env=machine_b)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert built(second) == set()
    friendly = f"{registry}/verl-e2e:gfx942"
    assert f"pushed verl-e2e:gfx942 to {friendly}" in second.stdout.splitlines()
    assert Client(Http(attempts=1)).has(friendly)
    documents_are_beside_the_image(registry, friendly, second.stdout)
    checked = run_doit("verify", *world.where, "arch=gfx942", "image=verl-e2e:gfx942", cache,
                       env=machine_b)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    final = str(plan["manifest"]["image"])
    # (The demo also made its upstream's base image there: the demo's, not the build's.)
    assert ours(machine_b) == {final, "verl-e2e:gfx942"}

    # One pin changed on B: exactly its closure builds there, on the parents it pulls.
    world.edit(["sources", "verl", "commit"], other_verl_commit(world))
    changed = world.build("gfx942", cache, env=machine_b)
    assert changed.returncode == 0, changed.stdout[-3000:] + changed.stderr
    assert built(changed) == {"verl", "assemble", "manifest"}
    assert pushed(changed) == {"verl", "assemble", "manifest"}
    stages_on_b = {ref.split("/", 1)[1].split(":")[0] for ref in ours(machine_b) if "/" in ref}
    # Pulled: verl's parent, and assemble's other parents (the stages it copies from).
    assert stages_on_b == {"slim", *GRAPH["assemble"].parents, "assemble", "manifest"}
    pulled = {"slim", *GRAPH["assemble"].parents} - {"verl"}
    assert {stage: summary(changed)[stage] for stage in pulled} == dict.fromkeys(pulled, "pulled")


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """What the run's summary says of each stage."""
    return dict(re.findall(r"^(\w+) +(built|pulled|reused|cached) ", result.stdout, re.M))


def world_on_b_with_new_causal_conv1d(
    world: E2E, cache: str, machine_b: dict[str, str], steps: str
) -> None:
    """Every stage of ``world`` in the cache (A shares what it holds), then causal-conv1d at
    a key no one built (its kernels' ``steps``), and B with none of the build's stages: B
    builds causal-conv1d on the wheels' image and assembles on verl's, pulling both."""
    shared = world.build("gfx942", cache)
    assert shared.returncode == 0, shared.stdout[-3000:] + shared.stderr
    world.edit(["sources", "causal_conv1d", "env", "DEMO_KERNEL_STEPS"], steps)
    for ref in ours(machine_b):
        on_b(machine_b, "image", "rm", ref)


def test_parents_are_pulled_side_by_side_and_a_lying_one_is_built_here_once(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    world = copy_of_demo(tmp_path)
    cache = f"cache={registry}"
    sglang = str(world.plan()["sglang"]["image"])
    world_on_b_with_new_causal_conv1d(world, cache, machine_b, "25001")
    # causal-conv1d's new key in the cache: another stage's image under its tag.
    plan = world.plan(env=machine_b, variables=(cache,))
    forged = f"{registry}/{plan['causal_conv1d']['image']}"
    docker("tag", sglang, forged)
    docker("push", forged)
    docker("image", "rm", forged)
    result = world.build("gfx942", cache, env=machine_b)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    refused = (
        f"warning: refused {forged}: its key label is {sglang.rsplit(':', 1)[1][:12]}, "
        "not the key its tag claims; building it here"
    )
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [refused]
    assert built(result) == {"causal_conv1d", "assemble", "manifest"}
    others = set(GRAPH["assemble"].parents) - {"causal_conv1d"}
    assert {stage: summary(result)[stage] for stage in others} == dict.fromkeys(others, "pulled")


def documents_are_beside_the_image(registry: str, friendly: str, said: str) -> None:
    """push=1: the image's SBOM and provenance in its registry, under cosign's tags, the
    provenance naming the pushed image by its digest."""
    client = Client(Http(attempts=1))
    digest = client.digest(friendly).removeprefix("sha256:")
    for suffix, kind in (("sbom", "cyclonedx"), ("att", "in-toto")):
        ref = f"{registry}/verl-e2e:sha256-{digest}.{suffix}"
        assert f"pushed {ref}" in said.splitlines()
        where = Reference.parse(ref).base_url
        manifest = requests.get(
            f"{where}/manifests/sha256-{digest}.{suffix}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"}, timeout=10,
        ).json()  # fmt: skip
        assert manifest["artifactType"] == f"application/vnd.{kind}+json"
        layer = manifest["layers"][0]["digest"]
        blob = requests.get(f"{where}/blobs/{layer}", timeout=10).json()
        if suffix == "att":
            assert {"name": friendly, "digest": {"sha256": digest}} in blob["subject"]
        else:
            assert blob["metadata"]["component"]["name"] == "verl-e2e"


def test_ctrl_c_while_parents_are_pulled_side_by_side_ends_in_one_line(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    world = copy_of_demo(tmp_path)
    cache = f"cache={registry}"
    world_on_b_with_new_causal_conv1d(world, cache, machine_b, "25002")
    process = subprocess.Popen(
        [sys.executable, "-m", "doit", "build:image", *world.where, "arch=gfx942", cache],
        cwd=ROOT, env={**os.environ, **machine_b}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # SIGINT to doit alone (a terminal's Ctrl-C reaches its group)
    )  # fmt: skip

    def pulls() -> list[str]:
        return [line for line in psutil_like(f"pull --quiet {registry}/") if "docker" in line]

    while len(pulls()) < 2 and process.poll() is None:  # the two big ones take seconds
        time.sleep(0.02)
    assert len(pulls()) >= 2, process.communicate()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, out[-3000:] + err
    # The interrupt's line first; no pull it stopped is said to have failed. (A push that
    # it kept from starting is said: a stage built before it is not in the cache.)
    said = err.splitlines()
    assert said[0] == "interrupted: nothing was building", err
    assert not [line for line in said if "could not pull" in line], err
    assert pulls() == []


def test_two_builders_split_the_stages_that_do_not_need_each_other(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    world = copy_of_demo(tmp_path)
    # an input of every source build, apart from each other
    world.edit(["build", "max_jobs"], unbuilt_max_jobs())
    plan = world.plan()
    to_build = {name for name, stage in plan.items() if stage["status"] == "not built"}
    assert {"vllm", "sglang", "causal_conv1d"} <= to_build
    b = machine_b["DOCKER_HOST"]
    hosts = {LOCAL: {}, b: machine_b}
    result = world.build("gfx942", "-n", "2", f"cache={registry}", f"builders={LOCAL},{b}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    where = dict(
        re.findall(r"^built (\w+) [0-9a-f]{12} in [0-9.]+ s on (\S+)", result.stdout, re.M)
    )
    assert set(where) == to_build
    assert set(where.values()) == set(hosts)  # both built
    for stage, host in where.items():
        assert str(plan[stage]["image"]) in images(hosts[host])  # each holds what it built
        log = (world.pins.parent / ".build" / "logs" / f"{stage}.log").read_text()
        assert log.startswith(f"$ DOCKER_HOST={host} ")
    assert pushed(result) == to_build  # every stage went through the cache
    # What one builder built and the other pulled as a parent stays "built" in the summary.
    assert {summary(result)[stage] for stage in to_build} == {"built"}, result.stdout
    # The image is tagged on the engine doit runs against (the first), pulled if B built it.
    final = str(plan["manifest"]["image"])
    assert {final, "verl-e2e:gfx942"} <= images({})


def test_a_cached_image_whose_key_label_lies_is_refused_and_built_here(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    honest = copy_of_demo(tmp_path / "a").plan()["manifest"]["image"]  # A built it
    world = copy_of_demo(tmp_path / "b")
    world.edit(["sources", "verl", "commit"], other_verl_commit(world))  # B has its parents
    forged_plan = world.plan(env=machine_b, variables=("cache=" + registry, "commit_tag=forged"))
    forged = f"{registry}/{forged_plan['manifest']['image']}"
    docker("tag", str(honest), forged)  # on A: another key's image, under this key's tag
    docker("push", forged)
    docker("image", "rm", forged)
    result = world.build("gfx942", f"cache={registry}", "commit_tag=forged", env=machine_b)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert (
        f"warning: refused {forged}: its key label is {str(honest).rsplit(':', 1)[1][:12]}, "
        "not the key its tag claims; building it here"
    ) in result.stderr.splitlines()
    key = '{{index .Config.Labels "org.verl-rocm-graph.key"}}'
    label = on_b(machine_b, "image", "inspect", "--format", key, "verl-e2e:gfx942")
    assert label.strip() == str(forged_plan["manifest"]["key"])


def test_a_cache_that_does_not_answer_is_said_once_and_built_past(tmp_path: Path) -> None:
    world = copy_of_demo(tmp_path)  # on A, where every stage of it is built
    down = "127.0.0.1:9/nowhere"  # nothing listens on the discard port
    result = world.build("gfx942", f"cache={down}", f"commit_tag=cache-down-{time.time_ns()}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith(f"warning: the stage cache {down} does not answer (")
    assert warnings[0].endswith("); building here")
    assert "manifest" in built(result)
    assert pushed(result) == set()  # no push is tried past a cache that does not answer


def test_a_small_change_built_on_b_takes_what_a_compiled_from_the_shared_compile_cache(
    tmp_path: Path, registry: str, machine_b: dict[str, str], redis: str
) -> None:
    # A variable ccache does not hash, in the pinned build's command: keys no run built before,
    # and BuildKit's own cache not used (it would skip the compile).
    run = time.time_ns()
    a = copy_of_demo(tmp_path / "a")
    a.edit(["sources", "vllm", "env"], {"DEMO_BUILT_BY": f"a-{run}"})
    first = a.build("gfx942", f"compile_cache={redis}", target="build:vllm")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert "vllm" in built(first)

    # B has never compiled anything (its BuildKit cache, ccache's local one, is emptied):
    # a small change (one file of the C extension, one kernel of 16) compiles those alone.
    on_b(machine_b, "builder", "prune", "--all", "--force")
    b = copy_of_demo(tmp_path / "b")
    b.edit(["sources", "vllm", "env"], {"DEMO_BUILT_BY": f"b-{run}"})
    commits = json.loads((DEMO_ROOT / "fixtures" / "built.json").read_text())["commits"]["vllm"]
    b.edit(["sources", "vllm", "commit"], commits[1])  # csrc/ops_b.c and k05.cpp changed
    second = b.build("gfx942", f"cache={registry}", f"compile_cache={redis}", target="build:vllm",
                     env=machine_b)  # fmt: skip
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    line = next(line for line in second.stdout.splitlines() if line.startswith("built vllm "))
    assert line.endswith(" s (ccache 16 hits (16 shared), 2 misses)"), line
    log = (b.pins.parent / ".build" / "logs" / "vllm.log").read_text()
    assert re.search(r"Remote storage:\n#\d+ [0-9.]+ +Hits: +16 / +18", log), log[-3000:]
    assert redis.split("//")[1] not in log  # a location, in a secret: in no command or output


@pytest.mark.parametrize("given", ["REDISCLI_AUTH", "VERL_GRAPH_COMPILE_CACHE"])
def test_a_compile_cache_password_is_in_no_command_line_log_record_or_image(
    tmp_path: Path, given: str
) -> None:
    """A build with the password of its compile cache set, as redis-cli takes it or in the
    URL of $VERL_GRAPH_COMPILE_CACHE: ccache uses it (the cache fills), and while the build
    runs no process's command line holds it; after, no file of the run (logs, run.json, the
    records, the trace, the SBOM) and nothing of the images (their history, configuration and
    files) does."""
    token = secrets.token_hex(12)  # what no file, line or layer may hold
    location = f"redis://127.0.0.1:{REDIS_PORT + 3}"
    if given == "REDISCLI_AUTH":
        password = f"pw-{token}"
        env, where = {"REDISCLI_AUTH": password}, [f"compile_cache={location}"]
    else:  # redis-py's form, a password with ':' and '@' in it: ccache's is not the same
        password = f"p@ss:{token}"
        env, where = {given: location.replace("//", f"//:{quote(password, safe='')}@")}, []
    world = copy_of_demo(tmp_path / "world", name="verl-secret")
    world.edit(["sources", "vllm", "env"], {"DEMO_BUILT_BY": f"secret-{time.time_ns()}"})
    argv = [sys.executable, "-m", "doit", "build:image", *world.where, "arch=gfx942", *where]
    seen: list[str] = []
    try:
        with compile_cache(tmp_path / "redis", REDIS_PORT + 3, password):
            build = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            out = threading.Thread(target=lambda: seen.append(build.communicate()[0]))
            out.start()
            leaked = []
            while build.poll() is None:  # every command line while it runs
                leaked += psutil_like(token)
                time.sleep(0.02)
            out.join()
            assert build.returncode == 0, "".join(seen)[-3000:]
            assert leaked == []
            assert redis_keys(REDIS_PORT + 3, password) > 0  # ccache wrote there: it got in
        run_files = [path for path in (tmp_path / "world" / ".build").rglob("*") if path.is_file()]
        assert {path.name for path in run_files} >= {"run.json", "trace.json", "vllm.log"}
        assert [path for path in run_files if token.encode() in path.read_bytes()] == []
        assert token not in "".join(seen)
        images = [str(stage["image"]) for stage in world.plan().values()] + ["verl-secret:gfx942"]
        for image in images:
            assert token not in docker("history", "--no-trunc", image), image
            assert token not in docker("image", "inspect", image), image
        assert not holds("verl-secret:gfx942", token.encode())
    finally:
        empty_namespace("verl-secret")


def redis_keys(port: int, password: str) -> int:
    """How many keys the redis on 127.0.0.1:``port`` holds (``password`` let in)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"AUTH {password}\r\nDBSIZE\r\n".encode())
        reply = b""
        while reply.count(b"\r\n") < 2:
            reply += conn.recv(4096)
    first, second = reply.split(b"\r\n")[:2]
    assert first == b"+OK", reply
    return int(second.removeprefix(b":"))


def holds(image: str, needle: bytes) -> bool:
    """Whether a file of ``image`` holds ``needle`` (its files as `docker export` gives them)."""
    container = docker("create", "--network=none", image, "true").strip()
    try:
        with subprocess.Popen([DOCKER, "export", container], stdout=subprocess.PIPE) as export:
            assert export.stdout is not None
            tail = b""
            while chunk := export.stdout.read(1 << 20):
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle) :]
        return False
    finally:
        docker("rm", container)


def test_a_registry_that_stops_mid_build_costs_one_warning(tmp_path: Path) -> None:
    served = Registry(tmp_path / "registry", PORT + 2)
    cache = f"127.0.0.1:{PORT + 2}/stops"
    world = copy_of_demo(tmp_path / "world")
    resume, out, err = tmp_path / "resume", tmp_path / "out", tmp_path / "err"
    argv = [sys.executable, "-m", "doit", "build:image", *world.where, "arch=gfx942",
            f"cache={cache}", f"commit_tag=stops-{time.time_ns()}"]  # fmt: skip
    env = {**os.environ, failpoints.ENV: "tagged", failpoints.RESUME_ENV: str(resume)}
    with out.open("w") as stdout, err.open("w") as stderr:
        run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
        try:
            deadline = time.monotonic() + 240  # the manifest is built, not yet pushed
            while "failpoint tagged" not in err.read_text():
                assert run.poll() is None, err.read_text()
                assert time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            served.stop()
            resume.touch()
            assert run.wait(240) == 0, out.read_text()[-3000:] + err.read_text()
        finally:
            if run.poll() is None:
                run.kill()
    warnings = [line for line in err.read_text().splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, err.read_text()
    # Said by whichever asked it first: a push, or the question whether a stage is cached.
    assert re.fullmatch(
        rf"warning: (stage \w+ was built but not pushed to {cache} \(.*\); pushing nothing "
        rf"more in this run|the stage cache {cache} does not answer \(.*\); building here)",
        warnings[0],
    ), warnings[0]
    said = re.search(rf"^not shared through {cache}: (.*)$", out.read_text(), re.MULTILINE)
    assert said, out.read_text()[-3000:]
    not_shared = said.group(1).split(", ")
    assert "manifest" in not_shared
    report = json.loads((world.pins.parent / ".build" / "run.json").read_text())
    assert report["not_shared"] == not_shared
    assert report["stages"]["manifest"]["status"] == "built"
    assert report["image"] == "verl-e2e:gfx942"
