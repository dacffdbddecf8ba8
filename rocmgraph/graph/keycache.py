"""Keys remembered between runs, under a fingerprint of everything they are computed from.

Computing the keys renders every recipe (importing Jinja for it) and hashes every file a
recipe names: most of what a run that builds nothing spends on its own work (about 30 ms of
the demo's no-op, a third of a second on a graph of 200 stages). The keys are a pure
function of the graph, the pins, the arch set, the variables, the closures and the files of
this repository (its code, the templates, the files the recipes name), so a run may take
them from an earlier run that had the same of all of them.

The fingerprint takes the graph, the pins and the arguments by value, and the repository's
files and folders by their status: inode, size, mtime and ctime in nanoseconds, as git's
index and Bazel's digest cache tell a changed file. Any write changes ctime, which no tool
can set back; a file added or removed changes its folder's. The cache is used only when
every one of those files last changed ``SETTLED`` seconds before this module was imported:

- timestamps are coarser than writes, so a file changed within the last moments could
  change again unseen (git's "racily clean" entries);
- a process renders with the code and the templates it loaded, so keys it computes after
  its files changed on disk are not those of the files now there (a lock that runs for
  hours, during a `git pull`): it neither reads nor keeps keys then.

The status is taken before the keys are computed, so a file that changes meanwhile leaves a
fingerprint no later run has. What is read back must hash from its inputs to its key, stage
by stage, or it is not used. Every fault here only costs the computation: a cache that
cannot be read or written is no cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from importlib.util import find_spec
from pathlib import Path

from rocmgraph.common.fsutil import cache_write_bytes
from rocmgraph.common.layout import ROOT
from rocmgraph.config import kinds
from rocmgraph.config.pins import Pins
from rocmgraph.graph import keys
from rocmgraph.graph.dag import Graph

FORMAT = 1  # bump when what a fingerprint covers changes
# The repository's folders the keys are made from: the code that renders and keys (rocmgraph,
# wheels), the stages, the templates and patches. Files the pins name elsewhere are added.
TREES = ("rocmgraph", "stages", "wheelfiles", "docker")
# Beside the repository's, the template engine's own files: an upgrade may render otherwise.
LIBRARIES = ("jinja2", "markupsafe")
SETTLED = 2.0  # seconds since a file's last change after which its status can be trusted
KEPT = 32  # fingerprints kept; the oldest go first
# About when this process loaded the code it renders with (within a fraction of a second of
# its start: dodo.py imports it with the rest of the project).
LOADED = time.time_ns()


class KeyCache:
    """The keys kept in ``folder`` for one graph and one pins file (a Run's). The files'
    statuses are taken once, before the first keys are computed: a run that computes its
    keys with the network and then sealed ones (closures locked) walks the files once."""

    def __init__(self, folder: Path, graph: Graph, pins: Pins) -> None:
        self.folder, self.graph, self.pins = folder, graph, pins

    @functools.cached_property
    def _statuses(self) -> dict[str, list[int] | None]:
        return dict(_statuses(_files(self.graph, self.pins)))

    def compute(
        self,
        archs: tuple[str, ...],
        variables: Mapping[str, str] | None = None,
        closures: Mapping[str, str] | None = None,
    ) -> dict[str, keys.StageKey]:
        """``keys.compute`` of the graph and pins with these, from the folder when an earlier
        run computed it from the same inputs, else computed and kept there."""
        graph, pins = self.graph, self.pins
        fingerprint, trusted = self._fingerprint(archs, variables, closures)
        if not trusted:
            return keys.compute(graph, pins, archs, variables, closures)
        path = self.folder / f"{fingerprint}.json"
        found = _read(path, graph)
        if found is not None:
            return found
        computed = keys.compute(graph, pins, archs, variables, closures)
        _write(path, computed)
        return computed

    def _fingerprint(
        self,
        archs: tuple[str, ...],
        variables: Mapping[str, str] | None,
        closures: Mapping[str, str] | None,
    ) -> tuple[str, bool]:
        """The fingerprint of the inputs, and whether it can be trusted: every file among
        them there, and changed last ``SETTLED`` seconds before this process loaded its code."""
        statuses = self._statuses
        known = [status for status in statuses.values() if status is not None]
        changed = max((max(status[2:]) for status in known), default=0)
        trusted = len(known) == len(statuses) and changed < LOADED - SETTLED * 1e9
        document = {
            "format": FORMAT,
            "python": sys.version,
            "root": str(ROOT),
            "graph": repr(tuple(self.graph)),  # frozen dataclasses of tuples: the same each run
            "pins": repr(self.pins),
            "archs": list(archs),
            "variables": dict(sorted((variables or {}).items())),
            "closures": dict(sorted((closures or {}).items())),
            "files": statuses,
        }
        text = json.dumps(document, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest(), trusted


def _files(graph: Graph, pins: Pins) -> list[Path]:
    """Every file the keys read, or might, and the folders that hold them: the repository's
    trees, the files stages copy in, the files the pins name (patches), and the template
    engine's."""
    found: set[Path] = set()
    visited: set[tuple[int, int]] = set()
    for tree in TREES:
        found.update(_walk(ROOT / tree, visited))
    for stage in graph:
        found.update(ROOT / name for name in stage.files)
    for leaf in pins.leaves():
        if leaf.kind is kinds.REPO_FILE:
            names = leaf.value if isinstance(leaf.value, tuple) else (str(leaf.value),)
            found.update(ROOT / name for name in names)
    for library in LIBRARIES:
        spec = find_spec(library)
        if spec is not None and spec.origin:
            found.update(_walk(Path(spec.origin).parent, visited))
    return sorted(found)


def _walk(folder: Path, visited: set[tuple[int, int]]) -> Iterator[Path]:
    """``folder``, and every file and folder under it (through links, each folder once)."""
    try:
        status = folder.stat()
    except OSError:
        return
    if (status.st_dev, status.st_ino) in visited:
        return
    visited.add((status.st_dev, status.st_ino))
    yield folder  # its status moves when a file is added or removed
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name == "__pycache__":
                continue  # Python's own cache of the code: the sources are the inputs
            if entry.is_dir():
                yield from _walk(Path(entry.path), visited)
            else:
                yield Path(entry.path)


def _statuses(paths: list[Path]) -> Iterator[tuple[str, list[int] | None]]:
    for path in paths:
        try:
            status = path.stat()
        except OSError:
            yield str(path), None  # missing: the computation says what is wrong
            continue
        yield str(path), [status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def _read(path: Path, graph: Graph) -> dict[str, keys.StageKey] | None:
    """The keys kept at ``path``, each checked to hash from its inputs; None when there are
    none, or any is not what it should be."""
    try:
        document = json.loads(path.read_bytes())
        found: dict[str, keys.StageKey] = {}
        for name in graph.order:
            entry = document[name]
            inputs = keys.Inputs.from_json(entry["inputs"])
            parents = {parent: found[parent].key for parent in graph[name].parents}
            if (
                inputs.stage != name
                or inputs.parents != parents
                or keys.digest(keys.canonical(inputs)) != entry["key"]
            ):
                return None
            found[name] = keys.StageKey(name, entry["key"], inputs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return found if len(found) == len(document) else None


def _write(path: Path, computed: Mapping[str, keys.StageKey]) -> None:
    document = {
        name: {"key": key.key, "inputs": key.inputs.as_json()} for name, key in computed.items()
    }
    if cache_write_bytes(path, json.dumps(document, sort_keys=True).encode()):
        with contextlib.suppress(OSError):  # another run trims too
            _trim(path.parent)


def _trim(folder: Path) -> None:
    """Keep the ``KEPT`` newest fingerprints: every edit of the code makes a new one."""
    kept = sorted(folder.glob("*.json"), key=lambda path: path.stat().st_mtime_ns, reverse=True)
    for old in kept[KEPT:]:
        old.unlink(missing_ok=True)
