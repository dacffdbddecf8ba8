"""What the last build of each stage was made of, so a plan can say why it rebuilds.

The image tags are the truth about what is built; a record only explains. A
record is written after a stage builds, atomically, one JSON file per stage, in
the folder of its image's namespace (Run.records_dir): two pins files side by
side (pins.toml, pins-rocm702.toml) build different images, and one's last
build says nothing about why the other's stage rebuilds.

A build cannot tag its image and write its record in one step, so the record
is written twice: before the build, as the build it begins (``begin``), and
after it, with how long it took (``save``). A run killed between the tag and
the second write leaves the first: it counts as the stage's last build when its
image is tagged, and the run that reads it needs no repair (``load``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.graph.keys import Inputs


@dataclass(frozen=True)
class Record:
    """A stage's last build on this machine."""

    key: str
    inputs: Inputs
    seconds: float | None  # how long it took; None: not known (its run was killed)


def _path(folder: Path, stage: str) -> Path:
    return folder / f"{stage}.json"


def _begun(folder: Path, stage: str) -> Path:
    return folder / f"{stage}.building.json"


def _write(path: Path, key: str, inputs: Inputs, seconds: float | None) -> None:
    rounded = None if seconds is None else round(seconds, 1)
    data = {"key": key, "inputs": inputs.as_json(), "seconds": rounded}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))


def begin(folder: Path, stage: str, key: str, inputs: Inputs, seconds: float | None = None) -> None:
    """The build of ``key`` begins (or ended, ``seconds`` long, and is about to be tagged):
    what it is made of, should its run not live to ``save``."""
    _write(_begun(folder, stage), key, inputs, seconds)


def save(folder: Path, stage: str, key: str, inputs: Inputs, seconds: float = 0.0) -> None:
    """The build of ``key`` ended well (its image is tagged), after ``seconds``."""
    _write(_path(folder, stage), key, inputs, seconds)
    _begun(folder, stage).unlink(missing_ok=True)


def load(
    folder: Path, stage: str, tagged: Callable[[str], bool] = lambda key: False
) -> Record | None:
    """The stage's last build, or None (never built, or unreadable). A build begun and never
    saved is the last one if its key is ``tagged``: its run was killed after the tag."""
    begun = _read(_begun(folder, stage))
    if begun is not None and tagged(begun.key):
        return begun
    return _read(_path(folder, stage))


def _read(path: Path) -> Record | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("inputs"), dict):
        return None
    seconds = data.get("seconds")
    return Record(
        str(data.get("key", "")),
        Inputs.from_json(data["inputs"]),
        float(seconds) if isinstance(seconds, int | float) else None,
    )


def seconds(folder: Path, stage: str, key: str) -> float | None:
    """How long the build of ``key`` took, if this machine's last build of the stage was it."""
    record = _read(_path(folder, stage))
    return record.seconds if record and record.key == key else None
