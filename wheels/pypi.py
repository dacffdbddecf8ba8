"""Installed-package trees from PyPI, so patches to a PyPI package can be checked on the host.

megatron-core comes from PyPI, not from git: its patch applies to
site-packages. To check it before any build, the pinned version's wheel is
fetched (verified by the sha256 PyPI publishes) and the files the patch
touches are unpacked into a scratch tree.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from rocmgraph.errors import FetchError
from rocmgraph.http import Http
from wheels.store import Store

PYPI_ENV = "VERL_GRAPH_PYPI"  # a PyPI JSON API mirror, e.g. http://127.0.0.1:8080/pypi


def pure_wheel(name: str, version: str, http: Http, store: Store) -> Path:
    """The stored py3-none-any wheel of ``name==version``."""
    api = os.environ.get(PYPI_ENV, "https://pypi.org/pypi").rstrip("/")
    response = http.get(f"{api}/{name}/{version}/json")
    if response.status_code != 200:
        raise FetchError(f"{name}=={version}: {api} answered HTTP {response.status_code}")
    for entry in response.json().get("urls", []):
        if entry.get("filename", "").endswith("-py3-none-any.whl"):
            stored = store.fetch(
                entry["url"], entry["filename"], entry["digests"]["sha256"], f"{name}=={version}"
            )
            return stored.path
    raise FetchError(f"{name}=={version}: PyPI has no pure-Python wheel to check patches against")


def unpack(wheel: Path, files: tuple[str, ...], dest: Path) -> None:
    """The members of ``wheel`` named ``files`` (site-packages paths), under ``dest``."""
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        for name in files:
            if name in members:
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
