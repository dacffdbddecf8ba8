"""`doit lock closures=1` on the demo: each stage built again with the network, what pip and
apt fetched recorded by sha256; `locked=1` refusing a stage whose closure is not locked; and
a cold build with the network off and no package index at all, file for file the same."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_doit
from demo_e2e import E2E, copy_of_demo, docker

import stages
from rocmgraph import closure, filetree
from rocmgraph.fsutil import sha256_file
from rocmgraph.outside import default_cache
from rocmgraph.outside.docker import DockerEngine
from rocmgraph.outside.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("e2e")]


def test_closures_are_locked_then_a_cold_build_needs_no_network_and_gives_the_same_files(
    tmp_path: Path,
) -> None:
    world = copy_of_demo(tmp_path, name="verl-sealed")  # images of its own: removed below
    assert world.build().returncode == 0
    where = (f"profile={world.profile}", f"pins={world.pins}", "arch=gfx942")
    audit = ("audit", *where, "image=verl-sealed:gfx942")
    before = run_doit(*audit)
    assert before.returncode == 1, before.stdout + before.stderr
    untraced = {line.split()[2] for line in before.stdout.splitlines() if line[:9] == "untraced "}
    # What the recipes install from the index and from Debian, unrecorded until locked:
    assert untraced >= {"setuptools-scm", "megatron-core", "demo-xgrammar", "ccache", "gcc"}

    result = run_doit("lock", *where, "closures=1")
    assert result.returncode == 0, result.stdout + result.stderr
    keys = {name: str(stage["key"]) for name, stage in world.plan().items()}
    closures_hold_what_the_demo_fetches(tmp_path / "pins.lock.toml", keys, result.stdout)
    after = run_doit(*audit)
    assert after.returncode == 0, after.stdout + after.stderr
    (traced,) = [line for line in after.stdout.splitlines() if line.startswith("verl-sealed")]
    assert re.fullmatch(
        r"verl-sealed:gfx942: \d+ packages; traced: \d+ by the base image's digest, "
        rf"{len(untraced)} by a closure's sha256, \d+ by a pinned source or wheel",
        traced,
    ), traced

    # Locked already: nothing is built again.
    again = run_doit("lock", *where, "closures=1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [line for line in again.stdout.splitlines() if ": locked at " in line] == [
        f"{name}: locked at {keys[name][:12]}" for name in stages.graph().order
    ]
    locked_refuses_a_stage_without_a_closure(world, tmp_path)
    a_cold_build_with_no_index_and_no_network(world, tmp_path, keys)


def closures_hold_what_the_demo_fetches(path: Path, keys: dict[str, str], said: str) -> None:
    locked = closure.load(path)
    assert locked.missing(keys) == []  # every stage, those that fetch nothing too
    names = {
        stage: {(item.kind, item.name, item.version) for item in locked.closures[stage, key].files}
        for stage, key in keys.items()
    }
    # What the demo's recipes take from its package index, beyond what they name:
    assert ("python", "setuptools-scm", "8.3.1") in names["base"]  # [python.tools]
    assert ("python", "demo-tilelang", "0.1.0") in names["vllm"]  # vLLM's requirements/rocm.txt
    assert ("python", "megatron-core", "0.18.0") in names["verl"]  # [python.stack]
    assert {("python", "demo-xgrammar", "0.1.32"), ("python", "demo-soundfile", "0.13.1")} <= (
        names["assemble"]
    )
    # and what the base's apt install added from Debian (gcc's libraries with it)
    assert {"ccache", "gcc"} <= {name for kind, name, _ in names["base"] if kind == "apt"}
    assert names["prune"] == names["slim"] == set()
    store = Store(default_cache())
    files = {item for entry in locked.closures.values() for item in entry.files}
    for item in files:
        assert sha256_file(store.path(item.sha256, item.file)) == item.sha256, item
    assert said.splitlines()[-1] == (
        f"{path}: {len(keys)} closures, {len(files)} files, every one by sha256"
    )


def locked_refuses_a_stage_without_a_closure(world: E2E, tmp_path: Path) -> None:
    """A package at another version: verl and what follows it have other keys, with no
    closure; locked=1 refuses them before any build."""
    world.edit(["python", "stack", "megatron-core"], "0.18.1")
    moved = {name: str(stage["key"])[:12] for name, stage in world.plan().items()}
    refused = world.build("gfx942", "locked=1")
    assert refused.returncode == 1
    named = ", ".join(f"{name} at {moved[name]}" for name in ("verl", "assemble", "manifest"))
    assert refused.stderr.splitlines()[-1] == (
        f"error: {tmp_path}/pins.lock.toml holds no closure for {named}: what they fetch as "
        "they build is not locked; run `doit lock closures=1` where the network allows and "
        "commit pins.lock.toml"
    )
    assert "built " not in refused.stdout
    world.edit(["python", "stack", "megatron-core"], "0.18.0")


def a_cold_build_with_no_index_and_no_network(
    world: E2E, tmp_path: Path, keys: dict[str, str]
) -> None:
    """Cold, with the package index gone (no key reads it) and every stage's network off: the
    same files as the build with the network."""
    images = {name: f"verl-sealed/{name}:{key}" for name, key in keys.items()}
    for name, ref in images.items():
        docker("tag", ref, f"verl-sealed/{name}:open")
    docker("image", "rm", *images.values())
    world.edit(["python", "index"], "http://127.0.0.1:9/simple")
    assert {name: str(stage["key"]) for name, stage in world.plan().items()} == keys
    shutil.rmtree(tmp_path / ".build" / "logs" / "builds", ignore_errors=True)  # open builds
    where = (f"profile={world.profile}", f"pins={world.pins}", "arch=gfx942")
    planned = run_doit("plan", *where)
    assert planned.stdout.splitlines()[-1] == (
        f"network: off for {len(keys)} of {len(keys)} stages to build (closures locked)"
    )
    escape = run_doit("plan", *where, "hermetic=0")
    assert escape.stdout.splitlines()[-1] == "network: on for every stage (hermetic=0)"
    sealed = world.build("gfx942", "locked=1")
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    report = json.loads((tmp_path / ".build" / "build.json").read_text())
    networks = {name: entry["network"] for name, entry in report["stages"].items()}
    assert networks == dict.fromkeys(keys, "off")
    engine = DockerEngine.connect(tmp_path / "logs")
    for name, ref in images.items():
        assert engine.labels(ref)["org.verl-rocm-graph.hermetic"] == "true", name
        assert filetree.compare(engine.files(f"verl-sealed/{name}:open"), engine.files(ref)) == []
    logs = (tmp_path / ".build" / "logs" / "builds").glob("*.log")
    argvs = [line for log in logs for line in log.read_text().splitlines() if line[:2] == "$ "]
    assert len(argvs) == len(keys)
    assert all("--network none" in argv for argv in argvs)
    docker("image", "rm", *(f"verl-sealed/{name}:open" for name in images))

    # A closure that lacks a file its stage needs: the build fails at once, naming it.
    path = tmp_path / "pins.lock.toml"
    lock = closure.load(path)
    verl = lock.closures["verl", keys["verl"]]
    kept = tuple(item for item in verl.files if item.name != "megatron-core")
    closures = {**lock.closures, ("verl", keys["verl"]): closure.Closure("verl", verl.key, kept)}
    closure.save(closure.LockFile(path, closures))
    docker("image", "rm", images["manifest"], images["assemble"], images["verl"])
    failed = world.build("gfx942", target="build:verl")
    assert failed.returncode == 1
    assert "No matching distribution found for megatron-core==0.18.0" in failed.stderr
