"""The build files of real upstream history (tests/fixtures/history/<fork>/, written by
benchmarks/buildfiles.py): the index whole, every blob the bytes git stored, and the
extraction's walk, a lacking object recorded rather than fatal."""

from __future__ import annotations

import hashlib
from pathlib import Path

import buildfiles
import history
import pytest
import tomli
from conftest import ROOT
from servers import commit, git, make_repo

FIXTURES = ROOT / "tests" / "fixtures" / "history"
FORKS = ("vllm", "sglang")


def index(fork: str) -> dict[str, object]:
    with (FIXTURES / fork / "index.toml").open("rb") as stream:
        return tomli.load(stream)


def blob_id(content: bytes) -> str:
    # Written out here rather than taken from the script: the test checks it.
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


@pytest.mark.parametrize("fork", FORKS)
def test_the_index_lists_every_picked_commit_of_its_fork(fork: str) -> None:
    choice = history.load()[fork]
    data = index(fork)
    assert (data["repository"], data["branch"]) == (choice.repo, choice.branch)
    assert (data["pin"], data["head"]) == (choice.pin, choice.head)
    commits = data["commits"]
    assert isinstance(commits, dict)
    assert list(commits) == list(choice.commits)  # history's order, none left out


@pytest.mark.parametrize("fork", FORKS)
def test_every_listed_blob_is_there_with_the_bytes_git_stored(fork: str) -> None:
    commits = index(fork)["commits"]
    assert isinstance(commits, dict)
    listed = {sha for files in commits.values() for sha in files.values()}
    blobs = FIXTURES / fork / "blobs"
    for sha in listed:
        assert blob_id((blobs / sha).read_bytes()) == sha
    assert {path.name for path in blobs.iterdir()} == listed  # and nothing unlisted


def test_the_vllm_pin_and_head_have_their_cmakelists() -> None:
    data = index("vllm")
    commits = data["commits"]
    assert isinstance(commits, dict)
    for commit_id in (data["pin"], data["head"]):
        assert "CMakeLists.txt" in commits[commit_id]
    read = buildfiles.load("vllm").read(str(data["head"]))
    assert "project(vllm_extensions" in (read("CMakeLists.txt") or "")
    assert read("./setup.py") is not None  # the spelling treefacts.join gives
    assert read("csrc/not-kept.cu") is None


def test_sgl_kernel_is_read_in_both_its_homes() -> None:
    # sgl-kernel moved under python/sglang/kernels/aot within the picked history.
    commits = index("sglang")["commits"]
    assert isinstance(commits, dict)
    homes = {
        next(path.removesuffix("/setup_rocm.py") for path in files if "setup_rocm.py" in path)
        for files in commits.values()
    }
    assert homes == {"sgl-kernel", "python/sglang/kernels/aot"}


def test_patterns_select_and_walk_only_what_they_name() -> None:
    patterns = ("CMakeLists.txt", "cmake/**", "requirements/rocm*.txt")
    assert buildfiles.selected("cmake/external_projects/qutlass.cmake", patterns)
    assert buildfiles.selected("requirements/rocm.txt", patterns)
    assert not buildfiles.selected("requirements/cuda.txt", patterns)
    assert not buildfiles.selected("csrc/CMakeLists.txt", patterns)
    assert buildfiles.visited("cmake/external_projects", patterns)
    assert buildfiles.visited("requirements", patterns)
    assert not buildfiles.visited("requirements/build", patterns)
    assert not buildfiles.visited("csrc", patterns)


def test_a_lacking_object_is_recorded_missing_with_its_path(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    sha = make_repo(repo, {"CMakeLists.txt": "project(x)\n", "cmake/a.cmake": "set(A 1)\n",
                           "csrc/b.cu": ""})  # fmt: skip
    commit(repo, {"requirements/rocm.txt": "torch\n"}, "second")
    lacking = git(repo, "rev-parse", f"{sha}:cmake/a.cmake")
    (repo / ".git" / "objects" / lacking[:2] / lacking[2:]).unlink()  # loose, never packed
    found = buildfiles.listing(repo / ".git", sha, ("CMakeLists.txt", "cmake/**"))
    assert found.files == {"CMakeLists.txt": git(repo, "rev-parse", f"{sha}:CMakeLists.txt")}
    assert found.missing == {"cmake/a.cmake": lacking}
    folder = git(repo, "rev-parse", f"{sha}:cmake")
    (repo / ".git" / "objects" / folder[:2] / folder[2:]).unlink()
    found = buildfiles.listing(repo / ".git", sha, ("CMakeLists.txt", "cmake/**"))
    assert found.missing == {"cmake": folder}
    gone = buildfiles.listing(repo / ".git", "0" * 40, ("CMakeLists.txt",))
    assert gone.missing == {".": "0" * 40}
