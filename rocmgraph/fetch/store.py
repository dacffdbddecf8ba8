"""A content-addressed store of downloaded files: ``<root>/files/<sha256>/<name>``.

A download goes to a temporary file first and moves into the store only
after its sha256 matches the pin; a mismatch keeps nothing and names the URL,
the expected and the actual hash. A no-op build does not download.

A stored file is not trusted by its path alone: a disk error or a hand (the
build context hard-links it) can change it, its size, mtime and inode kept. What a
build is given is hashed as it is handed over (``provide``): a second or so per GB,
paid only by a stage that builds, whose build costs far more. Other uses (audit,
lock, patch checks) trust a stamp beside each file, its size, mtime and inode when
its hash was last checked, and hash a file whose stamp no longer matches. Either
way a file that lost its hash is fetched again, with one warning that names it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common import disk
from rocmgraph.common.errors import FetchError, HashMismatch
from rocmgraph.common.fsutil import copy_hashed, date_by_content, owned, sha256_file
from rocmgraph.outside import leftovers
from rocmgraph.outside.http import Http


@dataclass(frozen=True)
class Stored:
    path: Path
    sha256: str  # what its bytes hash to (checked)


class Store:
    def __init__(self, root: Path, http: Http | None = None) -> None:
        self.root = root
        self.http = http or Http()
        self._sweeper = leftovers.Sweeper()

    def path(self, sha256: str, name: str) -> Path:
        return self.root / "files" / sha256 / name

    def fetch(self, url: str, name: str, sha256: str, what: str) -> Stored:
        """The file ``name`` with ``sha256`` (downloaded from ``url`` if not stored yet).

        With ``sha256`` empty (not locked yet) the download is kept under the
        hash it has, which the caller records.
        """
        stored = self.path(sha256, name)
        if sha256 and stored.is_file() and self._still(stored, sha256):
            return Stored(stored, sha256)
        with disk.writing(self.root / "tmp"):
            tmp_dir = self._sweeper.scratch(self.root / "tmp")
            fd, tmp_name = tempfile.mkstemp(prefix=owned(name), dir=tmp_dir)
        os.close(fd)  # the download reopens it by name
        tmp = Path(tmp_name)
        try:
            with disk.writing(tmp):  # a full disk, not the network: said as such
                actual = self.http.download(url, tmp)
            if sha256 and actual != sha256:
                raise HashMismatch(
                    f"{what}: {url} has sha256 {actual}, the pins say {sha256}; nothing was "
                    "kept. If upstream replaced the file on purpose, pin the new hash",
                    url,
                    sha256,
                    actual,
                )
            date_by_content(tmp, actual)  # as a build context has it (provide)
            final = self.path(actual, name)
            with disk.writing(final):
                final.parent.mkdir(parents=True, exist_ok=True)
                tmp.replace(final)
            _write_stamp(final)
            return Stored(final, actual)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def provide(self, url: str, name: str, sha256: str, what: str, dest: Path) -> Stored:
        """The file ``name`` with ``sha256`` (fetched as ``fetch`` does) at ``dest`` for a
        build: a hard link (a torch wheel is GBs), or a copy across file systems, its bytes
        hashed as they are handed over whatever the stamp says, and dated by their hash
        (fsutil.content_mtime) so that BuildKit, which sees a context file change by its
        size and mtime, sees other bytes as a change. One that lost its hash is fetched
        again, with a warning."""
        for _ in range(2):  # once more after a file that lost its hash
            stored = self.path(sha256, name)
            if not stored.is_file():
                stored = self.fetch(url, name, sha256, what).path
            actual = _hand_over(stored, dest)
            if actual == sha256:
                date_by_content(dest, sha256)  # a link dates the stored file: its stamp follows
                _write_stamp(stored)
                return Stored(stored, sha256)
            dest.unlink(missing_ok=True)
            if actual:
                self._lost(stored, sha256, actual)
        raise FetchError(
            f"{what}: {stored} lost its sha256 {sha256} again right after it was fetched (now "
            f"{actual or 'gone'}); check the disk under {self.root}"
        )

    def recheck(self, sha256: str) -> Stored | None:
        """The file stored under ``sha256``, hashed again (a build found other bytes than
        that hash names: ``Stored.sha256`` says what it holds now); one that lost its hash is
        removed, for the next run to fetch again. None when the store holds none."""
        folder = self.root / "files" / sha256
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.name.startswith(".") or not path.is_file():
                continue  # a stamp
            actual = sha256_file(path)
            if actual != sha256:
                path.unlink()
                _stamp_path(path).unlink(missing_ok=True)
            return Stored(path, actual)
        return None

    def _still(self, path: Path, sha256: str) -> bool:
        """Whether the stored ``path`` still has ``sha256``: by its stamp, else by hashing it.
        A file that lost its hash is removed (the caller fetches it again), with a warning."""
        if _read_stamp(path) == _stamp(path):
            return True
        actual = sha256_file(path)
        if actual == sha256:
            _write_stamp(path)
            return True
        self._lost(path, sha256, actual)
        return False

    def _lost(self, path: Path, sha256: str, actual: str) -> None:
        """The stored ``path`` hashes to ``actual``, not ``sha256``: said, and removed."""
        print(
            f"warning: {path} has sha256 {actual}, not the {sha256} it was stored under; "
            "fetching it again",
            file=sys.stderr,
        )
        path.unlink(missing_ok=True)  # another run may have found it so first
        _stamp_path(path).unlink(missing_ok=True)


def _hand_over(stored: Path, dest: Path) -> str:
    """``stored`` at ``dest``, linked or else copied; the sha256 of the bytes ``dest`` has
    ("": ``stored`` is gone, removed meanwhile by a run that found it changed)."""
    try:
        os.link(stored, dest)
    except FileNotFoundError:
        return ""
    except OSError:  # another file system
        return copy_hashed(stored, dest)
    return sha256_file(dest)


def _stamp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.checked")


def _stamp(path: Path) -> str:
    status = path.stat()
    return f"{status.st_size} {status.st_mtime_ns} {status.st_ino}"


def _read_stamp(path: Path) -> str | None:
    try:
        return _stamp_path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def _write_stamp(path: Path) -> None:
    with contextlib.suppress(OSError):  # without a stamp, the next use hashes again
        _stamp_path(path).write_text(_stamp(path), encoding="utf-8")
