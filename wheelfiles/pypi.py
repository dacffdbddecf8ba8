"""What PyPI's JSON API says of a project, read without fetching anything.

Which file of a release a patch check reads (``choose``): a pure wheel
(``py3-none-any``) when there is one; else the wheel that installs on the image
(CPython ``[python].version`` on linux x86_64, the best tag first); else the
sdist. Which version an unpinned install takes (``newest``): the newest final
release with such a file, not yanked, whose ``requires_python`` admits the
image's Python. rocmgraph/fetch/pypi.py fetches the documents and files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin

from packaging import tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

SDIST = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


@dataclass(frozen=True)
class Release:
    """One file of a release, as PyPI's JSON API lists it."""

    filename: str
    url: str
    sha256: str

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")


def image_tags(python: str) -> list[tags.Tag]:
    """The wheel tags the image installs, best first: CPython ``python`` on linux x86_64.

    Any glibc counts: the question is which source text the image gets, not
    whether this host could run it.
    """
    major, minor = (int(part) for part in python.split(".")[:2])
    platforms = [f"manylinux_2_{glibc}_x86_64" for glibc in range(60, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    platforms.append("linux_x86_64")
    version = (major, minor)
    return [
        *tags.cpython_tags(version, [f"cp{major}{minor}"], platforms),
        *tags.compatible_tags(version, f"cp{major}{minor}", platforms),
    ]


def choose(files: list[Release], python: str) -> Release | None:
    """The file a patch check reads: a pure wheel, else the best fitting wheel, else the sdist."""
    ranked = {tag: rank for rank, tag in enumerate(image_tags(python))}
    best: tuple[int, Release] | None = None
    for release in files:
        if not release.is_wheel:
            continue
        try:
            wheel_tags = parse_wheel_filename(release.filename)[3]
        except InvalidWheelFilename:
            continue
        if tags.Tag("py3", "none", "any") in wheel_tags:
            return release
        rank = min((ranked[tag] for tag in wheel_tags if tag in ranked), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, release)
    if best is not None:
        return best[1]
    return next((r for r in files if not r.is_wheel and r.filename.endswith(SDIST)), None)


def newest(releases: Mapping[str, object], document: str, python: str) -> Version | None:
    """The version pip installs for an unpinned project on CPython ``python`` (linux
    x86_64), from its document's ``releases``; None when no release installs there."""
    fitting = []
    for text, entries in releases.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease or not isinstance(entries, list):
            continue
        usable = [
            entry
            for entry in entries
            if isinstance(entry, dict)
            and not entry.get("yanked")
            and _admits(entry.get("requires_python"), python)
        ]
        if choose(files(document, usable), python):
            fitting.append(version)
    return max(fitting, default=None)


def _admits(requires_python: object, python: str) -> bool:
    """Whether a file's ``requires_python`` admits Python ``3.12`` (unreadable: it does, as
    pip ignores a specifier it cannot parse)."""
    if not isinstance(requires_python, str) or not requires_python.strip():
        return True
    try:
        return SpecifierSet(requires_python).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True


def files(document: str, entries: Sequence[object]) -> list[Release]:
    """The files of a release's entries (one without a sha256 is left out)."""
    return [  # a mirror may link its files relative to the document (the demo's does)
        Release(entry["filename"], urljoin(document, entry["url"]), entry["digests"]["sha256"])
        for entry in entries
        if isinstance(entry, dict)
        and entry.get("filename")
        and entry.get("url")
        and entry.get("digests", {}).get("sha256")
    ]
