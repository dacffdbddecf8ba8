"""Build one stage: skip it when its image exists, else render and hand it to the engine."""

from __future__ import annotations

from rocmgraph import records
from rocmgraph.engine import BuildJob
from rocmgraph.render import parent_arg, render
from rocmgraph.run import Run


def is_built(run: Run, stage: str) -> bool:
    return run.engine.image_exists(run.ref(stage))


def build_stage(run: Run, name: str) -> None:
    if is_built(run, name):
        return
    stage = run.graph[name]
    key = run.keys[name]
    job = BuildJob(
        stage=name,
        ref=run.ref(name),
        dockerfile=render(stage, run.pins, run.archs),
        build_args={parent_arg(parent): run.ref(parent) for parent in stage.parents},
        labels={"org.verl-rocm-graph.stage": name, "org.verl-rocm-graph.key": key.key},
    )
    run.engine.build(job)
    records.save(run.state_dir, name, key.key, key.inputs)


def tag_final(run: Run, final: str) -> str:
    alias = run.friendly_tag()
    run.engine.tag(run.ref(final), alias)
    return alias
