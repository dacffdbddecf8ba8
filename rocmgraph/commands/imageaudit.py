"""`doit audit image=<ref>`: every package an image holds, traced to a hash, or named.

A package in the image is traced when one of these says where its bytes came from:
- the base image, pinned by digest, holds it at that version;
- a closure of one of the image's stages (its stage keys, from its labels) fetched it, by
  sha256 (rocmgraph/graph/closure.py);
- it is built here from a pinned source (a commit), or is a pinned wheel (a sha256).

Anything else came from the network unrecorded: a row, and exit 1.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name as normal

from rocmgraph.building.provenance import installed
from rocmgraph.common.errors import GraphToolError, LockError, VerifyError
from rocmgraph.config.pins import Pins
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.closure import Closure
from rocmgraph.graph.invocation import Run

SBOM = "sbom.cdx.json"  # in the manifest folder (rocmgraph/inimage/sbom.py)
ORIGIN = "verl-rocm-graph:origin"  # a component's property: what traces it
KEY_PREFIX = "org.verl-rocm-graph.key."  # the final image's label of each stage's key

# `dpkg -l`: "ii  gcc-12:amd64  12.2.0-14  amd64  GNU C compiler" (installed, status ii).
_DPKG = re.compile(r"^ii\s+(?P<name>[^\s:]+)(?::\S+)?\s+(?P<version>\S+)\s")


@dataclass(frozen=True, order=True)
class Package:
    kind: str  # "python" or "apt"
    name: str  # normalised, for Python (PEP 503)
    version: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name} {self.version}"


def python_packages(pip_list: str) -> set[Package]:
    return {Package("python", name, version) for name, version in installed(pip_list).items()}


def apt_packages(dpkg_list: str) -> set[Package]:
    """The packages ``dpkg -l`` says are installed."""
    found = set()
    for line in dpkg_list.splitlines():
        match = _DPKG.match(line)
        if match:
            found.add(Package("apt", match["name"], match["version"]))
    return found


def apt_status(status: str) -> set[Package]:
    """The installed packages of a ``/var/lib/dpkg/status`` file."""
    found = set()
    for stanza in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            found.add(Package("apt", fields["Package"], fields.get("Version", "")))
    return found


@dataclass(frozen=True)
class Traced:
    """What traces an image's packages, and what does not."""

    by_base: int  # the base image's digest
    by_closure: int  # a closure's sha256
    by_pin: int  # a pinned source's commit, or a pinned wheel's sha256
    untraced: tuple[Package, ...]


def trace(
    held: Iterable[Package], base: set[Package], closures: Iterable[Closure], pins: Pins
) -> Traced:
    """Each package ``held`` traced to the base image, a closure, or a pin; the rest named."""
    fetched = {
        Package(item.kind, normal(item.name) if item.kind == "python" else item.name, item.version)
        for closure in closures
        for item in closure.files
    }
    # Built here: each source's distribution (sgl_kernel's is sglang-kernel: its `dist`)
    built = {normal(source.dist or name) for name, source in pins.sources.items()}
    wheels: Mapping[str, str] = {normal(name): wheel.version for name, wheel in pins.wheels.items()}
    counts = {"base": 0, "closure": 0, "pin": 0}
    untraced = []
    for package in sorted(held):
        if package in base:
            counts["base"] += 1
        elif package in fetched:
            counts["closure"] += 1
        elif package.kind == "python" and (
            package.name in built
            or wheels.get(package.name, None) == package.version.split("+", 1)[0]
        ):
            counts["pin"] += 1
        else:
            untraced.append(package)
    return Traced(counts["base"], counts["closure"], counts["pin"], tuple(untraced))


def audit_image(run: Run, outside: Outside, image: str) -> Traced:
    """The packages ``image`` holds (its manifest), traced by the base image the pins name,
    the closures of its stage keys (its labels) in the lock file, and the pins."""
    engine = outside.docker
    keys = {
        label.removeprefix(KEY_PREFIX): key
        for label, key in engine.labels(image).items()
        if label.startswith(KEY_PREFIX)
    }
    if not keys:
        raise VerifyError(
            f"{image} has no stage key labels ({KEY_PREFIX}<stage>): not a final image this "
            "graph built; name one (e.g. image=verl-rocm:gfx942)"
        )
    # A closure is locked for a stage's key with the network; a sealed image names the other.
    opened = {run.keys[name].key: run.closure_keys[name].key for name in run.graph.order}
    closures = [
        found for stage, key in keys.items()
        if (found := run.lock.get(stage, opened.get(key, key))) is not None
    ]  # fmt: skip
    manifest = run.pins.manifest
    with contextlib.suppress(GraphToolError, json.JSONDecodeError):  # none: traced here
        said = from_sbom(json.loads(engine.read(image, f"{manifest}/{SBOM}")))
        # what it left untraced, a closure locked since (for a key with the network) traces
        later = trace(said.untraced, set(), closures, run.pins)
        return Traced(said.by_base, said.by_closure + later.by_closure,
                      said.by_pin + later.by_pin, later.untraced)  # fmt: skip
    held = python_packages(engine.read(image, f"{manifest}/requirements.txt"))
    held |= apt_packages(engine.read(image, f"{manifest}/dpkg-list.txt"))
    base_ref = run.pins.base.image + (f"@{run.pins.base.digest}" if run.pins.base.digest else "")
    python = f"{run.pins.python.venv}/bin/python"
    listed = engine.output(
        base_ref, "sh", "-c", f"! test -x {python} || {python} -m pip list --format=freeze"
    )
    base = python_packages(listed) | apt_status(engine.read(base_ref, "/var/lib/dpkg/status"))
    return trace(held, base, closures, run.pins)


def from_sbom(document: Mapping[str, Any]) -> Traced:
    """What the image's own SBOM says traces each package it holds (its origin property:
    the base image, a closure, a source or a wheel; or untraced). `doit verify image=`
    checks that SBOM against the pins and the image's lists."""
    counts = {"base": 0, "closure": 0, "pin": 0}
    untraced = []
    for component in document.get("components", []):
        origin = next((p["value"] for p in component.get("properties", [])
                       if p.get("name") == ORIGIN), "untraced")  # fmt: skip
        kind = "python" if component.get("purl", "").startswith("pkg:pypi/") else "apt"
        name = normal(component["name"]) if kind == "python" else component["name"]
        if origin.startswith("base image "):
            counts["base"] += 1
        elif origin.startswith("closure of "):
            counts["closure"] += 1
        elif origin in ("source", "wheel"):
            counts["pin"] += 1
        else:
            untraced.append(Package(kind, name, component.get("version", "")))
    return Traced(counts["base"], counts["closure"], counts["pin"], tuple(sorted(untraced)))


def as_text(image: str, traced: Traced) -> str:
    total = traced.by_base + traced.by_closure + traced.by_pin + len(traced.untraced)
    head = (
        f"{image}: {total} packages; traced: {traced.by_base} by the base image's digest, "
        f"{traced.by_closure} by a closure's sha256, {traced.by_pin} by a pinned source or wheel"
    )
    if not traced.untraced:
        return head
    rows = [f"untraced {package}: in no closure, pin or base image" for package in traced.untraced]
    return "\n".join([head, *rows])


def verdict(image: str, traced: Traced) -> None:
    if traced.untraced:
        raise LockError(
            f"{image} holds {len(traced.untraced)} package(s) that no closure, pin or base image "
            "traces; run `doit lock closures=1` and build again"
        )
