"""Why a stage would rebuild: the difference between two input sets, in words."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rocmgraph.graph.keys import Inputs, Json

_HEX = re.compile(r"(sha256:)?[0-9a-f]{40,64}")


def changes(now: Inputs, before: Inputs | None) -> list[str]:
    """One reason per changed input; ``before`` is the stage's last known build."""
    if before is None:
        return ["never built"]
    if before.schema != now.schema:
        return ["the key schema changed"]
    reasons = _mapping_changes("file", now.files, before.files, values=False)
    reasons += _mapping_changes("pin", now.pins, before.pins, values=True)
    if before.arch != now.arch:
        reasons.append(f"arch: {_archs(before.arch)} -> {_archs(now.arch)}")
    for parent, key in now.parents.items():
        if before.parents.get(parent) != key:
            reasons.append(f"parent {parent} changed")
    reasons += _mapping_changes(
        "variable", now.variables or {}, before.variables or {}, values=True
    )
    reasons += _mapping_changes("input", now.extras or {}, before.extras or {}, values=True)
    if before.closure != now.closure:
        reasons.append(
            "its closure is locked: it builds with the network off"
            if before.closure is None
            else "with the network (no closure locked, or hermetic=0)"
            if now.closure is None
            else "its closure changed"
        )
    if not reasons and before.dockerfile != now.dockerfile:
        reasons.append("the rendered Dockerfile changed (the renderer changed)")
    return reasons


def _mapping_changes(
    what: str, now: Mapping[str, Json], before: Mapping[str, Json], *, values: bool
) -> list[str]:
    reasons = []
    for name in sorted(set(now) | set(before)):
        if name not in before:
            reasons.append(f"{what} {name} added")
        elif name not in now:
            reasons.append(f"{what} {name} removed")
        elif now[name] != before[name]:
            detail = f": {_short(before[name])} -> {_short(now[name])}" if values else ""
            reasons.append(f"{what} {name} changed{detail}")
    return reasons


def _short(value: Json) -> str:
    if isinstance(value, str) and _HEX.fullmatch(value):
        return value.removeprefix("sha256:")[:12]
    if isinstance(value, list):
        return ",".join(str(item) for item in value) or "[]"
    return repr(value) if isinstance(value, str) else str(value)


def _archs(archs: tuple[str, ...] | None) -> str:
    return ",".join(archs) if archs else "none"
