"""The graph as a user of `docker buildx bake` would write it: the peer to beat.

One target per stage, all in the monolith's Dockerfile (rocmgraph/building/dockerfiles.py),
each target's ``contexts`` naming its parents' targets; bake builds them in one session,
and each target's image is exported, as the graph exports a stage's. On fresh runners
each target writes a registry cache in mode=max where the engine can export one (the
containerd store), else an inline cache (the classic store's docker driver exports no
other), and reads every target's: a step that several targets share is looked up in the
cache of whichever target's build reaches it first.

A target's ``contexts`` are what the issue names, but on a fresh runner they cost bake its
cache: a step that reads the build context (a COPY of a source, a RUN that binds a script)
misses the registry cache in every target two or more ``target:`` links below the first,
though nothing changed (benchmarks/bake_contexts.py reproduces it on four COPY steps).
``contexts=False`` links the targets by the Dockerfile's own ``FROM <stage>``, as one file
of stages already does, and every step hits; the images are the same.

The file is a Compose file, one of bake's three formats: buildx 0.13's HCL and JSON
targets have no ``network`` (it came in 0.14), and the demo's upstreams are served on
127.0.0.1, so every step needs the host's network, which only Compose's ``build.network``
gives. JSON is YAML: the file is written as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from rocmgraph.common.engine import ImageStore
from rocmgraph.graph.invocation import Run

# BuildKit's registry cache as the peer keeps it: every step (mode=max), in an
# image manifest a plain registry stores (image-manifest=true).
REGISTRY_CACHE = "type=registry,ref={ref},mode=max,image-manifest=true,oci-mediatypes=true"


def bake_file(
    run: Run,
    context: Path,
    secrets: Mapping[str, Path],
    namespace: str,
    *,
    cache: str = "",
    store: ImageStore = ImageStore.CLASSIC,
    contexts: bool = True,
) -> str:
    """The bake file of ``run``'s stages over ``context`` (the monolith's), its images named
    under ``namespace``; with ``cache`` (a registry repository: a fresh runner), each
    target's image and cache there. ``contexts``: each target names its parents' targets
    (else the Dockerfile's stages link them)."""
    arch = ",".join(run.archs)
    images = {stage.name: f"{cache}/{stage.name}:{arch}" for stage in run.graph}
    imports = [f"type=registry,ref={_cache_ref(images[n], store)}" for n in sorted(images)]
    services = {}
    for stage in run.graph:
        build: dict[str, object] = {
            "context": str(context),
            "dockerfile": "Dockerfile",
            "target": stage.name,
            "network": "host",
            "secrets": sorted(secrets),
        }
        if contexts and stage.parents:
            build["additional_contexts"] = {p: f"target:{p}" for p in stage.parents}
        image = f"{namespace}-bake/{stage.name}:{arch}"
        if cache:
            image = images[stage.name]
            build.update(_cache(image, store, imports))
        services[stage.name] = {"image": image, "build": build}
    files = {name: {"file": str(path)} for name, path in sorted(secrets.items())}
    return json.dumps({"services": services, "secrets": files}, indent=1) + "\n"


def _cache_ref(image: str, store: ImageStore) -> str:
    """Where a target's cache is: its own repository's, or its image (an inline cache)."""
    if store is ImageStore.CONTAINERD:
        return f"{image.rsplit(':', 1)[0]}:buildcache"
    return image


def _cache(image: str, store: ImageStore, imports: list[str]) -> dict[str, object]:
    """A target's cache: the registry's, in mode=max, where the engine exports one; else
    the inline cache of its image, pushed (``output``); read from every target's."""
    if store is ImageStore.CONTAINERD:
        ref = _cache_ref(image, store)
        return {"cache_from": imports, "cache_to": [REGISTRY_CACHE.format(ref=ref)]}
    return {"cache_from": imports, "cache_to": ["type=inline"]}


def build_output(store: ImageStore) -> list[str]:
    """Where `docker buildx build` puts a monolith's image: into the engine, compressed as
    the graph compresses (zstd on the containerd store)."""
    if store is ImageStore.CONTAINERD:
        return ["--output", "type=image,compression=zstd,compression-level=1"]
    return ["--load"]


def output(store: ImageStore, fresh: bool = False) -> list[str]:
    """Where bake puts each target's image: into the engine, as the graph does (zstd on the
    containerd store, as the graph compresses); on a fresh runner of the classic store,
    pushed too, with its inline cache."""
    if store is ImageStore.CONTAINERD:
        return ["--set", "*.output=type=image,compression=zstd,compression-level=1"]
    return ["--set", "*.output=type=image,push=true"] if fresh else ["--load"]
