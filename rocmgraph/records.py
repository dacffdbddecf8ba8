"""What the last build of each stage was made of, so a plan can say why it rebuilds.

The image tags are the truth about what is built; a record only explains. A
record is written after a stage builds, atomically, one JSON file per stage, in
the folder of its image's namespace (Run.records_dir): two pins files side by
side (pins.toml, pins-rocm702.toml) build different images, and one's last
build says nothing about why the other's stage rebuilds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocmgraph.fsutil import atomic_write_text
from rocmgraph.keys import Inputs


def _path(folder: Path, stage: str) -> Path:
    return folder / f"{stage}.json"


def save(folder: Path, stage: str, key: str, inputs: Inputs, seconds: float = 0.0) -> None:
    data = json.dumps(
        {"key": key, "inputs": inputs, "seconds": round(seconds, 1)}, indent=1, sort_keys=True
    )
    atomic_write_text(_path(folder, stage), data)


def load(folder: Path, stage: str) -> tuple[str, Inputs] | None:
    """The key and inputs of the stage's last build, or None (never built, or unreadable)."""
    data = _read(folder, stage)
    return (str(data["key"]), dict(data["inputs"])) if data else None


def seconds(folder: Path, stage: str, key: str) -> float | None:
    """How long the build of ``key`` took, if this machine's last build of the stage was it."""
    data = _read(folder, stage)
    return float(data.get("seconds", 0.0)) if data and data.get("key") == key else None


def _read(folder: Path, stage: str) -> dict[str, Any] | None:
    try:
        data = json.loads(_path(folder, stage).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and "key" in data and "inputs" in data else None
    except (OSError, ValueError):
        return None
