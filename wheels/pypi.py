"""Installed-package trees from PyPI, so patches to a PyPI package can be checked on the host.

megatron-core comes from PyPI, not from git: its patch applies to
site-packages. To check it before any build, a file of the pinned version is
fetched (verified by the sha256 PyPI publishes) and the files the patch
touches are unpacked into a scratch tree, at their site-packages paths.

Which file: a pure wheel (``py3-none-any``) when there is one; else the wheel
that installs on the image (CPython ``[python].version`` on linux x86_64, the
best tag first); else the sdist, whose package files sit under its root
folder (or its ``src/``) rather than at site-packages paths.

The same document tells `doit lock` the version an unpinned package would
install (``newest``).
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urljoin

from packaging import tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from rocmgraph.errors import FetchError, HashMismatch
from rocmgraph.outside.http import Http
from rocmgraph.outside.store import Store

PYPI_ENV = "VERL_GRAPH_PYPI"  # a PyPI JSON API mirror, e.g. http://127.0.0.1:8080/pypi
_SDIST = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


@dataclass(frozen=True)
class Release:
    """One file of a release, as PyPI's JSON API lists it."""

    filename: str
    url: str
    sha256: str

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")


@dataclass(frozen=True)
class Unpacked:
    """A release file on disk: a wheel (members at site-packages paths) or an sdist."""

    path: Path
    is_wheel: bool


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
    return next((r for r in files if not r.is_wheel and r.filename.endswith(_SDIST)), None)


def release_files(name: str, version: str, http: Http) -> list[Release]:
    """The files PyPI lists for ``name==version`` (a file without a sha256 is left out)."""
    api, document, releases = _releases(name, f"{name}=={version}", http)
    entries = releases.get(version)
    if not isinstance(entries, list):
        raise FetchError(f"{name}=={version}: {api} lists no release {version} of {name}")
    return _files(document, entries)


def newest(name: str, python: str, http: Http) -> str:
    """The version pip installs for an unpinned ``name`` on CPython ``python`` (linux x86_64):
    the newest final release with a file that is not yanked, whose ``requires_python``
    admits ``python`` and that the image can install (``choose``)."""
    api, document, releases = _releases(name, name, http)
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
            if not entry.get("yanked") and _admits(entry.get("requires_python"), python)
        ]
        if choose(_files(document, usable), python):
            fitting.append(version)
    if not fitting:
        raise FetchError(
            f"{name}: {api} lists no final release of {name} that installs on CPython {python} "
            "on linux x86_64; pin a version by hand"
        )
    return str(max(fitting))


def _admits(requires_python: object, python: str) -> bool:
    """Whether a file's ``requires_python`` admits Python ``3.12`` (unreadable: it does, as
    pip ignores a specifier it cannot parse)."""
    if not isinstance(requires_python, str) or not requires_python.strip():
        return True
    try:
        return SpecifierSet(requires_python).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True


def _releases(name: str, what: str, http: Http) -> tuple[str, str, dict[str, Any]]:
    """The API, the document's URL and its ``releases``, from the project's document
    (``/pypi/<name>/json``), which every PyPI mirror serves; some serve no per-version one."""
    api = os.environ.get(PYPI_ENV, "https://pypi.org/pypi").rstrip("/")
    document = f"{api}/{canonicalize_name(name)}/json"
    response = http.get(document)
    if response.status_code != 200:
        raise FetchError(f"{what}: {api} answered HTTP {response.status_code}")
    try:
        releases = response.json().get("releases", {})
    except ValueError:
        raise FetchError(f"{what}: {api} answered something that is not JSON") from None
    return api, document, releases if isinstance(releases, dict) else {}


def _files(document: str, entries: list[Any]) -> list[Release]:
    return [  # a mirror may link its files relative to the document (the demo's does)
        Release(entry["filename"], urljoin(document, entry["url"]), entry["digests"]["sha256"])
        for entry in entries
        if entry.get("filename") and entry.get("url") and entry.get("digests", {}).get("sha256")
    ]


def fetch(name: str, version: str, python: str, http: Http, store: Store) -> Unpacked:
    """The stored file of ``name==version`` to check patches against (see ``choose``)."""
    release = choose(release_files(name, version, http), python)
    if release is None:
        raise FetchError(
            f"{name}=={version}: PyPI has no wheel for CPython {python} on linux x86_64 and no "
            "sdist to check patches against"
        )
    try:
        stored = store.fetch(release.url, release.filename, release.sha256, f"{name}=={version}")
    except HashMismatch as exc:  # the expected hash is PyPI's word, not a pin
        raise FetchError(
            f"{name}=={version}: {exc.url} has sha256 {exc.actual}, PyPI publishes {exc.expected}; "
            f"nothing was kept. Check the index ({PYPI_ENV} or pypi.org) and retry"
        ) from None
    return Unpacked(stored.path, release.is_wheel)


def unpack(dist: Unpacked, files: tuple[str, ...], dest: Path) -> None:
    """The members of ``dist`` at the site-packages paths ``files``, written under ``dest``."""
    try:
        found = (_wheel_members if dist.is_wheel else _sdist_members)(dist.path, files)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError):
        kind = "a wheel (zip)" if dist.is_wheel else "an sdist (tar or zip)"
        raise FetchError(f"{dist.path.name}: cannot be read as {kind}") from None
    for name, data in found.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _wheel_members(wheel: Path, files: tuple[str, ...]) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        return {name: archive.read(name) for name in files if name in members}


def _sdist_members(sdist: Path, files: tuple[str, ...]) -> dict[str, bytes]:
    """An sdist's files at site-packages paths: ``<root>/<path>``, or ``<root>/src/<path>``."""
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as archive:
            return _pick(archive.namelist(), files, archive.read)
    with tarfile.open(sdist) as tar:
        regular = {member.name: member for member in tar.getmembers() if member.isfile()}

        def read(name: str) -> bytes:
            extracted = tar.extractfile(regular[name])
            assert extracted is not None  # a regular file always extracts
            return extracted.read()

        return _pick(list(regular), files, read)


def _pick(
    members: list[str], files: tuple[str, ...], read: Callable[[str], bytes]
) -> dict[str, bytes]:
    roots = {PurePosixPath(member).parts[0] for member in members if "/" in member}
    if len(roots) != 1:  # an sdist is one folder, <name>-<version>/
        return {}
    root = roots.pop()
    present = set(members)
    found = {}
    for name in files:
        for candidate in (f"{root}/{name}", f"{root}/src/{name}"):
            if candidate in present:
                found[name] = read(candidate)
                break
    return found
