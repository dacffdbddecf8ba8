"""Build one stage: skip it when its image exists, else render and hand it to the engine."""

from __future__ import annotations

import shutil

from rocmgraph import context, records
from rocmgraph.engine import BuildJob
from rocmgraph.lock import check_locked
from rocmgraph.render import parent_arg
from rocmgraph.run import Run


def is_built(run: Run, stage: str) -> bool:
    return run.engine.image_exists(run.ref(stage))


def is_tagged(run: Run, final: str) -> bool:
    """The friendly tag names the final stage's image already."""
    engine = run.engine
    image = engine.image_id(run.ref(final))
    return image is not None and engine.image_id(run.friendly_tag()) == image


def build_stage(run: Run, name: str) -> bool:
    """Build stage ``name`` unless its image exists; True when it built."""
    if run.options.locked:
        check_locked(run.pins)
    if is_built(run, name):
        return False
    stage = run.graph[name]
    key = run.keys[name]
    context_dir = context.prepare(run, name, run.state_dir / "contexts" / f"{name}-{key.short}")
    job = BuildJob(
        stage=name,
        ref=run.ref(name),
        context=context_dir,
        build_args={
            **{parent_arg(parent): run.ref(parent) for parent in stage.parents},
            "PIP_INDEX_URL": run.pins.python.index,  # where, not what: no key input
        },
        labels={"org.verl-rocm-graph.stage": name, "org.verl-rocm-graph.key": key.key},
    )
    run.engine.build(job)
    records.save(run.state_dir, name, key.key, key.inputs)
    shutil.rmtree(context_dir, ignore_errors=True)  # kept when the build fails, to look at
    return True


def tag_final(run: Run, final: str) -> str:
    alias = run.friendly_tag()
    run.engine.tag(run.ref(final), alias)
    return alias
