"""doit lock: what only the network knows, recorded in the pins file with its comments kept."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from conftest import PINS, edit_toml, run_doit
from servers import git
from world import KEY, WHEELS, World, make_world, values_blanked, wheel_bytes

from rocmgraph.common.errors import PinsError
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.config import pins, pinsedit


def test_lock_records_files_hashes_and_full_commits_keeping_every_comment(world: World) -> None:
    before = world.pins_text()
    result = run_doit("lock", f"pins={world.pins}", env=world.env)
    assert result.returncode == 0, result.stdout + result.stderr
    locked = pins.load(world.pins)
    for name, (_version, file) in WHEELS.items():
        assert locked.wheels[name].file == file
        assert locked.wheels[name].sha256 == hashlib.sha256(wheel_bytes(name)).hexdigest()
    assert locked.rocm.key_sha256 == hashlib.sha256(KEY).hexdigest()
    for name in ("aiter", "transformer_engine", "flash_attention", "torch_memory_saver"):
        assert locked.sources[name].commit == world.commits[name], name
    assert locked.missing() == []
    assert f"locked [sources.aiter].commit: {world.commits['aiter'][:9]} -> " in result.stdout
    # Only the values changed: every comment and every other byte is where it was.
    after = world.pins_text()
    assert values_blanked(after) == values_blanked(before)
    assert "# exact apt version: `doit lock` reads it from the repository" in after


def refused_as_unlocked(world: World) -> str:
    """What `doit lock locked=1` names as not locked, the rest of its refusal checked."""
    refused = run_doit("lock", f"pins={world.pins}", "locked=1", env=world.env)
    assert refused.returncode == 1
    said = re.fullmatch(
        f"error: {re.escape(str(world.pins))} is not locked: (.+); "
        "run `doit lock` where the network allows and commit the pins file\n",
        refused.stderr,
    )
    assert said, refused.stderr
    return said[1]


def test_locked_refuses_unlocked_pins_and_accepts_locked_ones(world: World) -> None:
    assert refused_as_unlocked(world) == (
        "[rocm].key_sha256, [wheels.apex].file, "
        "[wheels.apex].sha256, [wheels.torch].file, [wheels.torch].sha256, "
        "[wheels.torchaudio].file, [wheels.torchaudio].sha256, [wheels.torchvision].file, "
        "[wheels.torchvision].sha256, [wheels.triton].file, [wheels.triton].sha256, "
        "[sources.aiter].commit, [sources.flash_attention].commit, "
        "[sources.torch_memory_saver].commit, [sources.transformer_engine].commit, "
        "[sources.triton_kernels].commit, [sources.sgl_kernel].tree, "
        "[sources.triton_kernels].tree"
    )
    locked = run_doit("lock", f"pins={world.pins}", env=world.env)
    assert locked.returncode == 0
    # sgl-kernel's folder id, as git gives it at the pinned commit: its stage's key
    tree = git(world.repos["sglang"], "rev-parse", f"{world.commits['sglang']}:sgl-kernel")
    assert f"locked [sources.sgl_kernel].tree: (empty) -> {tree}\n" in locked.stdout
    assert pins.load(world.pins).sources["sgl_kernel"].tree == tree
    accepted = run_doit("lock", f"pins={world.pins}", "locked=1", env=world.env)
    assert accepted.returncode == 0, accepted.stderr
    assert f"{world.pins} is locked" in accepted.stdout


def test_lock_that_cannot_reach_an_index_writes_what_it_found_and_fails(world: World) -> None:
    world.server.routes["/rocm-rel-7.14/"].status = 404
    result = run_doit("lock", f"pins={world.pins}", env=world.env)
    assert result.returncode == 1
    assert result.stderr == "error: 5 values could not be resolved; see above\n"
    assert f"left open [wheels.torch].file: GET {world.server.url}/rocm-rel-7.14/: HTTP 404" in (
        result.stdout
    )
    assert pins.load(world.pins).sources["aiter"].commit == world.commits["aiter"]


def test_lock_names_the_nearest_files_listed_beside_a_pinned_file_its_index_lacks(
    world: World,
) -> None:
    """A file pinned by hand that the index does not list (a build replaced, a typo): lock
    names the files the index lists nearest it, and downloads nothing for it."""
    unlisted = "torch-2.12.0+rocm7.14.0.lw.git00000000-cp312-cp312-linux_x86_64.whl"
    world.pins.write_text(edit_toml(world.pins_text(), ["wheels", "torch", "file"], unlisted))
    result = run_doit("lock", f"pins={world.pins}", env=world.env)
    assert result.returncode == 1
    assert result.stderr == "error: 1 values could not be resolved; see above\n"
    lines = [line for line in result.stdout.splitlines() if line.startswith("left open ")]
    assert lines == [
        f"left open [wheels.torch].file: [wheels.torch].file {unlisted} is not listed in "
        f"{world.server.url}/rocm-rel-7.14/; nearest published: {world.wheels['torch']}; pin "
        "one in [wheels.torch].file",
        "left open [wheels.torch].sha256: sha256 unknown; `doit lock` records it at first download",
    ]
    locked = pins.load(world.pins).wheels
    assert (locked["torch"].file, locked["torch"].sha256) == (unlisted, "")
    assert locked["triton"].sha256  # the others are locked all the same


# repo.radeon.com's rocm-rel-7.14 folder as it names its files: torch and triton at the
# versions pins.toml pins, and the builds of the wheels it pins no version of.
RELEASE_714 = {
    "torch": "torch-2.12.0+rocm7.14.0.git3f9d27c1-cp312-cp312-linux_x86_64.whl",
    "triton": "triton-3.7.0+rocm7.14.0.git8e41b0d5-cp312-cp312-linux_x86_64.whl",
    "torchvision": "torchvision-0.27.0+rocm7.14.0.git5c2a9e17-cp312-cp312-linux_x86_64.whl",
    "torchaudio": "torchaudio-2.12.0+rocm7.14.0.git0d6b4f38-cp312-cp312-linux_x86_64.whl",
    "apex": "apex-1.12.0a0+rocm7.14.0.git9a7e3c62-cp312-cp312-linux_x86_64.whl",
}


def test_the_real_profile_locks_what_its_builds_need_then_passes_locked(tmp_path: Path) -> None:
    """pins.toml as it is: the base provides ROCm, the torch stack, Flash Attention,
    TransformerEngine and aiter, whose stages only check versions. The lock asks nothing
    of the wheel index, ROCm's key or its apt repository, and leaves their pins alone."""
    with make_world(tmp_path, PINS, listed=RELEASE_714) as world:
        result = run_doit("lock", f"pins={world.pins}", env=world.env)
        assert result.returncode == 0, result.stdout + result.stderr
        sglang, saver = world.commits["sglang"], world.commits["torch_memory_saver"]
        tree = git(world.repos["sglang"], "rev-parse", f"{sglang}:sgl-kernel")
        triton = world.commits["triton_kernels"]
        folder = "python/triton_kernels/triton_kernels"
        kernels = git(world.repos["triton_kernels"], "rev-parse", f"{triton}:{folder}")
        ipython = world.versions["python", "sglang", "ipython"]
        assert result.stdout.splitlines() == [
            ".  lock",
            f"locked [sources.sgl_kernel].tree: (empty) -> {tree}",
            f"locked [sources.torch_memory_saver].commit: (empty) -> {saver}",
            f"locked [sources.triton_kernels].commit: (empty) -> {triton}",
            f"locked [sources.triton_kernels].tree: (empty) -> {kernels}",
            f"locked [base].digest: (empty) -> {world.digest}",
            f"locked [python.sglang].ipython: (empty) -> {ipython}",
            f"{world.pins}: 6 values recorded",
        ]
        untouched = [
            "/rocm-rel-7.14/",
            "/rocm/rocm.gpg.key",
            "/rocm/apt/7.14/dists/jammy/main/binary-amd64/Packages.gz",
        ]
        assert [world.server.routes[path].hits for path in untouched] == [0, 0, 0]
        locked = pins.load(world.pins)
        assert {wheel.file for wheel in locked.wheels.values()} == {""}
        assert locked.sources["aiter"].commit == world.commits["aiter"][:9]
        accepted = run_doit("lock", f"pins={world.pins}", "locked=1", env=world.env)
        assert accepted.returncode == 0, accepted.stderr
        assert accepted.stdout == f".  lock\n{world.pins} is locked\n"


def test_the_real_profile_with_nothing_provided_asks_for_its_wheels(tmp_path: Path) -> None:
    """From a plain base the wheels stage installs the wheels: each is asked, found in the
    index by its version, and one with no version is left for the user to pin (a choice,
    not a failed lookup: the lock exits 0, and locked=1 names it)."""
    with make_world(tmp_path, PINS, {("base", "provides"): []}, RELEASE_714) as world:
        result = run_doit("lock", f"pins={world.pins}", env=world.env)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        locked = pins.load(world.pins).wheels
        for name in ("torch", "triton"):
            assert f"locked [wheels.{name}].file: (empty) -> {RELEASE_714[name]}" in lines
            assert locked[name].sha256 == hashlib.sha256(wheel_bytes(name)).hexdigest()
        assert (
            "left open [wheels.apex].file: exact wheel file unknown, and no version to find it "
            "by; pin the version (`doit lock` then finds the file) or the exact file"
        ) in lines
        assert (
            "left open [wheels.apex].version: no version pinned, and `doit lock` picks none; "
            "pin the version to install"
        ) in lines
        assert refused_as_unlocked(world) == (
            "[wheels.apex].version, [wheels.apex].file, [wheels.apex].sha256, "
            "[wheels.torchaudio].version, [wheels.torchaudio].file, [wheels.torchaudio].sha256, "
            "[wheels.torchvision].version, [wheels.torchvision].file, [wheels.torchvision].sha256"
        )


@pytest.mark.parametrize("fault", ["no such tag", "repository gone"])
def test_a_tree_id_left_open_names_why_its_commit_could_not_be_resolved(
    tmp_path: Path, fault: str
) -> None:
    """The folder's tree id is read at the commit: when the commit cannot be resolved, its
    line says why (which source, commit, repository), not that `doit lock` records it."""
    with make_world(tmp_path, PINS, listed=RELEASE_714) as world:
        repo = world.repos["triton_kernels"]
        if fault == "no such tag":  # the world made its upstream with the tag pinned then
            tag = ["sources", "triton_kernels", "tag"]
            world.pins.write_text(edit_toml(world.pins_text(), tag, "v9.9.9"))
        else:
            shutil.rmtree(repo)
        result = run_doit("lock", f"pins={world.pins}", env=world.env)
    assert result.returncode == 1
    assert result.stderr == "error: 2 values could not be resolved; see above\n"
    cause = (
        f"[sources.triton_kernels].tag v9.9.9 does not exist in file://{repo}; fix "
        "[sources.triton_kernels].tag, or pin a full id in [sources.triton_kernels].commit"
        if fault == "no such tag"
        else f"source triton_kernels: cannot list file://{repo} (no repository there); check "
        "the network, or set a mirror ([sources.triton_kernels].mirror, [mirrors], or "
        "$VERL_GRAPH_MIRRORS)"
    )
    assert [line for line in result.stdout.splitlines() if line.startswith("left open ")] == [
        f"left open [sources.triton_kernels].commit: {cause}",
        "left open [sources.triton_kernels].tree: not looked up, as its commit could not be "
        f"resolved: {cause}",
    ]


MULTI = """\
[sources.vllm]
patches = [
    "a.patch",  # the first fix
    "b.patch",  # the second fix
    "c.patch",
]  # three fixes
commit = "x"
"""


@pytest.mark.parametrize(
    ("text", "new", "written"),
    [
        (MULTI, ("a.patch", "c.patch"),
         MULTI.replace('    "b.patch",  # the second fix\n', "")),
        (MULTI, ("c.patch",),
         MULTI.replace('    "a.patch",  # the first fix\n    "b.patch",  # the second fix\n', "")),
        (MULTI, (), 'patches = [\n]  # three fixes\n'),
        (MULTI, ("a.patch", "b.patch", "c.patch", "d.patch"),
         MULTI.replace('    "c.patch",\n', '    "c.patch",\n    "d.patch",\n')),
        ('patches = ["a.patch", "b.patch"]  # one line\n', ("b.patch",),
         'patches = ["b.patch"]  # one line\n'),
        ('patches = []\n', ("a.patch",), 'patches = ["a.patch"]\n'),
    ],
)  # fmt: skip
def test_a_list_keeps_its_layout_and_the_comments_of_the_items_that_stay(
    text: str, new: tuple[str, ...], written: str
) -> None:
    path = ("sources", "vllm", "patches") if text.startswith("[") else ("patches",)
    after = pinsedit.apply(text, [pinsedit.Change(path, (), new)])
    assert written in after if text.startswith("[") else after == written
    assert after.count("commit") == text.count("commit")


def test_a_value_the_file_does_not_have_yet_is_added_to_its_table() -> None:
    after = pinsedit.apply(MULTI, [pinsedit.Change(("sources", "vllm", "tag"), "", "v1")])
    assert after == MULTI + 'tag = "v1"\n'


def test_two_writers_of_one_pins_file_at_once_keep_both_edits(tmp_path: Path) -> None:
    """A lock and a bump at once: the second waits for the first's file, then edits it."""
    path = tmp_path / "pins.toml"
    path.write_text(PINS.read_text())
    other = os.open(path, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX)  # another writer, between its read and its rename
    jobs = pinsedit.Change(("build", "max_jobs"), 64, 8)
    writer = threading.Thread(target=pinsedit.write, args=(path, [jobs]), daemon=True)
    try:
        writer.start()
        writer.join(0.5)
        assert writer.is_alive()  # it waits
        ccache = pinsedit.Change(("build", "ccache_maxsize"), "50G", "10G")
        atomic_write_text(path, pinsedit.apply(path.read_text(), [ccache]))  # the other's edit
    finally:
        os.close(other)  # and it lets go
    writer.join(10)
    assert not writer.is_alive()
    written = pins.load(path).build
    assert (written.max_jobs, written.ccache_maxsize) == (8, "10G")


def test_a_pins_file_that_cannot_be_locked_is_written_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS without a lock manager, say: as before there were locks."""
    path = tmp_path / "pins.toml"
    path.write_text(PINS.read_text())

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    pinsedit.write(path, [pinsedit.Change(("build", "max_jobs"), 64, 8)])
    assert pins.load(path).build.max_jobs == 8


def test_a_value_another_writer_moved_since_it_was_read_is_refused_not_overwritten(
    tmp_path: Path,
) -> None:
    """A bump moved the commit a lock read: the lock's full commit of the old one would
    undo the bump without a word."""
    path = tmp_path / "pins.toml"
    path.write_text(PINS.read_text())
    moved = pinsedit.Change(("build", "max_jobs"), 64, 16)
    pinsedit.write(path, [moved], moved_refused=True)  # the bump's edit
    text = path.read_text()
    stale = pinsedit.Change(("build", "max_jobs"), 64, 8)  # read before the bump
    with pytest.raises(PinsError) as refused:
        pinsedit.write(path, [stale], moved_refused=True)
    assert str(refused.value) == (
        f"{path}: [build].max_jobs: changed while this command ran: it read 64, the file now "
        "holds 16; run the command again"
    )
    assert path.read_text() == text  # nothing written


def test_a_write_keeps_the_pins_files_mode_and_writes_through_a_symlink(tmp_path: Path) -> None:
    """A group-readable pins file stays readable by the group (a CI container of another
    uid), and a `pins=` link to a shared file edits that file, not a copy in its place."""
    shared = tmp_path / "shared.toml"
    shared.write_text(PINS.read_text())
    shared.chmod(0o664)
    link = tmp_path / "link.toml"
    link.symlink_to(shared)
    pinsedit.write(link, [pinsedit.Change(("build", "max_jobs"), 64, 8)])
    assert link.is_symlink()
    assert pins.load(shared).build.max_jobs == 8
    assert oct(shared.stat().st_mode & 0o777) == oct(0o664)


def test_a_new_file_written_whole_takes_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(old)
    assert oct((tmp_path / "new.json").stat().st_mode & 0o777) == oct(0o640)
