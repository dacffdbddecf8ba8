"""A write its disk refused, said in one line wherever it happens: the path, its disk (the
file system, where it is mounted, how much is free) and the fix.

Writers into the cache and the state folder go through ``writing``; a tool that says a
refusal only in words (git) through ``in_words``; the doit reporter words any other such
OSError with ``refused`` too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from rocmgraph.common.errors import DiskError
from rocmgraph.common.layout import CACHE_ENV, default_cache

# What each refusal is, and its fix.
REFUSALS = {
    errno.ENOSPC: ("no space is left on its disk", "free space on it"),
    errno.EDQUOT: ("its disk quota is used up", "free space within your quota"),
    errno.EROFS: ("its file system is read-only", "mount it read-write"),
    errno.EACCES: ("this user has no access to it", "give this user access to it"),
}
# A refusal in a tool's words: the C library's (outside/git runs git in the C locale), git's
# own for a short write, and curl's for a file it could not write, all git's dumb HTTP
# transport says of a full disk. Not EACCES's: "Permission denied" is also ssh's for a key.
WORDS = {
    "No space left on device": errno.ENOSPC,
    "Out of diskspace": errno.ENOSPC,
    "Failure writing output to destination": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
}
MOUNTS = Path("/proc/self/mountinfo")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Writes into ``path`` (a file or a folder) in the body: one the disk refuses is a
    DiskError that names ``path``, the name its writer knows it by."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in REFUSALS:
            raise
        raise refused(exc.errno, path) from None


def refused(code: int, path: Path | None) -> DiskError:
    """The refusal ``code`` (an errno of REFUSALS) of a write into ``path`` (None: an
    error that named no file, which ``writing`` keeps from the cache's writers)."""
    problem, fix = REFUSALS[code]
    if path is None:
        return DiskError("a file", problem, os.strerror(code), fix)
    if path.resolve().is_relative_to(default_cache().resolve()):
        fix += f", or set ${CACHE_ENV} to a folder on another disk"
    return DiskError(str(path), problem, disk_of(path), fix)


def in_words(text: str) -> int | None:
    """The refusal a tool's message ``text`` tells of, if it tells of one."""
    return next((code for words, code in WORDS.items() if words in text), None)


def disk_of(path: Path) -> str:
    """``ext4 at /home, 3.2 GB free of 500.1 GB``: the file system that holds ``path``, or
    would (its nearest existing folder)."""
    here = path.resolve()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        facts = os.statvfs(here)
    except OSError as exc:
        return f"its disk cannot be read: {exc.strerror}"
    free, total = facts.f_bavail * facts.f_frsize, facts.f_blocks * facts.f_frsize
    space = f"{_size(free)} free of {_size(total)}"
    mount = _mount(here)
    return f"{mount[0]} at {mount[1]}, {space}" if mount else space


def _mount(path: Path) -> tuple[str, str] | None:
    """The file system type and mount point that hold ``path``: the longest mount point
    above it, the last mounted of equal ones (it hides the others)."""
    try:
        lines = MOUNTS.read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:  # "36 35 98:0 /root /mnt/point rw,noatime shared:1 - ext4 /dev/sda1 rw"
        fields = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # \040: space
        kind = fields[fields.index("-") + 1]
        if path.is_relative_to(point) and (found is None or len(point) >= len(found[1])):
            found = (kind, point)
    return found


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
