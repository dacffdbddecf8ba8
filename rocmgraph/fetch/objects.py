"""A commit's files, read where they lie: a checkout (``Checkout``), or git's objects
(``Snapshot``) in a partial copy that holds every tree and only the blobs read so far.

Both are ``Files``: a path's bytes, whether it is a folder, and, for a reader that fetches,
which paths are ready and a way to fetch many at once (``load``), so that a check that
reads forty files makes one fetch, not forty.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rocmgraph.outside import git
from rocmgraph.outside.proc import CommandFailed


class Files(Protocol):
    """A commit's files, by their path from its root ("" is the root)."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when there is no such file."""

    def is_folder(self, path: str) -> bool: ...

    def ready(self, path: str) -> bool:
        """Whether ``read`` and ``is_folder`` answer for ``path`` without a fetch."""

    def load(self, paths: Iterable[str]) -> None:
        """Fetch, at once, what reading ``paths`` needs."""


@dataclass(frozen=True)
class Submodule:
    path: str  # in its superproject's tree
    url: str  # as .gitmodules writes it (perhaps relative)
    commit: str  # what the superproject's tree pins


@dataclass(frozen=True)
class Checkout:
    """Files checked out in a folder."""

    root: Path

    def read(self, path: str) -> bytes | None:
        file = self.root / path
        return file.read_bytes() if file.is_file() else None

    def is_folder(self, path: str) -> bool:
        return (self.root / path).is_dir()

    def ready(self, path: str) -> bool:
        return True

    def load(self, paths: Iterable[str]) -> None:
        pass


FetchBlobs = Callable[[list[str]], None]  # blobs by id, into the snapshot's repository
Opener = Callable[[Submodule], Files]  # a submodule's files at the commit it is pinned to


class Snapshot:
    """``commit``'s files in the repository ``git_dir``, which holds its trees: a blob is
    fetched (``fetch``) the first time it is read, and kept. A path inside a submodule is
    read from the submodule's own files (``opener``), opened when first asked for; with no
    ``opener``, a submodule is an empty folder, as a checkout without submodules has it."""

    def __init__(self, git_dir: Path, commit: str, fetch: FetchBlobs, opener: Opener | None = None):
        self.git_dir, self.commit = git_dir, commit
        self._fetch, self._open = fetch, opener
        self._entries = {entry.name: entry for entry in git.listing(git_dir, commit)}
        self._have = git.present(git_dir)
        self._bytes: dict[str, bytes] = {}  # blob id -> its bytes, once read
        self._subs: dict[str, Files] = {}  # a submodule's path -> its files, once opened
        self._declared: dict[str, str] | None = None  # .gitmodules: path -> URL

    def read(self, path: str) -> bytes | None:
        inside = self._inside(path)
        if inside is not None:
            return self._sub(inside[0]).read(inside[1]) if self._open else None
        entry = self._entries.get(_normal(path) or "")
        if entry is None or entry.kind != "blob":
            return None
        self.load([path])
        return self._bytes[entry.sha]

    def is_folder(self, path: str) -> bool:
        inside = self._inside(path)
        if inside is not None:
            return self._open is not None and self._sub(inside[0]).is_folder(inside[1])
        normal = _normal(path)
        entry = self._entries.get(normal or "")
        return normal == "" or (entry is not None and entry.kind in ("tree", "commit"))

    def ready(self, path: str) -> bool:
        inside = self._inside(path)
        if inside is not None:
            return not self._open or (inside[0] in self._subs and
                                      self._subs[inside[0]].ready(inside[1]))  # fmt: skip
        entry = self._entries.get(_normal(path) or "")
        return entry is None or entry.kind != "blob" or entry.sha in self._have

    def load(self, paths: Iterable[str]) -> None:
        own: list[str] = []
        inner: dict[str, list[str]] = {}
        for path in paths:
            inside = self._inside(path)
            if inside is None:
                own.append(path)
            elif self._open:
                inner.setdefault(inside[0], []).append(inside[1])
        self._load(own)
        for link, wanted in sorted(inner.items()):
            self._sub(link).load(wanted)

    def _load(self, paths: Iterable[str]) -> None:
        entries = (self._entries.get(_normal(path) or "") for path in paths)
        shas = {e.sha for e in entries if e is not None and e.kind == "blob"} - set(self._bytes)
        lacking = sorted(shas - self._have)
        if lacking:
            self._fetch(lacking)
            self._have |= set(lacking)
        self._bytes |= git.blobs(self.git_dir, sorted(shas))

    def _inside(self, path: str) -> tuple[str, str] | None:
        """(the submodule, the path in it) for a path below a submodule (the submodule's own
        path is an entry here: a folder)."""
        parts = (_normal(path) or "").split("/")
        for end in range(1, len(parts)):
            entry = self._entries.get("/".join(parts[:end]))
            if entry is None or entry.kind == "blob":
                return None
            if entry.kind == "commit":
                return entry.name, "/".join(parts[end:])
        return None

    def _sub(self, link: str) -> Files:
        if link not in self._subs:
            url = self._urls().get(link)
            commit = self._entries[link].sha
            # not in .gitmodules: a checkout leaves it an empty folder
            self._subs[link] = Empty() if url is None or self._open is None else \
                self._open(Submodule(link, url, commit))  # fmt: skip
        return self._subs[link]

    def _urls(self) -> dict[str, str]:
        if self._declared is None:
            entry = self._entries.get(".gitmodules")
            self._declared = {}
            if entry is not None and entry.kind == "blob":
                self._load([".gitmodules"])
                self._declared = declared(self.git_dir, entry.sha)
        return self._declared


class Empty:
    """An empty folder's files (a submodule .gitmodules does not declare)."""

    def read(self, path: str) -> bytes | None:
        return None

    def is_folder(self, path: str) -> bool:
        return not _normal(path)

    def ready(self, path: str) -> bool:
        return True

    def load(self, paths: Iterable[str]) -> None:
        pass


def declared(git_dir: Path, gitmodules: str) -> dict[str, str]:
    """The submodules the blob ``gitmodules`` (a .gitmodules) declares: path -> URL."""
    try:
        out = git.git("--git-dir", str(git_dir), "config", "--blob", gitmodules,
                      "--get-regexp", r"^submodule\..*\.(path|url)$", timeout=60)  # fmt: skip
    except CommandFailed:  # exit 1: no entries
        return {}
    return paths_and_urls(out)


def paths_and_urls(out: str) -> dict[str, str]:
    """``git config --get-regexp`` of .gitmodules' paths and URLs, as path -> URL."""
    entries: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key.removeprefix("submodule.").rpartition(".")
        entries.setdefault(name, {})[field] = value
    return {
        entry["path"]: entry["url"]
        for entry in entries.values()
        if entry.get("path") and entry.get("url")
    }


def copy(files: Files, paths: Iterable[str], dest: Path) -> frozenset[str]:
    """Write the files among ``paths`` into ``dest``; the paths that exist, files or folders
    (a folder is only looked at, not copied)."""
    wanted = list(paths)
    files.load(wanted)
    present = set()
    for path in wanted:
        data = files.read(path)
        if data is not None:
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(data)
            present.add(path)
        elif files.is_folder(path):
            present.add(path)
    return frozenset(present)


def _normal(path: str) -> str | None:
    """``path`` from the root, "" for the root; None for one that leaves the tree."""
    normal = posixpath.normpath(path) if path else "."
    if normal == ".":
        return ""
    if normal.startswith(("/", "../")) or normal == "..":
        return None
    return normal
