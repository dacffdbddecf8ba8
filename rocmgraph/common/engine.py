"""The seam to the container engine: the one interface the graph builds through.

The planner asks only whether an image exists; the builder hands over one
rendered stage at a time. Only one module may talk to docker, behind this
interface.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class ImageStore(enum.Enum):
    """Where an engine keeps its images: its own layer store (overlay2; Docker's default up
    to 28), or containerd's content store and snapshotters (Docker 29's default)."""

    CLASSIC = "classic"
    CONTAINERD = "containerd"


@dataclass(frozen=True)
class EngineFacts:
    """What an engine is, as a benchmark or a bug report names it."""

    server: str  # dockerd's version: 26.1.5
    buildx: str  # the client's buildx: 0.13.1
    store: ImageStore


@dataclass(frozen=True)
class BuildJob:
    """Everything an engine needs to build one stage."""

    stage: str
    ref: str  # <namespace>/<stage>:<key>
    context: Path  # holds the rendered Dockerfile and everything it uses
    build_args: Mapping[str, str] = field(default_factory=dict)  # parent image refs
    labels: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, Path] = field(default_factory=dict)  # BuildKit secrets: id -> file
    hide: tuple[str, ...] = ()  # URLs whose passwords its log must not show
    no_cache: bool = False  # every step run again (a rebuild that checks the first)
    target: str = ""  # the stage of a multi-stage Dockerfile it builds ("": the last)
    network: str = ""  # its steps' network ("": the engine's); "none" for a sealed stage
    log: Path | None = None  # where its output goes (None: the engine's log of the stage)
    # Each line of the build's output as it comes (its log has them all); None: printed.
    on_line: Callable[[str], None] | None = field(default=None, compare=False)


class Engine(Protocol):
    def image_exists(self, ref: str) -> bool: ...

    def image_id(self, ref: str) -> str | None: ...

    def image_ids(self, refs: Sequence[str]) -> Mapping[str, str | None]:
        """``image_id`` of every ref of ``refs``, asked together (a run asks of every stage)."""

    def build(self, job: BuildJob) -> str:
        """Build ``job``; the digest of the image it made ("": not known)."""

    def config(self, ref: str) -> Mapping[str, object]:
        """The configuration of the image ``ref`` (its environment, entrypoint, ...)."""

    def layers(self, ref: str) -> list[str]:
        """The layers of the image ``ref``, bottom first (their diff ids)."""

    def tag(self, ref: str, alias: str) -> None: ...

    def refresh(self) -> None:
        """Forget what is known of the engine's images: another run may have built some."""

    def pull(self, ref: str) -> None: ...

    def push(self, ref: str) -> str: ...

    def labels(self, ref: str) -> Mapping[str, str]: ...

    def untag(self, ref: str) -> None: ...


class Deferred:
    """An engine connected when first asked something: `doit plan` still shows every key
    where no engine answers, and says why it cannot tell what is built."""

    def __init__(self, connect: Callable[[], Engine]) -> None:
        self._connect = connect

    @functools.cached_property
    def _engine(self) -> Engine:
        return self._connect()

    def image_exists(self, ref: str) -> bool:
        return self._engine.image_exists(ref)

    def image_id(self, ref: str) -> str | None:
        return self._engine.image_id(ref)

    def image_ids(self, refs: Sequence[str]) -> Mapping[str, str | None]:
        return self._engine.image_ids(refs)

    def build(self, job: BuildJob) -> str:
        return self._engine.build(job)

    def config(self, ref: str) -> Mapping[str, object]:
        return self._engine.config(ref)

    def layers(self, ref: str) -> list[str]:
        return self._engine.layers(ref)

    def tag(self, ref: str, alias: str) -> None:
        self._engine.tag(ref, alias)

    def refresh(self) -> None:
        self._engine.refresh()

    def pull(self, ref: str) -> None:
        self._engine.pull(ref)

    def push(self, ref: str) -> str:
        return self._engine.push(ref)

    def labels(self, ref: str) -> Mapping[str, str]:
        return self._engine.labels(ref)

    def untag(self, ref: str) -> None:
        self._engine.untag(ref)


def familiar(ref: str) -> str:
    """``ref`` as `docker image ls` prints it: Docker Hub's host left out, and its
    ``library/`` namespace (docker.io/library/x:1 is x:1, docker.io/amd/x:1 is amd/x:1)."""
    name = ref.removeprefix("index.docker.io/").removeprefix("docker.io/")
    if name.startswith("library/") and "/" not in name.removeprefix("library/"):
        return name.removeprefix("library/")
    return name
