"""What a run leaves in shared folders while it works, and the sweep of what dead runs left.

A run names each scratch entry it makes in a shared folder (the cache's tmp/,
.build/secrets/) after its pid: ``<pid>-<what>`` (``fsutil.owned``). It removes its own when it
is done, even on failure; a run killed first cannot, and the next run that
uses the folder removes the entries of pids that are gone, never a live run's.
(A pid the system reuses keeps a leftover until that process ends too.)
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

from rocmgraph.outside.ports import alive

_OWNED = re.compile(r"(\d+)-")


class Sweeper:
    """Sweeps each folder it is given once: an owner of shared folders (the store, the
    source cache) keeps one for its life."""

    def __init__(self) -> None:
        self._swept: set[Path] = set()
        self._lock = threading.Lock()

    def scratch(self, folder: Path) -> Path:
        """``folder``, made if need be, rid of what dead runs left there, once."""
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:  # held through the sweep: a thread that comes meanwhile waits for it
            if folder not in self._swept:
                sweep(folder)
                self._swept.add(folder)
        return folder


def sweep(folder: Path) -> list[Path]:
    """Remove the entries of ``folder`` that runs which are gone left; what was removed."""
    gone = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        owner = _OWNED.match(entry.name)
        if owner is None or alive(int(owner.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        gone.append(entry)
    return gone
