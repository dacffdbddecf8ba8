"""PyPI, fetched: a project's JSON document, the files of a release (by the sha256 PyPI
publishes), and installed-package trees cut from them.

megatron-core comes from PyPI, not from git: its patch applies to
site-packages. To check it before any build, a file of the pinned version is
fetched (wheels.pypi.choose says which) and the files the patch touches are
unpacked into a scratch tree, at their site-packages paths. An sdist's package
files sit under its root folder (or its ``src/``) rather than at those paths.
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

from packaging.utils import canonicalize_name

from rocmgraph.common.errors import FetchError, HashMismatch
from rocmgraph.fetch.store import Store
from rocmgraph.outside.http import Http
from wheelfiles import pypi
from wheelfiles.pypi import Release

PYPI_ENV = "VERL_GRAPH_PYPI"  # a PyPI JSON API mirror, e.g. http://127.0.0.1:8080/pypi


@dataclass(frozen=True)
class Unpacked:
    """A release file on disk: a wheel (members at site-packages paths) or an sdist."""

    path: Path
    is_wheel: bool


def release_files(name: str, version: str, http: Http) -> list[Release]:
    """The files PyPI lists for ``name==version`` (a file without a sha256 is left out)."""
    api, document, releases = _releases(name, f"{name}=={version}", http)
    entries = releases.get(version)
    if not isinstance(entries, list):
        raise FetchError(f"{name}=={version}: {api} lists no release {version} of {name}")
    return pypi.files(document, entries)


def newest(name: str, python: str, http: Http) -> str:
    """The version pip installs for an unpinned ``name`` (wheels.pypi.newest)."""
    api, document, releases = _releases(name, name, http)
    version = pypi.newest(releases, document, python)
    if version is None:
        raise FetchError(
            f"{name}: {api} lists no final release of {name} that installs on CPython {python} "
            "on linux x86_64; pin a version by hand"
        )
    return str(version)


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


def fetch(name: str, version: str, python: str, http: Http, store: Store) -> Unpacked:
    """The stored file of ``name==version`` to check patches against (see ``choose``)."""
    release = pypi.choose(release_files(name, version, http), python)
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
