"""build.json: how an image was built, for /workspace/.manifest."""

from __future__ import annotations

import json

import rocmgraph
from rocmgraph import records
from rocmgraph.engine import Engine
from rocmgraph.keys import Json
from rocmgraph.run import Run


def build_record(run: Run, engine: Engine, final: str) -> dict[str, Json]:
    """Every stage up to ``final``: key, pins read, image and its id on ``engine``, build
    time."""
    stages: list[Json] = []
    for name in run.graph.closure(final):
        key = run.keys[name]
        ref = run.ref(name)
        # The stage being built has no image or time yet: in its first build, and in any
        # rebuild that checks it (its record is kept out, so both make the same file).
        building = name == final
        stages.append(
            {
                "name": name,
                "key": key.key,
                "image": ref,
                "image_id": None if building else engine.image_id(ref),
                "parents": list(run.graph[name].parents),
                "arch": list(key.inputs.arch) if key.inputs.arch is not None else None,
                "pins": dict(key.inputs.pins),
                "files": dict(key.inputs.files),
                "build_seconds": None
                if building
                else records.seconds(run.records_dir, name, key.key),
            }
        )
    return {
        "tool": {"name": "verl-rocm-graph", "version": rocmgraph.__version__},
        "pins_file": str(run.options.pins),
        "arch": list(run.archs),
        "stages": stages,
    }


def build_json(run: Run, engine: Engine, final: str) -> str:
    return json.dumps(build_record(run, engine, final), indent=1, sort_keys=True)
