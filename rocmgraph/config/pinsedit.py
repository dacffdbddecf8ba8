"""Edits of a pins file that keep every comment and space: one place for every writer
(`doit lock`, `doit bump`, the demo's generated pins, the tests' variations of
pins.toml). tomlkit parses and writes; a write is atomic, and two at once take turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from rocmgraph.common.errors import PinsError
from rocmgraph.common.fsutil import atomic_write_text, exclusive
from rocmgraph.config.pins import PinPath, Value, format_path


@dataclass(frozen=True)
class Change:
    """One value of a pins file, set from ``old`` to ``new``."""

    path: PinPath
    old: Value
    new: Value

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.old or '(empty)'} -> {self.new}"


def apply(text: str, changes: list[Change]) -> str:
    """``text`` (a pins file) with each changed value set; every comment and space kept."""
    document = tomlkit.parse(text)
    _set(document, changes)
    return tomlkit.dumps(document)


def _set(document: tomlkit.TOMLDocument, changes: list[Change]) -> None:
    for change in changes:
        node: Any = document
        for part in change.path[:-1]:
            node = node[part]
        key, current = change.path[-1], node.get(change.path[-1])
        if isinstance(change.new, tuple) and isinstance(current, tomlkit.items.Array):
            _edit_array(current, change.new)
        else:
            node[key] = list(change.new) if isinstance(change.new, tuple) else change.new


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


def write(path: Path, changes: list[Change], *, moved_refused: bool = False) -> None:
    """Set each changed value in the pins file, atomically. Two writers at once (a lock and
    a bump) take turns, so that neither writes back what it read before the other's edit:
    each reads and replaces the file under an exclusive lock of the file itself.
    ``moved_refused``: a value another writer changed since this one read it (its ``old``)
    is refused, not overwritten (a lock resolving the commit a bump just moved)."""
    with exclusive(path):
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
        if moved_refused:
            _refuse_moved(path, document, changes)
        _set(document, changes)
        atomic_write_text(path, tomlkit.dumps(document))


def _refuse_moved(path: Path, document: tomlkit.TOMLDocument, changes: list[Change]) -> None:
    plain = document.unwrap()  # once: it copies the whole document
    for change in changes:
        node: Any = plain
        for part in change.path:
            node = node.get(part) if isinstance(node, dict) else None
        read = list(change.old) if isinstance(change.old, tuple) else change.old
        if node != read and not (node is None and read in ("", [])):
            raise PinsError(
                str(path),
                format_path(change.path),
                f"changed while this command ran: it read {read!r}, the file now holds {node!r}",
                "run the command again",
            )


def delete(text: str, path: PinPath) -> str:
    """``text`` without the key at ``path`` (and its comment)."""
    document = tomlkit.parse(text)
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return tomlkit.dumps(document)
