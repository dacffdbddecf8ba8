"""The build context of a stage: everything its recipe uses, fetched and checked on the host.

Layout, relative to the context root:
- ``Dockerfile``: the rendered recipe;
- ``src/<name>/``: each source at its pinned commit (no .git), its patches
  applied; a conflicting patch stops here, before any compile starts. A stage that builds
  one folder of it (its ``subtree``) gets that folder alone, at its path, once its tree id
  is checked against the pin;
- ``wheels/``: the pinned wheels and a ``requirements.txt`` with their hashes;
- ``rocm.gpg.key``: the apt key, checked against its sha256;
- ``docker/...``: the recipe files the stage copies in, at their repository paths;
- ``build.json``: the provenance of the build, for the manifest stage;
- ``closure/<stage>/python/``, ``closure/<stage>/apt/``: a sealed stage's closure (what its
  build fetched, rocmgraph/graph/closure.py), each file from the store, checked by sha256, with
  the hashes pip and apt check each file against again as they install it.

Its files are dated by their content (fsutil.content_mtime; a source's keep its cache's, which
is never written): BuildKit sends a file of a context folder it has read before only if its
size or mtime changed, so bytes changed with both kept would reach the build no more than
bytes put back would.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from rocmgraph.building import provenance, sbomfacts
from rocmgraph.common import disk
from rocmgraph.common.engine import Engine
from rocmgraph.common.errors import FetchError, GraphToolError, LockError
from rocmgraph.common.fsutil import link_tree, settle
from rocmgraph.common.layout import ROOT
from rocmgraph.config.pins import KeyedRepo, Pins
from rocmgraph.fetch.objects import Checkout
from rocmgraph.fetch.store import Store
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import keys
from rocmgraph.graph.closure import KINDS, LINKS, SUMS
from rocmgraph.graph.dag import Fetch
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.recipe import render
from rocmgraph.trees import patches, preflight
from wheelfiles import index


def prepare(run: Run, engine: Engine, outside: Outside, name: str, dest: Path) -> Path:
    """Write stage ``name``'s context into ``dest`` (made empty first); return ``dest``.
    Its inputs are fetched through ``outside``; ``engine`` says what the parents are."""
    recipe = render(run.graph[name], run.pins, run.archs)
    return prepare_whole(run, outside, (name,), dest, recipe=recipe)


def prepare_whole(
    run: Run, outside: Outside, names: Sequence[str], dest: Path, *, recipe: str
) -> Path:
    """``prepare_many``, for a build that needs every one of ``names``: the first stage
    that cannot be prepared is the error. Return ``dest``."""
    for error in prepare_many(run, outside, names, dest, recipe=recipe).values():
        raise error
    return dest


def prepare_many(
    run: Run, outside: Outside, names: Sequence[str], dest: Path, *, recipe: str
) -> dict[str, GraphToolError]:
    """One context at ``dest`` for the stages ``names`` (a solve of several; made empty
    first) with the Dockerfile ``recipe``. What two stages both use is written once. A stage
    whose files cannot be had (a fetch, a patch that no longer applies) is returned with
    why: the others are filled all the same, and build without it."""
    shutil.rmtree(dest, ignore_errors=True)
    with disk.writing(dest):
        dest.mkdir(parents=True)
        (dest / "Dockerfile").write_text(recipe, encoding="utf-8")
    failed: dict[str, GraphToolError] = {}
    for name in names:
        try:
            with disk.writing(dest):
                _fill(run, outside, name, dest)
        except GraphToolError as exc:
            failed[name] = exc
    settle(dest)  # COPY keeps modes and BuildKit trusts mtimes: both from what a file is
    return failed


def _fill(run: Run, outside: Outside, name: str, dest: Path) -> None:
    """Stage ``name``'s files, fetched through ``outside``, into the context ``dest``."""
    stage, pins = run.graph[name], run.pins
    for relative in keys.recipe_files(stage, pins):
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, dest / relative)
    provided = name in pins.base.provides  # the base carries it: nothing to fetch or build
    for source_name in () if provided else stage.sources:
        _source(run, outside, source_name, dest / "src" / source_name)
    if not provided:
        for source_name in stage.sources:
            _sealed(name, source_name, run.pins, dest / "src" / source_name)
    if not provided:
        if Fetch.WHEELS in stage.fetches:
            _wheels(run.pins, outside.store, dest / "wheels")
        if Fetch.ROCM_KEY in stage.fetches:
            _rocm_key(run.pins, outside.store, dest / "rocm.gpg.key")
        if Fetch.BASE_KEYS in stage.fetches and pins.base.repos:
            (dest / "keys").mkdir()
            for repo_name, repo in pins.base.repos.items():
                _repo_key(outside.store, repo_name, repo, dest / "keys" / f"{repo_name}.asc")
    _closure(run, outside.store, name, dest / "closure" / name)
    if Fetch.PROVENANCE in stage.fetches:
        record = provenance.build_json(run, name)
        (dest / "build.json").write_text(record, encoding="utf-8")
    if Fetch.SBOM in stage.fetches:
        sbomfacts.write(run, dest)


def _source(run: Run, outside: Outside, name: str, tree: Path) -> None:
    """Source ``name`` at its commit, patched, into ``tree``; only its folder (``subtree``),
    at its path, where it pins one."""
    source = run.pins.sources[name]
    if source.version_env and not source.version:
        raise LockError(
            f"source {name}: [sources.{name}].version is empty, but its build reads its "
            f"version from {', '.join(source.version_env)} (the tree has no .git); pin the "
            "version upstream's tag at the commit gives"
        )
    if tree.exists():
        return  # another stage of the solve took it, patched
    cache = outside.sources(run.pins)
    if source.subtree:  # its tree id checked against the pin: the key covers that id
        if not source.tree:
            raise LockError(
                f"source {name}: [sources.{name}].tree is empty, the id of {source.subtree}/ "
                "that its key covers; run `doit lock` to record it"
            )
        link_tree(cache.subtree(name, source), tree / source.subtree)
    else:
        link_tree(cache.tree(name, source), tree)
    patches.apply(tree, source.patches, name)


def _sealed(stage: str, name: str, pins: Pins, tree: Path) -> None:
    """A fetch a build makes by itself that no pin accounts for fails here, in one line: with
    the network off it would fail at its CMake configure 200 lines into the log, with it on
    it would take whatever a tag names today (and a closure lock would not record it)."""
    source = pins.sources[name]
    read = preflight.tree_reader(Checkout(tree), tree, source.overlay)
    for folder in source.subdirs:
        for fetch in preflight.build_fetches(read, folder, preflight.rocm_build(pins, source)):
            row = preflight.fetch_rows(name, source, pins, [fetch])[0]
            if row.verdict is preflight.Verdict.MISMATCH:
                raise FetchError(
                    f"stage {stage}: its build fetches {row.upstream} ({row.where}); {row.pins}"
                )


def _closure(run: Run, store: Store, name: str, dest: Path) -> None:
    """A sealed stage's closure, each file from the store (checked by its sha256)."""
    sealed = run.sealed(name)
    if sealed is None:
        return
    for kind in KINDS:
        (dest / kind).mkdir(parents=True)
    for item in sealed.files:
        what = f"stage {name}: {item.name} {item.version} (its closure)"
        store.provide(item.url, item.file, item.sha256, what, dest / item.kind / item.file)
    (dest / LINKS).write_text(sealed.links_page(), encoding="utf-8")
    (dest / SUMS).write_text(sealed.sums(), encoding="utf-8")


def _wheels(pins: Pins, store: Store, dest: Path) -> None:
    dest.mkdir()
    lines = []
    for name, wheel in pins.wheels.items():
        if not wheel.file or not wheel.sha256:
            raise FetchError(
                f"stage wheels: [wheels.{name}] has no exact file and sha256 yet; run `doit lock`"
            )
        url = index.file_url(wheel.index, wheel.file)
        store.provide(url, wheel.file, wheel.sha256, f"wheel {name}", dest / wheel.file)
        lines.append(f"/tmp/wheels/{wheel.file} --hash=sha256:{wheel.sha256}\n")
    (dest / "requirements.txt").write_text("".join(lines), encoding="utf-8")


def _rocm_key(pins: Pins, store: Store, dest: Path) -> None:
    rocm = pins.rocm
    if not rocm.key_sha256:
        raise FetchError("stage rocm: [rocm].key_sha256 is not pinned yet; run `doit lock`")
    store.provide(rocm.key_url, "rocm.gpg.key", rocm.key_sha256, "ROCm key", dest)


def _repo_key(store: Store, name: str, repo: KeyedRepo, dest: Path) -> None:
    if not repo.key_sha256:
        raise FetchError(
            f"stage base: [base.repos.{name}].key_sha256 is not pinned yet; run `doit lock`"
        )
    store.provide(repo.key_url, f"{name}.asc", repo.key_sha256, f"{name} apt key", dest)
