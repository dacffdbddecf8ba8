"""doit audit: one row per pin; exit 0 clean, 1 on a violation, 2 when something went unchecked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import edit_toml, need, run_doit
from servers import LoopbackServer, Registry, closed_url, commit, git
from world import World, kernel_as_submodule


def audit(world: World, *args: str) -> tuple[int, dict[str, Any], str]:
    result = run_doit("audit", f"pins={world.pins}", "format=json", *args, env=world.env)
    return result.returncode, json.loads(result.stdout), result.stderr


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["pin"]: row for row in document["rows"]}


def locked_world(world: World, registry: Registry) -> None:
    """The world locked, its base in a real registry: a clean audit."""
    digest = registry.push("rocm/primus", "v26.4", b'{"os":"linux"}')
    text = edit_toml(world.pins_text(), ["base", "image"], f"{registry.host}/rocm/primus:v26.4")
    world.pins.write_text(edit_toml(text, ["base", "digest"], digest))
    assert run_doit("lock", f"pins={world.pins}", env=world.env).returncode == 0


def test_a_locked_world_audits_clean_and_says_how_far_behind(world: World, tmp_path: Path) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as registry:
        locked_world(world, registry)
        code, document, err = audit(world)
    assert (code, err) == (0, "")
    assert document["violations"] == document["unchecked"] == 0
    vllm = rows(document)["[sources.vllm].commit"]
    assert vllm == {
        "kind": "commit",
        "pin": "[sources.vllm].commit",
        "value": world.commits["vllm"],
        "full_length": True,
        "exists": True,
        "reachable": True,
        "behind": 1,  # upstream moved on by one commit
        "age_days": 0,
        "hash": "-",
        "patches": "3 applies",
        "problems": [],
        "unknown": [],
    }
    found = rows(document)
    assert found["[wheels.torch].file"]["hash"] == "verified"
    assert found["[rocm].key_sha256"]["hash"] == "verified"
    assert found["[base].digest"]["hash"] == "verified"


def test_a_pinned_commit_force_pushed_away_is_a_violation(world: World) -> None:
    repo = world.repos["vllm"]
    git(repo, "checkout", "--quiet", "--orphan", "rewritten")
    commit(repo, {"README": "history rewritten\n"}, "a new root")
    git(repo, "branch", "--quiet", "--force", "main", "rewritten")
    git(repo, "checkout", "--quiet", "main")
    git(repo, "branch", "--quiet", "--delete", "--force", "rewritten")
    code, document, err = audit(world)
    assert code == 1
    assert err.startswith("error: audit: ")
    vllm = rows(document)["[sources.vllm].commit"]
    assert vllm["exists"] is False
    assert vllm["problems"] == [f"does not exist upstream (force-pushed away?) in file://{repo}"]


def test_a_commit_only_a_tag_reaches_is_reachable_but_not_behind(world: World) -> None:
    repo = world.repos["mbridge"]
    git(repo, "checkout", "--quiet", "-b", "release")
    tagged = commit(repo, {"RELEASE": "v9\n"}, "release v9")
    git(repo, "tag", "v9", tagged)
    git(repo, "checkout", "--quiet", "main")
    git(repo, "branch", "--quiet", "--delete", "--force", "release")
    world.pins.write_text(world.pins_text().replace(world.commits["mbridge"], tagged))
    _, document, _ = audit(world)
    mbridge = rows(document)["[sources.mbridge].commit"]
    assert (mbridge["exists"], mbridge["reachable"], mbridge["behind"]) == (True, True, None)
    assert mbridge["problems"] == []


def test_short_ids_and_unpinned_installs_are_violations(world: World) -> None:
    code, document, _ = audit(world)  # the world as published: short ids, nothing locked
    assert code == 1
    found = rows(document)
    aiter = found["[sources.aiter].commit"]
    assert (aiter["full_length"], aiter["exists"]) == (False, True)
    assert aiter["problems"] == ["short commit id: names no fixed commit (`doit lock`)"]
    assert found["[sources.torch_memory_saver].commit"]["problems"] == [
        "unpinned: no commit (the build would take whatever upstream has)"
    ]
    assert found["[wheels.torch].file"]["problems"] == ["no exact file and sha256 (`doit lock`)"]


def test_an_unreachable_upstream_is_unknown_and_exits_2(world: World, tmp_path: Path) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as registry:
        locked_world(world, registry)
        with LoopbackServer() as server:
            closed = server.url
        text = edit_toml(world.pins_text(), ["sources", "vllm", "mirror"], f"{closed}/vllm.git")
        world.pins.write_text(text)
        code, document, err = audit(world)
    assert code == 2
    assert err == f"error: audit: 1 of {len(document['rows'])} pins could not be checked\n"
    assert rows(document)["[sources.vllm].commit"]["unknown"] == [
        f"source vllm: cannot fetch {closed}/vllm.git (connection refused)"
    ]


VERL_702 = """\
# verl's ROCm 7.0.2 recipe, in short
ARG GPU_ARCH="gfx942;gfx950"
FROM ubuntu:22.04 AS base
RUN apt update && apt install -y git curl
RUN wget -nv -O /tmp/cmake.tar.gz https://cmake.org/files/v3.26/cmake-3.26.4-linux-x86_64.tar.gz
FROM base AS rocm_torch
RUN --mount=type=cache,target=/root/.cache/pip \\
    pip3 install \\
    https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/torch-2.9.1.dev20251204+rocm7.0.2.lw.git351ff442-cp312-cp312-linux_x86_64.whl
ARG FA_TAG="83f9e450cd10e20701fb109db9c7703d376f282b"
RUN git clone https://github.com/ROCm/flash-attention \\
    && cd flash-attention \\
    && git checkout ${FA_TAG}
ARG VLLM_TAG="1ff9d3353"
RUN git clone https://github.com/vllm-project/vllm && cd vllm && git checkout ${VLLM_TAG}
RUN cd /workspace && git clone https://github.com/verl-project/verl.git && cd verl && pip install .
RUN pip install -U git+https://github.com/ISEEKYAN/mbridge.git@v0.15.1 && \\
    pip install transformers --upgrade && \\
    pip install megatron-core==0.18.0 && \\
    pip install mathruler
"""


def test_a_plain_dockerfile_is_audited_the_same_way(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile.rocm"
    dockerfile.write_text(VERL_702)
    result = run_doit("audit", f"dockerfile={dockerfile}", "format=json")
    assert result.returncode == 1
    found = [
        (r["kind"], r["pin"], r["value"], r["problems"]) for r in json.loads(result.stdout)["rows"]
    ]
    name = dockerfile.name
    assert found == [
        ("from", f"{name}:3", "ubuntu:22.04", ["FROM without a digest: the tag can move"]),
        ("url", f"{name}:5", "https://cmake.org/files/v3.26/cmake-3.26.4-linux-x86_64.tar.gz",
         ["downloads a URL whose content no hash checks"]),
        ("from", f"{name}:6", "base", ["FROM without a digest: the tag can move"]),
        ("pip", f"{name}:7", "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/torch-2.9.1."
         "dev20251204+rocm7.0.2.lw.git351ff442-cp312-cp312-linux_x86_64.whl",
         ["installs a URL whose content no hash checks"]),
        ("clone", f"{name}:11", "https://github.com/ROCm/flash-attention@"
         "83f9e450cd10e20701fb109db9c7703d376f282b", []),
        ("arg", f"{name}:14", "VLLM_TAG=1ff9d3353", ["short commit id: names no fixed commit"]),
        ("clone", f"{name}:15", "https://github.com/vllm-project/vllm@1ff9d3353",
         ["short commit id: names no fixed commit"]),
        ("clone", f"{name}:16", "https://github.com/verl-project/verl.git",
         ["git clone without a commit checkout: unpinned"]),
        ("pip", f"{name}:17", "-U", ["--upgrade installs whatever is newest"]),
        ("pip", f"{name}:17", "git+https://github.com/ISEEKYAN/mbridge.git@v0.15.1",
         ["git+ URL pinned to v0.15.1, not a full commit"]),
        ("pip", f"{name}:17", "transformers", ["unpinned: no ==version"]),
        ("pip", f"{name}:17", "--upgrade", ["--upgrade installs whatever is newest"]),
        ("pip", f"{name}:17", "megatron-core==0.18.0", []),
        ("pip", f"{name}:17", "mathruler", ["unpinned: no ==version"]),
    ]  # fmt: skip


def test_a_pinned_dockerfile_audits_clean(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    full = "0801cc05ed202544e2e5c67d6b0a1d454de54fca"
    dockerfile.write_text(
        f"FROM ubuntu:22.04@sha256:{'a' * 64}\n"
        f"RUN git clone https://github.com/sgl-project/sglang && git checkout {full}\n"
        "RUN pip install --require-hashes -r requirements.txt && pip install numpy==2.1.0\n"
    )
    result = run_doit("audit", f"dockerfile={dockerfile}")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_patch_tree_that_cannot_be_fetched_is_unknown_beside_every_other_row(
    world: World, tmp_path: Path
) -> None:
    need("docker-registry")
    closed = closed_url()
    with Registry(tmp_path / "registry") as registry:
        locked_world(world, registry)
        kernel_as_submodule(world, tmp_path, f"{closed}/sgl-kernel.git")
        code, document, err = audit(world)
    assert code == 2
    assert err == f"error: audit: 1 of {len(document['rows'])} pins could not be checked\n"
    sglang = rows(document)["[sources.sglang].commit"]
    assert (sglang["exists"], sglang["patches"], sglang["problems"]) == (True, "unknown", [])
    assert sglang["unknown"] == [
        f"source sglang: cannot fetch submodule sgl-kernel from {closed}/sgl-kernel.git "
        "(connection refused); check the network, or set a mirror ([mirrors] or "
        "$VERL_GRAPH_MIRRORS)"
    ]
    assert rows(document)["[sources.vllm].commit"]["patches"] == "3 applies"
