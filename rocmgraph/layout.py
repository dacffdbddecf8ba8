"""Where the repository's recipe files live."""

from __future__ import annotations

import os
from pathlib import Path

# The repository root: docker/ (templates, patches, helper files) sits beside
# the package. Pins name recipe files relative to it.
ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"

CACHE_ENV = "VERL_GRAPH_CACHE"


def default_cache() -> Path:
    """Fetched sources and files, shared by every pins file: they are addressed by content."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verl-rocm-graph"
