"""Git sources: the seam through which a stage gets its tree at the pinned commit."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rocmgraph.pins import GitSource


class SourceFetcher(Protocol):
    def tree(self, name: str, source: GitSource) -> Path:
        """A checked-out tree of ``source`` at its pinned commit, submodules included."""
        ...
