"""``Outside``: what one command reaches beyond its process (HTTP, the caches, the
engines, the registry), made once by the task layer and passed in; nothing below makes
its own."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rocmgraph.common.engine import Deferred, Engine
from rocmgraph.common.layout import default_cache
from rocmgraph.common.pool import Builder, Pool
from rocmgraph.config.pins import Pins
from rocmgraph.fetch.store import Store
from rocmgraph.outside.docker import DockerEngine
from rocmgraph.outside.http import Http

if TYPE_CHECKING:
    from rocmgraph.fetch.sources import SourceCache
    from rocmgraph.outside.registry import Client


@dataclass
class Outside:
    """The HTTP client, the caches, and the local Docker engine, which is connected only
    when first asked for (`doit plan` works where no engine answers)."""

    cache: Path = field(default_factory=default_cache)
    http: Http = field(default_factory=Http)
    logs: Path = Path(".build/logs")  # where the engine keeps each stage's build log
    network: str | None = None  # `docker build --network`; None: $VERL_GRAPH_NETWORK
    builders: tuple[str, ...] = ()  # Docker hosts that build at once (builders=); (): none
    builder: str = ""  # the buildx builder every build runs on (builder=); "": none

    def sources(self, pins: Pins) -> SourceCache:
        """The source cache, fetching through the mirrors ``pins`` name."""
        from rocmgraph.fetch.sources import Mirrors, SourceCache  # git: only when fetching

        return SourceCache(self.cache, Mirrors.from_pins(pins))

    @functools.cached_property
    def store(self) -> Store:
        return Store(self.cache, self.http)

    @functools.cached_property
    def cache_registry(self) -> Client:
        """The shared stage cache's registry, asked without a pull. One try, soon given up:
        a cache that does not answer is built past, not waited for."""
        from rocmgraph.outside.registry import Client  # a run without a cache never asks

        return Client(Http(timeout=10.0, attempts=1))

    @functools.cached_property
    def docker(self) -> DockerEngine:
        """The local Docker engine, connected now (the demo drives it beyond builds)."""
        return self._connect("")

    def _connect(self, host: str) -> DockerEngine:
        memo = self.cache / "docker-client.json"
        return DockerEngine.connect(self.logs, self.network, memo, host=host, builder=self.builder)

    @functools.cached_property
    def pool(self) -> Pool:
        """The builders (builders=), each connected when first asked something."""
        return Pool(
            [
                Builder(host, Deferred(functools.partial(self._connect, host)))
                for host in self.builders
            ]
        )

    @functools.cached_property
    def engine(self) -> Engine:
        """The local Docker engine as builds and plans use it: connected when first asked."""
        return Deferred(lambda: self.docker)
