"""Prebuilt wheels: resolved against a flat index, fetched by sha256 into a store.

The seam the graph uses: a store hands out the local file of a pinned wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rocmgraph.pins import Wheel


class WheelStore(Protocol):
    def path(self, name: str, wheel: Wheel) -> Path:
        """The verified local file of ``wheel``, fetched first if need be."""
        ...
