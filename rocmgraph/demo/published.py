"""A demo upstream's image, published once to the demo registry and reused from there.

The demo's base images stand in for images a registry serves (rocm/primus,
ubuntu), pinned by digest. They are made once, on whichever engine first needs
them, and pushed under their tag and under the hash of their inputs; an engine
that finds both tags on one digest (another machine, in the fleet tests) uses
that digest as it is, instead of making an image of its own whose digest, and so
every key, would differ.
"""

from __future__ import annotations

from collections.abc import Callable

from rocmgraph.common.errors import FetchError
from rocmgraph.outside.docker import DockerEngine
from rocmgraph.outside.http import Http


def published(engine: DockerEngine, ref: str, key: str, make: Callable[[], str]) -> str:
    """The digest of ``ref`` (registry/name:tag) as made from inputs hashed ``key``: the one
    the registry serves under both, else ``make()``'s local image pushed under both."""
    from rocmgraph.outside.registry import digest  # only when the demo starts

    by_inputs = f"{ref.rsplit(':', 1)[0]}:inputs-{key}"
    http = Http(timeout=10.0, attempts=1)
    try:
        served = digest(ref, http)
        if served == digest(by_inputs, http):
            return served
    except FetchError:
        pass  # not published yet (or not these inputs)
    local = make()
    engine.tag(local, by_inputs)
    engine.push(by_inputs)
    engine.tag(local, ref)
    return engine.push(ref)
