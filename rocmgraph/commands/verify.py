"""``doit verify image=<ref>``: whether an image is the one the pins describe; and
``doit verify stage=<name>``: whether a stage's build is reproducible (``stage=all``: every
stage's, side by side).

What a CI job that runs in a published image asks before it trusts it:

- **keys**: each stage key the image's labels name against the key the pins give
  that stage now (an image built from other pins differs there; the final stage's
  key is the image's own);
- **content**: the image against the final stage's image of that key, as this
  engine built it or the stage cache holds it (by image id: the digest of its
  configuration, which any change made after the build, a ``docker commit``
  say, changes);
- **manifest**: every Python package the pins name by version, and every pinned
  source's version, against what the image's manifest says pip installed.
- **sbom**: the SBOM the image holds against the one its manifest's lists and the pins'
  facts make (docs/sbom.md): a component edited after the build is a row.

One row per difference; exit 1 if there is any, 2 if the content could not be
compared (no build of the key here, and no cache that has it).

A stage is checked as ``nix build --check`` checks a derivation: built again with
every step run anew (no cache) on the same parents, then compared with the image
of its key file by file (path, type, mode, owner, size, sha256; not timestamps).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmgraph.building import execute, sbomfacts
from rocmgraph.building.provenance import installed
from rocmgraph.building.session import Session
from rocmgraph.common import filetree
from rocmgraph.common.errors import GraphToolError, Unchecked, VerifyError
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Run
from rocmgraph.outside.docker import DockerEngine

STAGE_KEY = "org.verl-rocm-graph.key."  # the final image's label of each stage's key


@dataclass(frozen=True)
class Row:
    what: str  # "key vllm", "content", "python vllm"
    expected: str
    found: str
    unknown: bool = False  # could not be compared: not a difference, not a match

    def text(self) -> str:
        if self.unknown:
            return f"{self.what}: cannot tell ({self.found})"
        return f"{self.what}: differs: the pins say {self.expected}, the image has {self.found}"


def check(run: Run, outside: Outside, image: str) -> list[Row]:
    """Every difference between ``image`` and what ``run``'s pins describe."""
    engine = outside.docker
    if not engine.image_exists(image):
        raise VerifyError(
            f"image {image} is not in the engine; pull it first (docker pull {image})"
        )
    labels = engine.labels(image)
    rows = [*_keys(run, labels), *_content(run, outside, engine, image)]
    return rows + _manifest(run, engine, image) + _sbom(run, engine, image)


def _keys(run: Run, labels: dict[str, str]) -> list[Row]:
    rows = []
    for stage in run.graph.order:
        want = run.keys[stage].key
        found = labels.get(STAGE_KEY + stage, "")
        if found != want:
            rows.append(Row(f"key {stage}", want[:12], found[:12] or "none"))
    return rows


def _content(run: Run, outside: Outside, engine: DockerEngine, image: str) -> list[Row]:
    """The image's id against that of the final stage's image of its key, here or cached
    (either id an engine gives it: its configuration's digest in the classic store, its
    index's or manifest's in the containerd store)."""
    mine = engine.image_id(image) or ""
    here = engine.image_id(run.ref(run.graph.final))
    built, where = frozenset({here} if here else ()), "as built here"
    if not built and run.cache:
        where = f"as {run.cache} holds it"
        try:
            built = outside.cache_registry.engine_ids(run.cached_ref(run.graph.final))
        except GraphToolError as exc:
            return [Row("content", "", f"the stage cache does not answer: {exc}", True)]
    if not built:
        key = run.keys[run.graph.final].short
        nowhere = f"no build of key {key} here, and no stage cache that holds it (cache=)"
        return [Row("content", "", nowhere, True)]
    if mine not in built:
        said = " or ".join(sorted(digest[:19] for digest in built))
        return [Row("content", f"{said} ({where})", f"{mine[:19]}: changed after its build")]
    return []


def _manifest(run: Run, engine: DockerEngine, image: str) -> list[Row]:
    """Pinned versions against the image's manifest (what pip listed when it was built)."""
    path = f"{run.pins.manifest}/requirements.txt"
    try:
        listed = installed(engine.read(image, path))
    except GraphToolError as exc:
        return [Row("manifest", path, f"none that can be read ({exc})")]
    wanted = {name: version for (_, _, name), version in run.pins.python.packages()}
    wanted |= {
        source.dist or name: source.version
        for name, source in run.pins.sources.items()
        if source.version
    }
    rows = []
    for name, version in sorted(wanted.items()):
        found = listed.get(canonicalize_name(name))
        if found is None or (version and not _same_release(found, version)):
            # an unpinned package ("") only has to be there
            rows.append(Row(f"python {name}", version or "installed", found or "none"))
    return rows


def _sbom(run: Run, engine: DockerEngine, image: str) -> list[Row]:
    """The image's SBOM against the one its manifest's lists and the pins' facts make: a
    component added, dropped or changed after the build is a row, named by its bom-ref."""
    # startup: the SBOM library only for a verify that reads one
    from cyclonedx.output.json import JsonV1Dot6

    from rocmgraph.inimage import sbom  # startup: with the library it imports

    folder = run.pins.manifest
    try:
        found = json.loads(engine.read(image, f"{folder}/{sbom.SBOM}"))
    except (GraphToolError, json.JSONDecodeError) as exc:
        return [Row("sbom", f"{folder}/{sbom.SBOM}", f"none that can be read ({exc})")]
    with tempfile.TemporaryDirectory() as scratch:
        lists = Path(scratch)
        (lists / "base").mkdir()
        for name in LISTS:  # what the image's manifest says it holds, as the SBOM was made of
            with contextlib.suppress(GraphToolError):  # no dpkg: no list
                (lists / name).write_text(engine.read(image, f"{folder}/{name}"))
        os_release = engine.read(image, "/etc/os-release")
        made = sbom.bom(lists, sbomfacts.facts(run), os_release)
    expected = json.loads(JsonV1Dot6(made).output_as_string())
    return _components(expected, found)


LISTS = ("requirements.txt", "dpkg-list.txt", "base/requirements.txt", "base/dpkg-list.txt")


def _components(expected: dict[str, Any], found: dict[str, Any]) -> list[Row]:
    """Each component that differs between two SBOMs, by bom-ref; then the rest."""
    want = {c["bom-ref"]: c for c in expected.get("components", [])}
    have = {c.get("bom-ref", ""): c for c in found.get("components", [])}
    rows = []
    for ref in sorted(want.keys() | have.keys()):
        if want.get(ref) != have.get(ref):
            rows.append(Row(f"sbom {ref}", _said(want.get(ref)), _said(have.get(ref))))
    rest = {k: v for k, v in expected.items() if k != "components"}
    if not rows and rest != {k: v for k, v in found.items() if k != "components"}:
        rows.append(Row("sbom", "the document its lists make", "another (edited after its build)"))
    return rows


def _said(component: dict[str, Any] | None) -> str:
    """A component in a few words: its version, origin and hashes."""
    if component is None:
        return "none"
    origin = next((p["value"] for p in component.get("properties", [])
                   if p.get("name") == "verl-rocm-graph:origin"), "?")  # fmt: skip
    hashes = ",".join(h.get("content", "")[:12] for h in component.get("hashes", []))
    return f"{component.get('version')} ({origin}{', ' + hashes if hashes else ''})"


def _same_release(found: str, pinned: str) -> bool:
    """The versions by PEP 440, public parts (2.12.0+rocm7.14 is 2.12.0; 1.14.0 is 1.14):
    as pip installs a pin, and as the image's smoke check compared them."""
    try:
        return Version(Version(found).public) == Version(Version(pinned).public)
    except InvalidVersion:
        return found.split("+", 1)[0] == pinned.split("+", 1)[0]


def as_text(image: str, run: Run, rows: list[Row]) -> str:
    if not rows:
        return (
            f"{image} is what {run.options.pins} describes: {len(run.graph.order)} stage keys, "
            "its content, every pinned version, and its SBOM"
        )
    return "\n".join(row.text() for row in rows)


def verdict(image: str, rows: list[Row]) -> None:
    differ = [row for row in rows if not row.unknown]
    if differ:
        raise VerifyError(f"{image} is not what the pins describe: {len(differ)} difference(s)")
    if rows:
        raise Unchecked(f"{image}: {len(rows)} check(s) could not be made")


@dataclass(frozen=True)
class StageCheck:
    """How a rebuild of a stage without cache compares with the image of its key."""

    same_layers: bool  # the same layer digests: the same bytes, no file compared
    differences: list[filetree.Difference]  # file by file, where the digests differ


def check_stages(
    run: Run, outside: Outside, session: Session, stages: Sequence[str]
) -> dict[str, StageCheck]:
    """:func:`check_stage` of each of ``stages``, their rebuilds side by side (as a build's
    stages of one wave), once every one of them is known to be built."""
    for stage in stages:
        _built(run, outside.docker, stage)
    with ThreadPoolExecutor(max_workers=max(len(stages), 1)) as pool:
        checks = {stage: pool.submit(check_stage, run, outside, session, stage) for stage in stages}
    return {stage: check.result() for stage, check in checks.items()}


def check_stage(run: Run, outside: Outside, session: Session, stage: str) -> StageCheck:
    """How a rebuild of ``stage`` (no cache) differs from the image of its key: by layer
    digests first, then, where they differ, file by file."""
    engine = outside.docker
    ref = _built(run, engine, stage)
    # this run's own tag: another verification of the stage at once removes its own
    tag = f"{run.namespace}/{stage}:verify-{run.keys[stage].short}-{os.getpid()}"
    execute.rebuild(run, engine, outside, session, stage, tag=tag)
    try:
        if engine.layers(ref) == engine.layers(tag):
            return StageCheck(True, [])
        return StageCheck(False, filetree.compare(engine.files(ref), engine.files(tag)))
    finally:
        engine.untag(tag)


def _built(run: Run, engine: DockerEngine, stage: str) -> str:
    """The image of ``stage``'s key, which a check compares its rebuild with."""
    ref = run.ref(stage)
    if not engine.image_exists(ref):
        raise VerifyError(
            f"stage {stage} is not built at key {run.keys[stage].short}: build it first "
            f"(doit build:{stage}), then check that a rebuild gives the same image"
        )
    return ref


def stage_text(stage: str, check: StageCheck) -> str:
    if check.same_layers:
        return f"{stage}: identical (a rebuild without cache has the same layer digests)"
    if not check.differences:
        return (
            f"{stage}: identical (every file of a rebuild without cache is the same; its layer "
            "digests differ, as the times of its files do)"
        )
    lines = [f"{stage}: {len(check.differences)} file(s) differ in a rebuild without cache:"]
    for difference in check.differences:
        lines.append(f"  {difference.path}: {difference.what}")
        lines.extend(f"    {line}" for line in difference.diff)
    return "\n".join(lines)


def stages_verdict(checks: Mapping[str, StageCheck]) -> None:
    differing = {stage: len(check.differences) for stage, check in checks.items()}
    named = [f"{stage} ({count} file(s) differ)" for stage, count in differing.items() if count]
    if len(checks) == 1 and named:
        ((stage, count),) = differing.items()
        raise VerifyError(f"stage {stage} is not reproducible: {count} file(s) differ")
    if named:
        raise VerifyError(f"{len(named)} of {len(checks)} stages are not reproducible: "
                          f"{', '.join(named)}")  # fmt: skip
