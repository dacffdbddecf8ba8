"""The library that writes the image's SBOM in the manifest stage's step
(rocmgraph/inimage/sbom.py): cyclonedx-python-lib and what it imports, taken from this
tool's own environment into the build context and mounted, never installed in the image.

Each distribution is pinned here and in pyproject.toml alike (a test holds them equal): the
pins are an input of the manifest stage's key, known without reading any installed package
(keys read recipe files only), and the context is made only from the pinned versions."""

from __future__ import annotations

from importlib import metadata

from rocmgraph.common.errors import StaleError

PINNED = {
    "cyclonedx-python-lib": "11.12.0",
    "packageurl-python": "0.17.6",
    "py-serializable": "2.2.0",
    "sortedcontainers": "2.4.0",
    "license-expression": "30.4.4",
    "boolean.py": "5.0",
    "defusedxml": "0.7.1",
    "typing_extensions": "4.15.0",
}


def check_installed() -> None:
    """Refuse to make an SBOM with another version than the key names: one line, with the
    fix."""
    for name, pinned in PINNED.items():
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            found = "none"
        if found != pinned:
            raise StaleError(
                f"the SBOM library {name} is {found} here, and the manifest stage's key says "
                f"{pinned}; reinstall this project: pip install -e ."
            )
