"""Content keys: what a stage is, as one sha256.

A stage's key covers, and only covers: its recipe files by content (the
Dockerfile template, helper files, the patches its pins name), the pins it
reads, the arch set when it depends on it, its parents' keys, and what reaches
its image besides its Dockerfile (``Inputs.extras``, variables). The
rendered Dockerfile is hashed too, so a change in how templates render can
never reuse an old image. Inputs that are content hashes already (a commit, a
wheel's sha256, an image digest) go in as they are, so computing every key
reads a few small text files and nothing else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

import rocmgraph
from rocmgraph.common import sbomlib
from rocmgraph.common.errors import GraphError, PinsError
from rocmgraph.common.layout import ROOT
from rocmgraph.config import kinds
from rocmgraph.config.pins import PinPath, Pins, Value, format_path, is_under
from rocmgraph.graph.dag import Fetch, Graph, Stage, dropped_env
from rocmgraph.graph.recipe import render, stage_archs

# Bump when the meaning of an input changes, so old keys cannot collide.
SCHEMA = 1

# A JSON value, as a key's inputs hold them (a pin's value, a list of archs).
Json = str | int | float | bool | None | list["Json"] | dict[str, "Json"]


@dataclass(frozen=True)
class Inputs:
    """What one stage's key covers; its JSON form (``as_json``) is what is hashed."""

    schema: int
    stage: str
    dockerfile: str  # sha256 of the rendered recipe
    files: Mapping[str, str]  # recipe file -> sha256
    pins: Mapping[str, Json]  # [table].key -> value, of the pins it reads
    arch: tuple[str, ...] | None  # the arch set, when the stage depends on it
    parents: Mapping[str, str]  # parent -> its key
    variables: Mapping[str, str] | None = None  # only where a variable is an input
    closure: str | None = None  # sealed: the sha256 of the closure it builds from (closure.py)
    # What reaches the image besides its Dockerfile, only where something does: the
    # variables a squash drops from the configuration it carries over, the tool version
    # build.json names.
    extras: Mapping[str, Json] | None = None

    def as_json(self) -> dict[str, Json]:
        document: dict[str, Json] = {
            "schema": self.schema,
            "stage": self.stage,
            "dockerfile": self.dockerfile,
            "files": dict(self.files),
            "pins": dict(self.pins),
            "arch": list(self.arch) if self.arch is not None else None,
            "parents": dict(self.parents),
        }
        if self.variables is not None:
            document["variables"] = dict(self.variables)
        if self.closure is not None:
            document["closure"] = self.closure
        if self.extras is not None:
            document["extras"] = dict(self.extras)
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Json]) -> Inputs:
        """Inputs as a record kept them (an older schema may lack a part: it reads empty)."""

        def mapping(name: str) -> dict[str, Json]:
            value = document.get(name)
            return dict(value) if isinstance(value, dict) else {}

        arch = document.get("arch")
        variables = document.get("variables")
        closure = document.get("closure")
        schema = document.get("schema")
        extras = document.get("extras")
        return cls(
            schema=schema if isinstance(schema, int) else 0,
            stage=str(document.get("stage", "")),
            dockerfile=str(document.get("dockerfile", "")),
            files={name: str(value) for name, value in mapping("files").items()},
            pins=mapping("pins"),
            arch=tuple(map(str, arch)) if isinstance(arch, list) else None,
            parents={name: str(value) for name, value in mapping("parents").items()},
            variables={k: str(v) for k, v in variables.items()}
            if isinstance(variables, dict)
            else None,
            closure=closure if isinstance(closure, str) else None,
            extras=dict(extras) if isinstance(extras, dict) else None,
        )


@dataclass(frozen=True)
class StageKey:
    name: str
    key: str  # 64 hex
    inputs: Inputs

    @property
    def short(self) -> str:
        return self.key[:12]


def canonical(inputs: Inputs) -> bytes:
    """One byte string per input set: sorted keys, no whitespace, ASCII."""
    return json.dumps(
        inputs.as_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reads_of(stage: Stage, pins: Pins) -> tuple[PinPath, ...]:
    """The pins ``stage``'s image depends on, besides its Dockerfile: those it reads but the
    ones it only writes into its Dockerfile. A stage the base image provides only checks the
    base, with what its Dockerfile says (the versions): the apt key, the wheel files, the
    commits it would build from are no input of it then."""
    if stage.name in pins.base.provides:
        return (("base", "provides"),)
    return tuple(read for read in stage.reads if read not in stage.rendered_only)


def recipe_files(stage: Stage, pins: Pins) -> list[str]:
    """Repository files a stage's image depends on: its template, the files it
    copies in, and the patches its pins name."""
    files = {f"docker/{stage.recipe}", *stage.files}
    for name in stage.files:
        if not (ROOT / name).is_file():
            raise GraphError(f"stage {stage.name!r} copies {name!r}, which does not exist")
    reads = reads_of(stage, pins)
    for leaf in pins.leaves():
        if leaf.kind is not kinds.REPO_FILE or not is_under(leaf.path, reads):
            continue
        names = leaf.value if isinstance(leaf.value, tuple) else (str(leaf.value),)
        for name in names:
            if not (ROOT / name).is_file():
                raise PinsError(
                    pins.file,
                    format_path(leaf.path),
                    f"{name!r} does not exist",
                    "name a file of this repository (paths are relative to its root)",
                )
        files.update(names)
    return sorted(files)


def depends_on_arch(stage: Stage, pins: Pins) -> bool:
    """Whether the arch set is an input of ``stage`` under ``pins``: a source stage the base
    image provides only verifies, for any arch set."""
    return stage.arch_dependent and stage.name not in pins.base.provides


def stage_inputs(
    stage: Stage,
    pins: Pins,
    archs: tuple[str, ...],
    parent_keys: Mapping[str, str],
    variables: Mapping[str, str] | None = None,
    *,
    closure: str | None = None,
) -> Inputs:
    read = pins.read(reads_of(stage, pins))
    given = variables or {}
    return Inputs(
        schema=SCHEMA,
        stage=stage.name,
        dockerfile=digest(render(stage, pins, archs).encode()),
        files={name: digest((ROOT / name).read_bytes()) for name in recipe_files(stage, pins)},
        pins={format_path(path, whole=True): _jsonable(value) for path, value in read.items()},
        arch=stage_archs(stage, pins, archs) if depends_on_arch(stage, pins) else None,
        parents={parent: parent_keys[parent] for parent in stage.parents},
        # only where a variable is an input, so other keys never move
        variables={name: given.get(name, default) for name, default in stage.variables}
        if stage.variables
        else None,
        closure=closure,
        extras=_extras(stage, pins),
    )


def _extras(stage: Stage, pins: Pins) -> dict[str, Json] | None:
    found: dict[str, Json] = {}
    if stage.drop_env:  # the engine leaves them out of the configuration it carries over
        found["drop_env"] = list(dropped_env(stage, pins))
    if Fetch.PROVENANCE in stage.fetches:  # build.json names the tool that wrote it
        found["tool"] = rocmgraph.__version__
    if Fetch.SBOM in stage.fetches:  # the library that writes the SBOM, mounted in its step
        found["sbom_library"] = dict[str, Json](sbomlib.PINNED)
    return found or None


def compute(
    graph: Graph,
    pins: Pins,
    archs: tuple[str, ...],
    variables: Mapping[str, str] | None = None,
    closures: Mapping[str, str] | None = None,
) -> dict[str, StageKey]:
    """Every stage's key, parents first; ``variables``: those stages take (commit_tag);
    ``closures``: the sha256 of the closure each sealed stage builds from, with the network
    off (the same stage built with the network is another build, of another key)."""
    keys: dict[str, StageKey] = {}
    for stage in graph:
        parent_keys = {parent: keys[parent].key for parent in stage.parents}
        closure = (closures or {}).get(stage.name)
        inputs = stage_inputs(stage, pins, archs, parent_keys, variables, closure=closure)
        keys[stage.name] = StageKey(stage.name, digest(canonical(inputs)), inputs)
    return keys


def closure_keys(graph: Graph, pins: Pins, archs: tuple[str, ...]) -> dict[str, StageKey]:
    """Each stage's key built with the network, every command-line variable at its default:
    the key its closure is locked under. A variable (commit_tag) is a build argument: it
    changes nothing a build fetches, and a release tag needs no lock of its own."""
    return compute(graph, pins, archs)


def _jsonable(value: Value) -> Json:
    return list(value) if isinstance(value, tuple) else value
