"""The demo profiles: prepare the demo's upstreams, serve them for a build, and pin them.

Two profiles, the two pipelines of verl's recipes, on the same upstreams:
- ``profile=demo`` (demo/pins.toml), verl's 7.14 recipe: a rocm/primus-like base
  (primus.py) provides ROCm, the torch stack, Flash Attention, TransformerEngine
  and aiter; vLLM, SGLang, causal-conv1d and verl build on it;
- ``profile=demo702`` (demo/pins-rocm702.toml), verl's 7.0.2 recipe: a plain OS
  base (baseimage.py), ROCm from the demo's apt repository, the torch stack
  from its wheel index, Flash Attention, TransformerEngine, aiter and vLLM
  built from source.

The pins of a profile are its template, with what only this machine knows (the
apt key's hash, the base image's digest) recorded by the real `doit lock` into
a generated copy, .build/demo/<profile>/pins.toml.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocmgraph.common import failpoints
from rocmgraph.common.errors import LockError
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.common.layout import ROOT
from rocmgraph.config.pins import Pins
from rocmgraph.config.pins import load as load_pins
from rocmgraph.demo import baseimage
from rocmgraph.demo.addresses import HTTP_PORT, REGISTRY, REGISTRY_PORT
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.dag import Graph
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.docker import DockerEngine

if TYPE_CHECKING:
    # startup: only when the demo serves
    from rocmgraph.demo.serve import Files, Registry

# Pushes a profile's base image to its reference, given the demo's root: returns its digest.
BaseMaker = Callable[[DockerEngine, str, Path], str]


def _os_base(engine: DockerEngine, ref: str, root: Path) -> str:
    return baseimage.ensure(engine, ref, root / "tmp")


def _primus_base(engine: DockerEngine, ref: str, root: Path) -> str:
    from rocmgraph.demo import primus  # its fixtures: only when the demo starts

    return primus.ensure(
        engine,
        ref,
        root / "fixtures" / "primus",
        baseimage.local_ref(),
        lambda: baseimage.rootfs(engine, root / "tmp"),
    )


@dataclass(frozen=True)
class Profile:
    template: Path  # the pins file the profile's pins are made from
    base: str  # the reference of its base image in the demo registry (as its pins name it)
    make_base: BaseMaker


PROFILES = {
    "demo": Profile(
        ROOT / "demo" / "pins.toml", f"{REGISTRY}/verl-demo/primus:v26.4", _primus_base
    ),
    "demo702": Profile(
        ROOT / "demo" / "pins-rocm702.toml",
        f"{REGISTRY}/verl-demo/os:{baseimage.SUITE}",
        _os_base,
    ),
}


DEMO_ROOT = ROOT / ".build" / "demo"  # the upstreams and the registry, which profiles share


def pins_path(profile: str, root: Path = DEMO_ROOT) -> Path:
    """Where a profile's generated pins live: a folder of their own, with its build records
    and logs beside them."""
    return root / profile / "pins.toml"


class Demo:
    def __init__(self, graph: Graph, profile: str = "demo", root: Path = DEMO_ROOT) -> None:
        self.graph = graph
        self.profile = PROFILES[profile]
        self.root = root
        self.pins = pins_path(profile, root)
        self.fills = self.pins.with_name("locked.json")
        self.servers: list[Files | Registry] = []
        self._held = contextlib.ExitStack()  # the demo's lock, from start to stop

    def sync_pins(self) -> Path:
        """The generated pins: the template, with what `doit lock` found here (no network)."""
        template = self.profile.template.read_text(encoding="utf-8")
        fills_text = self.fills.read_text() if self.fills.is_file() else "[]"
        made_from = self.pins.with_name("pins.from")
        source = hashlib.sha256(f"{template}\0{fills_text}".encode()).hexdigest()
        if self.pins.is_file() and made_from.is_file() and made_from.read_text() == source:
            return self.pins  # the common case, a no-op: nothing to parse
        from rocmgraph.config import pinsedit  # tomlkit: only when the pins are made anew

        fills = [pinsedit.Change(tuple(path), "", value) for path, value in json.loads(fills_text)]
        atomic_write_text(self.pins, pinsedit.apply(template, fills))
        atomic_write_text(made_from, source)
        return self.pins

    def load_pins(self, path: str) -> Pins:
        """The profile's pins, generated first if its template or locked values moved."""
        self.sync_pins()
        return load_pins(path)

    def start(self, outside: Outside, arch: str = "", wait: float | None = None) -> None:
        """Fixtures made, servers up, base image pushed, the generated pins locked; held
        from here to ``stop`` against another run's start (``arch`` and ``wait``: what it
        is told, and how long this one waits for it)."""
        # startup: only when the demo serves
        from rocmgraph.building import turns

        # First of all: another run's builds read the fixtures and use the servers. Runs
        # of other checkouts share only the ports (the pins name them), each taken in this
        # order by every run: two runs never hold one each.
        holder = turns.Holder.me(arch or "as pinned", f"serves the demo from {self.root}")
        self._held.enter_context(turns.held(self.root / "demo.turn", holder, wait))
        for port in (HTTP_PORT, REGISTRY_PORT):
            self._held.enter_context(turns.on_port(port, holder, wait))
        engine = outside.docker
        # Fixtures and servers: only when builds run (a run that builds nothing makes none).
        from rocmgraph.demo import fixtures

        # startup: only when the demo serves
        from rocmgraph.demo.serve import Files, Registry

        fixtures.build(self.root / "fixtures")
        self.servers.append(Files(self.root / "fixtures" / "www", HTTP_PORT))
        self.servers.append(Registry(self.root / "registry", REGISTRY_PORT))
        self.profile.make_base(engine, self.profile.base, self.root)
        # Locked from a copy of the template: the generated pins keep their last locked
        # values until the new ones are written whole (a kill in between loses nothing).
        unlocked = self.pins.with_name("unlocked.toml")
        atomic_write_text(unlocked, self.profile.template.read_text(encoding="utf-8"))
        from rocmgraph.commands import lock  # the network side of locking: only when the demo locks

        result = lock.resolve(Run(Options(pins=str(unlocked)), self.graph), outside)
        failpoints.reached("demo-lock")
        if result.unresolved:
            raise LockError("demo: " + "; ".join(map(str, result.unresolved)))
        atomic_write_text(self.fills, json.dumps([[list(c.path), c.new] for c in result.changes]))
        self.sync_pins()

    def stop(self) -> None:
        while self.servers:
            self.servers.pop().stop()
        self._held.close()
