"""`doit patches`: the status of every patch at the pinned commits."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from rocmgraph import patches
from rocmgraph.run import Run
from wheels import pypi


@dataclass(frozen=True)
class Row:
    target: str  # a source name, or a PyPI package
    at: str  # the commit, or the version
    patch: str
    status: str
    detail: str
    upstream: str  # "owner/repo#123", or "" for a local adaptation


def table(run: Run) -> list[Row]:
    rows: list[Row] = []
    for name, source in run.pins.sources.items():
        if source.patches:
            tree = run.sources.tree(name, source)
            rows += _rows(name, source.commit, patches.check(tree, source.patches))
    for package, names in run.pins.python.patches.items():
        version = run.pins.python.stack[package]
        wheel = pypi.pure_wheel(package, version, run.http, run.store)
        touched = tuple(f for patch in names for f in patches.read_patch(patch).files)
        with tempfile.TemporaryDirectory(prefix="site-") as scratch:
            pypi.unpack(wheel, touched, Path(scratch))
            rows += _rows(package, version, patches.check(Path(scratch), names))
    return rows


def _rows(target: str, at: str, statuses: list[patches.Status]) -> list[Row]:
    rows = []
    for status in statuses:
        upstream = patches.read_patch(status.patch).upstream
        pr = f"{upstream[0]}#{upstream[1]}" if upstream else ""
        rows.append(Row(target, at, status.patch, status.status, status.detail, pr))
    return rows


def as_json(rows: list[Row]) -> str:
    return json.dumps({"patches": [asdict(row) for row in rows]}, indent=2)


def as_text(rows: list[Row]) -> str:
    width = max((len(row.patch) for row in rows), default=5) + 2
    lines = [f"{'patch':<{width}}{'status':<11}detail"]
    for row in rows:
        detail = row.detail or (f"upstream {row.upstream}" if row.upstream else "local adaptation")
        lines.append(f"{row.patch:<{width}}{row.status:<11}{detail}")
    counts = {s: sum(r.status == s for r in rows) for s in ("applies", "obsolete", "conflicts")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)
