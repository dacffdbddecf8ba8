"""`doit patches`: the status of every patch at the pinned commits.

Every target has its rows: a source or package that cannot be fetched gets
an ``unknown`` row per patch saying why, and never hides the others.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rocmgraph.common.errors import FetchError, PatchError, Unchecked
from rocmgraph.fetch import pypi
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Run
from rocmgraph.trees import patches
from rocmgraph.trees.patches import Outcome


@dataclass(frozen=True)
class Row:
    target: str  # a source name, or a PyPI package
    at: str  # the commit, or the version
    patch: str
    status: Outcome
    detail: str
    upstream: str  # "owner/repo#123", or "" for a local adaptation


def table(run: Run, outside: Outside) -> list[Row]:
    """A row per patch of ``run``'s pins, checked against trees fetched through ``outside``."""
    rows: list[Row] = []
    sources = outside.sources(run.pins)
    python = run.pins.python.version
    for name, source in run.pins.sources.items():
        if source.patches:
            check = functools.partial(patches.check_source, sources, name, source)
            rows += _rows(name, source.commit, source.patches, check)
    for package, names in run.pins.python.patches.items():
        version = run.pins.python.stack[package]
        rows += _rows(
            package,
            version,
            names,
            functools.partial(_pypi, outside, python, package, version, names),
        )
    return rows


def _pypi(
    outside: Outside, python: str, package: str, version: str, names: tuple[str, ...]
) -> list[patches.Status]:
    dist = pypi.fetch(package, version, python, outside.http, outside.store)
    touched = tuple(f for patch in names for f in patches.read_patch(patch).files)
    with tempfile.TemporaryDirectory(prefix="site-") as scratch:
        pypi.unpack(dist, touched, Path(scratch))
        return patches.check(Path(scratch), names)


def _rows(
    target: str, at: str, names: tuple[str, ...], check: Callable[[], list[patches.Status]]
) -> list[Row]:
    try:
        statuses = check()
    except FetchError as exc:
        statuses = [patches.Status(name, Outcome.UNKNOWN, str(exc)) for name in names]
    rows = []
    for status in statuses:
        upstream = patches.read_patch(status.patch).upstream
        pr = f"{upstream[0]}#{upstream[1]}" if upstream else ""
        rows.append(Row(target, at, status.patch, status.status, status.detail, pr))
    return rows


def verdict(rows: list[Row]) -> None:
    """Raise for the exit code: 1 when a patch conflicts, 2 when one could not be checked."""
    conflicts = sum(row.status is Outcome.CONFLICTS for row in rows)
    unknown = sum(row.status is Outcome.UNKNOWN for row in rows)
    if conflicts:
        raise PatchError(f"{conflicts} patches conflict with their pinned tree")
    if unknown:
        raise Unchecked(f"{unknown} patches could not be checked; see the rows marked unknown")


def as_json(rows: list[Row]) -> str:
    return json.dumps({"patches": [asdict(row) for row in rows]}, indent=2)


def as_text(rows: list[Row]) -> str:
    width = max((len(row.patch) for row in rows), default=5) + 2
    lines = [f"{'patch':<{width}}{'status':<11}detail"]
    for row in rows:
        detail = row.detail or (f"upstream {row.upstream}" if row.upstream else "local adaptation")
        lines.append(f"{row.patch:<{width}}{row.status:<11}{detail}")
    counts = {s: sum(r.status is s for r in rows) for s in Outcome}
    shown = {s: n for s, n in counts.items() if n or s is not Outcome.UNKNOWN}
    lines.append(", ".join(f"{n} {s}" for s, n in shown.items()))
    return "\n".join(lines)
