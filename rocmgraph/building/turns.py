"""Locks on shared state: what one run builds or serves, another run waits for.

Two runs share a state directory (.build/) when they build from pins files side
by side: the contexts they prepare, the logs they write, the demo's servers.
A lock is one file, locked with flock(2), whose holder writes who it is into
it, so that the run that waits can say for whom. The kernel lets go of a lock
when its holder dies, however it dies: a kill -9 never leaves one behind.

Locks are as narrow as what they guard: one per stage key (two archs share the
stages that do not depend on the arch, and build the others side by side), and
one for a demo profile's servers. A TCP port is the machine's, not a
checkout's: its lock lives in a folder every checkout shares (``on_port``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from rocmgraph.common.errors import GraphToolError

POLL = 0.2  # seconds between two tries of a lock another run holds
UNSAID = "another build (it has not said which yet)"
UNSAID_GRACE = 1.0  # seconds a waiter gives a new holder to say who it is

# When this run started: the lock's holder says so to the runs that wait for it.
STARTED = time.time()

# Where the locks of machine-wide things (TCP ports) live: /tmp itself, not $TMPDIR,
# which differs between users and CI jobs; not the cache, which is per user and may be on
# NFS. Every user may write there, it is emptied at boot (a lock means nothing after one),
# and it is shared by every checkout that shares the ports (one network namespace).
MACHINE = Path("/tmp")


class Busy(GraphToolError):
    """Another run holds a lock, and this one was told not to wait that long."""


@dataclass(frozen=True)
class Holder:
    """A run that holds a lock, and what it does under it."""

    pid: int
    started: float  # the run's start, in seconds since the epoch
    arch: str
    doing: str  # "builds vllm 1a2b3c4d5e6f"

    @classmethod
    def me(cls, arch: str, doing: str) -> Holder:
        return cls(os.getpid(), STARTED, arch, doing)

    def describe(self, now: float | None = None) -> str:
        """Who holds the lock, said at ``now`` (default: this moment); the date only when
        the holder started on another day."""
        started = time.localtime(self.started)
        same_day = started[:3] == time.localtime(now)[:3]
        when = time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", started)
        return f"the build started at {when} by pid {self.pid} (arch {self.arch}): it {self.doing}"


def on_port(
    port: int, me: Holder, wait: float | None = None, folder: Path = MACHINE
) -> contextlib.AbstractContextManager[bool]:
    """Hold TCP ``port``'s lock, machine-wide: a run in another checkout (its own .build/,
    its own locks) that serves on the port waits here, instead of failing to bind it."""
    return held(folder / f"rocmgraph-port-{port}.turn", me, wait, mode=0o666)


@contextlib.contextmanager
def held(path: Path, me: Holder, wait: float | None = None, mode: int = 0o644) -> Iterator[bool]:
    """Hold the lock ``path`` for the body; yields whether another run held it first.

    ``wait`` is how many seconds to wait for another holder (None: as long as it
    takes); past it, Busy names the holder. Waiting is said once, on stderr. A new
    lock file gets ``mode`` (0o666: any user's run may take it over).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = None if wait is None else started + wait
    waited = told = False
    while True:
        fd = _open(path, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            said = _holder(fd)
            os.close(fd)
            waited, other = True, said or UNSAID
            if deadline is not None and time.monotonic() >= deadline:
                raise Busy(_busy(other, wait or 0.0)) from None
            # A holder writes who it is just after it takes the lock: a moment to let it.
            if not told and (said or time.monotonic() - started >= UNSAID_GRACE):
                print(f"waiting for {other}", file=sys.stderr, flush=True)
                told = True
            time.sleep(POLL)
            continue
        if _same_file(fd, path):
            break
        os.close(fd)  # its holder removed it as we opened it: lock the file now at the path
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(me)).encode(), 0)
        yield waited
    finally:
        # Removed while still locked: a run that opened it meanwhile finds it gone and
        # opens the new one (_same_file), so one lock never has two holders. Another
        # user's file in /tmp (sticky) stays, unlocked, for the next run to take.
        with contextlib.suppress(FileNotFoundError, PermissionError):
            path.unlink()
        os.close(fd)


def _open(path: Path, mode: int) -> int:
    """The lock file, open for writing; made with ``mode`` if missing. An existing one is
    opened without O_CREAT, which Linux refuses for another user's file in /tmp
    (fs.protected_regular); a symbolic link is never followed (another user could point
    it at a file of ours, which the holder truncates)."""
    try:
        return os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise GraphToolError(
            f"{path} is a symbolic link, not a lock file of this tool; remove it"
        ) from None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:  # made meanwhile by another run
        return _open(path, mode)
    os.fchmod(fd, mode)  # the bits the umask took
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _holder(fd: int) -> str | None:
    """Who holds the lock open as ``fd``, as its holder wrote it; None before it has."""
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
        return Holder(**data).describe()
    except (OSError, ValueError, TypeError):  # not written yet, or by another version
        return None


def _busy(other: str, wait: float) -> str:
    waited = "not waiting (wait=0)" if wait == 0 else f"waited {wait:g} s (wait={wait:g})"
    return f"{waited} for {other}; rerun when it ends, or without wait= to wait as long as it takes"
