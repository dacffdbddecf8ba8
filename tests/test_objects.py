"""Checks read a commit's files from git's objects: a partial copy fetches only the blobs
they read, so a mirror that lacks an unrelated blob still gives every fact, while a
complete checkout of it names the object it lacks."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml
from servers import GitHttpServer, commit, git, make_repo

from rocmgraph.common.errors import FetchError
from rocmgraph.config import pins
from rocmgraph.demo import upstreams
from rocmgraph.fetch.objects import Checkout, Files
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.trees import patches, preflight
from rocmgraph.trees.patches import Outcome
from rocmgraph.trees.preflight import Verdict

UNRELATED = "docs/assets/big.png"
# What `doit preflight` and the patches read of the demo's vLLM: its build files, and the
# files its patches touch (the kernels in csrc/kernels/ and the docs are never read).
READ = [
    "CMakeLists.txt",
    "cmake/external_projects/triton_kernels.cmake",
    "csrc/cumem_allocator.cpp",
    "pyproject.toml",
    "requirements/rocm.txt",
    "setup.py",
    "vllm/model_executor/layers/fused_moe/oracle/unquantized.py",
    "vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py",
]


@pytest.fixture
def vllm(tmp_path: Path) -> tuple[Path, str]:
    """The demo's vLLM as a git repository, with a picture its build never reads."""
    repo = tmp_path / "vllm"
    make_repo(repo, upstreams.histories()["vllm"][0][1])
    (repo / "docs" / "assets").mkdir(parents=True)
    (repo / UNRELATED).write_bytes(b"\x89PNG\r\n" + secrets.token_bytes(4096))
    git(repo, "add", UNRELATED)
    return repo, commit(repo, {}, "a picture")


@contextmanager
def served(
    tmp_path: Path, repo: Path, transport: str, *, filters: bool = True, lacking: str = ""
) -> Iterator[str]:
    """A bare copy of ``repo``, served over ``transport`` (file, or smart HTTP), that takes
    partial fetches (or, ``filters`` off, ignores the filter and sends every blob), and
    lacks the blob of the path ``lacking``; yields its URL."""
    www = tmp_path / "www"
    www.mkdir()
    bare = www / "vllm.git"
    git(www, "clone", "--quiet", "--bare", str(repo), str(bare))  # keeps loose objects
    git(bare, "config", "uploadpack.allowFilter", str(filters).lower())
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    if lacking:
        blob = git(bare, "rev-parse", f"HEAD:{lacking}")
        (bare / "objects" / blob[:2] / blob[2:]).unlink()
    if transport == "file":
        yield f"file://{bare}"
        return
    with GitHttpServer(www) as smart:
        yield f"{smart.url}/vllm.git"


def demo_pins(url: str, commit_id: str) -> pins.Pins:
    text = (ROOT / "demo" / "pins.toml").read_text()
    text = edit_toml(text, ["sources", "vllm", "mirror"], url)
    return pins.loads(edit_toml(text, ["sources", "vllm", "commit"], commit_id), "pins.toml")


def snapshot(tmp_path: Path, url: str, head: str) -> Files:
    return SourceCache(tmp_path / "cache").snapshot("vllm", demo_pins(url, head).sources["vllm"])


def blobs_in(git_dir: Path) -> set[str]:
    out = git(
        git_dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"
    )
    return {line.split()[0] for line in out.splitlines() if line.endswith(" blob")}


def blobs_of(repo: Path, commit_id: str, paths: list[str]) -> set[str]:
    return {git(repo, "rev-parse", f"{commit_id}:{path}") for path in paths}


@pytest.mark.parametrize("transport", ["file", "smart"])
def test_a_mirror_that_lacks_an_unrelated_blob_still_gives_every_fact(
    tmp_path: Path, vllm: tuple[Path, str], transport: str
) -> None:
    repo, head = vllm
    with served(tmp_path, repo, transport, lacking=UNRELATED) as url:
        lost = git(repo, "rev-parse", f"HEAD:{UNRELATED}")
        demo = demo_pins(url, head)
        cache = SourceCache(tmp_path / "cache")
        rows = preflight.check(demo, cache.snapshot, ["vllm"])
        statuses = patches.check_source(cache, "vllm", demo.sources["vllm"])
        with pytest.raises(FetchError) as caught:
            cache.tree("vllm", demo.sources["vllm"])
    # the same rows as from the whole tree, checked out
    whole = preflight.check(demo, lambda _name, _source: Checkout(repo), ["vllm"])
    assert rows == whole
    assert [row for row in rows if row.verdict is not Verdict.OK] == []
    assert [s.status for s in statuses] == [Outcome.APPLIES] * 3
    assert str(caught.value) == (
        f"source vllm: the repository {url} is damaged: git cannot read object {lost}; fetch "
        "that copy again, or point [sources.vllm].mirror at a whole copy"
    )
    assert not (tmp_path / "cache" / "git").exists()


def test_a_partial_copy_fetches_only_the_blobs_read(tmp_path: Path, vllm: tuple[Path, str]) -> None:
    repo, head = vllm
    with served(tmp_path, repo, "smart") as url:
        demo = demo_pins(url, head)
        cache = SourceCache(tmp_path / "cache")
        rows = preflight.check(demo, cache.snapshot, ["vllm"])
        patches.check_source(cache, "vllm", demo.sources["vllm"])
    assert [row for row in rows if row.verdict is not Verdict.OK] == []
    assert blobs_in(tmp_path / "cache" / "objects" / head) == blobs_of(repo, head, READ)


def test_reads_are_fetched_a_round_at_a_time(tmp_path: Path, vllm: tuple[Path, str]) -> None:
    """One fetch for the commit's trees, one for the files the patches touch, then one per
    round of reads: the build files read first (setup.py, pyproject.toml, requirements),
    the CMakeLists.txt that setup.py builds with, and the file that includes."""
    repo, head = vllm
    with served(tmp_path, repo, "file"), GitHttpServer(tmp_path / "www") as smart:
        demo = demo_pins(f"{smart.url}/vllm.git", head)
        preflight.check(demo, SourceCache(tmp_path / "cache").snapshot, ["vllm"])
        assert smart.packs_served == 1 + 1 + 3
        preflight.check(demo, SourceCache(tmp_path / "cache").snapshot, ["vllm"])
        assert smart.packs_served == 5  # again: every blob it reads is here, in one round


def test_a_server_that_ignores_the_filter_sends_every_blob_and_still_serves(
    tmp_path: Path, vllm: tuple[Path, str]
) -> None:
    repo, head = vllm
    with served(tmp_path, repo, "file", filters=False) as url:
        demo = demo_pins(url, head)
        cache = SourceCache(tmp_path / "cache")
        rows = preflight.check(demo, cache.snapshot, ["vllm"])
    assert [row for row in rows if row.verdict is not Verdict.OK] == []
    everything = git(repo, "ls-tree", "-r", "--name-only", head).splitlines()
    assert blobs_in(tmp_path / "cache" / "objects" / head) == blobs_of(repo, head, everything)


def test_a_server_that_ignores_the_filter_and_lacks_a_blob_names_it(
    tmp_path: Path, vllm: tuple[Path, str]
) -> None:
    """It sends every blob or none: the check cannot be made, and says which object the
    copy lacks."""
    repo, head = vllm
    with served(tmp_path, repo, "file", filters=False, lacking=UNRELATED) as url:
        lost = git(repo, "rev-parse", f"HEAD:{UNRELATED}")
        rows = preflight.check(demo_pins(url, head), SourceCache(tmp_path / "cache").snapshot,
                               ["vllm"])  # fmt: skip
    assert [(row.upstream, row.verdict, row.pins) for row in rows] == [
        (preflight.NOT_READ, Verdict.UNREAD,
         f"source vllm: the repository {url} is damaged: git cannot read object {lost}; fetch "
         "that copy again, or point [sources.vllm].mirror at a whole copy"),
    ]  # fmt: skip


def test_reading_the_blob_a_mirror_lacks_names_it(tmp_path: Path, vllm: tuple[Path, str]) -> None:
    repo, head = vllm
    with served(tmp_path, repo, "file", lacking=UNRELATED) as url:
        lost = git(repo, "rev-parse", f"HEAD:{UNRELATED}")
        files = snapshot(tmp_path, url, head)
        assert files.read("setup.py") == (repo / "setup.py").read_bytes()
        with pytest.raises(FetchError) as caught:
            files.read(UNRELATED)
    assert str(caught.value) == (
        f"source vllm: the repository {url} is damaged: git cannot read object {lost}; fetch "
        "that copy again, or point [sources.vllm].mirror at a whole copy"
    )


def test_a_snapshot_reads_folders_files_and_nothing_outside(
    tmp_path: Path, vllm: tuple[Path, str]
) -> None:
    repo, head = vllm
    with served(tmp_path, repo, "file") as url:
        files = snapshot(tmp_path, url, head)
        found = {
            path: (files.read(path), files.is_folder(path))
            for path in ["", ".", "csrc", "csrc/", "./requirements/rocm.txt", "csrc/ops_b.c/x",
                         "no/such", "../vllm/setup.py", "/setup.py"]
        }  # fmt: skip
    rocm = (repo / "requirements" / "rocm.txt").read_bytes()
    assert found == {
        "": (None, True), ".": (None, True), "csrc": (None, True), "csrc/": (None, True),
        "./requirements/rocm.txt": (rocm, False), "csrc/ops_b.c/x": (None, False),
        "no/such": (None, False), "../vllm/setup.py": (None, False), "/setup.py": (None, False),
    }  # fmt: skip
