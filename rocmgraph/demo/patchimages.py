"""Images of a patch: the files as it expects to find them, and as it leaves them.

The test upstreams and the demo's sources are made from these, so they carry
exactly the paths and context the real patches touch, and nothing else of
upstream. Not used by any command: rocmgraph/trees/patches.py reads and applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmgraph.trees.patches import Patch


def preimage(patch: Patch) -> dict[str, str]:
    """The files as the patch expects to find them: each hunk's old lines at its line.

    Lines no hunk covers are placeholders. Test upstreams and the demo's
    sources are made from this, so they carry exactly the paths and context
    the real patches touch, and nothing else of upstream.
    """
    return _image(patch, old=True)


def postimage(patch: Patch) -> dict[str, str]:
    """The files once the patch is applied (what an upstream that merged it has)."""
    return _image(patch, old=False)


@dataclass(frozen=True)
class Hunk:
    start: int  # the first line, in the old or the new file
    text: str  # its lines, old or new


def hunks(patch: Patch, *, old: bool = True) -> dict[str, list[Hunk]]:
    """Each file's hunks, as the old (or new) file has them."""
    found: dict[str, list[Hunk]] = {}
    for part in re.split(r"^(?=diff --git )", patch.text, flags=re.MULTILINE):
        match = re.match(r"diff --git a/(\S+) b/(\S+)", part)
        if not match:
            continue
        name = match.group(1) if old else match.group(2)
        for hunk in re.finditer(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@.*\n((?:[ +\-\\].*\n?)*)",
                                part, re.MULTILINE):  # fmt: skip
            keep = (" ", "-" if old else "+")
            lines = [line[1:] for line in hunk.group(3).splitlines() if line[:1] in keep]
            start = int(hunk.group(1) if old else hunk.group(2))
            found.setdefault(name, []).append(Hunk(start, "".join(f"{line}\n" for line in lines)))
    return found


def _image(patch: Patch, *, old: bool) -> dict[str, str]:
    images = {}
    for name, file_hunks in hunks(patch, old=old).items():
        comment = "//" if name.endswith((".c", ".cc", ".cpp", ".cu", ".h", ".hpp")) else "#"
        lines: list[str] = []
        for hunk in file_hunks:
            lines += [f"{comment} line {n}\n" for n in range(len(lines) + 1, hunk.start)]
            lines += hunk.text.splitlines(keepends=True)
        lines.append(f"{comment} end of {name}\n")
        images[name] = "".join(lines)
    return images
