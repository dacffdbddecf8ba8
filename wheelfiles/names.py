"""What a wheel's file name says, and whether it is the wheel a pin means.

One rule for both places that ask: the pins loader (a pinned ``file`` must not
contradict its table's name and version, ``[python].version`` or the platform)
and the index resolver (which files of a listing a pin may resolve to).

A pinned version without a local part (``2.12.0``) means any build of that
public version (``2.12.0+rocm7.14.0.lw.git1a2b3c4d``); one with a local part
means exactly that build. Images are linux x86_64 (glibc), so a wheel must be
for linux or manylinux x86_64, or pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from packaging.tags import Tag
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

_PLATFORM = re.compile(r"(many)?linux[0-9_]*_x86_64|any")
PLATFORMS = "linux_x86_64, manylinux_*_x86_64 or any"


@dataclass(frozen=True)
class WheelName:
    """A parsed wheel file name."""

    file: str
    project: NormalizedName
    version: Version
    tags: frozenset[Tag]

    @classmethod
    def parse(cls, file: str) -> WheelName | None:
        """The parts of ``file``, or None if it is not a wheel file name."""
        try:
            project, version, _build, tags = parse_wheel_filename(file)
        except InvalidWheelFilename:
            return None
        return cls(file, project, version, tags)

    def runs_on(self, python: str) -> bool:
        """Whether one of its tags is for Python ``3.12`` on linux x86_64."""
        return any(_fits_python(tag, python) and _fits_platform(tag) for tag in self.tags)

    def misfit(self, name: str, version: str, python: str) -> Misfit | None:
        """Why this is not the wheel ``[wheels.<name>]`` with ``version`` (may be "") means
        for Python ``python``, or None when it is."""
        if self.project != canonicalize_name(name):
            return Misfit("project", self.project)
        if version and not version_fits(self.version, Version(version)):
            fitting = self.version if Version(version).local else self.version.public
            return Misfit("version", str(self.version), str(fitting))
        if not any(_fits_python(tag, python) for tag in self.tags):
            return Misfit("python", ", ".join(sorted({tag.interpreter for tag in self.tags})))
        if not self.runs_on(python):
            return Misfit("platform", ", ".join(sorted({tag.platform for tag in self.tags})))
        return None


@dataclass(frozen=True)
class Misfit:
    """Which part of a wheel's name does not fit its pin, and what the name says there."""

    part: Literal["project", "version", "python", "platform"]
    found: str  # the project, the version, the interpreters or the platforms
    fitting: str = ""  # for "version": the version pin this file would fit


def version_fits(found: Version, pinned: Version) -> bool:
    """``2.12.0`` takes every build of 2.12.0; ``2.12.0+rocm7.14.0.lw.git1a2b`` only itself."""
    if pinned.local is not None:
        return found == pinned
    return Version(found.public) == pinned


def interpreter(python: str) -> str:
    """``3.12`` -> ``cp312``."""
    return "cp" + python.replace(".", "")


def _fits_python(tag: Tag, python: str) -> bool:
    major = python.split(".", 1)[0]
    nodot = python.replace(".", "")
    return tag.interpreter in (f"cp{nodot}", f"py{nodot}", f"py{major}")


def _fits_platform(tag: Tag) -> bool:
    return _PLATFORM.fullmatch(tag.platform) is not None
