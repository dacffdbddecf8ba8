"""The Dockerfile corpus: real recipes fetched from PyPI sdists by exact file and sha256.

The sdists are kept in the content-addressed store (the cache every other
download uses), so a second run reads them from disk.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import tomli

from rocmgraph.common.layout import default_cache
from rocmgraph.fetch import pypi
from rocmgraph.fetch.store import Store
from rocmgraph.outside.http import Http

HERE = Path(__file__).parent / "corpus"


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    file: str
    sha256: str


@dataclass(frozen=True)
class Recipe:
    sdist: str
    path: str  # inside the sdist, without its top folder
    text: str


def sdists() -> list[Sdist]:
    table = tomli.loads((HERE / "sdists.toml").read_text())
    return [Sdist(name, t["version"], t["file"], t["sha256"]) for name, t in table.items()]


def fetch(sdist: Sdist, http: Http, store: Store) -> Path:
    """The sdist file, from the store or from PyPI (verified by the sha256 pinned here)."""
    stored = store.path(sdist.sha256, sdist.file)
    if stored.is_file():
        return stored
    files = pypi.release_files(sdist.name, sdist.version, http)
    url = next(release.url for release in files if release.filename == sdist.file)
    return store.fetch(url, sdist.file, sdist.sha256, sdist.name).path


def recipes(sdist: Sdist, archive: Path) -> list[Recipe]:
    """Every Dockerfile of the sdist (``Dockerfile*``, ``*.Dockerfile``), in path order."""
    found = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            dockerfile = name.startswith("Dockerfile") or name.endswith(".Dockerfile")
            if member.isfile() and dockerfile and not name.endswith(".jinja"):
                data = tar.extractfile(member)
                assert data is not None
                text = data.read().decode("utf-8", "surrogateescape")
                found.append(Recipe(sdist.name, member.name.split("/", 1)[1], text))
    return sorted(found, key=lambda recipe: recipe.path)


def load_all() -> list[Recipe]:
    http = Http(timeout=120)
    store = Store(default_cache(), http)
    return [recipe for sdist in sdists() for recipe in recipes(sdist, fetch(sdist, http, store))]
