"""Where the repository's recipe files live."""

from __future__ import annotations

from pathlib import Path

# The repository root: docker/ (templates, patches, helper files) sits beside
# the package. Pins name recipe files relative to it.
ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
