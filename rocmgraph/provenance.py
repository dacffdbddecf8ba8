"""build.json: how an image was built, for /workspace/.manifest."""

from __future__ import annotations

import json
from typing import Any

import rocmgraph
from rocmgraph import records
from rocmgraph.run import Run


def build_record(run: Run, final: str) -> dict[str, Any]:
    """Every stage up to ``final``: key, pins read, image and its id, build time."""
    stages = []
    for name in run.graph.closure(final):
        key = run.keys[name]
        ref = run.ref(name)
        stages.append(
            {
                "name": name,
                "key": key.key,
                "image": ref,
                "image_id": run.engine.image_id(ref),  # None for the stage being built
                "parents": run.graph[name].parents,
                "arch": key.inputs["arch"],
                "pins": key.inputs["pins"],
                "files": key.inputs["files"],
                "build_seconds": records.seconds(run.records_dir, name, key.key),
            }
        )
    return {
        "tool": {"name": "verl-rocm-graph", "version": rocmgraph.__version__},
        "pins_file": str(run.options.pins),
        "arch": list(run.archs),
        "stages": stages,
    }


def build_json(run: Run, final: str) -> str:
    return json.dumps(build_record(run, final), indent=1, sort_keys=True)
