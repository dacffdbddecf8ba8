"""An image's files, as facts that can be compared: what `doit verify stage=` holds a
rebuild to. Timestamps are left out (a rebuild is later by definition); everything
else that makes a file what it is counts: path, type, mode, owner, size, content.
"""

from __future__ import annotations

import difflib
import hashlib
import posixpath
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

TEXT_KEPT = 64 * 1024  # a text file this small keeps its content, for a diff


@dataclass(frozen=True)
class File:
    kind: str  # "file", "dir", "link", "hardlink", "other"
    mode: int
    owner: str  # "uid:gid"
    size: int
    digest: str  # sha256 of the content; a link's target
    text: str | None = None  # the content of a small text file, for a diff

    def facts(self) -> tuple[str, int, str, int, str]:
        return (self.kind, self.mode, self.owner, self.size, self.digest)


Tree = dict[str, File]


def read_tar(stream: IO[bytes]) -> Tree:
    """The files of a tar stream (``docker export``), read once, front to back."""
    tree: Tree = {}
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            # "./x" and "x" are /x; ".profile" is /.profile (not /profile)
            path = posixpath.normpath("/" + member.name.lstrip("/"))
            owner = f"{member.uid}:{member.gid}"
            if member.isfile():
                data = archive.extractfile(member)
                content = data.read() if data is not None else b""
                text = _text(content)
                digest = hashlib.sha256(content).hexdigest()
                tree[path] = File("file", member.mode, owner, member.size, digest, text)
            elif member.isdir():
                tree[path] = File("dir", member.mode, owner, 0, "")
            elif member.issym():
                tree[path] = File("link", member.mode, owner, 0, member.linkname)
            elif member.islnk():
                tree[path] = File("hardlink", member.mode, owner, 0, "/" + member.linkname)
            else:
                tree[path] = File("other", member.mode, owner, 0, "")
    return tree


def _text(content: bytes) -> str | None:
    if len(content) > TEXT_KEPT or b"\0" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class Difference:
    path: str
    what: str  # "only in the image", "only in the rebuild", or the facts that differ
    diff: tuple[str, ...] = ()  # a short unified diff, for a text file


DIFF_LINES = 12


def compare(built: Tree, rebuilt: Tree) -> list[Difference]:
    """How ``rebuilt`` differs from ``built``, path by path, in path order."""
    return list(_compare(built, rebuilt))


def _compare(built: Tree, rebuilt: Tree) -> Iterator[Difference]:
    names = ("type", "mode", "owner", "size", "content")
    for path in sorted(built.keys() | rebuilt.keys()):
        old, new = built.get(path), rebuilt.get(path)
        if new is None:
            yield Difference(path, "only in the image")
        elif old is None:
            yield Difference(path, "only in the rebuild")
        elif old.facts() != new.facts():
            changed = [n for n, a, b in zip(names, old.facts(), new.facts(), strict=True) if a != b]
            yield Difference(path, ", ".join(changed), _diff(old, new))


def _diff(old: File, new: File) -> tuple[str, ...]:
    if old.text is None or new.text is None or old.digest == new.digest:
        return ()
    lines = difflib.unified_diff(old.text.splitlines(), new.text.splitlines(), "image",
                                 "rebuild", lineterm="", n=1)  # fmt: skip
    return tuple(_first(lines, DIFF_LINES))


def _first(lines: Iterable[str], count: int) -> Iterator[str]:
    for n, line in enumerate(lines):
        if n == count:
            yield "…"
            return
        yield line
