"""doit bump: upstream's newest, every patch checked, comments kept, nothing half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import edit_toml, need, run_doit
from servers import Registry, commit, git
from world import World

from rocmgraph import fsutil, patches, pins

CUMEM = "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch"
PAD = "docker/patches/vllm/0002-moe-pad-weight-in-place.patch"
ORACLE = "docker/patches/vllm/0003-moe-oracle-keep-weight-storage.patch"
PAD_FILE = "vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py"


def date(repo: Path, commit_id: str) -> str:
    return git(repo, "show", "--no-patch", "--format=%cs", commit_id)


def bump(world: World, *args: str) -> tuple[int, str, str]:
    result = run_doit(*args, f"pins={world.pins}", env=world.env)
    return result.returncode, result.stdout, result.stderr


def test_bump_moves_to_the_branch_head_and_changes_only_that_value(world: World) -> None:
    repo, first = world.repos["vllm"], world.commits["vllm"]
    head = git(repo, "rev-parse", "HEAD")
    before = world.pins_text()
    code, out, err = bump(world, "bump:vllm")
    assert code == 0, out + err
    assert out.splitlines() == [
        f"vllm: {first[:12]} ({date(repo, first)}) -> {head[:12]} ({date(repo, head)}), 1 commits, "
        f"https://github.com/vllm-project/vllm/compare/{first[:12]}...{head[:12]}",
        f"  applies   {CUMEM}",
        f"  applies   {PAD}",
        f"  applies   {ORACLE}",
        "rebuilds: vllm, assemble, prune, manifest",
        f"wrote {world.pins}",
    ]
    assert world.pins_text() == before.replace(first, head)  # every comment, byte for byte


def test_bump_at_the_newest_commit_writes_nothing(world: World) -> None:
    assert bump(world, "bump:vllm")[0] == 0
    before = world.pins_text()
    stamp = world.pins.stat().st_mtime_ns
    code, out, _ = bump(world, "bump:vllm")
    head = git(world.repos["vllm"], "rev-parse", "HEAD")
    assert code == 0
    assert out == f"vllm: already at upstream's {head[:12]} (main)\n"
    assert world.pins_text() == before
    assert world.pins.stat().st_mtime_ns == stamp


def test_bump_to_a_tag_or_a_commit(world: World) -> None:
    repo, tagged = world.repos["flash_attention"], world.commits["flash_attention"]
    code, out, err = bump(world, "bump:flash_attention", "to=v2.8.3")
    assert code == 0, out + err
    moved = pins.load(world.pins).sources["flash_attention"]
    assert (moved.commit, moved.tag) == (tagged, "v2.8.3")
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = bump(world, "bump:flash_attention", f"to={head[:10]}")
    assert code == 0, out + err
    moved = pins.load(world.pins).sources["flash_attention"]
    assert (moved.commit, moved.tag) == (head, "")  # the tag names the old commit: it goes


def test_a_squash_merged_fix_is_obsolete_even_when_its_text_differs(world: World) -> None:
    repo = world.repos["vllm"]
    cpp = (repo / "csrc/cumem_allocator.cpp").read_text()
    fix = "  zero_fresh_memory(d_mem, size);  // upstream's own fix\n"
    upstream_way = cpp.replace(
        "    return;\n  }\n  // std::cout", f"    return;\n  }}\n{fix}  // std::cout"
    )
    merge = commit(repo, {"csrc/cumem_allocator.cpp": upstream_way},
                   "[ROCm] Zero freshly mapped memory (#44972)")  # fmt: skip
    code, out, err = bump(world, "bump:vllm")
    assert code == 0, out + err
    assert (
        f"  obsolete  {CUMEM}: upstream merged #44972 in {merge[:12]} ([ROCm] Zero freshly mapped "
        "memory (#44972)); left out of [sources.vllm].patches: delete the file"
    ) in out.splitlines()
    moved = pins.load(world.pins).sources["vllm"]
    assert moved.commit == merge
    assert moved.patches == (PAD, ORACLE)


def test_a_fix_upstream_already_has_is_obsolete(world: World) -> None:
    repo = world.repos["vllm"]
    commit(repo, patches.postimage(patches.read_patch(CUMEM)), "Allocator cleanups")
    code, out, _ = bump(world, "bump:vllm")
    assert code == 0
    assert (
        f"  obsolete  {CUMEM}: upstream has it already; left out of [sources.vllm].patches: "
        "delete the file"
    ) in out.splitlines()


def conflicting_upstream(world: World) -> None:
    repo = world.repos["vllm"]
    text = (repo / PAD_FILE).read_text().replace("# used by captured CUDA graphs.", "# reworded")
    commit(repo, {PAD_FILE: text}, "[MoE] Reword a comment (#46100)")


def test_a_conflicting_patch_stops_the_bump_with_nothing_written(world: World) -> None:
    conflicting_upstream(world)
    before = world.pins_text()
    code, out, err = bump(world, "bump:vllm")
    assert code == 1
    assert err == "error: bump stopped for vllm: patches conflict; see above\n"
    lines = out.splitlines()
    assert f"  conflicts {PAD}: {PAD_FILE}: hunk 1 (@@ -210,8 +210,8 @@) does not apply" in lines
    assert "  stopped: 1 patch conflict; nothing written for vllm (force=1 writes)" in lines
    assert world.pins_text() == before


def test_force_writes_despite_a_conflict_and_dry_writes_nothing(world: World) -> None:
    conflicting_upstream(world)
    before = world.pins_text()
    code, out, _ = bump(world, "bump:vllm", "dry=1", "force=1")
    assert code == 0
    assert out.splitlines()[-1] == "dry run: nothing written"
    assert world.pins_text() == before
    code, out, _ = bump(world, "bump:vllm", "force=1")
    assert code == 0
    assert out.splitlines()[-1] == f"wrote {world.pins}"
    assert pins.load(world.pins).sources["vllm"].commit == git(
        world.repos["vllm"], "rev-parse", "HEAD"
    )


def test_bump_base_moves_the_digest_to_what_the_tag_names(world: World, tmp_path: Path) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as registry:
        image = f"{registry.host}/rocm/primus:v26.4"
        first = registry.push("rocm/primus", "v26.4", b'{"os":"linux","v":1}')
        world.pins.write_text(edit_toml(edit_toml(world.pins_text(), ["base", "image"], image),
                                        ["base", "digest"], first))  # fmt: skip
        code, out, _ = bump(world, "bump:base")
        assert (code, out) == (0, f"base: {image} is still {first[7:19]}\n")
        moved = registry.push("rocm/primus", "v26.4", b'{"os":"linux","v":2}')
        code, out, err = bump(world, "bump:base")
    assert code == 0, out + err
    assert out.splitlines()[0] == f"base: {image} {first[7:19]} -> {moved[7:19]}"
    assert out.splitlines()[1].startswith("rebuilds: base, rocm, wheels, ")
    assert pins.load(world.pins).base.digest == moved


def test_to_names_one_source(world: World) -> None:
    code, _, err = bump(world, "bump:all", "to=v1")
    assert code == 3  # a wrong command (UsageError)
    assert err == "error: to=... moves one source; name it: doit bump:<source> to=...\n"


def test_an_interrupted_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pins.toml"
    path.write_text("old = 1\n")

    def power_cut(_fd: int) -> None:
        raise OSError("interrupted")

    monkeypatch.setattr(os, "fsync", power_cut)
    with pytest.raises(OSError, match="interrupted"):
        fsutil.atomic_write_text(path, "new = 2\n" * 1000)
    assert path.read_text() == "old = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pins.toml"]  # no half-written file left
