"""Build contexts: sources patched on the host, wheels and key by hash, nothing fetched twice."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import run_doit
from servers import commit
from world import World, locked_run, prepare

import stages
from rocmgraph.common import fsutil
from rocmgraph.common.errors import FetchError, PatchError
from rocmgraph.common.layout import default_cache
from rocmgraph.demo import patchimages
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.trees import patches


def test_a_source_stage_gets_its_patched_tree_without_git(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = locked_run(world, monkeypatch)
    dest = prepare(run, "vllm", tmp_path / "ctx")
    assert (dest / "Dockerfile").read_text().startswith("# vllm: built from pinned sources")
    tree = dest / "src" / "vllm"
    assert not (tree / ".git").exists()
    assert "hipMemset" in (tree / "csrc/cumem_allocator.cpp").read_text()
    assert (dest / "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch").is_file()
    cached = default_cache() / "git" / world.commits["vllm"]
    assert "hipMemset" not in (cached / "csrc/cumem_allocator.cpp").read_text()


def test_the_wheels_stage_gets_its_files_by_hash_and_a_hashed_requirements_file(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = locked_run(world, monkeypatch)
    dest = prepare(run, "wheels", tmp_path / "ctx")
    lines = (dest / "wheels" / "requirements.txt").read_text().splitlines()
    torch = run.pins.wheels["torch"]
    assert f"/tmp/wheels/{torch.file} --hash=sha256:{torch.sha256}" in lines
    assert len(lines) == 5
    stored = Outside().store.path(torch.sha256, torch.file)
    assert (dest / "wheels" / torch.file).stat().st_ino == stored.stat().st_ino  # a link
    key = prepare(run, "rocm", tmp_path / "rocm")
    assert (key / "rocm.gpg.key").read_bytes().startswith(b"-----BEGIN PGP")


def test_an_unlocked_wheel_stops_the_context_with_what_to_do(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    run = Run(Options(pins=str(world.pins), arch="gfx942"), stages.graph())
    with pytest.raises(FetchError) as caught:
        prepare(run, "wheels", tmp_path / "ctx")
    assert str(caught.value) == (
        "stage wheels: [wheels.apex] has no exact file and sha256 yet; run `doit lock`"
    )


def test_a_conflicting_patch_stops_the_stage_before_any_build(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo = world.repos["vllm"]
    text = (
        (repo / "csrc/cumem_allocator.cpp").read_text().replace("    return;\n", "    goto out;\n")
    )
    moved = commit(repo, {"csrc/cumem_allocator.cpp": text}, "upstream rework")
    world.pins.write_text(world.pins_text().replace(world.commits["vllm"], moved))
    run = locked_run(world, monkeypatch)
    with pytest.raises(PatchError) as caught:
        prepare(run, "vllm", tmp_path / "ctx")
    assert str(caught.value) == (
        "source vllm: docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch conflicts: "
        "csrc/cumem_allocator.cpp: hunk 1 (@@ -212,6 +212,14 @@) does not apply"
    )


def test_doit_patches_reports_each_patch_at_the_pinned_commits(world: World) -> None:
    assert run_doit("lock", f"pins={world.pins}", env=world.env).returncode == 0
    result = run_doit("patches", f"pins={world.pins}", "format=json", env=world.env)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["patches"]
    assert len(rows) == 9
    assert {row["status"] for row in rows} == {"applies"}
    megatron = next(row for row in rows if row["target"] == "megatron-core")
    assert megatron["at"] == "0.18.0"
    cumem = next(
        row for row in rows if row["patch"].endswith("0001-cumem-zero-mapped-vram-on-rocm.patch")
    )
    assert cumem["upstream"] == "vllm-project/vllm#44972"
    assert cumem["at"] == world.commits["vllm"]


def test_doit_patches_names_obsolete_and_conflicting_patches(world: World) -> None:
    repo = world.repos["vllm"]
    merged = patchimages.postimage(
        patches.read_patch("docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch")
    )
    pad = "vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py"
    reworded = (repo / pad).read_text().replace("# used by captured CUDA graphs.", "# reworded")
    moved = commit(repo, {**merged, pad: reworded}, "Zero mapped VRAM on ROCm (#44972)")
    world.pins.write_text(world.pins_text().replace(world.commits["vllm"], moved))
    assert run_doit("lock", f"pins={world.pins}", env=world.env).returncode == 0
    result = run_doit("patches", f"pins={world.pins}", env=world.env)
    assert result.returncode == 1
    assert result.stderr == "error: 1 patches conflict with their pinned tree\n"
    lines = [line for line in result.stdout.splitlines() if "/vllm/" in line]
    assert lines[0].split() == [
        "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch",
        "obsolete", "upstream", "has", "this", "change", "already",
    ]  # fmt: skip
    assert lines[1].split()[:3] == [
        "docker/patches/vllm/0002-moe-pad-weight-in-place.patch", "conflicts", f"{pad}:",
    ]  # fmt: skip
    assert result.stdout.splitlines()[-1] == "7 applies, 1 obsolete, 1 conflicts"


def test_a_context_s_modes_are_git_s_whatever_the_umask(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A build's COPY keeps modes: made under Ubuntu's umask 0002 (group-writable) the
    context holds what it holds under root's 0022, and the image is the same."""
    run = locked_run(world, monkeypatch)
    prepare(run, "vllm", tmp_path / "first")  # the source cache filled
    cached = default_cache() / "git" / world.commits["vllm"] / "csrc/cumem_allocator.cpp"
    cached.chmod(0o664)  # as a checkout under umask 0002 leaves it
    old = os.umask(0o002)
    try:
        dest = prepare(run, "vllm", tmp_path / "ctx")
    finally:
        os.umask(old)
        cached.chmod(0o644)
    modes = {
        path.relative_to(dest).as_posix(): stat.S_IMODE(path.lstat().st_mode)
        for path in [dest, *dest.rglob("*")]
        if not path.is_symlink()
    }
    assert modes["src/vllm/csrc/cumem_allocator.cpp"] == 0o644
    assert {mode for path, mode in modes.items() if (dest / path).is_dir()} == {0o755}
    assert set(modes.values()) <= {0o644, 0o755}


def test_git_modes_leave_a_store_file_linked_in_as_the_store_made_it(tmp_path: Path) -> None:
    store, context = tmp_path / "store", tmp_path / "context"
    store.mkdir()
    context.mkdir()
    private = store / "wheel.whl"
    private.write_bytes(b"wheel")
    private.chmod(0o600)  # as the store writes it: a private index's wheel stays private
    os.link(private, context / "wheel.whl")
    odd = context / "group-only-exec.sh"
    odd.write_text("echo\n")
    odd.chmod(0o671)
    fsutil.settle(context)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(odd.stat().st_mode) == 0o644  # git keeps 0755 for the owner's x only


def test_link_tree_links_git_s_files_and_copies_the_rest_without_git(tmp_path: Path) -> None:
    tree, dest = tmp_path / "tree", tmp_path / "dest"
    (tree / ".git").mkdir(parents=True)
    (tree / ".git" / "HEAD").write_text("ref\n")
    (tree / "third_party" / "sub").mkdir(parents=True)
    (tree / "third_party" / "sub" / ".git").write_text("gitdir: ../../.git/modules/sub\n")
    for name, mode in (("setup.py", 0o644), ("build.sh", 0o755), ("umask-0002.txt", 0o664)):
        (tree / name).write_text(name)
        (tree / name).chmod(mode)
    (tree / "link").symlink_to("setup.py")
    (tree / "folder-link").symlink_to("third_party")
    fsutil.link_tree(tree, dest)
    made = sorted(path.relative_to(dest).as_posix() for path in dest.rglob("*"))
    assert made == [
        "build.sh", "folder-link", "link", "setup.py", "third_party", "third_party/sub",
        "umask-0002.txt",
    ]  # fmt: skip
    same = {name: (dest / name).stat().st_ino == (tree / name).stat().st_ino
            for name in ("setup.py", "build.sh", "umask-0002.txt")}  # fmt: skip
    assert same == {"setup.py": True, "build.sh": True, "umask-0002.txt": False}
    assert (dest / "link").readlink() == Path("setup.py")
    assert (dest / "folder-link").readlink() == Path("third_party")


def test_a_source_enters_its_context_as_links_and_its_patch_leaves_the_cache_alone(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = locked_run(world, monkeypatch)
    tree = prepare(run, "vllm", tmp_path / "ctx") / "src" / "vllm"
    cached = default_cache() / "git" / world.commits["vllm"]
    assert (tree / "setup.py").stat().st_ino == (cached / "setup.py").stat().st_ino
    patched = "csrc/cumem_allocator.cpp"
    assert (tree / patched).stat().st_ino != (cached / patched).stat().st_ino
    status = ["git", "-C", str(cached), "status", "--porcelain", "--untracked-files=all"]
    assert subprocess.run(status, capture_output=True, text=True, check=True).stdout == ""


def dates(root: Path) -> dict[str, int]:
    """Each file's mtime (ns), by its path under ``root``."""
    return {
        path.relative_to(root).as_posix(): path.lstat().st_mtime_ns
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


def test_a_context_s_files_are_dated_by_their_content(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """BuildKit sends a file of a context folder it has read before only if its size or mtime
    changed: the same bytes keep one mtime, other bytes get another. A stored wheel changed
    with its size, mtime and inode kept is found as the context is made, and fetched again."""
    run = locked_run(world, monkeypatch)
    first = prepare(run, "wheels", tmp_path / "first")
    for name, mtime in dates(first).items():
        assert mtime == fsutil.content_mtime(fsutil.sha256_file(first / name)), name
    torch = run.pins.wheels["torch"]
    stored = Outside().store.path(torch.sha256, torch.file)
    status = stored.stat()
    with stored.open("r+b") as changed:
        changed.write(b"X")
    os.utime(stored, ns=(status.st_atime_ns, status.st_mtime_ns))
    flipped = fsutil.sha256_file(stored)
    capsys.readouterr()
    second = prepare(run, "wheels", tmp_path / "second")
    assert capsys.readouterr().err == (
        f"warning: {stored} has sha256 {flipped}, not the {torch.sha256} it was stored under; "
        "fetching it again\n"
    )
    assert fsutil.sha256_file(second / "wheels" / torch.file) == torch.sha256
    assert dates(second) == dates(first)  # the same bytes: nothing for BuildKit to send again


def test_content_times_date_the_context_s_own_files_not_those_linked_in(tmp_path: Path) -> None:
    store, context = tmp_path / "store", tmp_path / "context"
    store.mkdir()
    context.mkdir()
    (store / "wheel.whl").write_bytes(b"wheel")
    os.utime(store / "wheel.whl", ns=(1, 1))
    os.link(store / "wheel.whl", context / "wheel.whl")  # its owner dates it, as it checks it
    (context / "Dockerfile").write_text("FROM scratch\n")
    (context / "link").symlink_to("Dockerfile")
    fsutil.settle(context)
    sha = fsutil.sha256_file(context / "Dockerfile")
    assert dates(context) == {"Dockerfile": fsutil.content_mtime(sha), "wheel.whl": 1}
    (context / "Dockerfile").write_text("FROM other\n")  # other bytes, of the same size
    fsutil.settle(context)
    assert dates(context)["Dockerfile"] != fsutil.content_mtime(sha)


def test_a_copy_is_hashed_as_it_is_written_and_never_written_through_a_link(
    tmp_path: Path,
) -> None:
    source, dest = tmp_path / "source", tmp_path / "dest"
    source.write_bytes(b"wheel")
    source.chmod(0o600)
    kept = tmp_path / "kept"
    kept.write_bytes(b"the store's")
    os.link(kept, dest)  # a link to a file of the store was there
    assert fsutil.copy_hashed(source, dest) == fsutil.sha256_file(source)
    assert dest.read_bytes() == b"wheel"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert kept.read_bytes() == b"the store's"
