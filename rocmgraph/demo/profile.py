"""`profile=demo`: prepare the demo's upstreams, serve them for a build, and pin them.

The pins of the demo are demo/pins.toml, with what only this machine knows
(the apt key's hash, the base image's digest) recorded by the real `doit
lock` into a generated copy under .build/demo/.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import stages
from rocmgraph import lock
from rocmgraph.demo import baseimage, fixtures
from rocmgraph.demo.serve import Files, Registry
from rocmgraph.docker import DockerEngine
from rocmgraph.errors import LockError
from rocmgraph.fsutil import atomic_write_text
from rocmgraph.layout import ROOT
from rocmgraph.run import Options, Run

TEMPLATE = ROOT / "demo" / "pins.toml"
HTTP_PORT = 38470
REGISTRY_PORT = 38471
BASE_REF = f"127.0.0.1:{REGISTRY_PORT}/verl-demo/os:{baseimage.SUITE}"


class Demo:
    def __init__(self, root: Path = ROOT / ".build" / "demo") -> None:
        self.root = root
        self.pins = root / "pins.toml"
        self.fills = root / "locked.json"
        self.servers: list[Files | Registry] = []

    def sync_pins(self) -> Path:
        """The generated pins: the template, with what `doit lock` found here (no network)."""
        template = TEMPLATE.read_text(encoding="utf-8")
        fills_text = self.fills.read_text() if self.fills.is_file() else "[]"
        made_from = self.root / "pins.from"
        source = hashlib.sha256(f"{template}\0{fills_text}".encode()).hexdigest()
        if self.pins.is_file() and made_from.is_file() and made_from.read_text() == source:
            return self.pins  # the common case, a no-op: nothing to parse
        fills = [lock.Change(tuple(path), "", value) for path, value in json.loads(fills_text)]
        atomic_write_text(self.pins, lock.apply(template, fills))
        atomic_write_text(made_from, source)
        return self.pins

    def start(self, engine: DockerEngine) -> None:
        """Fixtures made, servers up, base image pushed, the generated pins locked."""
        fixtures.build(self.root / "fixtures")
        self.servers.append(Files(self.root / "fixtures" / "www", HTTP_PORT))
        self.servers.append(Registry(self.root / "registry", REGISTRY_PORT))
        baseimage.ensure(engine, BASE_REF, self.root / "tmp")
        self.fills.unlink(missing_ok=True)
        result = lock.resolve(Run(Options(pins=str(self.sync_pins())), stages.graph(), engine))
        if result.unresolved:
            raise LockError("demo: " + "; ".join(map(str, result.unresolved)))
        atomic_write_text(self.fills, json.dumps([[list(c.path), c.new] for c in result.changes]))
        self.sync_pins()

    def stop(self) -> None:
        while self.servers:
            self.servers.pop().stop()
