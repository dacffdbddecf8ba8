"""One invocation: the pins loaded once, the arch set, the profile's graph and its keys.

A Run is pure: it reads the pins file and its lock file (the closures, read only by a build
that needs them), and the keys an earlier run computed from the same inputs when it is given
a folder of them (keycache.py), and nothing else (the engine, the network
and the caches come in from the task layer as an ``Outside``). Task creators
make a Run from doit's variables without reading anything; the first action
that needs the pins loads them, so ``doit list`` works even when pins.toml is
broken and the error is reported by the task that needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocmgraph.common.errors import LockError
from rocmgraph.config import kinds
from rocmgraph.config import pins as pins_
from rocmgraph.config.archs import parse_archs
from rocmgraph.config.pins import Pins, format_path
from rocmgraph.graph import closure, keycache
from rocmgraph.graph import keys as keys_
from rocmgraph.graph.dag import Graph
from rocmgraph.graph.keys import StageKey


@dataclass(frozen=True)
class Options:
    """doit's command-line variables, as given."""

    pins: str = "pins.toml"
    arch: str = ""  # "" means the default of the pins file
    locked: bool = False  # refuse anything unlocked (for CI)
    network: str = ""  # `docker build --network`; "" is the engine's default ($VERL_GRAPH_NETWORK)
    profile: str = ""  # "demo": the offline demo profile serves its upstreams during builds
    commit_tag: str = "DEV"  # the manifest's training_docker_version, as verl's GIT_COMMIT_TAG
    wait: float | None = None  # seconds to wait for another run's build of a stage; None: no end
    cache: str = ""  # the registry stage images are shared through; "": [cache].registry
    cache_required: bool = False  # a cache that does not answer fails the run (for CI)
    push: bool = False  # push the friendly tag to the cache too
    builders: tuple[str, ...] = ()  # Docker hosts that build stages at once; (): the local engine
    builder: str = ""  # the buildx builder builds run on ("": the engine's own BuildKit)
    compile_cache: str = ""  # ccache's remote storage for source builds; "": [build].compile_cache
    # $REDISCLI_AUTH: the password of a redis compile cache whose URL names none
    compile_cache_password: str = field(default="", repr=False)
    progress: str = "auto"  # the console: auto (live in a terminal, else lines), plain, quiet
    hermetic: bool = True  # network off, from locked closures (none locked: refused); False: on
    trace: str = ""  # where a build writes its timeline; "": trace.json beside its run.json


class Run:
    def __init__(
        self,
        options: Options,
        graph: Graph,
        load: Callable[[str], Pins] = pins_.load,
        key_cache: Path | None = None,
    ) -> None:
        self.options = options
        self.stages = graph  # every stage there is; `graph` is this profile's
        self._load = load  # a demo profile's loader writes its generated pins first
        self._key_cache = key_cache  # keys kept between runs (None: computed each time)

    @functools.cached_property
    def pins(self) -> Pins:
        return self._load(self.options.pins)

    @functools.cached_property
    def graph(self) -> Graph:
        """The stages of this profile: those whose sources the pins pin."""
        self.stages.check(self.pins)
        return self.stages.select(frozenset(self.pins.sources))

    @functools.cached_property
    def archs(self) -> tuple[str, ...]:
        if self.options.arch:
            return parse_archs(self.options.arch)
        return self.pins.build.archs

    @property
    def variables(self) -> dict[str, str]:
        """The command-line variables that are inputs of some stage (Stage.variables)."""
        return {"commit_tag": self.options.commit_tag}

    @functools.cached_property
    def keys(self) -> dict[str, StageKey]:
        """Each stage's key: of its build with the network off where its closure is locked
        (and hermetic=1), else of its build with the network (``open_keys``)."""
        sealed = {}
        for name in self.graph.order if self.options.hermetic else ():
            found = self.lock.get(name, self.closure_keys[name].key)
            if found is not None:
                sealed[name] = found.digest
        if not sealed:
            return self.open_keys
        return self._compute(sealed)

    @functools.cached_property
    def open_keys(self) -> dict[str, StageKey]:
        """Each stage's key built with the network."""
        return self._compute()

    @functools.cached_property
    def closure_keys(self) -> dict[str, StageKey]:
        """keys.closure_keys of this run's archs: the open keys when every command-line
        variable is at its default, as it mostly is (and then from the kept keys)."""
        defaults = {name: default for stage in self.graph for name, default in stage.variables}
        if all(self.variables.get(name, default) == default for name, default in defaults.items()):
            return self.open_keys
        return keys_.closure_keys(self.graph, self.pins, self.archs)

    def _compute(
        self, closures: dict[str, str] | None = None, variables: dict[str, str] | None = None
    ) -> dict[str, StageKey]:
        given = self.variables if variables is None else variables
        if self._kept is None:
            return keys_.compute(self.graph, self.pins, self.archs, given, closures)
        return self._kept.compute(self.archs, given, closures)

    @functools.cached_property
    def _kept(self) -> keycache.KeyCache | None:
        """The keys kept between runs, if this Run was given a folder of them."""
        if self._key_cache is None:
            return None
        return keycache.KeyCache(self._key_cache, self.graph, self.pins)

    @functools.cached_property
    def lock(self) -> closure.LockFile:
        """The closures locked beside the pins file (rocmgraph/graph/closure.py)."""
        return closure.load(closure.lock_path(self.options.pins))

    @functools.cached_property
    def unlocked(self) -> frozenset[str]:
        """The stages the lock file holds no closure for (at their keys with the network)."""
        return frozenset(self.lock.missing({n: k.key for n, k in self.closure_keys.items()}))

    def sealed(self, stage: str) -> closure.Closure | None:
        """The closure stage ``stage`` builds from with the network off: its key's, if the
        lock holds one, unless ``hermetic=0``."""
        if not self.options.hermetic:
            return None
        return self.lock.get(stage, self.closure_keys[stage].key)

    @property
    def namespace(self) -> str:
        return self.pins.image.name

    @property
    def state_dir(self) -> Path:
        """Build records and logs live beside the pins file they were built from."""
        return Path(self.options.pins).resolve().parent / ".build"

    @property
    def records_dir(self) -> Path:
        """What each stage's last build was made of, per image namespace: pins files side
        by side build different images, and explain only their own rebuilds."""
        return self.state_dir / "records" / self.namespace

    def ref(self, stage: str, key: str = "") -> str:
        """The image of ``stage`` at ``key`` (default: its key in this run)."""
        return f"{self.namespace}/{stage}:{key or self.keys[stage].key}"

    @property
    def cache(self) -> str:
        """The registry prefix stage images are shared through ("": none); the command line
        wins over the pins."""
        return self.options.cache or self.pins.cache.registry

    @property
    def compile_cache(self) -> str:
        """ccache's shared remote storage ("": none), with its password; the command line
        wins over the pins."""
        location = self.options.compile_cache or self.pins.build.compile_cache
        return kinds.with_redis_password(location, self.options.compile_cache_password)

    def cached_ref(self, stage: str) -> str:
        """Where the image of ``stage`` is kept in the shared cache."""
        return f"{self.cache}/{self.ref(stage)}"

    def friendly_tag(self) -> str:
        return f"{self.pins.image.name}:{'-'.join(self.archs)}"


def check_locked(run: Run) -> None:
    """For ``locked=1``: refuse pins that still leave open anything a build needs."""
    missing = run.graph.asked(run.pins)
    if missing:
        names = ", ".join(format_path(m.path) for m in missing)
        raise LockError(
            f"{run.pins.file} is not locked: {names}; run `doit lock` where the network allows "
            "and commit the pins file"
        )


def check_closures(run: Run, names: Sequence[str]) -> None:
    """hermetic=1 (the default) or ``locked=1``: refuse ``names`` if any has no closure in the
    lock file this run read (its keys are of that file). Built or not: a stage with none
    could only have been built with the network."""
    missing = [name for name in names if name in run.unlocked]
    if missing:
        named = ", ".join(f"{name} at {run.closure_keys[name].short}" for name in missing)
        why = (
            "so they cannot build with the network off"
            if run.options.hermetic
            else "and locked=1 refuses what is not locked"
        )
        raise LockError(
            f"{run.lock.path} holds no closure for {named}: what they fetch as they build is "
            f"not locked, {why}; {closure_fix(run)}"
        )


def closure_fix(run: Run) -> str:
    """What to do about a stage with no closure: lock it, or (not for CI) build open."""
    fix = f"run `doit lock closures=1` where the network allows and commit {run.lock.path.name}"
    if not run.options.locked and run.options.hermetic:
        fix += ", or build with hermetic=0 (the network on, as the images' labels record)"
    return fix
