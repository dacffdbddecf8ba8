"""Write the image's SBOM (CycloneDX 1.6 JSON) into its manifest folder, from what the image
holds and what the graph knows of it.

Runs inside the image being built, on its own Python, in the manifest stage's step, after
manifest.py wrote the lists: cyclonedx-python-lib and what it imports are mounted from the
build context (PYTHONPATH), never installed, so the image's pip list stays its own.

Each Python distribution (``pip list``) and Debian package (``dpkg -l``) is a component with
its version and purl and, where the graph knows it (sbom-facts.json), where its bytes came
from: a pinned wheel's sha256, a source's repository, full commit and patches, a closure's
file by sha256, or the base image, by digest, that held it before anything was installed
(the base stage lists that in the manifest folder's base/ first). Reproducible: its serial
number and timestamp are made of what it holds, so a rebuild writes the same bytes.

    PYTHONPATH=/tmp/sbomlib python3 sbom.py --dir /workspace/.manifest --facts facts.json
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import (
    Commit,
    Component,
    ComponentType,
    Diff,
    Patch,
    PatchClassification,
    Pedigree,
)
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

ORIGIN = "verl-rocm-graph:origin"  # how the graph traces a component: wheel, source, ...
SBOM = "sbom.cdx.json"
# `pip list`'s table and `dpkg -l`'s rows (installed: "ii"), as the manifest writes them.
_PIP = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+(?P<version>\S+)")
_DPKG = re.compile(r"^ii\s+(?P<name>[^\s:]+)(?::(?P<arch>\S+))?\s+(?P<version>\S+)\s+(?P<a>\S+)")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)  # SOURCE_DATE_EPOCH's 0


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def python_rows(text: str) -> Iterator[tuple[str, str]]:
    for line in text.splitlines():
        found = _PIP.match(line)
        if found and found["name"] != "Package" and not set(line.split()[0]) <= {"-"}:
            yield found["name"], found["version"]


def apt_rows(text: str) -> Iterator[tuple[str, str, str]]:
    for line in text.splitlines():
        found = _DPKG.match(line)
        if found:
            yield found["name"], found["version"], found["arch"] or found["a"]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def python_component(
    name: str, version: str, facts: Mapping[str, Any], base: set[str]
) -> Component:
    key = normal(name)
    purl = PackageURL("pypi", name=key, version=version)
    hashes, refs, props, pedigree = [], [], [], None
    wheel = facts["wheels"].get(key)
    source = facts["sources"].get(key)
    pinned = source if source is not None else wheel
    if pinned is not None and pinned["provided"]:  # the base's bytes: the pin's version, checked
        origin = f"base image {facts['base']}"
        said = (f"git+{pinned['repo']}@{pinned['commit']}" if source is not None
                else f"{pinned['file']} sha256:{pinned['sha256']}")  # fmt: skip
        props.append(Property(name="verl-rocm-graph:pinned", value=said))
    elif source is not None:
        origin = "source"
        vcs = f"git+{source['repo']}@{source['commit']}"
        refs.append(ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(vcs)))
        patches = [
            Patch(type=PatchClassification.UNOFFICIAL, diff=Diff(url=XsUri(p["file"])))
            for p in source["patches"]
        ]
        commit = Commit(uid=source["commit"], url=XsUri(source["repo"]))
        pedigree = Pedigree(commits=[commit], patches=patches or None)
        props += [Property(name=f"verl-rocm-graph:patch:{p['file']}", value=p["sha256"])
                  for p in source["patches"]]  # fmt: skip
    elif wheel is not None and version.split("+", 1)[0] == wheel["version"].split("+", 1)[0]:
        origin = "wheel"
        hashes.append(HashType(alg=HashAlgorithm.SHA_256, content=wheel["sha256"]))
        url = wheel["index"].rstrip("/") + "/" + wheel["file"]
        refs.append(ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(url)))
    else:
        origin, hashes, refs = fetched_or_base(f"python:{key}=={version}", facts, base)
    props.append(Property(name=ORIGIN, value=origin))
    return Component(
        name=name, version=version, type=ComponentType.LIBRARY, purl=purl,
        bom_ref=f"pypi:{key}@{version}", hashes=hashes, external_references=refs,
        properties=props, pedigree=pedigree,
    )  # fmt: skip


def fetched_or_base(
    held: str, facts: Mapping[str, Any], base: set[str]
) -> tuple[str, list[HashType], list[ExternalReference]]:
    """A package no pin names (``kind:name==version``): a closure's file, by its sha256 and
    URL; else the base image's; else untraced. Its origin, hashes and references."""
    fetched = facts["fetched"].get(held)
    if fetched is not None:
        url = XsUri(fetched["url"])
        return (
            f"closure of {fetched['stage']}",
            [HashType(alg=HashAlgorithm.SHA_256, content=fetched["sha256"])],
            [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=url)],
        )
    if held in base:
        return f"base image {facts['base']}", [], []
    return "untraced", [], []


def distribution(os_release: str) -> str:
    """The purl namespace of the image's Debian packages: its os-release ID (ubuntu for
    rocm/primus, debian for the demo)."""
    found = re.search(r"^ID=\"?([a-z0-9._-]+)\"?$", os_release, re.MULTILINE)
    return found.group(1) if found else "debian"


def apt_component(
    row: tuple[str, str, str], distro: str, facts: Mapping[str, Any], base: set[str]
) -> Component:
    name, version, arch = row
    purl = PackageURL("deb", namespace=distro, name=name, version=version,
                      qualifiers={"arch": arch})  # fmt: skip
    origin, hashes, refs = fetched_or_base(f"apt:{name}=={version}", facts, base)
    return Component(
        name=name, version=version, type=ComponentType.LIBRARY, purl=purl,
        bom_ref=f"deb:{name}@{version}", hashes=hashes, external_references=refs,
        properties=[Property(name=ORIGIN, value=origin)],
    )  # fmt: skip


def bom(folder: Path, facts: Mapping[str, Any], os_release: str) -> Bom:
    """The SBOM of what the manifest folder's lists say the image holds (``os_release``: the
    image's /etc/os-release)."""
    pip_list, dpkg_list = _read(folder / "requirements.txt"), _read(folder / "dpkg-list.txt")
    base = {
        f"python:{normal(n)}=={v}"
        for n, v in python_rows(_read(folder / "base" / "requirements.txt"))
    }
    base |= {f"apt:{n}=={v}" for n, v, _ in apt_rows(_read(folder / "base" / "dpkg-list.txt"))}
    components = [python_component(n, v, facts, base) for n, v in python_rows(pip_list)]
    distro = distribution(os_release)
    components += [apt_component(row, distro, facts, base) for row in apt_rows(dpkg_list)]
    image = facts["image"]
    held = hashlib.sha256((pip_list + dpkg_list + json.dumps(facts, sort_keys=True)).encode())
    subject = Component(
        name=image["name"], version=image["version"], type=ComponentType.CONTAINER,
        bom_ref=f"image:{image['name']}",
        properties=[Property(name="verl-rocm-graph:arch", value=",".join(image["arch"]))],
    )  # fmt: skip
    maker = facts["tool"]
    tool = Component(name=maker["name"], version=maker["version"],
                     type=ComponentType.APPLICATION, bom_ref=f"tool:{maker['name']}")  # fmt: skip
    made = Bom(
        components=components,
        serial_number=uuid.UUID(held.hexdigest()[:32]),  # of what it holds: reproducible
        metadata=BomMetaData(
            component=subject, tools=ToolRepository(components=[tool]), timestamp=_EPOCH
        ),
    )
    made.register_dependency(subject, components)  # the image holds each of them
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--facts", required=True)
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    facts = json.loads(Path(args.facts).read_text(encoding="utf-8"))
    made = bom(folder, facts, _read(Path("/etc/os-release")))
    text = JsonV1Dot6(made).output_as_string(indent=1)
    (folder / SBOM).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
