"""Who holds a TCP port on this machine (Linux's /proc), so that a port clash names its
holder instead of guessing, and whether a process still lives."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # the state column of /proc/net/tcp


def listener(port: int, proc: Path = PROC) -> str | None:
    """``pid 123 (docker-registry serve ...)`` for the process listening on ``port``, or None
    (nobody, or not a process this user may see)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == LISTEN and fields[1].endswith(f":{port:04X}"):
                inodes.add(fields[9])
    if not inodes:
        return None
    for fd_dir in proc.glob("[0-9]*/fd"):
        if {f"socket:[{inode}]" for inode in inodes} & _links(fd_dir):
            return f"pid {fd_dir.parent.name} ({command_line(int(fd_dir.parent.name), proc)})"
    return None


def _links(fd_dir: Path) -> set[str]:
    """What a process's descriptors point at; one that closes while read (the listing's
    own) is skipped, a process that cannot be read has none."""
    found: set[str] = set()
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return found
    for fd in fds:
        try:
            found.add(str(fd.readlink()))
        except OSError:
            continue
    return found


def command_line(pid: int, proc: Path = PROC) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
