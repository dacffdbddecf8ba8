"""The plan: every stage in build order, its key, built or not, and why it would build."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from rocmgraph import records
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
    status: str  # "built" or "not built"
    reasons: tuple[str, ...]  # why it would build; empty when built
    missing: tuple[dict[str, str], ...]  # pins it reads that are not known yet
    note: str


def make_plan(run: Run) -> list[StagePlan]:
    plans = []
    missing = run.pins.missing()
    for stage in run.graph:
        key = run.keys[stage.name]
        ref = run.ref(stage.name)
        built = run.engine.image_exists(ref)
        reasons: list[str] = []
        if not built:
            record = records.load(run.state_dir, stage.name)
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
                status="built" if built else "not built",
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
        "stages": [asdict(plan) for plan in plans],
    }
    return json.dumps(document, indent=2)


def as_text(run: Run, plans: list[StagePlan]) -> str:
    width = max(len(plan.name) for plan in plans) + 2
    lines = [
        f"plan for arch {','.join(run.archs)} from {run.options.pins}",
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
