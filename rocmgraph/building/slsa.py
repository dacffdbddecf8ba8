"""SLSA v1 provenance of an image, as an in-toto Statement v1, from the graph's own facts.

Everything in it is what a Run already knows: the pins (every locked input by its digest),
the closures its stages were sealed with, the stages' keys; what the run did (each stage's
builder, times and outcome) and the image's id come in from the caller. Nothing here reads
a clock, an engine or a file beyond what the Run reads anyway (the pins, the lock file): the
patches are by the sha256 of their bytes that the keys were made of.

The statement follows slsa.dev/spec/v1.1/provenance and in-toto's spec/v1 (statement.md,
resource_descriptor.md); tests/fixtures/slsa-provenance-v1.schema.json holds it to them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from packaging.utils import canonicalize_name

import rocmgraph
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.config.pins import PinPath, Wheel, format_path
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.keys import Json
from wheelfiles import index

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
# Names the type of this build (the stage graph of a pins file, built by this tool), as
# SLSA asks of buildType: a TypeURI is an identifier, which SHOULD resolve to a description
# but need not. No page answers at it.
BUILD_TYPE = "https://github.com/verl-project/verl-rocm-graph/build/v1"
TOOL = "verl-rocm-graph"
# The builder: this tool at its version (an identifier, like BUILD_TYPE).
BUILDER = f"https://github.com/verl-project/verl-rocm-graph@{rocmgraph.__version__}"

_HEX64 = re.compile(r"[0-9a-f]{64}")
# A full git object id: SHA-1 (40 hex) or SHA-256 (64 hex), as the gitCommit digest takes it.
_GIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


@dataclass(frozen=True)
class StageRun:
    """What one stage did in the run: its full key (64 hex), the engine that built it ("":
    the local one), when its build started and finished (aware datetimes), its status, and
    the digest of the image it made ("": not known)."""

    name: str
    key: str
    builder: str
    started: datetime
    finished: datetime
    status: str
    image: str = ""


@dataclass(frozen=True)
class _Dependency:
    """One entry of resolvedDependencies before those naming the same artifact merge."""

    uri: str  # "": none (a patch of this repository is known by name and digest)
    digest: tuple[tuple[str, str], ...]  # (algorithm, value); (): its pin is not locked yet
    name: str
    facts: tuple[tuple[str, str], ...] = ()  # annotations of the artifact itself
    pins: frozenset[str] = frozenset()  # the pins its digest comes from: [sources.vllm].commit
    stages: frozenset[str] = frozenset()  # the stages whose locked closure holds it
    # Only stages the base image provides would fetch it: the base carries what it pins,
    # checked by version, and no build here takes it.
    provided: bool = False

    @property
    def identity(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.uri, self.digest

    def merge(self, other: _Dependency) -> _Dependency:
        """One artifact named twice (SGLang and sgl-kernel at one commit, a file two
        closures fetched): one descriptor, with everything that names it."""
        return dataclasses.replace(
            self,
            pins=self.pins | other.pins,
            stages=self.stages | other.stages,
            provided=self.provided and other.provided,
        )

    def descriptor(self) -> dict[str, Json]:
        found: dict[str, Json] = {"name": self.name}
        if self.uri:
            found["uri"] = self.uri
        if self.digest:
            found["digest"] = dict(self.digest)
        annotations: dict[str, Json] = dict(self.facts)
        if self.pins:
            annotations["pins"] = list[Json](sorted(self.pins))
        if self.stages:
            annotations["stages"] = list[Json](sorted(self.stages))
        if self.provided:
            annotations["providedByBase"] = True
        if annotations:
            found["annotations"] = annotations
        return found


def statement(
    run: Run,
    subject_name: str,
    subject_digest: str,
    stages: Sequence[StageRun],
    *,
    pins_sha256: str,
    invocation: str,
) -> dict[str, object]:
    """The in-toto Statement that the image ``subject_name`` (its id ``subject_digest``,
    ``sha256:<64 hex>``) was built by ``run``: SLSA provenance v1 of it. ``stages`` are the
    stages built in this run, ``pins_sha256`` the sha256 of the pins file's bytes,
    ``invocation`` what names this run (its run.json)."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": _sha256_of(subject_digest)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external_parameters(run, pins_sha256),
                "internalParameters": {
                    "stages": {name: run.keys[name].key for name in run.graph.order},
                    "tool": {"name": TOOL, "version": rocmgraph.__version__},
                },
                "resolvedDependencies": resolved_dependencies(run),
            },
            "runDetails": {
                "builder": {"id": BUILDER, "version": {TOOL: rocmgraph.__version__}},
                "metadata": metadata(invocation, stages),
                "byproducts": [_byproduct(stage) for stage in _in_order(run, stages)],
            },
        },
    }


def external_parameters(run: Run, pins_sha256: str) -> dict[str, Json]:
    """What the user chose: the pins file (by sha256: its path alone says nothing of what
    it held), the archs, and the variables that reach the image or decide how it builds.
    Where it builds, and through which caches, are left out: no key takes them, so they
    change no byte of the image (SLSA: such parameters SHOULD be excluded)."""
    options = run.options
    found: dict[str, Json] = {
        "pins": {"path": options.pins, "sha256": pins_sha256},
        "arch": list(run.archs),
        "commit_tag": options.commit_tag,
        "hermetic": options.hermetic,
    }
    if options.profile:
        found["profile"] = options.profile
    return found


def resolved_dependencies(run: Run) -> list[dict[str, Json]]:
    """Every locked input by its digest, one descriptor per (uri, digest), sorted by them."""
    found = [
        *_base(run),
        *_sources(run),
        *_patches(run),
        *_wheels(run),
        *_apt_keys(run),
        *_closures(run),
    ]
    return [dependency.descriptor() for dependency in _merged(found)]


def metadata(invocation: str, stages: Sequence[StageRun]) -> dict[str, Json]:
    """The run's id, and when its first build started and its last one finished."""
    found: dict[str, Json] = {"invocationId": invocation} if invocation else {}
    if stages:
        # in UTC to the second, the Z form sorts as time does (and a naive time is refused)
        found["startedOn"] = min(timestamp(stage.started) for stage in stages)
        found["finishedOn"] = max(timestamp(stage.finished) for stage in stages)
    return found


def timestamp(moment: datetime) -> str:
    """``moment`` as SLSA writes times: RFC 3339 in UTC, to the second (YYYY-MM-DDThh:mm:ssZ).
    A naive datetime is refused: its zone, and so its UTC time, is unknown."""
    if moment.utcoffset() is None:
        raise ValueError(f"{moment.isoformat()} has no time zone; give times in UTC")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(path: Path, document: Mapping[str, object]) -> None:
    atomic_write_text(path, json.dumps(document, indent=1, sort_keys=True) + "\n")


def _sha256_of(digest: str) -> str:
    """``sha256:<64 hex>`` (an image id) -> the hex, as a DigestSet holds it."""
    hexdigest = digest.removeprefix("sha256:")
    if hexdigest == digest or not _HEX64.fullmatch(hexdigest):
        raise ValueError(f"{digest!r} is not an image id (sha256:<64 hex>)")
    return hexdigest


def _in_order(run: Run, stages: Sequence[StageRun]) -> list[StageRun]:
    """The stages in build order (the graph's), each checked to be one of the run's."""
    order = run.graph.order
    for stage in stages:
        if stage.name not in order:
            raise ValueError(f"{stage.name!r} is not a stage of {run.options.pins}")
    return sorted(stages, key=lambda stage: (order.index(stage.name), stage.started))


def _byproduct(stage: StageRun) -> dict[str, Json]:
    # The digest is its key: the sha256 of its inputs (rocmgraph/graph/keys.py), not of the
    # image's bytes; the same key built elsewhere names the same stage image.
    if not _HEX64.fullmatch(stage.key):
        raise ValueError(f"stage {stage.name}: {stage.key!r} is not a full key (64 hex)")
    return {
        "name": f"stage {stage.name}",
        "digest": {"sha256": stage.key},
        "annotations": {
            "builder": stage.builder,
            "startedOn": timestamp(stage.started),
            "finishedOn": timestamp(stage.finished),
            "status": stage.status,
            **({"image": stage.image} if stage.image else {}),
        },
    }


def _merged(found: Iterable[_Dependency]) -> list[_Dependency]:
    kept: dict[tuple[str, tuple[tuple[str, str], ...]], _Dependency] = {}
    for dependency in sorted(found, key=lambda d: (d.identity, d.name)):
        same = kept.get(dependency.identity)
        kept[dependency.identity] = dependency if same is None else same.merge(dependency)
    return [kept[identity] for identity in sorted(kept)]


def _pinned(run: Run, path: PinPath, found: _Dependency) -> _Dependency:
    """``found``, whose digest the pin at ``path`` gives, marked when only stages the base
    image provides would fetch it."""
    return dataclasses.replace(
        found,
        pins=frozenset({format_path(path, whole=True)}),
        provided=run.graph.only_provided(run.pins, path),
    )


def _digest(algorithm: str, value: str) -> tuple[tuple[str, str], ...]:
    """A one-entry digest set; none for a pin `doit lock` has not filled in yet."""
    return ((algorithm, value),) if value else ()


def _base(run: Run) -> Iterator[_Dependency]:
    base = run.pins.base
    digest = _digest("sha256", base.digest.removeprefix("sha256:"))
    yield _pinned(
        run, ("base", "digest"), _Dependency(f"docker://{base.image}", digest, base.image)
    )


def _sources(run: Run) -> Iterator[_Dependency]:
    """Each source at its commit; a short id is no digest (`doit lock` records the full)."""
    for name, source in sorted(run.pins.sources.items()):
        repo = f"git+{source.repo}" if not source.repo.startswith("git+") else source.repo
        at = f"{repo}@{source.commit}" if source.commit else repo
        full = source.commit if _GIT_ID.fullmatch(source.commit) else ""
        commit = ("sources", name, "commit")
        yield _pinned(run, commit, _Dependency(at, _digest("gitCommit", full), name))
        if source.subtree:  # built from that folder alone: its key is of the folder's tree
            tree = ("sources", name, "tree")
            folder = f"{at}#{source.subtree}"
            digest = _digest("gitTree", source.tree)
            yield _pinned(run, tree, _Dependency(folder, digest, f"{name}/{source.subtree}"))


def _patches(run: Run) -> Iterator[_Dependency]:
    """The patches the pins name, by the sha256 of their bytes the keys were made of. One
    no key covers is applied by no stage of this run (its source's stage is provided)."""
    hashed = {name: sha for key in run.keys.values() for name, sha in key.inputs.files.items()}
    named: list[tuple[PinPath, str]] = [
        (("sources", source, "patches"), patch)
        for source, pinned in run.pins.sources.items()
        for patch in pinned.patches
    ]
    named += [
        (("python", "patches", package), patch)
        for package, patches in run.pins.python.patches.items()
        for patch in patches
    ]
    for path, patch in named:
        if patch in hashed:  # a file of this repository: known by its name, no URI
            yield _pinned(run, path, _Dependency("", _digest("sha256", hashed[patch]), patch))


def _wheels(run: Run) -> Iterator[_Dependency]:
    for name, wheel in sorted(run.pins.wheels.items()):
        digest = _digest("sha256", wheel.sha256)
        uri = _wheel_uri(name, wheel)
        found = _Dependency(uri, digest, wheel.file or name, (("version", wheel.version),))
        yield _pinned(run, ("wheels", name, "sha256"), found)


def _wheel_uri(name: str, wheel: Wheel) -> str:
    """Where its file is. Before `doit lock` finds the file (or where a base that provides
    it leaves the file unpinned), its project at its version on its index, as a Package
    URL: the index alone would make every such wheel one dependency."""
    if wheel.file:
        return index.file_url(wheel.index, wheel.file)
    version = f"@{quote(wheel.version, safe='')}" if wheel.version else ""
    where = quote(wheel.index, safe=":/")
    return f"pkg:pypi/{canonicalize_name(name)}{version}?repository_url={where}"


def _apt_keys(run: Run) -> Iterator[_Dependency]:
    """The keys apt trusts: ROCm's, and those of the repositories the base adds."""
    keyed: list[tuple[PinPath, str, str]] = [
        (("rocm", "key_sha256"), run.pins.rocm.key_url, run.pins.rocm.key_sha256)
    ]
    keyed += [
        (("base", "repos", name, "key_sha256"), repo.key_url, repo.key_sha256)
        for name, repo in run.pins.base.repos.items()
    ]
    for path, url, sha256 in keyed:
        yield _pinned(
            run, path, _Dependency(url, _digest("sha256", sha256), url.rsplit("/", 1)[-1])
        )


def _closures(run: Run) -> Iterator[_Dependency]:
    """Every file a sealed stage's locked closure holds (none with hermetic=0)."""
    for stage in run.graph.order:
        sealed = run.sealed(stage)
        for item in sealed.files if sealed is not None else ():
            facts = (("kind", item.kind), ("package", item.name), ("version", item.version))
            digest = (("sha256", item.sha256),)
            yield _Dependency(item.url, digest, item.file, facts, stages=frozenset({stage}))
