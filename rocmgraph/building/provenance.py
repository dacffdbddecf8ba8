"""build.json: how an image was built, for /workspace/.manifest."""

from __future__ import annotations

import json

from packaging.utils import canonicalize_name

import rocmgraph
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.keys import Json


def build_record(run: Run, final: str) -> dict[str, Json]:
    """Every stage up to ``final``: its key, image and the pins it read. Not the id an engine
    gave its image, how long its build took, or the name and place of its pins file: facts
    of the machine that built it (its .build/run.json), which a rebuild of the same key
    elsewhere, or here after its tag was lost, does not share; the image would then differ
    from its own rebuild."""
    stages: list[Json] = []
    for name in run.graph.closure(final):
        key = run.keys[name]
        ref = run.ref(name)
        stages.append(
            {
                "name": name,
                "key": key.key,
                "image": ref,
                "parents": list(run.graph[name].parents),
                "arch": list(key.inputs.arch) if key.inputs.arch is not None else None,
                "pins": dict(key.inputs.pins),
                "files": dict(key.inputs.files),
                # sealed: the sha256 of the closure it was built from, with the network off
                "closure": key.inputs.closure,
            }
        )
    return {
        "tool": {"name": "verl-rocm-graph", "version": rocmgraph.__version__},  # in its key
        "arch": list(run.archs),
        "stages": stages,
    }


def build_json(run: Run, final: str) -> str:
    return json.dumps(build_record(run, final), indent=1, sort_keys=True)


def installed(pip_list: str) -> dict[str, str]:
    """The Python packages an image's manifest lists (``pip list``'s table, or
    ``name==version`` lines): name as pip compares them (PEP 503) -> version."""
    found: dict[str, str] = {}
    for line in pip_list.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
        else:
            parts = line.split()
            if len(parts) < 2 or set(parts[0]) <= {"-"} or parts[0] == "Package":
                continue
            name, version = parts[0], parts[1]
        found[canonicalize_name(name)] = version.strip()
    return found
