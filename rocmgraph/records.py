"""What the last build of each stage was made of, so a plan can say why it rebuilds.

The image tags are the truth about what is built; a record only explains. A
record is written after a stage builds, atomically, one JSON file per stage, in
the folder of its image's namespace (Run.records_dir): two pins files side by
side (pins.toml, pins-rocm702.toml) build different images, and one's last
build says nothing about why the other's stage rebuilds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.fsutil import atomic_write_text
from rocmgraph.keys import Inputs


@dataclass(frozen=True)
class Record:
    """A stage's last build on this machine."""

    key: str
    inputs: Inputs
    seconds: float  # how long it took


def _path(folder: Path, stage: str) -> Path:
    return folder / f"{stage}.json"


def save(folder: Path, stage: str, key: str, inputs: Inputs, seconds: float = 0.0) -> None:
    data = json.dumps(
        {"key": key, "inputs": inputs.as_json(), "seconds": round(seconds, 1)},
        indent=1,
        sort_keys=True,
    )
    atomic_write_text(_path(folder, stage), data)


def load(folder: Path, stage: str) -> Record | None:
    """The stage's last build, or None (never built, or unreadable)."""
    try:
        data = json.loads(_path(folder, stage).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("inputs"), dict):
        return None
    seconds = data.get("seconds", 0.0)
    return Record(
        str(data.get("key", "")),
        Inputs.from_json(data["inputs"]),
        float(seconds) if isinstance(seconds, int | float) else 0.0,
    )


def seconds(folder: Path, stage: str, key: str) -> float | None:
    """How long the build of ``key`` took, if this machine's last build of the stage was it."""
    record = load(folder, stage)
    return record.seconds if record and record.key == key else None
