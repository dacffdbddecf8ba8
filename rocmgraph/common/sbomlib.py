"""The library that writes the image's SBOM in the manifest stage's step
(rocmgraph/inimage/sbom.py): cyclonedx-python-lib and what it imports, taken from this
tool's own environment into the build context and mounted, never installed in the image."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTIONS = (
    "cyclonedx-python-lib", "packageurl-python", "py-serializable", "sortedcontainers",
    "license-expression", "boolean.py", "defusedxml", "typing_extensions",
)  # fmt: skip


def versions() -> dict[str, str]:
    """Each distribution's version: an input of the manifest stage's key."""
    return {name: metadata.version(name) for name in DISTRIBUTIONS}
