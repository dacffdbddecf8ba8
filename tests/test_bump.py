"""doit bump: upstream's newest, every patch checked, comments kept, nothing half-written."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml, need, run_doit
from servers import Registry, closed_url, commit, git
from world import World, kernel_as_submodule

import stages
from rocmgraph.commands.bump import rebuilds, together
from rocmgraph.common import fsutil
from rocmgraph.config import pins
from rocmgraph.config.pinsedit import Change
from rocmgraph.demo import patchimages
from rocmgraph.graph import closure
from rocmgraph.graph.closure import Closure, LockFile
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.trees import patches

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
        "  note: [sources.vllm].version still says 0.22.1rc1.dev384: set it to the version at "
        f"{head[:12]}",
        "rebuilds: vllm, assemble, manifest",
        "  locks first: `doit lock closures=1` (what they fetch, for hermetic builds)",
        f"wrote {world.pins}",  # not the repository's pins.toml: no docs to render
    ]
    assert world.pins_text() == before.replace(first, head)  # every comment, byte for byte


def test_a_mirror_that_lacks_an_unrelated_blob_still_bumps(world: World) -> None:
    # The forks' copies lack a few blobs under docs/assets/: the history and the checks
    # fetch commits and trees, and only the blobs they read.
    repo, first = world.repos["vllm"], world.commits["vllm"]
    head = commit(repo, {"docs/assets/timeline.html": "<html>a picture</html>\n"}, "docs")
    blob = git(repo, "rev-parse", f"{head}:docs/assets/timeline.html")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        git(repo, "config", key, "true")
    code, out, err = bump(world, "bump:vllm", "dry=1")
    assert code == 0, out + err
    assert out.splitlines()[:4] == [
        f"vllm: {first[:12]} ({date(repo, first)}) -> {head[:12]} ({date(repo, head)}), 2 commits, "
        f"https://github.com/vllm-project/vllm/compare/{first[:12]}...{head[:12]}",
        f"  applies   {CUMEM}",
        f"  applies   {PAD}",
        f"  applies   {ORACLE}",
    ]


def with_kernel_tree(world: World) -> tuple[Path, str, str]:
    """The world's sgl-kernel/ folder id pinned (as `doit lock` records it): the repo, the
    pinned commit and that id."""
    repo, first = world.repos["sglang"], world.commits["sglang"]
    tree = git(repo, "rev-parse", f"{first}:sgl-kernel")
    world.pins.write_text(edit_toml(world.pins_text(), ["sources", "sgl_kernel", "tree"], tree))
    return repo, first, tree


def test_a_commit_outside_the_folder_moves_both_pins_and_rebuilds_no_kernel(
    world: World,
) -> None:
    repo, first, _ = with_kernel_tree(world)
    head = git(repo, "rev-parse", "HEAD")  # upstream's next commit touches NEWS alone
    before = world.pins_text()
    code, out, err = bump(world, "bump:sgl_kernel")  # either name moves both, SGLang first
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"sglang: {first[:12]} (")
    assert lines[4].startswith(f"sgl_kernel: {first[:12]} (")
    assert lines[4].endswith(" (with sglang: one repository, one commit)")
    assert "rebuilds: sglang, assemble, manifest" in lines  # not the hour of sgl-kernel
    assert world.pins_text() == before.replace(first, head)  # the folder's id stays
    # one repository, one history: SGLang's is fetched once for both sources
    histories = [p.name for p in (world.root / "cache" / "history").iterdir() if p.suffix == ".git"]
    assert len([name for name in histories if name.startswith("sglang-")]) == 1, histories


def test_a_commit_inside_the_folder_moves_its_tree_and_rebuilds_the_kernel(
    world: World,
) -> None:
    repo, first, tree = with_kernel_tree(world)
    head = commit(repo, {"sgl-kernel/csrc/moe.cu": "// a new kernel\n"}, "Add a MoE kernel")
    moved = git(repo, "rev-parse", f"{head}:sgl-kernel")
    before = world.pins_text()
    code, out, err = bump(world, "bump:sglang")
    assert code == 0, out + err
    assert "rebuilds: sgl_kernel, sglang, assemble, manifest" in out.splitlines()
    assert world.pins_text() == before.replace(first, head).replace(tree, moved)


def test_sources_of_one_repository_already_at_its_head_both_say_so(world: World) -> None:
    with_kernel_tree(world)
    assert bump(world, "bump:sglang")[0] == 0
    before = world.pins_text()
    code, out, err = bump(world, "bump:sgl_kernel")
    head = git(world.repos["sglang"], "rev-parse", "HEAD")
    assert (code, err) == (0, "")
    assert out == (
        f"sglang: already at upstream's {head[:12]} (main)\nsgl_kernel: already there with sglang\n"
    )
    assert world.pins_text() == before


def test_one_repository_is_one_whatever_its_url_spelling_or_the_ids_length() -> None:
    text = (ROOT / "pins.toml").read_text()
    text = edit_toml(
        text, ["sources", "sgl_kernel", "repo"], "https://github.com/SGL-project/sglang.git/"
    )
    text = edit_toml(text, ["sources", "sgl_kernel", "commit"], "0801cc05ed20")
    loaded = pins.loads(text)
    assert together(loaded, "sglang") == ["sgl_kernel"]
    assert together(loaded, "sgl_kernel") == ["sglang"]
    assert together(loaded, "vllm") == []
    apart = edit_toml(text, ["sources", "sgl_kernel", "workspace"], "kernels")
    other = pins.loads(edit_toml(apart, ["sources", "sgl_kernel", "commit"], "1" * 40))
    assert together(other, "sglang") == []


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
    merged(repo)
    merge = git(repo, "rev-parse", "HEAD")
    before = world.pins_text()
    code, out, err = bump(world, "bump:vllm")
    assert code == 0, out + err
    assert (
        f"  obsolete  {CUMEM}: upstream merged #44972 in {merge[:12]} ([ROCm] Zero freshly mapped "
        f"memory (#44972)) by title, though its content conflicts with the tree ({CUMEM_HUNK}): "
        "check that upstream's change covers it; left out of [sources.vllm].patches: delete the "
        "file"
    ) in out.splitlines()
    moved = pins.load(world.pins).sources["vllm"]
    assert moved.commit == merge
    assert moved.patches == (PAD, ORACLE)
    # the list stays one item a line; only the obsolete patch's line goes
    assert world.pins_text() == before.replace(world.commits["vllm"], merge).replace(
        f'    "{CUMEM}",\n', ""
    )


def test_a_merged_fix_whose_change_upstream_has_is_obsolete_without_a_doubt(
    world: World,
) -> None:
    """Merged by title and its reverse applies: the content agrees, the verdict has no
    caveat."""
    repo = world.repos["vllm"]
    merge = commit(repo, patchimages.postimage(patches.read_patch(CUMEM)), MERGE_TITLE)
    code, out, err = bump(world, "bump:vllm", "dry=1")
    assert code == 0, out + err
    assert (
        f"  obsolete  {CUMEM}: upstream merged #44972 in {merge[:12]} ({MERGE_TITLE}); left out "
        "of [sources.vllm].patches: delete the file"
    ) in out.splitlines()


def test_a_fix_upstream_already_has_is_obsolete(world: World) -> None:
    repo = world.repos["vllm"]
    commit(repo, patchimages.postimage(patches.read_patch(CUMEM)), "Allocator cleanups")
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
    assert err == "error: bump stopped for vllm: conflicts at the new commit; see above\n"
    lines = out.splitlines()
    head = git(world.repos["vllm"], "rev-parse", "--short=10", "HEAD")
    assert (
        f"  conflicts {PAD}: {PAD_FILE}: hunk 1 (@@ -210,8 +210,8 @@) does not apply "
        f"(last changed in {head} (#46100))"  # the commit that reworded the comment
    ) in lines
    assert "  stopped: 1 patch conflict; nothing written for vllm (force=1 writes)" in lines
    assert world.pins_text() == before


def test_a_conflict_and_a_new_fetch_are_both_reported_in_one_run(world: World) -> None:
    """A patch that conflicts no longer hides the build's facts: they are read from the
    tree the patches that still apply make, and both stop the bump in one summary."""
    conflicting_upstream(world)
    repo = world.repos["vllm"]
    cmake = (repo / "CMakeLists.txt").read_text() + (
        '\nif(VLLM_GPU_LANG STREQUAL "HIP")\n'
        "  FetchContent_Declare(extras GIT_REPOSITORY https://example.org/extras.git"
        " GIT_TAG v1)\n"
        "  FetchContent_MakeAvailable(extras)\n"
        "endif()\n"
    )
    commit(repo, {"CMakeLists.txt": cmake}, "[ROCm] Fetch extras (#46101)")
    line = len(cmake.splitlines()) - 2
    code, out, _ = bump(world, "bump:vllm")
    lines = out.splitlines()
    assert code == 1
    assert [line for line in lines if line.startswith(f"  conflicts {PAD}")] != []
    assert (
        "  conflicts preflight fetch: https://example.org/extras.git v1: no pin gives it: mark it "
        "in [sources.vllm].skipped_fetches with why the build does not take it "
        f"(CMakeLists.txt:{line})"
    ) in lines
    assert (
        "  stopped: 1 patch conflict and 1 fact of the new tree differs from the pins; nothing "
        "written for vllm (force=1 writes)"
    ) in lines


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


# ---------------------------------------------------------------- obsolete needs evidence

CPP = "csrc/cumem_allocator.cpp"
MERGE_TITLE = "[ROCm] Zero freshly mapped memory (#44972)"
CUMEM_HUNK = f"{CPP}: hunk 1 (@@ -212,6 +212,14 @@) does not apply"


def upstream_way(text: str) -> str:
    """vLLM's own fix, written differently from ours: our patch no longer applies."""
    fix = "  zero_fresh_memory(d_mem, size);  // upstream's own fix\n"
    return text.replace(
        "    return;\n  }\n  // std::cout", f"    return;\n  }}\n{fix}  // std::cout"
    )


def merged(repo: Path) -> None:
    commit(repo, {CPP: upstream_way((repo / CPP).read_text())}, MERGE_TITLE)


def merged_then_reverted(repo: Path) -> None:
    original = (repo / CPP).read_text()
    merged(repo)
    commit(repo, {CPP: original}, f'Revert "{MERGE_TITLE}" (#45001)')
    reworded = original.replace("  // std::cout", "  // debug: std::cout")
    commit(repo, {CPP: reworded}, "Reword the debug print")


def another_pr_merged(repo: Path) -> None:
    commit(repo, {CPP: upstream_way((repo / CPP).read_text())}, "[ROCm] Zero memory (#44973)")


def titled_but_elsewhere(repo: Path) -> None:
    commit(repo, {"NEWS": "the fix, announced\n"}, MERGE_TITLE)


OBSOLETE = (
    f"  obsolete  {CUMEM}: upstream merged #44972 in {{head}} ({MERGE_TITLE}) by title, though "
    f"its content conflicts with the tree ({CUMEM_HUNK}): check that upstream's change covers "
    "it; left out of [sources.vllm].patches: delete the file"
)
CONFLICTS = f"  conflicts {CUMEM}: {CUMEM_HUNK} (last changed in {{head10}} ({{cite}}))"
APPLIES = f"  applies   {CUMEM}"


@pytest.mark.parametrize(
    ("repo_url", "history", "verdict"),
    [
        # the repository the Forwarded: URL names, however its URL is spelled
        ("https://github.com/VLLM-Project/vLLM.git", merged, OBSOLETE),
        ("https://github.com/vllm-project/vllm/", merged, OBSOLETE),
        # a fork's #44972 is another pull request; so is another forge's
        ("https://github.com/ROCm/vllm", merged, CONFLICTS),
        ("https://gitlab.com/vllm-project/vllm", merged, CONFLICTS),
        # reverted since: not upstream's any more; another number is another fix
        ("https://github.com/vllm-project/vllm", merged_then_reverted, CONFLICTS),
        ("https://github.com/vllm-project/vllm", another_pr_merged, CONFLICTS),
        # (a conflict names the commit that last changed the file: its pull request, else
        # its title)
        # a title never overrides a patch that still applies
        ("https://github.com/vllm-project/vllm", titled_but_elsewhere, APPLIES),
    ],
)
def test_a_merged_pull_request_counts_only_in_its_repository_and_only_if_it_stands(
    world: World, repo_url: str, history: Callable[[Path], None], verdict: str
) -> None:
    repo = world.repos["vllm"]
    text = edit_toml(world.pins_text(), ["sources", "vllm", "repo"], repo_url)
    # a mirror says where to fetch, never which repository it is
    world.pins.write_text(edit_toml(text, ["sources", "vllm", "mirror"], f"file://{repo}"))
    history(repo)
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = bump(world, "bump:vllm", "dry=1")
    subject = git(repo, "log", "-1", "--format=%s")
    cite = {MERGE_TITLE: "#44972", "[ROCm] Zero memory (#44973)": "#44973"}.get(subject, subject)
    assert verdict.format(head=head[:12], head10=head[:10], cite=cite) in out.splitlines()
    assert code == (1 if verdict == CONFLICTS else 0), out + err


# ---------------------------------------------------------------- what the recipe expects

SETUP_ROCM = "docker/patches/sglang/0003-sgl-kernel-build-for-every-target-arch.patch"
FP8 = "docker/patches/sglang/0004-sgl-kernel-fp8-type-by-compiled-arch.patch"


def test_a_moved_folder_and_its_files_are_conflicts_that_say_where_they_went(
    world: World,
) -> None:
    repo = world.repos["sglang"]
    (repo / "python/sglang/kernels").mkdir(parents=True, exist_ok=True)
    git(repo, "mv", "sgl-kernel", "python/sglang/kernels/aot")
    commit(repo, {}, "Move sgl-kernel into the package (#40000)")
    before = world.pins_text()
    code, out, err = bump(world, "bump:sglang")
    aot = "python/sglang/kernels/aot"
    head = git(repo, "rev-parse", "HEAD")
    lines = out.splitlines()
    assert lines[1:5] == [
        "  applies   docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch",
        "  applies   docker/patches/sglang/0002-pyproject-no-rust-grpc-extension.patch",
        f"  note: [sources.sglang].version still says 0.5.15: set it to the version at {head[:12]}",
        # one repository at one commit: SGLang waits for its sgl-kernel folder
        "  stopped: it moves with sgl_kernel, which stopped; nothing written for sglang "
        "(force=1 writes)",
    ]
    assert lines[5].startswith("sgl_kernel: ")
    assert lines[5].endswith(" (with sglang: one repository, one commit)")
    by = f"in {head[:10]} (#40000)"  # the commit that moved them
    assert lines[6:] == [
        f"  conflicts {SETUP_ROCM}: sgl-kernel/setup_rocm.py moved to {aot}/setup_rocm.py {by}",
        f"  conflicts {FP8}: sgl-kernel/include/utils.h moved to {aot}/include/utils.h {by}",
        '  conflicts [sources.sgl_kernel.overlay]."sgl-kernel/pyproject.toml": '
        f"sgl-kernel/pyproject_rocm.toml moved to {aot}/pyproject_rocm.toml {by}",
        '  conflicts [sources.sgl_kernel.overlay]."sgl-kernel/setup.py": '
        f"sgl-kernel/setup_rocm.py moved to {aot}/setup_rocm.py {by}",
        f"  conflicts [sources.sgl_kernel].subdirs: sgl-kernel/ moved to {aot}/ {by}",
        f"  conflicts [sources.sgl_kernel].subtree: sgl-kernel/ moved to {aot}/ {by}",
        "  stopped: 2 patches conflict and 4 paths the recipe names are missing; "
        "nothing written for sgl_kernel (force=1 writes)",
    ]
    assert (code, err) == (
        1,
        "error: bump stopped for sgl_kernel: conflicts at the new commit (sglang waits with "
        "it); see above\n",
    )
    assert world.pins_text() == before


def test_a_deleted_requirements_file_and_a_moved_patched_file(world: World) -> None:
    repo = world.repos["vllm"]
    (repo / "csrc/cumem").mkdir()
    git(repo, "mv", CPP, "csrc/cumem/allocator.cpp")
    git(repo, "rm", "--quiet", "requirements/rocm.txt")
    commit(repo, {}, "Reorganise the allocator and the requirements")
    code, out, _ = bump(world, "bump:vllm")
    assert code == 1
    lines = out.splitlines()
    by = git(repo, "rev-parse", "--short=10", "HEAD")  # its title names no pull request
    by = f"{by} (Reorganise the allocator and the requirements)"
    assert f"  conflicts {CUMEM}: {CPP} moved to csrc/cumem/allocator.cpp in {by}" in lines
    assert (
        "  conflicts [sources.vllm].requirements: requirements/rocm.txt: deleted upstream "
        f"in {by} (git finds no rename)"
    ) in lines
    assert lines[-1] == (
        "  stopped: 1 patch conflict and 1 path the recipe names is missing; nothing written "
        "for vllm (force=1 writes)"
    )
    code, out, _ = bump(world, "bump:vllm", "force=1")
    assert code == 0
    assert pins.load(world.pins).sources["vllm"].commit == git(repo, "rev-parse", "HEAD")


# ---------------------------------------------------------------- one unreachable, others shown


def test_bump_all_reports_every_source_when_one_cannot_be_reached(
    world: World, tmp_path: Path
) -> None:
    need("docker-registry")
    closed = closed_url()
    text = edit_toml(world.pins_text(), ["sources", "vllm", "mirror"], f"{closed}/vllm.git")
    with Registry(tmp_path / "registry") as registry:
        image = f"{registry.host}/rocm/primus:v26.4"
        digest = registry.push("rocm/primus", "v26.4", b'{"os":"linux"}')
        text = edit_toml(edit_toml(text, ["base", "image"], image), ["base", "digest"], digest)
        world.pins.write_text(text)
        code, out, err = bump(world, "bump:all")
    assert code == 2, out + err
    assert err == "error: bump: could not check vllm; see above\n"
    lines = out.splitlines()
    at = lines.index("vllm: not checked")
    assert lines[at + 1] == (
        f"  unknown: source vllm: cannot fetch {closed}/vllm.git (connection refused)"
    )
    assert f"base: {image} is still {digest[7:19]}" in lines
    assert lines[-1] == f"wrote {world.pins}"
    after = pins.load(world.pins).sources
    for name, repo in world.repos.items():
        expected = world.commits["vllm"] if name == "vllm" else git(repo, "rev-parse", "HEAD")
        assert after[name].commit == expected, name


def test_a_conflict_wins_over_what_cannot_be_reached(world: World) -> None:
    closed = closed_url()
    text = edit_toml(world.pins_text(), ["sources", "sglang", "mirror"], f"{closed}/sglang.git")
    image = f"{closed.removeprefix('http://')}/rocm/primus:v26.4"
    world.pins.write_text(edit_toml(text, ["base", "image"], image))
    conflicting_upstream(world)
    code, out, err = bump(world, "bump:all")
    assert code == 1
    assert err == "error: bump stopped for vllm: conflicts at the new commit; see above\n"
    lines = out.splitlines()
    assert lines[lines.index("base: not checked") + 1] == (
        f"  unknown: GET {closed}/v2/rocm/primus/manifests/v26.4: cannot connect (3 attempts)"
    )
    assert lines[lines.index("sglang: not checked") + 1] == (
        f"  unknown: source sglang: cannot fetch {closed}/sglang.git (connection refused)"
    )
    # its sgl-kernel folder is the same repository: one fetch, one answer for both
    assert lines[lines.index("sgl_kernel: not checked") + 1] == (
        f"  unknown: source sglang: cannot fetch {closed}/sglang.git (connection refused)"
    )


def test_a_new_tree_that_cannot_be_fetched_is_unknown_and_nothing_is_written(
    world: World, tmp_path: Path
) -> None:
    before = world.pins_text()
    closed = closed_url()
    head = kernel_as_submodule(world, tmp_path, f"{closed}/sgl-kernel.git")
    world.pins.write_text(before)  # still pinned at the old commit; upstream moved
    code, out, err = bump(world, "bump:sglang")
    assert (code, err) == (2, "error: bump: could not check sglang, sgl_kernel; see above\n")
    lines = out.splitlines()
    assert lines[0].startswith(f"sglang: {world.commits['sglang'][:12]} (")
    assert f" -> {head[:12]} (" in lines[0]
    # SGLang's own patches need no sgl-kernel/; it waits for the folder all the same
    assert lines[1:4] == [
        "  applies   docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch",
        "  applies   docker/patches/sglang/0002-pyproject-no-rust-grpc-extension.patch",
        "  unknown: moves with sgl_kernel, which could not be checked",
    ]
    assert lines[4].startswith("  note: [sources.sglang].version still says 0.5.15")
    assert lines[5].startswith("sgl_kernel: ")
    assert lines[6:] == [
        "  unknown: source sgl_kernel: cannot fetch submodule sgl-kernel from "
        f"{closed}/sgl-kernel.git (connection refused); check the network, or set a mirror "
        "([mirrors] or $VERL_GRAPH_MIRRORS)"
    ]
    assert world.pins_text() == before


def test_a_source_that_moves_with_one_that_could_not_be_checked_is_not_checked(
    world: World, tmp_path: Path
) -> None:
    """SGLang's own new tree cannot be read: its sgl-kernel folder was not looked at either,
    so it is no "already there"."""
    with_sgl_kernel_patch = edit_toml(
        world.pins_text(),
        ["sources", "sglang", "patches"],
        [*pins.loads(world.pins_text()).sources["sglang"].patches, SETUP_ROCM],
    )
    closed = closed_url()
    kernel_as_submodule(world, tmp_path, f"{closed}/sgl-kernel.git")
    world.pins.write_text(with_sgl_kernel_patch)  # pinned at the old commit; upstream moved
    code, out, err = bump(world, "bump:sglang")
    assert (code, err) == (2, "error: bump: could not check sglang, sgl_kernel; see above\n")
    lines = out.splitlines()
    assert lines[lines.index("sgl_kernel: not checked") + 1 :] == [
        "  unknown: moves with sglang, which could not be checked"
    ]
    assert world.pins_text() == with_sgl_kernel_patch


# ---------------------------------------------------------------- the version a bump cannot know


def test_a_version_tag_on_the_new_commit_sets_the_version(world: World) -> None:
    repo = world.repos["sglang"]
    head = commit(repo, {"NEWS": "release\n"}, "Release 0.5.16")
    git(repo, "tag", "-a", "v0.5.16", "-m", "0.5.16", head)
    git(repo, "tag", "nightly", head)  # not a version: ignored
    code, out, err = bump(world, "bump:sglang")
    assert code == 0, out + err
    assert "note:" not in out
    assert pins.load(world.pins).sources["sglang"].version == "0.5.16"


def test_two_version_tags_on_the_new_commit_are_left_to_you(world: World) -> None:
    repo = world.repos["sglang"]
    head = commit(repo, {"NEWS": "release\n"}, "Release")
    git(repo, "tag", "v0.5.16", head)
    git(repo, "tag", "v0.6.0rc0", head)
    code, out, _ = bump(world, "bump:sglang")
    assert code == 0
    assert (
        f"  note: [sources.sglang].version still says 0.5.15: set it to the version at {head[:12]}"
    ) in out.splitlines()
    assert pins.load(world.pins).sources["sglang"].version == "0.5.15"


def test_a_folder_built_alone_takes_its_version_from_its_files_not_the_tags(
    world: World,
) -> None:
    """The tags are SGLang's: sgl-kernel/ states a version of its own, in the pyproject its
    ROCm build reads (pyproject_rocm.toml, over pyproject.toml), and the bump follows it."""
    repo, _, _ = with_kernel_tree(world)
    world.pins.write_text(
        edit_toml(world.pins_text(), ["sources", "sgl_kernel", "version"], "0.3.0")
    )
    head = commit(repo, {"NEWS": "release\n"}, "Release 0.5.16")
    git(repo, "tag", "-a", "v0.5.16", "-m", "0.5.16", head)
    code, out, err = bump(world, "bump:sglang")
    assert code == 0, out + err
    after = pins.load(world.pins).sources
    assert (after["sglang"].version, after["sgl_kernel"].version) == ("0.5.16", "0.4.2.post2")
    assert "note:" not in out
    rocm = '[project]\nname = "sglang-kernel"\nversion = "0.4.3"\n'
    head = commit(repo, {"sgl-kernel/pyproject_rocm.toml": rocm}, "Release 0.5.17")
    git(repo, "tag", "-a", "v0.5.17", "-m", "0.5.17", head)
    code, out, err = bump(world, "bump:sglang")
    assert code == 0, out + err
    assert pins.load(world.pins).sources["sgl_kernel"].version == "0.4.3"
    assert "note:" not in out


def test_a_new_fetch_in_the_new_tree_stops_the_bump_with_its_file_and_line(
    world: World,
) -> None:
    repo = world.repos["causal_conv1d"]
    setup = git(repo, "show", "HEAD:setup.py")  # causal-conv1d's, at its pin
    fetching = (
        f"{setup}\n\n"
        "def kernels():\n"
        '    urllib.request.urlretrieve("https://example.org/kernels.tar", "k.tar")\n'
    )
    commit(repo, {"setup.py": fetching}, "Fetch kernels at build time")
    line = len(fetching.splitlines())
    before = world.pins_text()
    code, out, err = bump(world, "bump:causal_conv1d")
    assert (code, err) == (
        1,
        "error: bump stopped for causal_conv1d: conflicts at the new commit; see above\n",
    )
    lines = out.splitlines()
    assert (
        "  conflicts preflight fetch: https://example.org/kernels.tar: no pin gives it: mark it "
        "in [sources.causal_conv1d].skipped_fetches with why the build does not take it "
        f"(setup.py:{line})"
    ) in lines
    assert (
        "  stopped: 1 fact of the new tree differs from the pins; nothing written for "
        "causal_conv1d (force=1 writes)"
    ) in lines
    assert world.pins_text() == before


def test_a_tag_with_a_slash_is_recorded_as_git_names_it(world: World) -> None:
    repo = world.repos["flash_attention"]
    head = commit(repo, {"NEWS": "x\n"}, "Release")
    git(repo, "tag", "rocm/v2.8.4", head)
    code, out, err = bump(world, "bump:flash_attention", "to=rocm/v2.8.4")
    assert (code, err) == (0, ""), out
    after = pins.load(world.pins).sources["flash_attention"]
    assert (after.commit, after.tag) == (head, "rocm/v2.8.4")


# ---------------------------------------------------------------- the docs follow pins.toml


def test_a_bump_of_the_repository_pins_renders_the_docs(world: World, tmp_path: Path) -> None:
    """In a copy of this repository whose pins.toml is the world's: bump writes it and the
    docs made from it, so `doit render check=1` (CI) passes right after."""
    copy = tmp_path / "repository"
    listed = git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard").splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    (copy / "pins.toml").write_text(world.pins_text())
    result = run_doit("bump:vllm", cwd=copy, env=world.env)
    assert result.returncode == 0, result.stdout + result.stderr
    head = git(world.repos["vllm"], "rev-parse", "HEAD")
    assert result.stdout.splitlines()[-3:] == [
        "wrote pins.toml",
        "wrote docs/versions.md",
        "wrote docker/Dockerfile.rocm",
    ]
    assert f"vLLM @{head[:9]}" in (copy / "docs" / "versions.md").read_text()
    check = run_doit("render", "check=1", cwd=copy, env=world.env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[-1] == "docs are fresh"


def test_what_a_bump_rebuilds_is_the_same_with_closures_locked(tmp_path: Path) -> None:
    """Locked closures give every stage a sealed key; a bump still names only the stages
    whose inputs it moves, not every stage whose sealed key differs from its open one."""
    path = tmp_path / "pins.toml"
    path.write_text((ROOT / "pins.toml").read_text())
    run = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    opened = {name: key.key for name, key in run.open_keys.items()}
    found = {(name, key): Closure(name, key, ()) for name, key in opened.items()}
    closure.save(LockFile(closure.lock_path(path), found))
    locked = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    assert locked.keys["vllm"].key != opened["vllm"]  # sealed
    old = locked.pins.sources["vllm"].commit
    change = Change(("sources", "vllm", "commit"), old, "f" * 40)
    assert rebuilds(locked, [change]) == ["vllm", "assemble", "manifest"]
