"""Upstream history: fetched whole or not at all, reverts read, repositories told apart, moves."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from servers import GitHttpServer, commit, failing_upstream, git, make_repo, many_files

from rocmgraph.common.errors import FetchError
from rocmgraph.config.pins import GitSource
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.fetch.upstream import Commit, History, github_repo, merged_pr, moved_to


def listing(root: Path) -> dict[str, int]:
    """Every file below ``root`` with its size: what a failed fetch must leave unchanged."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _source(url: str) -> GitSource:
    return GitSource(repo="https://github.com/o/up", mirror=url, branch="main", commit="")


def history(tmp_path: Path, url: str, timeout: float = 60) -> History:
    return History(SourceCache(tmp_path / "cache"), "up", _source(url), timeout=timeout)


KINDS = ["cut", "stalled", "dumb"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_first_history_fetch_that_fails_half_way_leaves_nothing(
    tmp_path: Path, kind: str
) -> None:
    repo = tmp_path / "up"
    make_repo(repo, many_files(150))  # > 100 objects: git keeps the fetch as a pack
    with failing_upstream(kind, tmp_path / "www", repo) as (url, reason):
        upstream = history(tmp_path, url, timeout=3)
        with pytest.raises(FetchError) as caught:
            upstream.fetch()
    assert str(caught.value) == f"source up: cannot fetch {url} ({reason})"
    # no tmp_pack_*, no half-made repository: only the (empty) lock fetches take turns by
    assert listing(tmp_path / "cache") == {f"history/{upstream.repo.name}.turn": 0}
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["history", "tmp"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_later_history_fetch_that_fails_leaves_the_repository_as_it_was(
    tmp_path: Path, kind: str
) -> None:
    repo = tmp_path / "up"
    first = make_repo(repo, many_files(150))
    www = tmp_path / "www-ok"
    www.mkdir()
    git(www, "clone", "--quiet", "--bare", str(repo), str(www / "up.git"))
    with GitHttpServer(www) as good:
        history(tmp_path, f"{good.url}/up.git").fetch()
    before = listing(tmp_path / "cache")
    newer = commit(repo, many_files(150), "more work")
    with failing_upstream(kind, tmp_path / "www-failing", repo) as (url, reason):
        moved = history(tmp_path, url, timeout=3)
        with pytest.raises(FetchError) as caught:
            moved.fetch()
    assert str(caught.value) == f"source up: cannot fetch {url} ({reason})"
    assert listing(tmp_path / "cache") == before
    assert moved.head() == first
    git(www / "up.git", "fetch", "--quiet", str(repo), "+refs/heads/*:refs/heads/*")
    with GitHttpServer(www) as good:
        moved = history(tmp_path, f"{good.url}/up.git")
        moved.fetch()
    assert moved.head() == newer
    assert moved.between(first, newer) == [Commit(newer, moved.commit(newer).date, "more work")]


def test_a_history_from_a_copy_with_a_missing_object_is_named_damaged(tmp_path: Path) -> None:
    repo = tmp_path / "up"
    make_repo(repo, {"setup.py": "# v1\n"})
    www = tmp_path / "www"
    www.mkdir()
    git(www, "clone", "--quiet", "--bare", str(repo), str(www / "up.git"))
    blob = git(www / "up.git", "rev-parse", "HEAD:setup.py")
    (www / "up.git" / "objects" / blob[:2] / blob[2:]).unlink()
    with GitHttpServer(www) as smart:
        url = f"{smart.url}/up.git"
        with pytest.raises(FetchError) as caught:
            history(tmp_path, url).fetch()
    assert str(caught.value) == (
        f"source up: the repository {url} is damaged: git cannot read object {blob}; fetch "
        "that copy again, or point [sources.up].mirror at a whole copy"
    )


def test_a_later_fetch_brings_only_what_is_new_and_prunes_what_upstream_dropped(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "up"
    make_repo(repo, many_files(150))
    git(repo, "tag", "v1")
    www = tmp_path / "www"
    www.mkdir()
    git(www, "clone", "--quiet", "--bare", str(repo), str(www / "up.git"))
    with GitHttpServer(www) as server:
        history(tmp_path, f"{server.url}/up.git").fetch()
        newer = commit(repo, {"NEWS": "one more line\n"}, "news")
        git(www / "up.git", "fetch", "--quiet", str(repo), "+refs/heads/*:refs/heads/*")
        git(www / "up.git", "tag", "--delete", "v1")
        moved = history(tmp_path, f"{server.url}/up.git")
        moved.fetch()
    assert moved.head() == newer
    assert not moved.is_tag("v1")
    counts = dict(line.split(": ") for line in git(moved.repo, "count-objects", "-v").splitlines())
    # 150 blobs, two trees and a commit, then NEWS's blob, tree and commit: each object once.
    assert int(counts["in-pack"]) + int(counts["count"]) == 153 + 3


# ---------------------------------------------------------------- merged pull requests


def c(subject: str, ident: str = "") -> Commit:
    return Commit(ident or subject, "2026-08-01", subject)


MERGE = c("[ROCm] Zero freshly mapped memory (#44972)")
REVERT = c('Revert "[ROCm] Zero freshly mapped memory (#44972)"')
SQUASHED_REVERT = c('Revert "[ROCm] Zero freshly mapped memory (#44972)" (#45001)')
REAPPLY = c('Reapply "[ROCm] Zero freshly mapped memory (#44972)" (#45100)')
REVERT_OF_REVERT = c('Revert "Revert "[ROCm] Zero freshly mapped memory (#44972)"" (#45200)')


@pytest.mark.parametrize(
    ("newest_first", "standing"),
    [
        ([MERGE], MERGE),
        ([c("Unrelated (#1)"), MERGE, c("Other (#44973)")], MERGE),
        ([REVERT, MERGE], None),
        ([SQUASHED_REVERT, MERGE], None),
        ([REAPPLY, SQUASHED_REVERT, MERGE], REAPPLY),
        ([REVERT_OF_REVERT, REVERT, MERGE], REVERT_OF_REVERT),
        ([c('Revert "Other fix (#44973)"'), MERGE], MERGE),
        ([MERGE, REVERT], MERGE),  # reverted before it was merged (again): it stands
        ([c("Mentions #44972 in passing")], None),
        ([c("Fix (#44972) of something else, and more")], None),
        ([], None),
    ],
)
def test_a_merge_stands_unless_a_later_revert_takes_it_out(
    newest_first: list[Commit], standing: Commit | None
) -> None:
    assert merged_pr(newest_first, 44972) == standing


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://github.com/vllm-project/vllm", "vllm-project/vllm"),
        ("https://github.com/VLLM-Project/vLLM.git", "vllm-project/vllm"),
        ("https://github.com/vllm-project/vllm/", "vllm-project/vllm"),
        ("https://GitHub.com/ROCm/flash-attention", "rocm/flash-attention"),
        ("https://github.com/rocm/vllm", "rocm/vllm"),
        ("https://gitlab.com/vllm-project/vllm", None),
        ("https://github.com/vllm-project", None),
        ("https://github.com/vllm-project/vllm/pull/44972", None),
        ("http://127.0.0.1:8080/vllm-project/vllm", None),
    ],
)
def test_a_repository_is_known_by_its_owner_and_name(url: str, named: str | None) -> None:
    assert github_repo(url) == named


# ---------------------------------------------------------------- moves


def test_rename_detection_finds_a_moved_file_and_a_moved_folder(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    kernel = {f"sgl-kernel/csrc/k{n}.cu": f"// kernel {n}\n" * 40 for n in range(5)}
    old = make_repo(repo, {**kernel, "sgl-kernel/setup_rocm.py": "# rocm build\n" * 30,
                           "python/setup.py": "# sglang\n"})  # fmt: skip
    (repo / "python/sglang/kernels").mkdir(parents=True)
    git(repo, "mv", "sgl-kernel", "python/sglang/kernels/aot")
    git(repo, "mv", "python/setup.py", "python/build.py")
    new = commit(repo, {}, "Move sgl-kernel into the package")
    upstream = history(tmp_path, f"file://{repo}")
    upstream.fetch()
    renames = upstream.renames(old, new)
    assert renames["python/setup.py"] == "python/build.py"
    before = upstream.files(old, "sgl-kernel")
    assert len(before) == 6
    assert moved_to("sgl-kernel", renames, before) == "python/sglang/kernels/aot/"
    assert moved_to("python/setup.py", renames, []) == "python/build.py"
    assert moved_to("csrc/gone.cpp", renames, []) is None


def test_a_folder_moved_only_in_part_is_not_called_moved() -> None:
    files = [f"kernel/{n}.cu" for n in range(4)]
    half = {"kernel/0.cu": "aot/0.cu", "kernel/1.cu": "aot/1.cu"}
    assert moved_to("kernel", half, files) is None
    most = {**half, "kernel/2.cu": "aot/2.cu", "kernel/3.cu": "elsewhere/three.cu"}
    assert moved_to("kernel", most, files) == "aot/"
    scattered = {"kernel/0.cu": "a/0.cu", "kernel/1.cu": "b/1.cu", "kernel/2.cu": "c/2.cu"}
    assert moved_to("kernel", scattered, files) is None


def _fetch_once(cache: str, url: str) -> str:
    """One process's fetch of the shared history (run in a pool: a process each)."""
    try:
        History(SourceCache(Path(cache)), "up", _source(url), timeout=60).fetch()
    except Exception as exc:  # the test shows whatever went wrong
        return f"{type(exc).__name__}: {exc}"
    return "fetched"


def test_runs_that_fetch_one_history_at_once_take_turns(tmp_path: Path) -> None:
    repo = tmp_path / "up"
    make_repo(repo, {"a": "1\n"})
    url = str(repo)  # git fetches from a path as from a URL
    history(tmp_path, url).fetch()  # the history exists: later fetches update it
    for turn in range(3):  # each turn moves 30 branches that every fetch updates
        head = commit(repo, {"a": f"{turn}\n"}, f"turn {turn}")
        for i in range(30):
            git(repo, "branch", "-f", f"b{i}", head)
        with multiprocessing.get_context("spawn").Pool(4) as pool:
            results = pool.starmap(_fetch_once, [(str(tmp_path / "cache"), url)] * 4)
        assert results == ["fetched"] * 4
    assert history(tmp_path, url).resolve("refs/heads/b29") == head
