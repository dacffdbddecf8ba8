"""The stage graph: what each stage is, and an order to build them in.

A stage is a declaration (stages/*.py): its parents, the pins it reads, its
recipe template and whether the GPU arch set is one of its inputs. The graph
is checked when it is made: an unknown parent or a cycle is an error that
names the path.
"""

from __future__ import annotations

import dataclasses
import graphlib
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from enum import StrEnum

from rocmgraph.common.errors import GraphError, PinsError, shown
from rocmgraph.common.spelling import suggest
from rocmgraph.config.pins import GitSource, Missing, PinPath, Pins, is_under


class Fetch(StrEnum):
    """What a stage's context gets besides its sources, fetched and checked on the host."""

    WHEELS = "wheels"  # the prebuilt wheels, by sha256
    ROCM_KEY = "rocm_key"  # ROCm's apt key, by sha256
    BASE_KEYS = "base_keys"  # the keys of the base's apt repositories, by sha256
    PROVENANCE = "provenance"  # build.json, for the manifest
    SBOM = "sbom"  # sbom-facts.json and the library that writes the SBOM, for the manifest

    @property
    def pins(self) -> tuple[PinPath, ...]:
        """The pins only this fetch needs: a stage the base provides fetches nothing."""
        return _FETCHED_BY[self]


_FETCHED_BY: Mapping[Fetch, tuple[PinPath, ...]] = {
    Fetch.WHEELS: (("wheels",),),  # each file and sha256, and the version that finds the file
    Fetch.ROCM_KEY: (("rocm", "key_sha256"), ("rocm", "packages")),  # and what apt installs
    Fetch.BASE_KEYS: (("base", "repos"),),
    Fetch.PROVENANCE: (),
    Fetch.SBOM: (),  # the facts are of its ancestors' pins: their keys are in its own
}


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One node of the build graph, one image tagged ``<namespace>/<name>:<key>``."""

    name: str
    doc: str
    parents: tuple[str, ...] = ()  # the first is the image it builds FROM
    # Pin paths this stage reads, e.g. ("sources", "vllm"): the key covers
    # every value under them, and the template sees nothing else.
    reads: tuple[PinPath, ...] = ()
    # Of those, the ones that reach the image only as text of its Dockerfile (which the key
    # holds whole), where the recipe writes them at all: they are no input of their own, so
    # a change the Dockerfile does not show rebuilds nothing (a source's version).
    rendered_only: tuple[PinPath, ...] = ()
    recipe: str  # template under docker/
    files: tuple[str, ...] = ()  # further recipe files copied into the context
    arch_dependent: bool = False
    # It compiles GPU code, for [build].source_archs where they hold the image's archs
    # (Build.compiled_for): images of several arch sets share its build.
    compiles: bool = False
    # Fetched into the context besides sources (none when the base image provides the stage).
    fetches: tuple[Fetch, ...] = ()
    # Its recipe ends ``FROM scratch`` and copies a filesystem in, so that files it removed
    # ship in no layer below: the engine gives it the configuration of its first parent,
    # less the build-only variables `drop_env` names (dropped_env: but those the base keeps).
    squash: bool = False
    drop_env: tuple[str, ...] = ()
    # A source stage a profile may leave out: it is in the graph only when the pins pin
    # its sources (verl's 7.14 recipe builds no Flash Attention, its 7.0.2 one no SGLang).
    optional: bool = False
    # Command-line variables whose value is an input, and their defaults (commit_tag=DEV).
    variables: tuple[tuple[str, str], ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        """The git sources whose trees this stage's context holds: those whose commit it
        reads (assemble reads how to install what others built, not their trees)."""
        return tuple(
            dict.fromkeys(
                path[1]
                for path in self.reads
                if path[:1] == ("sources",) and len(path) >= 2 and path[2:3] in ((), ("commit",))
            )
        )

    @property
    def fetched(self) -> tuple[PinPath, ...]:
        """The pins only its build needs: its sources' (commit, tree, the version its build
        is given) and what it fetches. A stage the base provides only checks versions, an
        empty one passing any: it needs none of these."""
        fetched = (path for fetch in self.fetches for path in fetch.pins)
        return (*(("sources", name) for name in self.sources), *fetched)


# How assemble installs what a source stage built, and whether the manifest stage keeps its
# build variables in the image: no input of the build (a change there rebuilds no wheel,
# which would be hours of vLLM).
INSTALL_KNOBS = ("install_deps", "uninstall", "keep_env", "build_only_env")


def built_from(source: str) -> tuple[PinPath, ...]:
    """What a source stage reads of a source it builds: its tree (commit, submodules,
    patches) and how its recipe builds it; not where it is fetched from or what upstream
    calls it (locations: the commit fixes the tree), nor how assemble installs it."""
    return tuple(
        ("sources", source, knob.name)
        for knob in dataclasses.fields(GitSource)
        if knob.name not in INSTALL_KNOBS and not knob.metadata.get("location", False)
    )


def source_stage(name: str, doc: str, sources: tuple[str, ...] = ()) -> Stage:
    """A stage that builds pinned sources into wheels for the target archs
    (docker/source-wheel.Dockerfile.j2); by default the source of its own name."""
    reads = tuple(read for source in sources or (name,) for read in built_from(source))
    return Stage(
        name=name,
        doc=doc,
        parents=("wheels",),
        reads=(*reads, ("build", "max_jobs"), ("base", "provides")),
        # the version it is given (version_env), the dist and version a provided one is
        # checked for; not what assemble and the manifest check
        rendered_only=tuple(read for read in reads if read[2:] in (("version",), ("dist",))),
        recipe="source-wheel.Dockerfile.j2",
        files=("rocmgraph/inimage/verify_dists.py", "rocmgraph/inimage/inplace.py"),
        arch_dependent=True,
        compiles=True,
        optional=True,
    )


@dataclass(frozen=True)
class Graph:
    """Stages in a deterministic build order (parents first, ties by name)."""

    stages: Mapping[str, Stage]
    order: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[Stage]:
        return (self.stages[name] for name in self.order)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    def ancestors(self, name: str) -> set[str]:
        found: set[str] = set()
        todo = list(self.stages[name].parents)
        while todo:
            parent = todo.pop()
            if parent not in found:
                found.add(parent)
                todo.extend(self.stages[parent].parents)
        return found

    def descendants(self, name: str) -> set[str]:
        return {other for other in self.order if name in self.ancestors(other)}

    def select(self, pinned: Set[str]) -> Graph:
        """The graph of a profile whose pins pin the sources ``pinned``: an optional stage
        of a source it lacks is left out, and so are the parents and reads naming it."""
        gone = {
            stage.name
            for stage in self.stages.values()
            if stage.optional and not set(stage.sources) <= pinned
        }
        if not gone:
            return self
        missing = {
            source for name in gone for source in self.stages[name].sources if source not in pinned
        }
        kept = {
            stage.name: dataclasses.replace(
                stage,
                parents=tuple(p for p in stage.parents if p not in gone),
                reads=tuple(
                    read for read in stage.reads if not (read[:1] == ("sources",)
                                                        and read[1:2] and read[1] in missing)
                ),
            )
            for stage in self.stages.values()
            if stage.name not in gone
        }  # fmt: skip
        return Graph(kept, tuple(name for name in self.order if name in kept))

    def asked(self, pins: Pins) -> list[Missing]:
        """What of ``pins.missing()`` a build needs: not what only stages the base provides
        would fetch (a wheel's file, a short commit of aiter), nor a version only they check."""
        return [missing for missing in pins.missing() if not self.only_provided(pins, missing.path)]

    def only_provided(self, pins: Pins, path: PinPath) -> bool:
        """Whether only stages the base image provides would fetch what ``path`` pins: no
        build here needs it."""
        provided = set(pins.base.provides)
        fetched = tuple(read for stage in self for read in stage.fetched)
        needed = tuple(
            read for stage in self if stage.name not in provided for read in stage.fetched
        )
        return is_under(path, fetched) and not is_under(path, needed)

    def check(self, pins: Pins) -> None:
        """What the pins say that only the stages can tell wrong: a source no stage builds
        (a misspelt name would leave its stage out of the image without a word), a stage
        some of whose sources are pinned and some not, a stage no base image can provide."""
        named = sorted({read[1] for stage in self for read in stage.reads
                        if read[:1] == ("sources",) and len(read) > 1})  # fmt: skip
        for name in pins.sources:
            if name not in named:
                raise PinsError(
                    pins.file,
                    f"[sources.{name}]",
                    "no stage builds a source of this name",
                    f"{suggest(name, named)}name one of: {', '.join(named)}",
                )
        for stage in self:
            pinned = [source for source in stage.sources if source in pins.sources]
            lacking = [source for source in stage.sources if source not in pins.sources]
            if stage.optional and pinned and lacking:
                raise PinsError(
                    pins.file,
                    f"[sources.{lacking[0]}]",
                    f"is missing: stage {stage.name} builds it with [sources.{pinned[0]}]",
                    f"pin it too, or remove [sources.{pinned[0]}] to leave {stage.name} "
                    "out of the image",
                )
        # Only what its own recipe can check in a base image: ROCm, the torch stack, a
        # source stage (verl and the sources other stages build have no such check).
        providable = ["rocm", "wheels", *(stage.name for stage in self if stage.optional)]
        for name in pins.base.provides:
            if name not in providable:
                raise PinsError(
                    pins.file,
                    "[base].provides",
                    f"{shown(name)} is not a stage a base image can provide",
                    f"list only stages it carries: {', '.join(providable)}",
                )

    @property
    def final(self) -> str:
        """The stage the image is: the one no other stage builds on."""
        named = {parent for stage in self.stages.values() for parent in stage.parents}
        sinks = [name for name in self.order if name not in named]
        if len(sinks) != 1:
            raise GraphError(f"the graph has {len(sinks)} final stages ({', '.join(sinks)}): "
                             "one stage must build on all the others")  # fmt: skip
        return sinks[0]

    def closure(self, name: str) -> tuple[str, ...]:
        """``name`` and everything it needs, in build order."""
        needed = self.ancestors(name) | {name}
        return tuple(n for n in self.order if n in needed)


def make_graph(stages: Iterable[Stage]) -> Graph:
    by_name: dict[str, Stage] = {}
    for stage in stages:
        if stage.name in by_name:
            raise GraphError(f"stage {stage.name!r} is declared twice")
        by_name[stage.name] = stage
    for stage in by_name.values():
        for parent in stage.parents:
            if parent not in by_name:
                hint = suggest(parent, sorted(by_name))
                raise GraphError(
                    f"stage {stage.name!r} names unknown parent {parent!r}; "
                    f"{hint}known stages: {', '.join(sorted(by_name))}"
                )
    return Graph(by_name, _order(by_name))


def _order(stages: Mapping[str, Stage]) -> tuple[str, ...]:
    sorter = graphlib.TopologicalSorter({name: s.parents for name, s in stages.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = list(reversed(exc.args[1]))  # graphlib lists it parent -> child
        raise GraphError(
            f"stage graph has a cycle (stage -> parent): {' -> '.join(cycle)}"
        ) from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())  # sorted: the same order on every machine
        order.extend(ready)
        sorter.done(*ready)
    return tuple(order)


def dropped_env(stage: Stage, pins: Pins) -> tuple[str, ...]:
    """The variables ``stage`` leaves out of the configuration it carries over: its
    ``drop_env``, less those the base image sets itself ([base].keeps_env)."""
    return tuple(name for name in stage.drop_env if name not in pins.base.keeps_env)
