"""Where the repository's recipe files live, and the cache of what is fetched."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# The repository root: docker/ (templates, patches, helper files) sits beside
# the package. Pins name recipe files relative to it.
ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"

CACHE_ENV = "VERL_GRAPH_CACHE"


def default_cache(environ: Mapping[str, str] = os.environ) -> Path:
    """Fetched sources and files, shared by every pins file: they are addressed by content."""
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verl-rocm-graph"
