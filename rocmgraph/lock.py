"""`doit lock`: fill in what can only be known online, and write it into the pins file.

It records exact wheel file names and their sha256, the full id behind a
short commit (or the commit a tag or branch names when none is pinned), the
apt keys' sha256, the base image's digest, and the version an unpinned Python
or apt package would install today. The pins file is rewritten with tomlkit
(comments and layout kept), atomically. ``locked=1`` changes nothing: it
fails when anything is still unlocked, for CI.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from rocmgraph.errors import Answer, FetchError, LockError
from rocmgraph.fsutil import atomic_write_text
from rocmgraph.outside import apt, pypi, registry
from rocmgraph.outside.upstream import History
from rocmgraph.pins import GitSource, PinPath, Pins, Value, Wheel, format_path
from rocmgraph.run import Run
from wheels import index


@dataclass(frozen=True)
class Change:
    path: PinPath
    old: Value
    new: Value

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.old or '(empty)'} -> {self.new}"


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


def check_locked(pins: Pins) -> None:
    """For ``locked=1``: refuse pins that still leave anything open."""
    missing = pins.missing()
    if missing:
        names = ", ".join(format_path(m.path) for m in missing)
        raise LockError(
            f"{pins.file} is not locked: {names}; run `doit lock` where the network allows "
            "and commit the pins file"
        )


def resolve(run: Run) -> Result:
    pins, result = run.pins, Result()
    for name, wheel in pins.wheels.items():
        _wheel(run, name, wheel, result)
    for name, source in pins.sources.items():
        commit: str | None = source.commit
        if len(source.commit) != 40:
            commit = result.attempt(
                ("sources", name, "commit"),
                source.commit,
                lambda name=name, source=source: run.sources.full_id(name, source),  # type: ignore[misc]
            )
        if source.version_env and not source.version and commit:
            _version(run, name, source, commit, result)
    if not pins.rocm.key_sha256:
        key_url = pins.rocm.key_url
        result.attempt(
            ("rocm", "key_sha256"),
            "",
            lambda: run.store.fetch(key_url, "rocm.gpg.key", "", "ROCm key").sha256,
        )
    for name, repo in pins.base.repos.items():
        if not repo.key_sha256:
            result.attempt(
                ("base", "repos", name, "key_sha256"),
                "",
                lambda name=name, url=repo.key_url: (
                    run.store.fetch(  # type: ignore[misc]
                        url, f"{name}.asc", "", f"{name} apt key"
                    ).sha256
                ),
            )
    if not pins.base.digest:
        image = pins.base.image
        result.attempt(("base", "digest"), "", lambda: registry.digest(image, run.http))
    _packages(run, result)
    seen = {c.path for c in result.changes} | {u.path for u in result.unresolved}
    for missing in pins.missing():
        if missing.path not in seen:  # a version a build reads from git: a choice, not a lookup
            result.unresolved.append(Unresolved(missing.path, missing.why, failed=False))
    return result


def _version(run: Run, name: str, source: GitSource, commit: str, result: Result) -> None:
    """The version a build reads from git (``version_env``): the one version tag on the
    pinned commit; with none or several, a choice left to the maintainer."""
    path = ("sources", name, "version")
    history = History(run.sources, name, source)
    try:
        history.fetch()
    except FetchError as exc:
        result.unresolved.append(Unresolved(path, str(exc)))
        return
    versions = history.versions_at(commit)
    if len(versions) == 1:
        result.changes.append(Change(path, "", versions.pop()))
        return
    found = f"tags give {', '.join(sorted(versions))}" if versions else "no version tag names it"
    result.unresolved.append(
        Unresolved(
            path,
            f"its build reads its version from git, and at {commit[:12]} {found}; pin the "
            "version the build should report",
            failed=False,
        )
    )


def _packages(run: Run, result: Result) -> None:
    """What an unversioned install would take today: the newest release pip installs, the
    one version the ROCm repositories list."""
    pins = run.pins
    for path, version in pins.python.packages():
        if not version:
            newest = functools.partial(pypi.newest, path[-1], pins.python.version, run.http)
            result.attempt(path, "", newest)
    for name, version in pins.rocm.packages.items():
        if not version:
            listed = functools.partial(apt.version, name, pins.rocm.repos, run.http)
            result.attempt(("rocm", "packages", name), "", listed)


def _wheel(run: Run, name: str, wheel: Wheel, result: Result) -> None:
    file = wheel.file or result.attempt(
        ("wheels", name, "file"), "", lambda: _listed_file(run, name, wheel)
    )
    if file and not wheel.sha256:
        url = index.file_url(wheel.index, file)
        result.attempt(
            ("wheels", name, "sha256"),
            "",
            lambda: run.store.fetch(url, file, "", f"wheel {name}").sha256,
        )


def _listed_file(run: Run, name: str, wheel: Wheel) -> str:
    """The file of the index that ``[wheels.<name>]`` means."""
    listing = index.listing(run.http.get_text(wheel.index), wheel.index)
    try:
        return index.resolve(name, wheel, listing, run.pins.python.version)
    except index.Unresolved as exc:
        raise FetchError(str(exc)) from None


def apply(text: str, changes: list[Change]) -> str:
    """``text`` (a pins file) with each changed value set; every comment and space kept."""
    document = tomlkit.parse(text)
    for change in changes:
        node: Any = document
        for part in change.path[:-1]:
            node = node[part]
        key, current = change.path[-1], node.get(change.path[-1])
        if isinstance(change.new, tuple) and isinstance(current, tomlkit.items.Array):
            _edit_array(current, change.new)
        else:
            node[key] = list(change.new) if isinstance(change.new, tuple) else change.new
    return tomlkit.dumps(document)


def _edit_array(array: tomlkit.items.Array, new: tuple[str, ...]) -> None:
    """Make ``array`` hold ``new`` in place: items that stay keep their line, place and
    comment; items that go take their comment with them; new ones follow in the same style.
    (The pins read a list as a set, so its order is the file's to keep.)
    """
    for item in [item for item in array if item not in new]:
        array.remove(item)
    for item in new:
        if item not in array:
            array.append(item)


def write(path: Path, changes: list[Change]) -> None:
    """Set each changed value in the pins file, atomically."""
    atomic_write_text(path, apply(path.read_text(encoding="utf-8"), changes))


def run_lock(run: Run) -> Answer:
    """`doit lock`: resolve, write what was found, and report; fails if a lookup failed."""
    if run.options.locked:
        check_locked(run.pins)
        return Answer([f"{run.pins.file} is locked"])
    result = resolve(run)
    if result.changes:
        write(Path(run.options.pins), result.changes)
    lines = [f"locked {change}" for change in result.changes]
    lines += [f"left open {item}" for item in result.unresolved]
    lines.append(f"{run.pins.file}: {len(result.changes)} values recorded")
    failed = [item for item in result.unresolved if item.failed]
    if failed:
        return Answer(lines, LockError(f"{len(failed)} values could not be resolved; see above"))
    return Answer(lines)
