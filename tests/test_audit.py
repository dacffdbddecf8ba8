"""doit audit: one row per pin; exit 0 clean, 1 on a violation, 2 when something went unchecked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import PINS, edit_toml, need, run_doit
from servers import LoopbackServer, Registry, closed_url, commit, git, make_repo
from world import World, kernel_as_submodule

from rocmgraph.config import pins


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


def test_a_tag_that_names_another_commit_than_the_pin_is_a_problem(world: World) -> None:
    """The docs name Flash Attention by its tag: a commit moved past it leaves them wrong."""
    repo = world.repos["flash_attention"]
    tag = pins.load(world.pins).sources["flash_attention"].tag
    tagged = git(repo, "rev-parse", f"{tag}^{{commit}}")
    later = commit(repo, {"NEWS": "after the release\n"}, "after the release")
    world.pins.write_text(
        edit_toml(world.pins_text(), ["sources", "flash_attention", "commit"], later)
    )
    _, document, _ = audit(world)
    row = rows(document)["[sources.flash_attention].commit"]
    assert row["problems"] == [
        f"[sources.flash_attention].tag {tag} is {tagged[:12]}, not the pinned commit: "
        f'`doit bump:flash_attention to={tag}`, or set tag = ""'
    ]


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
    # the pin, and what preflight would read of its tree
    assert err == f"error: audit: 2 of {len(document['rows'])} pins could not be checked\n"
    assert rows(document)["[sources.vllm].commit"]["unknown"] == [
        f"source vllm: cannot fetch {closed}/vllm.git (connection refused)"
    ]
    assert rows(document)["[sources.vllm] path"]["value"] == "tree not read"


def test_a_folder_id_that_is_not_the_folders_is_a_problem_with_its_fix(
    world: World, tmp_path: Path
) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as registry:
        locked_world(world, registry)
        tree = pins.load(world.pins).sources["sgl_kernel"].tree  # as `doit lock` recorded it
        world.pins.write_text(
            edit_toml(world.pins_text(), ["sources", "sgl_kernel", "tree"], "c" * 40)
        )
        code, document, err = audit(world)
    assert (code, err) == (1, f"error: audit: 1 of {len(document['rows'])} pins break a policy\n")
    assert rows(document)["[sources.sgl_kernel].commit"]["problems"] == [
        f"[sources.sgl_kernel].tree {'c' * 40} is not sgl-kernel/ at this commit, which is "
        f'{tree}: set tree = "{tree}"'
    ]


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
    # the pin, and preflight's reading of its folder; SGLang's own facts read no submodule
    assert err == f"error: audit: 2 of {len(document['rows'])} pins could not be checked\n"
    assert rows(document)["[sources.sgl_kernel] path"]["value"] == "tree not read"
    assert "[sources.sglang] path" not in rows(document)
    kernel = rows(document)["[sources.sgl_kernel].commit"]
    assert (kernel["exists"], kernel["patches"], kernel["problems"]) == (True, "unknown", [])
    assert kernel["unknown"] == [
        f"source sgl_kernel: cannot fetch submodule sgl-kernel from {closed}/sgl-kernel.git "
        "(connection refused); check the network, or set a mirror ([mirrors] or "
        "$VERL_GRAPH_MIRRORS)"
    ]
    # SGLang's own patches touch its Python alone: checked without the submodule
    assert rows(document)["[sources.sglang].commit"]["patches"] == "2 applies"
    assert rows(document)["[sources.vllm].commit"]["patches"] == "3 applies"


def test_a_source_no_stage_builds_is_refused_before_anything_is_fetched(tmp_path: Path) -> None:
    """Issue 49: audit fetched every source's history first, then said the name was wrong."""
    head = make_repo(tmp_path / "upstream", {"README": "x\n"})
    pins_file = tmp_path / "pins.toml"
    pins_file.write_text(
        PINS.read_text()
        + f'\n[sources.nosuch]\nrepo = "https://example.org/nosuch"\nbranch = "main"\n'
        f'commit = "{head}"\nmirror = "file://{tmp_path / "upstream"}"\n'
    )
    result = run_doit("audit", f"pins={pins_file}", env={"VERL_GRAPH_CACHE": str(tmp_path)})
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(
        f"error: {pins_file}: [sources.nosuch]: no stage builds a source of this name; "
    )
    assert not (tmp_path / "history").exists()
