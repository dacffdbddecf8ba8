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

from packaging.tags import Tag
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from rocmgraph.errors import cut

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
        for Python ``python``, or None when it is. Every part is cut, as it may be long."""
        if self.project != canonicalize_name(name):
            name, project = cut(name), cut(self.project)
            return Misfit(
                f"is a wheel of {project}, not of {name}",
                f"pin a {name} wheel here, or this one in [wheels.{project}]",
            )
        if version and not version_fits(self.version, Version(version)):
            fitting = self.version if Version(version).local else self.version.public
            name, version, found = cut(name), cut(version), cut(str(self.version))
            return Misfit(
                f"is {name} {found}, but [wheels.{name}].version is {version}",
                f'pin a file of {version}, or set version = "{cut(str(fitting))}"',
            )
        if not any(_fits_python(tag, python) for tag in self.tags):
            found = cut(", ".join(sorted({tag.interpreter for tag in self.tags})))
            return Misfit(
                f"is for {found}, but [python].version is {python}",
                f"pin the {interpreter(python)} build",
            )
        if not self.runs_on(python):
            found = cut(", ".join(sorted({tag.platform for tag in self.tags})))
            return Misfit(f"is for {found}, not linux x86_64", f"pin a {PLATFORMS} build")
        return None


@dataclass(frozen=True)
class Misfit:
    """What is wrong with a wheel for a pin, and what to pin instead."""

    problem: str
    fix: str


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
