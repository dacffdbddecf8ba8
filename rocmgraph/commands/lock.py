"""`doit lock`: fill in what can only be known online, and write it into the pins file.

It records exact wheel file names and their sha256, the full id behind a short commit
(or the commit a tag or branch names when none is pinned), the apt keys' sha256, the base
image's digest, and the version an unpinned Python or apt package would install today;
only what a build needs (Graph.asked): a stage the base image provides fetches nothing,
so its wheels, ROCm key and commits stay as pinned. The pins file is rewritten with
tomlkit (comments and layout kept), atomically. ``locked=1`` changes nothing: it fails
when anything a build needs is still unlocked, for CI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Set
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from rocmgraph.building import execute, records, turns
from rocmgraph.building.session import Session
from rocmgraph.common import failpoints
from rocmgraph.common.errors import Answer, FetchError, GraphToolError, LockError
from rocmgraph.config.pins import GitSource, PinPath, Pins, Value, Wheel, format_path
from rocmgraph.config.pinsedit import Change, write
from rocmgraph.fetch import apt, pypi
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.fetch.upstream import History
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import closure
from rocmgraph.graph import keys as keys_
from rocmgraph.graph.invocation import Run, check_locked
from rocmgraph.outside import registry
from rocmgraph.outside.http import Http
from wheelfiles import index


@dataclass(frozen=True)
class Unresolved:
    path: PinPath
    why: str
    failed: bool = True  # a lookup failed (network, not found); else a choice left to you

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.why}"


@dataclass
class Result:
    changes: list[Change] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)

    def attempt(self, path: PinPath, old: Value, compute: Callable[[], str]) -> str | None:
        """Record what ``compute`` finds for ``path``, or why it could not."""
        try:
            new = compute()
        except FetchError as exc:
            self.unresolved.append(Unresolved(path, str(exc)))
            return None
        if new != old:
            self.changes.append(Change(path, old, new))
        return new


def resolve(run: Run, outside: Outside) -> Result:
    """Everything the pins of ``run`` leave open, that a build needs and ``outside`` can
    answer (nothing a stage the base provides would fetch: run.graph.asked)."""
    pins, result = run.pins, Result()
    missing = run.graph.asked(pins)
    asked = {m.path for m in missing}
    sources = outside.sources(pins)
    for name, wheel in pins.wheels.items():
        if {("wheels", name, "file"), ("wheels", name, "sha256")} & asked:
            _wheel(run, outside, name, wheel, result)
    for name, source in pins.sources.items():
        _source(sources, name, source, asked, result)
    if ("rocm", "key_sha256") in asked:
        key_url = pins.rocm.key_url
        result.attempt(
            ("rocm", "key_sha256"),
            "",
            lambda: outside.store.fetch(key_url, "rocm.gpg.key", "", "ROCm key").sha256,
        )
    for name, repo in pins.base.repos.items():
        if ("base", "repos", name, "key_sha256") in asked:
            result.attempt(
                ("base", "repos", name, "key_sha256"),
                "",
                lambda name=name, url=repo.key_url: (
                    outside.store.fetch(  # type: ignore[misc]
                        url, f"{name}.asc", "", f"{name} apt key"
                    ).sha256
                ),
            )
    if ("base", "digest") in asked:
        image = pins.base.image
        result.attempt(("base", "digest"), "", lambda: registry.digest(image, outside.http))
    _packages(pins, outside.http, asked, result)
    seen = {c.path for c in result.changes} | {u.path for u in result.unresolved}
    for item in missing:
        if item.path not in seen:  # a wheel with no version, a version a build reads from git
            result.unresolved.append(Unresolved(item.path, item.why, failed=False))
    return result


def _source(
    sources: SourceCache, name: str, source: GitSource, asked: Set[PinPath], result: Result
) -> None:
    """A source's full commit, and what is read at it: its version, its folder's tree id."""
    commit: str | None = source.commit
    if ("sources", name, "commit") in asked:
        path = ("sources", name, "commit")
        commit = result.attempt(path, source.commit, lambda: sources.full_id(name, source))
        if commit is None:
            _unresolved_commit(name, asked, result)
            return
    if ("sources", name, "version") in asked and commit:
        _version(sources, name, source, commit, result)
    if ("sources", name, "tree") in asked and commit:
        at = dataclasses.replace(source, commit=commit)
        result.attempt(("sources", name, "tree"), "", lambda: sources.subtree_id(name, at))


def _unresolved_commit(name: str, asked: Set[PinPath], result: Result) -> None:
    """What is read at a source's commit (its tree id, its version), when the commit itself
    could not be resolved: its cause, not the generic "`doit lock` records it" (which is
    what did not happen)."""
    cause = next(u.why for u in result.unresolved if u.path == ("sources", name, "commit"))
    for field_ in ("version", "tree"):
        if ("sources", name, field_) in asked:
            result.unresolved.append(
                Unresolved(
                    ("sources", name, field_),
                    f"not looked up, as its commit could not be resolved: {cause}",
                )
            )


def _version(
    sources: SourceCache, name: str, source: GitSource, commit: str, result: Result
) -> None:
    """The version a build reads from git (``version_env``), as setuptools_scm reads it from
    a clone: the one version tag on the pinned commit, else the next dev release after the
    nearest one below it; with several tags on it, or none below, a choice left to you."""
    path = ("sources", name, "version")
    history = History(sources, name, source)
    try:
        history.fetch()
    except FetchError as exc:
        result.unresolved.append(Unresolved(path, str(exc)))
        return
    versions = history.versions_at(commit) or {history.described(commit) or ""} - {""}
    if len(versions) == 1:
        result.changes.append(Change(path, "", versions.pop()))
        return
    found = f"tags give {', '.join(sorted(versions))}" if versions else "no version tag is below it"
    result.unresolved.append(
        Unresolved(
            path,
            f"its build reads its version from git, and at {commit[:12]} {found}; pin the "
            "version the build should report",
            failed=False,
        )
    )


def _packages(pins: Pins, http: Http, asked: Set[PinPath], result: Result) -> None:
    """What an unversioned install would take today: the newest release pip installs, the
    one version the ROCm repositories list."""
    for path, _ in pins.python.packages():
        if path in asked:
            newest = functools.partial(pypi.newest, path[-1], pins.python.version, http)
            result.attempt(path, "", newest)
    for name in pins.rocm.packages:
        if ("rocm", "packages", name) in asked:
            listed = functools.partial(apt.version, name, pins.rocm.repos, http)
            result.attempt(("rocm", "packages", name), "", listed)


def _wheel(run: Run, outside: Outside, name: str, wheel: Wheel, result: Result) -> None:
    """A wheel's file, found in its index by its version (a pinned one: found there, or
    the nearest named), and the file's sha256; with neither file nor version pinned there
    is nothing to look up: the choice is the user's."""
    if not wheel.file and not wheel.version:
        return
    python = run.pins.python.version
    file = result.attempt(
        ("wheels", name, "file"),
        wheel.file,
        lambda: _listed_file(outside.http, python, name, wheel),
    )
    if file and not wheel.sha256:
        url = index.file_url(wheel.index, file)
        result.attempt(
            ("wheels", name, "sha256"),
            "",
            lambda: outside.store.fetch(url, file, "", f"wheel {name}").sha256,
        )


def _listed_file(http: Http, python: str, name: str, wheel: Wheel) -> str:
    """The file of the index that ``[wheels.<name>]`` means."""
    listing = index.listing(http.get_text(wheel.index), wheel.index)
    try:
        return index.resolve(name, wheel, listing, python)
    except index.Unresolved as exc:
        raise FetchError(str(exc)) from None


def run_lock(run: Run, outside: Outside) -> Answer:
    """`doit lock`: resolve, write what was found, and report; fails if a lookup failed."""
    if run.options.locked:
        check_locked(run)
        return Answer([f"{run.pins.file} is locked"])
    result = resolve(run, outside)
    if result.changes:
        write(Path(run.options.pins), result.changes, moved_refused=True)
    lines = [f"locked {change}" for change in result.changes]
    lines += [f"left open {item}" for item in result.unresolved]
    lines.append(f"{run.pins.file}: {len(result.changes)} values recorded")
    failed = [item for item in result.unresolved if item.failed]
    if failed:
        return Answer(lines, LockError(f"{len(failed)} values could not be resolved; see above"))
    return Answer(lines)


def lock_closures(run: Run, outside: Outside, session: Session) -> Answer:
    """`doit lock closures=1`: each stage whose key has no closure in the lock file is built
    with the network, every step anew, and what pip and apt report fetching becomes its
    closure; every file of it is downloaded into the store and checked against its sha256.
    A stage locks once its parents are there, side by side with the stages that do not need
    each other (as a build's run at once): a stage not built yet is tagged with that build
    under its key once its closure is locked (its children's lock builds stand on it), and
    its record written as a build's is (what a plan says of it and costs); a locked parent
    is built as a build would (network off)."""
    path = closure.lock_path(run.options.pins)
    # One lock run per lock file at a time: a second one waits, then reads what the first
    # locked and builds nothing again (each would build every stage, and save its own view).
    me = turns.Holder.me(",".join(run.archs), f"locks closures into {path.name}")
    with turns.held(run.state_dir / "turns" / f"closures-{path.name}", me, run.options.wait):
        return _lock_closures(run, outside, session, path)


def _lock_closures(run: Run, outside: Outside, session: Session, path: Path) -> Answer:
    found = dict(closure.load(path).closures)
    said: dict[str, str] = {}
    pending = []
    for name in run.graph.order:
        key = run.closure_keys[name].key  # of the stage's build with the network
        if (name, key) in found:
            said[name] = f"{name}: locked at {key[:12]}"
        else:
            pending.append(name)
    building: dict[Future[tuple[list[str], float]], str] = {}
    failed: list[GraphToolError] = []
    with ThreadPoolExecutor(max_workers=max(len(pending), 1)) as pool:
        while pending or building:
            waiting = set(pending) | set(building.values())
            ready = [n for n in pending if not failed and waiting.isdisjoint(run.graph[n].parents)]
            for name in ready:
                pending.remove(name)
                try:  # its parents made local here, so that siblings never build one twice
                    for parent in run.graph[name].parents:
                        execute.ensure_local(run, outside.docker, outside, session, parent)
                except GraphToolError as exc:
                    failed.append(exc)
                    continue
                building[pool.submit(_lock_build, run, outside, session, name)] = name
            if not building:
                break  # what is left waits on a stage that failed
            ended, _ = wait(building, return_when=FIRST_COMPLETED)
            for future in ended:
                name = building.pop(future)
                try:
                    output, seconds = future.result()
                    said[name] = _locked(
                        run, outside, name, output, seconds=seconds, into=found, path=path
                    )
                except GraphToolError as exc:  # the stages building go on, and are locked
                    failed.append(exc)
    if failed:
        raise failed[0]
    # What the lock keeps: the closures of the keys the pins give now, for this run's archs,
    # each one arch of [build].archs and all of them; older keys' closures go.
    archs = {run.archs, run.pins.build.archs, *((arch,) for arch in run.pins.build.archs)}
    current = {
        (stage, key.key)
        for arch_set in archs
        for stage, key in keys_.closure_keys(run.graph, run.pins, arch_set).items()
    }
    kept = {entry: found[entry] for entry in found if entry in current}
    closure.save(closure.LockFile(path, kept))
    files = {item for entry in kept.values() for item in entry.files}
    lines = [said[name] for name in run.graph.order]
    lines.append(f"{path}: {len(kept)} closures, {len(files)} files, every one by sha256")
    return Answer(lines)


def _lock_build(run: Run, outside: Outside, session: Session, name: str) -> tuple[list[str], float]:
    """Stage ``name`` built with the network, every step anew, under its lock tag: the
    build's output lines, and its time."""
    started = time.monotonic()
    tag = _lock_tag(run, name)
    output = execute.rebuild(run, outside.docker, outside, session, name, tag=tag, report=True)
    return output, time.monotonic() - started


def _lock_tag(run: Run, name: str) -> str:
    """The tag of stage ``name``'s lock build, until its closure is locked."""
    return f"{run.namespace}/{name}:lock-{run.closure_keys[name].key[:12]}"


def _locked(
    run: Run,
    outside: Outside,
    name: str,
    output: list[str],
    *,
    seconds: float,
    into: dict[tuple[str, str], closure.Closure],
    path: Path,
) -> str:
    """Stage ``name``'s lock build's closure, its files fetched, saved in the lock file at
    ``path`` with the others ``into`` holds; the build tagged as the stage's image where it
    has none: the stage's line."""
    engine = outside.docker
    key = run.closure_keys[name].key
    tag = _lock_tag(run, name)
    try:
        fetched = closure.receipts(output)
        for item in fetched:
            outside.store.fetch(item.url, item.file, item.sha256, f"{name}: {item.name}")
        into[(name, key)] = closure.Closure(name, key, fetched)
        closure.save(closure.LockFile(path, into))  # a later failure keeps what is locked
        # Not locked when this run began, its key here is of a build with the network:
        # the image is that build, which its children's lock builds stand on.
        if not execute.is_built(run, engine, name):
            # and its record, as a build writes one: what the plan says of it and costs.
            # Begun before the tag, as a build's: a kill between the two keeps it.
            stage_key = run.keys[name]
            records.begin(run.records_dir, name, stage_key.key, stage_key.inputs, seconds)
            engine.tag(tag, run.ref(name))
            failpoints.reached("tagged")
            records.save(run.records_dir, name, stage_key.key, stage_key.inputs, seconds)
    finally:
        with contextlib.suppress(GraphToolError):  # never hiding the error that ends the lock
            engine.untag(tag)
    return _closure_line(name, key, fetched)


def _closure_line(name: str, key: str, fetched: tuple[closure.Fetched, ...]) -> str:
    kinds = ", ".join(
        f"{sum(1 for item in fetched if item.kind == kind)} {kind}" for kind in closure.KINDS
    )
    return f"{name}: locked at {key[:12]} ({kinds} files)"
