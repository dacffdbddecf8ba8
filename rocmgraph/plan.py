"""The plan: every stage in build order, its key, built or not, and why it would build."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from rocmgraph import records
from rocmgraph.engine import Engine
from rocmgraph.errors import EngineError
from rocmgraph.explain import changes
from rocmgraph.keys import depends_on_arch
from rocmgraph.pins import Missing, format_path, is_under
from rocmgraph.run import Run


class Status(StrEnum):
    BUILT = "built"
    NOT_BUILT = "not built"
    UNKNOWN = "unknown"  # no engine to ask


@dataclass(frozen=True)
class StagePlan:
    name: str
    key: str
    image: str
    parents: tuple[str, ...]
    arch_dependent: bool
    status: Status
    reasons: tuple[str, ...]  # why it would build; empty when built
    missing: tuple[Missing, ...]  # pins it reads that are not known yet
    note: str


@dataclass(frozen=True)
class Plan:
    stages: tuple[StagePlan, ...]
    engine: str  # why the engine cannot say what is built; "" when it can


def engine_problem(engine: Engine) -> str:
    """Why the engine cannot say what is built ("" when it can): the plan still shows keys."""
    try:
        engine.image_exists("verl-rocm-graph/probe:none")
    except EngineError as exc:
        return str(exc)
    return ""


def make_plan(run: Run, engine: Engine) -> Plan:
    """Every stage of ``run``, built or not on ``engine``."""
    plans = []
    missing = run.pins.missing()
    problem = engine_problem(engine)
    for stage in run.graph:
        key = run.keys[stage.name]
        ref = run.ref(stage.name)
        built = False if problem else engine.image_exists(ref)
        reasons: list[str] = []
        if problem:
            reasons = ["unknown: no engine to ask"]
        elif not built:
            record = records.load(run.records_dir, stage.name)
            if record and record.key == key.key:
                reasons = [f"image {ref} is gone (it was built before)"]
            else:
                reasons = changes(key.inputs, record.inputs if record else None)
        note = ""
        if stage.name in run.pins.base.provides:
            note = "verify only: the base image provides it"
        plans.append(
            StagePlan(
                name=stage.name,
                key=key.key,
                image=ref,
                parents=stage.parents,
                arch_dependent=depends_on_arch(stage, run.pins),
                status=Status.UNKNOWN if problem else Status.BUILT if built else Status.NOT_BUILT,
                reasons=tuple(reasons),
                missing=tuple(m for m in missing if is_under(m.path, stage.reads)),
                note=note,
            )
        )
    return Plan(tuple(plans), problem)


def as_json(run: Run, plan: Plan) -> str:
    document = {
        "arch": list(run.archs),
        "pins": str(run.options.pins),
        "engine": plan.engine or "ok",
        "stages": [
            {
                "name": stage.name,
                "key": stage.key,
                "image": stage.image,
                "parents": list(stage.parents),
                "arch_dependent": stage.arch_dependent,
                "status": str(stage.status),
                "reasons": list(stage.reasons),
                "missing": [{"pin": format_path(m.path), "why": m.why} for m in stage.missing],
                "note": stage.note,
            }
            for stage in plan.stages
        ],
    }
    return json.dumps(document, indent=2)


def as_text(run: Run, plan: Plan) -> str:
    width = max(len(stage.name) for stage in plan.stages) + 2
    lines = [
        f"plan for arch {','.join(run.archs)} from {run.options.pins}",
        *([f"engine: {plan.engine}"] if plan.engine else []),
        f"{'stage':<{width}}{'key':<14}{'arch':<6}{'status':<11}why",
    ]
    pad = " " * (width + 14 + 6 + 11)
    for stage in plan.stages:
        why = "; ".join([*stage.reasons, *([stage.note] if stage.note else [])]) or "-"
        arch = "yes" if stage.arch_dependent else "-"
        lines.append(f"{stage.name:<{width}}{stage.key[:12]:<14}{arch:<6}{stage.status:<11}{why}")
        lines += [f"{pad}missing: {m}" for m in stage.missing]
    built = sum(stage.status is Status.BUILT for stage in plan.stages)
    total = len(plan.stages)
    lines.append(f"{total} stages: {built} built, {total - built} to build")
    return "\n".join(lines)
