"""A failed build's output, read for what the host can fix: the files pip refused because
their bytes are not those their hash names. A file of the store is checked again
(Store.recheck) and the error says what to do about it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# pip, for each file it refuses: "    torch==2.12.0 from file:///tmp/wheels/torch-...whl
# (...):", "        Expected sha256 <hex>" (then "Expected     or <hex>" for each other hash
# allowed), "             Got        <hex>".
_EXPECTED = re.compile(r"\bExpected sha256 ([0-9a-f]{64})\s*$")
_GOT = re.compile(r"\bGot\s+([0-9a-f]{64})\s*$")


@dataclass(frozen=True)
class Mismatch:
    """A file pip refused: the sha256 its hash names, and the one its bytes had."""

    expected: str
    got: str


def hash_mismatches(lines: Iterable[str]) -> list[Mismatch]:
    """The files pip refused for their hash in ``lines`` (a build's output), once each."""
    found: dict[Mismatch, None] = {}
    expected = ""
    for line in lines:
        if hit := _EXPECTED.search(line):
            expected = hit.group(1)
        elif (hit := _GOT.search(line)) and expected:
            found[Mismatch(expected, hit.group(1))] = None
            expected = ""
    return list(found)


def store_fix(mismatch: Mismatch, path: Path, now: str) -> str:
    """What to do about the file of the store at ``path`` (its bytes hash to ``now``, as
    checked again) that a build found with other bytes than ``mismatch.expected``."""
    if now != mismatch.expected:
        return (
            f"{path} in the store had lost its sha256 (its bytes hash to {now}): removed; "
            "build again to fetch it again"
        )
    return (
        f"{path} in the store has its sha256, but the build was given other bytes (sha256 "
        f"{mismatch.got}): BuildKit's copy of the build context; clear it (`docker builder "
        "prune`) and build again"
    )
