"""A content-addressed store of downloaded files: ``<root>/files/<sha256>/<name>``.

A download goes to a temporary file first and moves into the store only
after its sha256 matches the pin; a mismatch keeps nothing and names the URL,
the expected and the actual hash. A no-op build does not download.

A stored file is not trusted by its path alone: a disk error or a hand (the
build context hard-links it) can change it. Beside each file a stamp records its
size, mtime and inode when its hash was last checked; a file whose stamp no
longer matches is hashed again before use, and one that lost its hash is
fetched again, with one warning that names it. Hashing a torch wheel takes
seconds, so only a changed file pays it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common import disk
from rocmgraph.common.errors import HashMismatch
from rocmgraph.common.fsutil import owned, sha256_file
from rocmgraph.outside import leftovers
from rocmgraph.outside.http import Http


@dataclass(frozen=True)
class Stored:
    path: Path
    sha256: str


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
            final = self.path(actual, name)
            with disk.writing(final):
                final.parent.mkdir(parents=True, exist_ok=True)
                tmp.replace(final)
            _write_stamp(final)
            return Stored(final, actual)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _still(self, path: Path, sha256: str) -> bool:
        """Whether the stored ``path`` still has ``sha256``: by its stamp, else by hashing it.
        A file that lost its hash is removed (the caller fetches it again), with a warning."""
        if _read_stamp(path) == _stamp(path):
            return True
        actual = sha256_file(path)
        if actual == sha256:
            _write_stamp(path)
            return True
        print(
            f"warning: {path} has sha256 {actual}, not the {sha256} it was stored under; "
            "fetching it again",
            file=sys.stderr,
        )
        path.unlink()
        _stamp_path(path).unlink(missing_ok=True)
        return False


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
