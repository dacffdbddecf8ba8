"""The plan: every stage in build order, its key, built or not, and why it would build."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from rocmgraph import records
from rocmgraph.errors import EngineError
from rocmgraph.explain import changes
from rocmgraph.pins import format_path, is_under
from rocmgraph.run import Run


@dataclass(frozen=True)
class StagePlan:
    name: str
    key: str
    image: str
    parents: tuple[str, ...]
    arch_dependent: bool
    status: str  # "built", "not built", or "unknown" (no engine to ask)
    reasons: tuple[str, ...]  # why it would build; empty when built
    missing: tuple[dict[str, str], ...]  # pins it reads that are not known yet
    note: str


def engine_problem(run: Run) -> str:
    """Why the engine cannot say what is built ("" when it can): the plan still shows keys."""
    try:
        run.engine.image_exists("verl-rocm-graph/probe:none")
    except EngineError as exc:
        return str(exc)
    return ""


def make_plan(run: Run) -> list[StagePlan]:
    plans = []
    missing = run.pins.missing()
    problem = engine_problem(run)
    for stage in run.graph:
        key = run.keys[stage.name]
        ref = run.ref(stage.name)
        built = False if problem else run.engine.image_exists(ref)
        reasons: list[str] = []
        if problem:
            reasons = ["unknown: no engine to ask"]
        elif not built:
            record = records.load(run.records_dir, stage.name)
            if record and record[0] == key.key:
                reasons = [f"image {ref} is gone (it was built before)"]
            else:
                reasons = changes(key.inputs, record[1] if record else None)
        note = ""
        if stage.name in run.pins.base.provides:
            note = "verify only: the base image provides it"
        plans.append(
            StagePlan(
                name=stage.name,
                key=key.key,
                image=ref,
                parents=stage.parents,
                arch_dependent=stage.arch_dependent,
                status="unknown" if problem else "built" if built else "not built",
                reasons=tuple(reasons),
                missing=tuple(
                    {"pin": format_path(m.path), "why": m.why}
                    for m in missing
                    if is_under(m.path, stage.reads)
                ),
                note=note,
            )
        )
    return plans


def as_json(run: Run, plans: list[StagePlan]) -> str:
    document = {
        "arch": list(run.archs),
        "pins": str(run.options.pins),
        "engine": engine_problem(run) or "ok",
        "stages": [asdict(plan) for plan in plans],
    }
    return json.dumps(document, indent=2)


def as_text(run: Run, plans: list[StagePlan]) -> str:
    width = max(len(plan.name) for plan in plans) + 2
    problem = engine_problem(run)
    lines = [
        f"plan for arch {','.join(run.archs)} from {run.options.pins}",
        *([f"engine: {problem}"] if problem else []),
        f"{'stage':<{width}}{'key':<14}{'arch':<6}{'status':<11}why",
    ]
    pad = " " * (width + 14 + 6 + 11)
    for plan in plans:
        why = "; ".join([*plan.reasons, *([plan.note] if plan.note else [])]) or "-"
        arch = "yes" if plan.arch_dependent else "-"
        lines.append(f"{plan.name:<{width}}{plan.key[:12]:<14}{arch:<6}{plan.status:<11}{why}")
        lines += [f"{pad}missing: {m['pin']} ({m['why']})" for m in plan.missing]
    built = sum(plan.status == "built" for plan in plans)
    lines.append(f"{len(plans)} stages: {built} built, {len(plans) - built} to build")
    return "\n".join(lines)
