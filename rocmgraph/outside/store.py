"""A content-addressed store of downloaded files: ``<root>/files/<sha256>/<name>``.

A download goes to a temporary file first and moves into the store only
after its sha256 matches the pin; a mismatch keeps nothing and names the URL,
the expected and the actual hash. A stored file is trusted by its hash, so a
no-op build does not download.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.errors import HashMismatch
from rocmgraph.outside.http import Http


@dataclass(frozen=True)
class Stored:
    path: Path
    sha256: str


class Store:
    def __init__(self, root: Path, http: Http | None = None) -> None:
        self.root = root
        self.http = http or Http()

    def path(self, sha256: str, name: str) -> Path:
        return self.root / "files" / sha256 / name

    def fetch(self, url: str, name: str, sha256: str, what: str) -> Stored:
        """The file ``name`` with ``sha256`` (downloaded from ``url`` if not stored yet).

        With ``sha256`` empty (not locked yet) the download is kept under the
        hash it has, which the caller records.
        """
        if sha256 and self.path(sha256, name).is_file():
            return Stored(self.path(sha256, name), sha256)
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=tmp_dir)
        os.close(fd)  # the download reopens it by name
        tmp = Path(tmp_name)
        try:
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
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.replace(final)
            return Stored(final, actual)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
