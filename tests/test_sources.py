"""Sources: fetched at their pinned commit into a content-addressed cache, or a clear line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import PINS, edit_toml
from servers import LoopbackServer, commit, git, make_repo, serve_bare

from rocmgraph import pins
from rocmgraph.errors import FetchError
from rocmgraph.pins import GitSource
from rocmgraph.sources import Mirrors, SourceCache

UPSTREAM = "https://example.invalid/vllm.git"  # never contacted: a mirror stands in


def source(commit_id: str, mirror: str = "", **more: object) -> GitSource:
    return GitSource(repo=UPSTREAM, mirror=mirror, branch="main", commit=commit_id, **more)  # type: ignore[arg-type]


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "upstream"
    first = make_repo(repo, {"setup.py": "# v1\n", "csrc/a.cpp": "int a;\n"})
    commit(repo, {"setup.py": "# v2\n"}, "second")
    return repo, first


def test_a_pinned_commit_lands_in_the_cache_under_its_id(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    repo, first = upstream
    cache = SourceCache(tmp_path / "cache")
    tree = cache.tree("vllm", source(first, f"file://{repo}"))
    assert tree == tmp_path / "cache" / "git" / first
    assert (tree / "setup.py").read_text() == "# v1\n"
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []


def test_a_cached_commit_is_trusted_by_its_id_without_the_network(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    repo, first = upstream
    cache = SourceCache(tmp_path / "cache")
    cache.tree("vllm", source(first, f"file://{repo}"))
    shutil.rmtree(repo)  # upstream gone: a no-op must not notice
    assert (cache.tree("vllm", source(first, f"file://{repo}")) / "setup.py").is_file()


def test_a_commit_that_does_not_exist_upstream_is_one_line(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    repo, _ = upstream
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(FetchError) as caught:
        SourceCache(tmp_path / "cache").tree("vllm", source(missing, f"file://{repo}"))
    assert str(caught.value) == (
        f"source vllm: commit {missing} does not exist in file://{repo}; check "
        "[sources.vllm].commit, or run `doit bump:vllm` to move to upstream's newest"
    )
    assert not (tmp_path / "cache" / "git").exists()


def test_a_short_id_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as caught:
        SourceCache(tmp_path / "cache").tree("aiter", source("b5e03ed19"))
    assert str(caught.value) == (
        "source aiter: [sources.aiter].commit b5e03ed19 is a short id, which names no fixed "
        "commit; run `doit lock` to record the full 40-hex id"
    )


def test_an_empty_commit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as caught:
        SourceCache(tmp_path / "cache").tree("torch_memory_saver", source(""))
    assert str(caught.value) == (
        "source torch_memory_saver: [sources.torch_memory_saver].commit is empty "
        "(nothing pinned); run `doit lock` to pin one"
    )


def test_an_unreachable_upstream_is_one_line_that_names_the_url(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        closed = server.url  # a port that answers nothing once the server is gone
    commit_id = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(FetchError) as caught:
        SourceCache(tmp_path / "cache").tree("vllm", source(commit_id, f"{closed}/vllm.git"))
    assert str(caught.value) == (
        f"source vllm: cannot fetch {closed}/vllm.git (connection refused); check the network, "
        "or set a mirror ([sources.vllm].mirror, [mirrors], or $VERL_GRAPH_MIRRORS)"
    )
    assert not (tmp_path / "cache" / "git").exists()


def test_fetch_over_http_from_a_loopback_server(tmp_path: Path, upstream: tuple[Path, str]) -> None:
    repo, first = upstream
    (tmp_path / "www").mkdir()
    serve_bare(repo, tmp_path / "www", "vllm.git")
    with LoopbackServer(tmp_path / "www") as server:
        tree = SourceCache(tmp_path / "cache").tree("vllm", source(first, f"{server.url}/vllm.git"))
    assert (tree / "csrc" / "a.cpp").read_text() == "int a;\n"


def with_submodule(tmp_path: Path, url: str) -> tuple[Path, str]:
    sub = tmp_path / "sub"
    make_repo(sub, {"kernel.h": "// pinned by the superproject\n"})
    top = tmp_path / "top"
    make_repo(top, {"setup.py": "# top\n"})
    git(top, "submodule", "add", "--quiet", f"file://{sub}", "third_party/sub")
    git(top, "config", "-f", ".gitmodules", "submodule.third_party/sub.url", url)
    git(top, "add", ".gitmodules")
    return top, commit(top, {}, "add submodule")


def test_submodules_come_with_the_tree(tmp_path: Path) -> None:
    top, pinned = with_submodule(tmp_path, f"file://{tmp_path / 'sub'}")
    tree = SourceCache(tmp_path / "cache").tree("sglang", source(pinned, f"file://{top}"))
    assert (tree / "third_party" / "sub" / "kernel.h").is_file()


def test_mirrors_rewrite_submodule_urls_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, pinned = with_submodule(tmp_path, "https://example.invalid/sub")
    monkeypatch.setenv("VERL_GRAPH_MIRRORS", f"https://example.invalid/sub=file://{tmp_path}/sub")
    mirrors = Mirrors.from_pins(
        _pins_with_mirrors({"https://example.invalid/vllm.git": f"file://{top}"})
    )
    assert mirrors.apply(UPSTREAM) == f"file://{top}"
    tree = SourceCache(tmp_path / "cache", mirrors).tree("vllm", source(pinned))
    assert (tree / "third_party" / "sub" / "kernel.h").is_file()


def test_a_fetch_that_fails_half_way_never_lands_in_the_cache(tmp_path: Path) -> None:
    top, pinned = with_submodule(tmp_path, f"file://{tmp_path / 'sub'}")
    shutil.rmtree(tmp_path / "sub")  # the submodule's upstream is gone
    with pytest.raises(FetchError) as caught:
        SourceCache(tmp_path / "cache").tree("sglang", source(pinned, f"file://{top}"))
    assert str(caught.value) == (
        f"source sglang: submodules of {pinned} could not be fetched (no repository there); "
        "check the network or set a mirror"
    )
    assert not (tmp_path / "cache" / "git").exists()
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []


def test_full_id_expands_a_short_id_a_tag_or_the_branch_head(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    repo, first = upstream
    git(repo, "tag", "-a", "v1.0", "-m", "release", first)
    head = git(repo, "rev-parse", "HEAD")
    cache = SourceCache(tmp_path / "cache")
    mirror = f"file://{repo}"
    assert cache.full_id("x", source(first[:9], mirror)) == first  # not a tip: history fetched
    assert cache.full_id("x", source(head[:9], mirror)) == head
    assert cache.full_id("x", source("", mirror, tag="v1.0")) == first
    assert cache.full_id("x", source("", mirror)) == head
    with pytest.raises(FetchError) as caught:
        cache.full_id("x", source("", mirror, tag="v9"))
    assert str(caught.value) == f"[sources.x].tag v9 does not exist in file://{repo}"


def test_a_bad_mirror_variable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_GRAPH_MIRRORS", "https://github.com/")
    with pytest.raises(FetchError) as caught:
        Mirrors.from_pins(_pins_with_mirrors({}))
    assert str(caught.value) == (
        "VERL_GRAPH_MIRRORS: 'https://github.com/' is not prefix=replacement; "
        "write e.g. VERL_GRAPH_MIRRORS='https://github.com/=http://127.0.0.1:8080/'"
    )


def _pins_with_mirrors(mirrors: dict[str, str]) -> pins.Pins:
    text = PINS.read_text()
    for prefix, replacement in mirrors.items():
        text = edit_toml(text, ["mirrors", prefix], replacement)
    return pins.loads(text)
