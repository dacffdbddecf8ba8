"""doit's own database (.doit.db): a cache of which tasks ran, which two commands in one
checkout (a plan while a build runs) share. It is doit's sqlite3 backend, where each write
is a transaction (dbm.dumb rewrites its index in place, and a reader meanwhile finds none).
One that cannot be read is set aside, if no live command holds it; where it cannot be
written (a read-only checkout), doit keeps which tasks ran in memory."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DOIT_DB = ".doit.db"  # doit's default dep_file, beside dodo.py (doit's cwd)
BACKEND = "sqlite3"
IN_MEMORY = ":memory:"  # sqlite's database of one connection, gone with it
# Companions sqlite keeps beside a database, which belong to it (a journal is replayed into
# the database of its name): set aside with it.
COMPANIONS = ("", "-journal", "-wal", "-shm")
# What sqlite says of a database that is not at fault: another command writes it, the file
# or its disk cannot be written, or read.
NOT_ITS_FAULT = frozenset({
    sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM,
})  # fmt: skip


@dataclass(frozen=True)
class Held:
    """doit's database as this command holds it: the file doit is to use (its ``dep_file``),
    and this command's share of it, kept while the command lives (None where none can be
    had: a read-only folder without a holders file yet, a file system without locks)."""

    dep_file: str
    share: int | None  # a file descriptor


def hold(path: Path) -> Held:
    """The database at ``path``, before doit opens it. Every live command holds a share of
    it (a shared flock(2) on ``<path>.holders``); one that cannot be read is set aside, with
    one warning, only by a command that holds it alone. One this command cannot write is
    not used: doit keeps what ran in memory."""
    share = _share(path.with_name(f"{path.name}.holders"))
    if path.exists() and not _readable(path) and not _set_aside_alone(path, share):
        print(
            f"warning: {path} cannot be read, and another command may hold it: left as it is "
            "(remove it when none runs); this command keeps no record of which tasks ran",
            file=sys.stderr,
        )
        return Held(IN_MEMORY, share)
    return Held(str(path) if _writable(path) else IN_MEMORY, share)


def _share(path: Path) -> int | None:
    """A shared lock on ``path``, made if need be: its file descriptor, which nothing closes
    (the kernel does, with the process); None where no lock can be had."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY)  # made before, in a folder this user cannot write
        except OSError:
            return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only for one setting a database aside
    except OSError:  # a file system without locks
        os.close(fd)
        return None
    return fd


def _set_aside_alone(path: Path, share: int | None) -> bool:
    """Set the database at ``path`` aside if no other command holds a share; whether it is
    out of the way (another command may have set it aside first)."""
    if share is None:
        return False  # who holds it cannot be known
    try:
        fcntl.flock(share, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        alone = False
    else:
        alone = True
        if not _readable(path):
            _set_aside(path)
    fcntl.flock(share, fcntl.LOCK_SH)  # a conversion that failed may have let go of it
    return alone


def _set_aside(path: Path) -> None:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    moved = []
    for part in (path.with_name(path.name + suffix) for suffix in COMPANIONS):
        with contextlib.suppress(FileNotFoundError):
            part.rename(part.with_name(f"{part.name}.broken-{stamp}"))
            moved.append(f"{part.name}.broken-{stamp}")
    print(
        f"warning: {path} cannot be read; set aside as {', '.join(moved)}; which tasks ran "
        "is forgotten, what is built is not (the image tags say)",
        file=sys.stderr,
    )


def _readable(path: Path) -> bool:
    """Whether doit can read the database at ``path`` (a missing one: yes, it makes one):
    sqlite's, with a table of tasks whose data are JSON, or none yet (a new database)."""
    try:
        uri = f"{path.absolute().as_uri()}?mode=rw"  # read-only where the file is
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            tables = db.execute("select name from sqlite_master where name = 'doit'").fetchall()
            rows = db.execute("select task_data from doit").fetchall() if tables else []
        for (data,) in rows:
            json.loads(data)
    except sqlite3.Error as error:
        return error.sqlite_errorcode & 0xFF in NOT_ITS_FAULT  # (its primary code)
    except ValueError:
        return False
    return True


def _writable(path: Path) -> bool:
    """Whether sqlite can write the database at ``path``: it, and its journal beside it."""
    return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
