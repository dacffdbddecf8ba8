"""File and directory writes that never leave half a file (or directory) behind, each one
the disk refuses said as such (common/disk), and the modes and mtimes a build context's
files take."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from rocmgraph.common import disk
from rocmgraph.common.errors import DiskError


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path``: readers see the old file or the new one, never a mix."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``: readers see the old file or the new one, never a mix. A
    symlink is followed (the file it names gets the data, the link stays) and the file keeps
    its mode (a new one takes the umask's)."""
    path = path.resolve() if path.is_symlink() else path
    with disk.writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        with tempfile.NamedTemporaryFile(
            "wb", dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as tmp:
            try:
                os.fchmod(tmp.fileno(), mode)  # mkstemp's is 0600
                tmp.write(data)
                tmp.flush()
                os.fsync(tmp.fileno())
            except BaseException:
                Path(tmp.name).unlink()
                raise
        Path(tmp.name).replace(path)  # atomic on one filesystem


def cache_write_bytes(path: Path, data: bytes) -> bool:
    """atomic_write_bytes into a cache, which is only a cache: a write the disk refuses
    (read-only, full, no access) or that fails otherwise is skipped, silently. Whether it
    was written."""
    try:
        atomic_write_bytes(path, data)
    except (OSError, DiskError):  # DiskError: the refusal as ``disk.writing`` words it
        return False
    return True


def _umask() -> int:
    """This process's umask, read where Linux shows it: setting it to read it back would
    change it for the other threads meanwhile."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def owned(what: str) -> str:
    """The name prefix of a scratch entry this run makes in a shared folder: its pid first,
    so that what a killed run left is known as such (outside/leftovers sweeps it)."""
    return f"{os.getpid()}-{what}-"


def build_dir(final: Path, scratch: Path, fill: Callable[[Path], None]) -> Path:
    """``final``, made by ``fill`` in a fresh directory under ``scratch``.

    The directory is renamed into place only once ``fill`` returns; whatever
    happens (a failure, a timeout, an interrupt) the scratch copy goes, so a
    half-made directory is never left behind and never seen at ``final``.
    """
    with disk.writing(final):
        scratch.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=owned(final.name), dir=scratch))
        try:
            fill(work)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                work.rename(final)
            except OSError:
                if not final.is_dir():  # another process landed it first: keep that one
                    raise
            return final
        finally:
            shutil.rmtree(work, ignore_errors=True)


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in chunks (a torch wheel is GBs)."""
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def copy_hashed(source: Path, dest: Path) -> str:
    """Copy ``source`` to ``dest`` (a new file; its mode too) and return the sha256 of the
    bytes copied: what was written is what was hashed, in one read."""
    digest = hashlib.sha256()
    dest.unlink(missing_ok=True)  # a link to another file: never written through
    with source.open("rb") as data, dest.open("xb") as out:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    shutil.copymode(source, dest)
    return digest.hexdigest()


# BuildKit sends a context file again only when its size or mtime (or mode) changed, never
# for its bytes alone: a file dated by its content gets another mtime whenever it gets other
# bytes. From 1980-01-02 (nothing earlier fits a zip, which a wheel built from the files is,
# in any time zone) over 2**30 seconds, to the nanosecond.
_FIRST_SECOND = 315532800 + 86400
_SECONDS = 1 << 30


def content_mtime(sha256: str) -> int:
    """The mtime, in ns, of a context file whose bytes have ``sha256``."""
    seconds = _FIRST_SECOND + int(sha256[:8], 16) % _SECONDS
    return seconds * 10**9 + int(sha256[8:16], 16) % 10**9


def date_by_content(path: Path, sha256: str) -> bool:
    """Give ``path`` (whose bytes have ``sha256``) the mtime of its content; whether it had
    another."""
    facts, mtime = path.stat(), content_mtime(sha256)
    if facts.st_mtime_ns == mtime:
        return False
    os.utime(path, ns=(facts.st_atime_ns, mtime))
    return True


def settle(root: Path) -> None:
    """Give every file under ``root`` what a build copies in, in one walk: the mode git
    records (0755 if its owner may execute it, else 0644; every directory 0755), so the
    umask of the machine that made it does not reach an image (Ubuntu's 0002 gives 0664
    files, root's 0022 0644), and a date by its content (``content_mtime``), so BuildKit,
    which compares size and mtime, sees every change of bytes. A file linked in keeps its
    own: a store file is the store's (dated as the store checks it, Store.provide), and a
    source's cache (by commit) is never written."""
    for folder, _, files in os.walk(root):  # symbolic links to folders are not followed
        Path(folder).chmod(0o755)
        for name in files:
            path = Path(folder) / name
            facts = path.lstat()
            if stat.S_ISLNK(facts.st_mode) or facts.st_nlink > 1:
                continue  # a link's own mode means nothing
            path.chmod(0o755 if facts.st_mode & stat.S_IXUSR else 0o644)
            date_by_content(path, sha256_file(path))


def link_tree(tree: Path, dest: Path) -> None:
    """``tree`` at ``dest`` without git metadata (submodules' ``.git`` files too): each file
    a hard link to the tree's, where it has a mode git records (then settle leaves it
    as it is), else a copy. Linking vLLM's 5,460 files takes a fifth of the time copying
    them does, and the tree is not written: a patch replaces the files it changes (git
    apply writes a new file, never into the old one)."""
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [name for name in dirs if name != ".git"]
        here = dest / os.path.relpath(folder, tree)
        here.mkdir(parents=True, exist_ok=True)
        for name in [*files, *(d for d in dirs if (Path(folder) / d).is_symlink())]:
            if name == ".git":
                continue
            source, target = Path(folder) / name, here / name
            facts = source.lstat()
            if stat.S_ISLNK(facts.st_mode):
                target.symlink_to(source.readlink())
                continue
            if stat.S_IMODE(facts.st_mode) in (0o644, 0o755):
                with contextlib.suppress(OSError):  # another filesystem: a copy
                    os.link(source, target)
                    continue
            shutil.copy2(source, target)


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold flock(2) on the file at ``path``. A write that replaces the file
    (a rename: pinsedit) leaves a writer that waited holding the lock of the file it
    replaced: it locks the new one then. Where no lock can be had (a file system without
    them), what it guards goes on unlocked."""
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), path.stat()
        except OSError as exc:
            os.close(fd)
            if exc.errno in NO_LOCKS:
                yield
                return
            raise
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            break
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)  # and the lock with it


# What flock(2) says where it cannot lock: NFS emulates it with fcntl(2) locks, which need
# the file open for writing (EBADF), or a server that keeps none (ENOLCK).
NO_LOCKS = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)


def _open(path: Path) -> int:
    """The file, for writing where it may be (NFS locks only such), else for reading: a
    read-only pins file is still replaced, as its folder allows."""
    try:
        return os.open(path, os.O_RDWR)
    except PermissionError:
        return os.open(path, os.O_RDONLY)
