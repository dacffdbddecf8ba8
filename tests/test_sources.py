"""Sources: fetched at their pinned commit into a content-addressed cache, or a clear line."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import PINS, edit_toml
from servers import (
    GitHttpServer,
    LoopbackServer,
    closed_url,
    commit,
    failing_upstream,
    git,
    make_repo,
    many_files,
    serve_bare,
)

from rocmgraph.common.errors import FetchError
from rocmgraph.config import pins
from rocmgraph.config.pins import GitSource
from rocmgraph.fetch.sources import Mirrors, SourceCache
from rocmgraph.trees import patches

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


def test_a_folder_is_given_alone_only_when_its_tree_id_is_the_pinned_one(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    repo, first = upstream
    tree = git(repo, "rev-parse", f"{first}:csrc")
    cache = SourceCache(tmp_path / "cache")
    pinned = source(first, f"file://{repo}", subtree="csrc", tree=tree)
    assert cache.subtree_id("kernel", pinned) == tree
    folder = cache.subtree("kernel", pinned)
    assert sorted(path.name for path in folder.iterdir()) == ["a.cpp"]
    wrong = source(first, f"file://{repo}", subtree="csrc", tree="c" * 40)
    with pytest.raises(FetchError) as caught:
        cache.subtree("kernel", wrong)
    assert str(caught.value) == (
        f"source kernel: csrc/ at {first[:12]} is tree {tree}, not the pinned {'c' * 40}; "
        f'if the commit is right, set [sources.kernel].tree = "{tree}"'
    )
    gone = source(first, f"file://{repo}", subtree="kernels", tree=tree)
    with pytest.raises(FetchError) as caught:
        cache.subtree("kernel", gone)
    assert str(caught.value) == (
        f"source kernel: {first[:12]} has no folder kernels/; fix [sources.kernel].subtree"
    )


def test_a_submodule_in_the_folder_that_gitmodules_does_not_declare_is_refused(
    tmp_path: Path, upstream: tuple[Path, str]
) -> None:
    # Checked out empty, and a later .gitmodules (outside the folder's tree id) would fill
    # it under the same key: refused, not built.
    repo, _ = upstream
    inner = tmp_path / "inner"
    make_repo(inner, {"k.cu": "// k\n"})
    link = git(inner, "rev-parse", "HEAD")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{link},csrc/third")
    head = commit(repo, {}, "a gitlink with no .gitmodules entry")
    tree = git(repo, "rev-parse", f"{head}:csrc")
    cache = SourceCache(tmp_path / "cache")
    with pytest.raises(FetchError) as caught:
        cache.subtree("kernel", source(head, f"file://{repo}", subtree="csrc", tree=tree))
    assert str(caught.value) == (
        "source kernel: csrc/third in csrc/ is a submodule .gitmodules does not declare, so "
        "it would be checked out empty; pin a commit whose .gitmodules declares it, or remove "
        "[sources.kernel].subtree to build the whole tree"
    )


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


@contextmanager
def damaged_copy(tmp_path: Path, repo: Path, transport: str) -> Iterator[tuple[str, str]]:
    """A bare copy of ``repo`` whose blob of setup.py at HEAD is deleted, served over
    ``transport``: yields its URL and the deleted blob's id."""
    www = tmp_path / "www"
    www.mkdir()
    bare = serve_bare(repo, www, "vllm.git")
    blob = git(bare, "rev-parse", "HEAD:setup.py")
    (bare / "objects" / blob[:2] / blob[2:]).unlink()  # a clone keeps loose objects
    if transport == "file":
        yield f"file://{bare}", blob
    elif transport == "dumb":
        with LoopbackServer(www) as server:
            yield f"{server.url}/vllm.git", blob
    else:
        with GitHttpServer(www) as smart:
            yield f"{smart.url}/vllm.git", blob


@pytest.mark.parametrize("transport", ["file", "dumb", "smart"])
def test_a_copy_with_a_missing_object_is_named_damaged_not_the_network(
    tmp_path: Path, upstream: tuple[Path, str], transport: str
) -> None:
    # Fetching again from the same copy fails the same way: the network is not the fault.
    repo, _ = upstream
    head = git(repo, "rev-parse", "HEAD")
    with (
        damaged_copy(tmp_path, repo, transport) as (url, blob),
        pytest.raises(FetchError) as caught,
    ):
        SourceCache(tmp_path / "cache").tree("vllm", source(head, url))
    assert str(caught.value) == (
        f"source vllm: the repository {url} is damaged: git cannot read object {blob}; fetch "
        "that copy again, or point [sources.vllm].mirror at a whole copy"
    )
    assert not (tmp_path / "cache" / "git").exists()


def test_fetch_over_http_from_a_loopback_server(tmp_path: Path, upstream: tuple[Path, str]) -> None:
    repo, first = upstream
    (tmp_path / "www").mkdir()
    serve_bare(repo, tmp_path / "www", "vllm.git")
    with LoopbackServer(tmp_path / "www") as server:
        tree = SourceCache(tmp_path / "cache").tree("vllm", source(first, f"{server.url}/vllm.git"))
    assert (tree / "csrc" / "a.cpp").read_text() == "int a;\n"


def add_submodule(top: Path, path: str, repo: Path, declared: str = "") -> None:
    """``repo`` as the submodule ``path`` of ``top``, its URL in .gitmodules ``declared``."""
    git(top, "submodule", "add", "--quiet", f"file://{repo}", path)
    if declared:
        git(top, "config", "-f", ".gitmodules", f"submodule.{path}.url", declared)
        git(top, "add", ".gitmodules")


def with_submodule(tmp_path: Path, url: str) -> tuple[Path, str]:
    sub = tmp_path / "sub"
    make_repo(sub, {"kernel.h": "// pinned by the superproject\n"})
    top = tmp_path / "top"
    make_repo(top, {"setup.py": "# top\n"})
    add_submodule(top, "third_party/sub", sub, url)
    return top, commit(top, {}, "add submodule")


@pytest.mark.parametrize(
    ("damage", "seen"),
    [
        (lambda tree: (tree / "setup.py").write_text("# edited\n"), "setup.py"),
        (lambda tree: (tree / "csrc" / "a.cpp").unlink(), "csrc/a.cpp"),
        (lambda tree: (tree / "evil.py").write_text("x\n"), "evil.py"),
    ],
    ids=["edited", "deleted", "added"],
)
def test_a_cached_tree_that_differs_from_its_commit_is_fetched_again(
    tmp_path: Path,
    upstream: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[Path], object],
    seen: str,
) -> None:
    repo, first = upstream
    cache = SourceCache(tmp_path / "cache")
    tree = cache.tree("vllm", source(first, f"file://{repo}"))
    damage(tree)
    assert cache.tree("vllm", source(first, f"file://{repo}")) == tree
    assert (tree / "setup.py").read_text() == "# v1\n"
    assert (tree / "csrc" / "a.cpp").is_file()
    assert not (tree / "evil.py").exists()
    assert capsys.readouterr().err == (
        f"warning: the cached tree of source vllm at {first[:12]} ({tree}) differs from its "
        f"commit ({seen}); fetching it again\n"
    )


def test_a_changed_submodule_is_seen_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top, pinned = with_submodule(tmp_path, f"file://{tmp_path / 'sub'}")
    cache = SourceCache(tmp_path / "cache")
    tree = cache.tree("sglang", source(pinned, f"file://{top}"))
    (tree / "third_party" / "sub" / "kernel.h").write_text("// edited\n")
    assert cache.tree("sglang", source(pinned, f"file://{top}")) == tree
    assert "third_party/sub" in capsys.readouterr().err
    assert (tree / "third_party" / "sub" / "kernel.h").read_text() != "// edited\n"


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
        f"source sglang: cannot fetch submodule third_party/sub from file://{tmp_path / 'sub'} "
        "(no repository there); check the network, or set a mirror ([mirrors] or "
        "$VERL_GRAPH_MIRRORS)"
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
    assert str(caught.value) == (
        f"[sources.x].tag v9 does not exist in file://{repo}; fix [sources.x].tag, or pin a "
        "full id in [sources.x].commit"
    )


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


# ---------------------------------------------------------------- mirrors on path boundaries


@pytest.mark.parametrize(
    ("url", "rewritten"),
    [
        ("https://github.com/org/repo", "file:///m/repo"),
        ("https://github.com/org/repo/sub.git", "file:///m/repo/sub.git"),
        ("https://github.com/org/repo-recipe", "file:///m/all/repo-recipe"),
        ("https://github.com/org/repo.git", "file:///m/all/repo.git"),
        ("https://github.com/org/reposition", "file:///m/all/reposition"),
        ("https://github.com/orgs", "https://github.com/orgs"),
        ("https://github.com/other/repo", "https://github.com/other/repo"),
        ("git@github.com:org/repo", "file:///m/ssh/org/repo"),
        ("git@github.com:organ", "file:///m/ssh/organ"),
    ],
)
def test_a_mirror_prefix_matches_on_a_path_boundary(url: str, rewritten: str) -> None:
    mirrors = Mirrors(
        (
            ("https://github.com/org/repo", "file:///m/repo"),
            ("https://github.com/org/", "file:///m/all/"),
            ("git@github.com:", "file:///m/ssh/"),
        )
    )
    assert mirrors.apply(url) == rewritten


def test_a_submodule_url_that_shares_a_prefix_is_not_rewritten_by_it(tmp_path: Path) -> None:
    """git's insteadOf would send .../org/repo-recipe to the mirror of .../org/repo."""
    recipe = tmp_path / "all" / "repo-recipe"
    make_repo(recipe, {"recipe.txt": "the real submodule\n"})
    top = tmp_path / "repo"
    make_repo(top, {"setup.py": "# top\n"})
    add_submodule(top, "recipe", recipe, "https://example.invalid/org/repo-recipe")
    pinned = commit(top, {}, "add the recipe")
    mirrors = Mirrors(
        (
            ("https://example.invalid/org/repo", f"file://{top}"),
            ("https://example.invalid/org/", f"file://{tmp_path}/all/"),
        )
    )
    repo = GitSource(repo="https://example.invalid/org/repo", branch="main", commit=pinned)
    tree = SourceCache(tmp_path / "cache", mirrors).tree("repo", repo)
    assert (tree / "recipe" / "recipe.txt").read_text() == "the real submodule\n"


def test_a_relative_submodule_url_is_read_against_where_the_superproject_came_from(
    tmp_path: Path,
) -> None:
    make_repo(tmp_path / "mirror" / "sub", {"kernel.h": "// sibling on the mirror\n"})
    top = tmp_path / "mirror" / "top"
    make_repo(top, {"setup.py": "# top\n"})
    add_submodule(top, "third/sub", tmp_path / "mirror" / "sub", "../sub")
    pinned = commit(top, {}, "relative submodule")
    tree = SourceCache(tmp_path / "cache").tree("top", source(pinned, f"file://{top}"))
    assert (tree / "third" / "sub" / "kernel.h").read_text() == "// sibling on the mirror\n"


# ---------------------------------------------------------------- files: what a check needs


def nested(tmp_path: Path, unreachable: str) -> tuple[Path, str]:
    """top -> kernels (submodule) -> inner (submodule), and a submodule nobody can fetch."""
    inner = tmp_path / "inner"
    make_repo(inner, {"inner.h": "// inner\n"})
    kernels = tmp_path / "kernels"
    make_repo(kernels, {"setup_rocm.py": "# kernels\n"})
    add_submodule(kernels, "third/inner", inner)
    commit(kernels, {}, "inner")
    top = tmp_path / "top"
    make_repo(top, {"python/setup.py": "# top\n"})
    add_submodule(top, "sgl-kernel", kernels)
    add_submodule(top, "3rdparty/gone", inner, unreachable)
    return top, commit(top, {}, "submodules")


def test_files_fetch_no_submodule_that_no_path_is_inside(tmp_path: Path) -> None:
    closed = closed_url()
    top, pinned = nested(tmp_path, f"{closed}/gone.git")
    cache = SourceCache(tmp_path / "cache")
    dest = tmp_path / "dest"
    present = cache.files("sglang", source(pinned, f"file://{top}"),
                          ["python/setup.py", "python", "sgl-kernel", "3rdparty/gone", "no/such"],
                          dest)  # fmt: skip
    assert present == {"python/setup.py", "python", "sgl-kernel", "3rdparty/gone"}
    assert listing(dest) == ["python/setup.py"]
    assert sorted(p.name for p in (tmp_path / "cache" / "objects").iterdir()) == [pinned]
    assert not (tmp_path / "cache" / "git").exists()  # no complete tree was made


def test_files_fetch_only_the_submodules_that_hold_a_path(tmp_path: Path) -> None:
    closed = closed_url()
    top, pinned = nested(tmp_path, f"{closed}/gone.git")
    dest = tmp_path / "dest"
    present = SourceCache(tmp_path / "cache").files(
        "sglang",
        source(pinned, f"file://{top}"),
        ["sgl-kernel/setup_rocm.py", "sgl-kernel/third/inner/inner.h", "sgl-kernel/missing.h"],
        dest,
    )
    assert present == {"sgl-kernel/setup_rocm.py", "sgl-kernel/third/inner/inner.h"}
    assert listing(dest) == ["sgl-kernel/setup_rocm.py", "sgl-kernel/third/inner/inner.h"]
    assert len(list((tmp_path / "cache" / "objects").iterdir())) == 3  # top, kernels, inner


def test_a_submodule_that_cannot_be_fetched_is_named_with_the_url_tried(tmp_path: Path) -> None:
    closed = closed_url()
    top, pinned = nested(tmp_path, f"{closed}/gone.git")
    cache = SourceCache(tmp_path / "cache")
    with pytest.raises(FetchError) as caught:
        cache.files("sglang", source(pinned, f"file://{top}"), ["3rdparty/gone/inner.h"],
                    tmp_path / "dest")  # fmt: skip
    assert str(caught.value) == (
        f"source sglang: cannot fetch submodule 3rdparty/gone from {closed}/gone.git "
        "(connection refused); check the network, or set a mirror ([mirrors] or "
        "$VERL_GRAPH_MIRRORS)"
    )
    shutil.rmtree(tmp_path / "inner")  # a nested one, gone upstream
    with pytest.raises(FetchError) as caught:
        cache.files("sglang", source(pinned, f"file://{top}"), ["sgl-kernel/third/inner/x.h"],
                    tmp_path / "dest")  # fmt: skip
    assert str(caught.value) == (
        f"source sglang: cannot fetch submodule sgl-kernel/third/inner from "
        f"file://{tmp_path / 'inner'} (no repository there); check the network, or set a mirror "
        "([mirrors] or $VERL_GRAPH_MIRRORS)"
    )
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []


def test_files_come_from_the_complete_tree_when_it_is_cached(tmp_path: Path) -> None:
    top, pinned = with_submodule(tmp_path, f"file://{tmp_path / 'sub'}")
    cache = SourceCache(tmp_path / "cache")
    pin = source(pinned, f"file://{top}")
    cache.tree("sglang", pin)
    shutil.rmtree(top)  # offline from here on
    present = cache.files("sglang", pin, ["third_party/sub/kernel.h"], tmp_path / "dest")
    assert present == {"third_party/sub/kernel.h"}
    assert not (tmp_path / "cache" / "objects").exists()


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ---------------------------------------------------------------- failures leave nothing


@pytest.mark.parametrize("kind", ["cut", "stalled", "dumb"])
@pytest.mark.parametrize("how", ["tree", "files", "full_id"])
def test_a_source_fetch_cut_half_way_leaves_nothing(tmp_path: Path, kind: str, how: str) -> None:
    repo = tmp_path / "up"
    first = make_repo(repo, many_files(150))
    commit(repo, {"NEWS": "later\n"}, "later")
    cache = SourceCache(tmp_path / "cache", timeout=3)
    fetches: dict[str, Callable[[str], object]] = {
        "tree": lambda url: cache.tree("up", source(first, url)),
        "files": lambda url: cache.files("up", source(first, url), ["NEWS"], tmp_path / "dest"),
        "full_id": lambda url: cache.full_id("up", source(first[:9], url)),
    }
    failing = failing_upstream(kind, tmp_path / "www", repo)
    with failing as (url, reason), pytest.raises(FetchError) as caught:
        fetches[how](url)
    assert str(caught.value) == (
        f"source up: cannot fetch {url} ({reason}); check the network, or set a mirror "
        "([sources.up].mirror, [mirrors], or $VERL_GRAPH_MIRRORS)"
    )
    assert listing(tmp_path / "cache") == []


def test_the_user_s_git_configuration_does_not_change_a_tree(
    tmp_path: Path, upstream: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line endings converted, attributes and hooks of one's own, whitespace fixed in
    patches: all would give one commit two trees (and one key two images)."""
    repo, first = upstream
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    hook = home / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\necho hooked > hooked.txt\n")
    hook.chmod(0o755)
    (home / "attributes").write_text("* text eol=crlf\n")
    (home / ".gitconfig").write_text(
        "[core]\n\tautocrlf = true\n\teol = crlf\n"
        f"\tattributesFile = {home / 'attributes'}\n\thooksPath = {home / 'hooks'}\n"
        "[apply]\n\twhitespace = fix\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    tree = SourceCache(tmp_path / "cache").tree("vllm", source(first, f"file://{repo}"))
    assert (tree / "setup.py").read_bytes() == b"# v1\n"
    assert not (tree / "hooked.txt").exists()
    patch = tmp_path / "0001.patch"
    patch.write_text("--- a/csrc/a.cpp\n+++ b/csrc/a.cpp\n@@ -1 +1,2 @@\n int a;\n+int b;   \n")
    work = tmp_path / "work"
    shutil.copytree(tree, work, ignore=shutil.ignore_patterns(".git"))
    patches._git_apply(work, patch)
    assert (work / "csrc/a.cpp").read_bytes() == b"int a;\nint b;   \n"
