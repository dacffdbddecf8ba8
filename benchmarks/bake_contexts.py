"""Benchmark: why bake misses its registry cache on fresh runners, reduced to four COPY steps.

A Dockerfile of four stages, a <- b <- c <- d, each copying one file of the build context,
baked with one target per stage on an empty engine that writes each target's registry
cache in mode=max and reads every target's; then baked again, nothing changed, on another
empty engine. Two bake files, the same targets and caches:

- ``contexts``: each target names its parent's target (``additional_contexts``, a
  ``target:`` link), as benchmarks/bake.py writes by default and issue 47 names;
- ``stages``: no contexts; the Dockerfile's ``FROM <stage>`` links them.

It prints the steps the second runner ran again. Nothing changed, so every step should
hit; any that runs is the miss that benchmarks/RESULTS.md's fresh-runner rows show at the
size of the demo.

    python3 benchmarks/bake_contexts.py [--store containerd|classic]   (dockerd and buildx)

The classic store's docker driver exports no registry cache: there each target carries an
inline cache in its pushed image instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bake import REGISTRY_CACHE
from changelog import _steps

from rocmgraph.common.engine import ImageStore
from rocmgraph.demo.machine import second_engine
from rocmgraph.demo.serve import Registry

STAGES = "abcd"
PORT = 28476  # below Linux's ephemeral range, beside the change log's registry
DOCKERFILE = "\n".join(
    f"FROM {'scratch' if i == 0 else STAGES[i - 1]} AS {name}\nCOPY {name}.txt /{name}.txt\n"
    for i, name in enumerate(STAGES)
)


def bake_file(context: Path, cache: str, store: ImageStore, *, contexts: bool) -> str:
    """A Compose file for bake: one target per stage, each writing its registry cache
    (containerd) or an inline cache in its image (classic), each reading every target's."""

    def cache_ref(name: str) -> str:
        return f"{cache}/{name}:{'buildcache' if store is ImageStore.CONTAINERD else '1'}"

    services = {}
    for i, name in enumerate(STAGES):
        written = REGISTRY_CACHE.format(ref=cache_ref(name))
        build: dict[str, object] = {
            "context": str(context),
            "target": name,
            "cache_from": [f"type=registry,ref={cache_ref(other)}" for other in STAGES],
            "cache_to": [written if store is ImageStore.CONTAINERD else "type=inline"],
        }
        if contexts and i:
            build["additional_contexts"] = {STAGES[i - 1]: f"target:{STAGES[i - 1]}"}
        services[name] = {"image": f"{cache}/{name}:1", "build": build}
    return json.dumps({"services": services}, indent=1) + "\n"


def ran_again(bakefile: Path, store: ImageStore) -> list[list[str]]:
    """The steps each of two empty engines ran, baking ``bakefile`` one after the other."""
    runs = []
    for _ in range(2):
        with second_engine(store) as runner:
            done = subprocess.run(
                ["docker", "buildx", "bake", "--progress=plain", "-f", str(bakefile),
                 "--set", "*.output=type=image,push=true"],
                env={**os.environ, **runner}, capture_output=True, text=True, check=False,
            )  # fmt: skip
            log = done.stdout + done.stderr
            if done.returncode != 0:
                raise SystemExit(log[-3000:])
            names = {  # "#7 [d c 1/1] COPY c.txt /c.txt": the step, of whichever target
                line.split(" ", 1)[0][1:]: line.split("] ", 1)[1]
                for line in log.splitlines()
                if line.startswith("#") and "] COPY " in line
            }
            _, ran = _steps(log)
            runs.append(sorted(names[step] for step in ran if step in names))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=ImageStore, default=ImageStore.CONTAINERD)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        context = work / "context"
        context.mkdir()
        (context / "Dockerfile").write_text(DOCKERFILE)
        for name in STAGES:
            (context / f"{name}.txt").write_text(f"{name}\n")
        registry = Registry(work / "registry", PORT)
        try:
            print(f"the {args.store.value} store\n")
            print("| bake file | first runner: COPY steps run | second runner, nothing changed |")
            print("| --- | ---: | --- |")
            for contexts in (True, False):
                cache = f"127.0.0.1:{PORT}/{'contexts' if contexts else 'stages'}-{time.time_ns()}"
                bakefile = work / "bake.compose.yaml"
                bakefile.write_text(bake_file(context, cache, args.store, contexts=contexts))
                first, second = ran_again(bakefile, args.store)
                again = ", ".join(f"`{step}`" for step in second) or "none"
                print(f"| {'contexts' if contexts else 'stages'} | {len(first)} | {again} |")
        finally:
            registry.stop()


if __name__ == "__main__":
    main()
