"""The second real profile, pins-rocm702.toml, through plan, lock, audit and bump: its world
serves what that profile pins (wheels by exact file, a base repository's key, unpinned
Python and apt packages, sources by short id, by tag and not at all)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import edit_toml, run_doit
from servers import commit, git
from world import World, key_bytes, locked_run, prepare, values_blanked, wheel_bytes

from rocmgraph.common.errors import LockError
from rocmgraph.config import pins
from rocmgraph.config.pins import format_path
from rocmgraph.fetch.upstream import next_dev
from rocmgraph.graph.invocation import Run

STAGES = ["base", "rocm", "wheels", "aiter", "flash_attention", "prune", "slim",
          "transformer_engine", "vllm", "verl", "assemble", "manifest"]  # fmt: skip
# What the profile leaves open as published, as `doit plan` names it.
SHA256_LATER = "sha256 unknown; `doit lock` records it at first download"
OPEN = {
    "[base].digest": "image digest unknown; `doit lock` resolves it",
    "[base.repos.deadsnakes].key_sha256": SHA256_LATER,
    "[rocm].key_sha256": SHA256_LATER,
    "[rocm.packages].rocm": "apt version unknown; `doit lock` resolves it from the repository",
    **{f"[wheels.{name}].sha256": SHA256_LATER
       for name in ("apex", "torch", "torchaudio", "torchvision", "triton")},
    **{f"[sources.{name}].commit": "short commit id; `doit lock` records the full id"
       for name in ("aiter", "transformer_engine", "vllm")},
    **{f"[sources.{name}].commit": "no commit is pinned; `doit lock` records upstream's"
       for name in ("mbridge", "triton_kernels", "verl")},
    "[sources.triton_kernels].tree": pins.TREE_UNKNOWN,
    **{f"[sources.{name}].version": pins.VERSION_FROM_GIT for name in ("aiter", "vllm")},
    **dict.fromkeys(
        ("[python.tools].numpy", "[python.stack].cupy-rocm-7-0",
         "[python.stack].flash-linear-attention", "[python.stack].mathruler",
         "[python.stack].qwen_vl_utils", "[python.stack].transformers"),
        "no exact version; `doit lock` resolves one",
    ),
}  # fmt: skip
VERSIONS = {"aiter": "0.1.5.post4", "vllm": "0.11.1rc2"}  # what a user reads from the tags


def doit(world: World, *args: str) -> tuple[int, str, str]:
    result = run_doit(*args, f"pins={world.pins}", env=world.env)
    return result.returncode, result.stdout, result.stderr


def lock(world: World) -> str:
    code, out, err = doit(world, "lock")
    assert code == 0, out + err
    return out


def pin_versions_by_hand(world: World) -> None:
    text = world.pins_text()
    for name, version in VERSIONS.items():
        text = edit_toml(text, ["sources", name, "version"], version)
    world.pins.write_text(text)


def audit(world: World) -> tuple[int, dict[str, dict[str, Any]], str]:
    code, out, err = doit(world, "audit", "format=json")
    return code, {row["pin"]: row for row in json.loads(out)["rows"]}, err


def date(repo: Path, commit_id: str) -> str:
    return git(repo, "show", "--no-patch", "--format=%cs", commit_id)


def test_plan_lists_every_stage_and_names_what_is_open_before_lock(world_702: World) -> None:
    code, out, err = doit(world_702, "plan", "format=json")
    # This world has no engine: the keys are there, the statuses unknown (exit 2).
    assert code == 2
    assert err.startswith("error: built status unknown: no docker client can build")
    plan = json.loads(out)
    assert [stage["name"] for stage in plan["stages"]] == STAGES  # no SGLang, no causal-conv1d
    named = {m["pin"]: m["why"] for stage in plan["stages"] for m in stage["missing"]}
    assert named == OPEN
    vllm = next(stage for stage in plan["stages"] if stage["name"] == "vllm")
    assert [m["pin"] for m in vllm["missing"]] == [
        "[sources.triton_kernels].commit",
        "[sources.vllm].commit",
        "[sources.triton_kernels].tree",
        "[sources.vllm].version",
    ]
    code, out, _ = doit(world_702, "plan")
    assert code == 2
    assert (
        " " * 70 + "missing: [sources.vllm].version (its build reads its version from git, and "
        "the tree has no .git; pin the version upstream's tag at the commit gives)"
    ) in out.splitlines()
    assert "12 stages: built status unknown (the engine is not reachable)" in out.splitlines()


def test_lock_resolves_what_the_network_knows_and_changes_only_those_values(
    world_702: World,
) -> None:
    world, before = world_702, world_702.pins_text()
    out = lock(world)
    locked = pins.load(world.pins)
    for name, file in world.wheels.items():  # the files the profile names, now hashed
        assert locked.wheels[name].file == file
        assert locked.wheels[name].sha256 == hashlib.sha256(wheel_bytes(name)).hexdigest()
    for name, source in locked.sources.items():
        assert source.commit == world.commits[name], name
    # mbridge by its tag, verl (unpinned) at its branch's head: as upstream has them
    tagged = git(world.repos["mbridge"], "rev-list", "-n1", "v0.15.1")
    assert locked.sources["mbridge"].commit == tagged
    assert locked.sources["verl"].commit == git(world.repos["verl"], "rev-parse", "main")
    assert locked.base.digest == world.digest
    assert sorted(world.keys) == [
        ("base", "repos", "deadsnakes", "key_sha256"),
        ("rocm", "key_sha256"),
    ]
    for path, key in world.keys.items():
        assert locked.flat()[path] == hashlib.sha256(key).hexdigest(), path
    assert len(world.versions) == 7  # six Python packages and ROCm's apt package
    for path, version in world.versions.items():  # the newest each index offers
        assert locked.flat()[path] == version, path
    lines = out.splitlines()
    short = pins.loads(before).sources["transformer_engine"].commit  # as published: 8 digits
    full = world.commits["transformer_engine"]
    assert f"locked [sources.transformer_engine].commit: {short} -> {full}" in lines
    assert "locked [python.stack].transformers: (empty) -> 5.1.0" in lines
    assert "locked [rocm.packages].rocm: (empty) -> 7.0.2.1-1" in lines
    assert lines[-3:] == [
        f"left open [sources.{name}].version: its build reads its version from git, and at "
        f"{world.commits[name][:12]} no version tag is below it; pin the version the build "
        "should report"
        for name in ("aiter", "vllm")
    ] + [f"{world.pins}: 22 values recorded"]
    after = world.pins_text()
    assert values_blanked(after) == values_blanked(before)  # every comment, every space
    assert "# verl installs the v0.15.1 tag: `doit lock` resolves it" in after
    assert {format_path(m.path) for m in locked.missing()} == {
        "[sources.aiter].version",
        "[sources.vllm].version",
    }


def test_lock_takes_a_build_version_from_the_one_version_tag_on_the_commit(
    world_702: World,
) -> None:
    world = world_702
    git(world.repos["vllm"], "tag", "v0.11.1rc2", world.commits["vllm"])
    git(world.repos["aiter"], "tag", "v0.1.5", world.commits["aiter"])
    git(world.repos["aiter"], "tag", "v0.1.6", world.commits["aiter"])
    lines = lock(world).splitlines()
    assert "locked [sources.vllm].version: (empty) -> 0.11.1rc2" in lines
    assert (
        "left open [sources.aiter].version: its build reads its version from git, and at "
        f"{world.commits['aiter'][:12]} tags give 0.1.5, 0.1.6; pin the version the build "
        "should report"
    ) in lines
    assert pins.load(world.pins).sources["vllm"].version == "0.11.1rc2"


def test_lock_takes_a_build_version_below_any_tag_as_setuptools_scm_reads_git(
    world_702: World,
) -> None:
    """No tag on the commit: the nearest version tag below it and the distance, one up as
    setuptools_scm's default scheme makes them (what verl's clone reports)."""
    world, repo = world_702, world_702.repos["aiter"]
    git(repo, "tag", "v0.1.12.post1", world.commits["aiter"])
    head = git(repo, "rev-parse", "HEAD")  # one commit on
    world.pins.write_text(edit_toml(world.pins_text(), ["sources", "aiter", "commit"], head))
    lines = lock(world).splitlines()
    assert "locked [sources.aiter].version: (empty) -> 0.1.12.post2.dev1" in lines


def test_the_next_dev_release_is_setuptools_scm_s() -> None:
    tags = [("0.22.1rc0", 384), ("0.1.12.post1", 217), ("1.2.3", 5), ("1.2.3", 0), ("2.0.dev3", 4)]
    assert [next_dev(tag, distance) for tag, distance in tags] == [
        "0.22.1rc1.dev384", "0.1.12.post2.dev217", "1.2.4.dev5", "1.2.3", "2.0.dev4",
    ]  # fmt: skip


def test_locked_fails_until_the_versions_are_pinned_by_hand(world_702: World) -> None:
    world = world_702
    lock(world)
    code, _, err = doit(world, "lock", "locked=1")
    assert code == 1
    assert err == (
        f"error: {world.pins} is not locked: [sources.aiter].version, [sources.vllm].version; "
        "run `doit lock` where the network allows and commit the pins file\n"
    )
    pin_versions_by_hand(world)
    code, out, err = doit(world, "lock", "locked=1")
    assert (code, err) == (0, "")
    assert f"{world.pins} is locked" in out.splitlines()


def test_audit_flags_the_published_profile_and_passes_the_locked_one(world_702: World) -> None:
    world = world_702
    code, rows, err = audit(world)
    assert code == 1
    assert err == f"error: audit: 23 of {len(rows)} pins break a policy\n"
    assert rows["[sources.transformer_engine].commit"]["problems"] == [
        "short commit id: names no fixed commit (`doit lock`)"
    ]
    assert rows["[sources.verl].commit"]["problems"] == [
        "unpinned: no commit (the build would take whatever upstream has)"
    ]
    assert rows["[base.repos.deadsnakes].key_sha256"]["problems"] == [
        "the apt key has no sha256 (`doit lock`)"
    ]
    assert rows["[python.stack].transformers"]["problems"] == [
        "unpinned: installs whatever version is newest"
    ]
    lock(world)
    code, rows, err = audit(world)  # locked, but two versions only you can read
    assert (code, err) == (1, f"error: audit: 4 of {len(rows)} pins break a policy\n")
    assert {pin: row["problems"] for pin, row in rows.items() if row["problems"]} == {
        **{f"[sources.{name}].version": [f"empty: {pins.VERSION_FROM_GIT}"] for name in VERSIONS},
        # and what preflight reads of their builds, which need them
        "[sources.vllm] version": [
            "the tree has no .git: pin [sources.vllm].version and name one of "
            "SETUPTOOLS_SCM_PRETEND_VERSION, VLLM_VERSION_OVERRIDE in [sources.vllm].version_env "
            "(pyproject.toml:16)"
        ],
        "[sources.aiter] version": [
            "the tree has no .git: pin [sources.aiter].version and name one of "
            "SETUPTOOLS_SCM_PRETEND_VERSION, SETUPTOOLS_SCM_PRETEND_VERSION_FOR_AMD_AITER in "
            "[sources.aiter].version_env (setup.py:439)"
        ],
    }
    pin_versions_by_hand(world)
    code, rows, err = audit(world)
    assert (code, err) == (0, "")
    assert [pin for pin, row in rows.items() if row["problems"] or row["unknown"]] == []
    for name in world.repos:
        row = rows[f"[sources.{name}].commit"]
        behind = 0 if name == "verl" else 1  # verl was locked at its head; the rest moved on
        assert (row["full_length"], row["exists"], row["reachable"], row["behind"]) == (
            True, True, True, behind,
        ), name  # fmt: skip
    hashed = [pin for pin, row in rows.items() if row["kind"] in ("wheel", "key", "digest")]
    assert len(hashed) == 8  # five wheels, two keys, the base
    assert {rows[pin]["hash"] for pin in hashed} == {"verified"}
    assert rows["[sources.vllm].version"]["value"] == VERSIONS["vllm"]


def test_bump_vllm_moves_to_the_head_says_what_rebuilds_and_names_the_empty_version(
    world_702: World,
) -> None:
    world = world_702
    lock(world)
    repo, first = world.repos["vllm"], world.commits["vllm"]
    head = git(repo, "rev-parse", "main")
    before = world.pins_text()
    code, out, err = doit(world, "bump:vllm")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"vllm: {first[:12]} ({date(repo, first)}) -> {head[:12]} ({date(repo, head)}), "
        f"1 commits, https://github.com/vllm-project/vllm/compare/{first[:12]}...{head[:12]}",
        "  note: [sources.vllm].version is empty, and its build needs it: set it to the "
        f"version at {head[:12]}",
        "rebuilds: vllm, assemble, manifest",
        "  locks first: `doit lock closures=1` (what they fetch, for hermetic builds)",
        f"wrote {world.pins}",
    ]
    assert world.pins_text() == before.replace(first, head)


def test_a_version_tag_on_the_new_commit_fills_the_empty_version(world_702: World) -> None:
    world = world_702
    lock(world)
    repo = world.repos["vllm"]
    release = commit(repo, {"RELEASE": "0.11.2\n"}, "Release 0.11.2")
    git(repo, "tag", "v0.11.2", release)
    code, out, err = doit(world, "bump:vllm")
    assert (code, err) == (0, "")
    assert "note" not in out
    moved = pins.load(world.pins).sources["vllm"]
    assert (moved.commit, moved.version) == (release, "0.11.2")


def test_bump_all_moves_the_sources_the_profile_pins_and_no_other(world_702: World) -> None:
    world = world_702
    before = world.pins_text()
    code, out, err = doit(world, "bump:all", "dry=1")
    assert (code, err) == (0, "")
    headlines = [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert headlines == [*sorted(world.repos), "base", "rebuilds", "dry run"]
    assert world.pins_text() == before
    code, _, err = doit(world, "bump:sglang")
    assert code == 3  # a command this profile has nothing for (UsageError)
    assert err == (
        f"error: bump:sglang: {world.pins} pins no [sources.sglang]; its sources: aiter, "
        "flash_attention, mbridge, transformer_engine, triton_kernels, verl, vllm\n"
    )


def test_a_build_that_reads_its_version_from_git_stops_on_an_empty_one(
    world_702: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = locked_run(world_702, monkeypatch)
    with pytest.raises(LockError) as caught:
        prepare(run, "vllm", tmp_path / "ctx")
    assert str(caught.value) == (
        "source vllm: [sources.vllm].version is empty, but its build reads its version from "
        "VLLM_VERSION_OVERRIDE (the tree has no .git); "
        "pin the version upstream's tag at the commit gives"
    )
    pin_versions_by_hand(world_702)
    run = Run(run.options, run.stages)  # the pins file changed: read it again
    dockerfile = (prepare(run, "vllm", tmp_path / "ctx") / "Dockerfile").read_text()
    assert (
        "    && VLLM_VERSION_OVERRIDE=0.11.1rc2 "
        "TRITON_KERNELS_SRC_DIR=/src/triton_kernels/python/triton_kernels/triton_kernels "
        "pip wheel --no-build-isolation --no-deps --wheel-dir /dist ./. \\"
    ) in dockerfile.splitlines()
    base = prepare(run, "base", tmp_path / "base")  # the deadsnakes key, by its hash
    assert (base / "keys" / "deadsnakes.asc").read_bytes() == key_bytes("deadsnakes")
    wheels = prepare(run, "wheels", tmp_path / "wheels")
    assert sorted(path.name for path in (wheels / "wheels").glob("*.whl")) == sorted(
        world_702.wheels.values()
    )
