"""What the last build of each stage was made of, so a plan can say why it rebuilds.

The image tags are the truth about what is built; a record only explains. A
record is written after a stage builds, atomically, one JSON file per stage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocmgraph.fsutil import atomic_write_text
from rocmgraph.keys import Inputs


def _path(state_dir: Path, stage: str) -> Path:
    return state_dir / "records" / f"{stage}.json"


def save(state_dir: Path, stage: str, key: str, inputs: Inputs) -> None:
    data = json.dumps({"key": key, "inputs": inputs}, indent=1, sort_keys=True)
    atomic_write_text(_path(state_dir, stage), data)


def load(state_dir: Path, stage: str) -> tuple[str, Inputs] | None:
    """The key and inputs of the stage's last build, or None (never built, or unreadable)."""
    try:
        data: Any = json.loads(_path(state_dir, stage).read_text(encoding="utf-8"))
        return str(data["key"]), dict(data["inputs"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
