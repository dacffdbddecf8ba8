"""The plan: every stage in build order, its key, built or not, and why it would build."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import partial

from rocmgraph.building import records
from rocmgraph.common.engine import Engine
from rocmgraph.common.errors import EngineError, Unchecked
from rocmgraph.config.pins import Missing, format_path, is_under
from rocmgraph.graph import estimate
from rocmgraph.graph.explain import changes
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.keys import depends_on_arch


class Status(StrEnum):
    BUILT = "built"
    CACHED = "cached"  # in the shared cache (a registry): pulled when needed, never built
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
    estimate: estimate.Estimate | None  # what building it costs; None when built
    hermetic: bool  # it builds with the network off, from its locked closure


@dataclass(frozen=True)
class Plan:
    stages: tuple[StagePlan, ...]
    engine: str  # why the engine cannot say what is built; "" when it can
    total: estimate.Total  # what building the stages not built costs


def engine_problem(engine: Engine) -> str:
    """Why the engine cannot say what is built ("" when it can): the plan still shows keys."""
    try:
        engine.image_exists("verl-rocm-graph/probe:none")
    except EngineError as exc:
        return str(exc)
    return ""


def make_plan(
    run: Run,
    engine: Engine,
    references: Mapping[str, estimate.Reference] | None = None,
    builders: int = 2,
    cached: Callable[[str], bool] = lambda stage: False,
) -> Plan:
    """Every stage of ``run``, built or not on ``engine`` (or ``cached`` in a shared cache),
    and what the build costs on ``builders`` builders (from this machine's records, else
    from ``references``)."""
    plans = []
    missing = run.graph.asked(run.pins)
    references = references or {}
    problem = engine_problem(engine)
    ids = {} if problem else engine.image_ids([run.ref(stage.name) for stage in run.graph])

    def tagged(stage: str, key: str) -> bool:
        return not problem and engine.image_exists(run.ref(stage, key))

    for stage in run.graph:
        key = run.keys[stage.name]
        ref = run.ref(stage.name)
        built = ids.get(ref) is not None
        in_cache = not problem and not built and cached(stage.name)
        reasons: list[str] = []
        record = records.load(run.records_dir, stage.name, partial(tagged, stage.name))
        if problem:
            reasons = ["unknown: no engine to ask"]
        elif in_cache:
            reasons = [f"in the cache as {run.cached_ref(stage.name)}"]
        elif not built:
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
                status=_status(bool(problem), built, in_cache),
                reasons=tuple(reasons),
                missing=tuple(m for m in missing if is_under(m.path, stage.reads)),
                note=note,
                estimate=None
                if built or in_cache or problem  # no engine: what is built is not known
                else estimate.estimate(
                    stage.name,
                    record.seconds if record else None,
                    references,
                    check_only=stage.name in run.pins.base.provides,  # its source build is not
                ),
                hermetic=run.sealed(stage.name) is not None,
            )
        )
    costs = {p.name: p.estimate for p in plans if p.estimate is not None}
    parents = {p.name: p.parents for p in plans}
    return Plan(tuple(plans), problem, estimate.total(costs, parents, builders))


def _status(unknown: bool, built: bool, cached: bool) -> Status:
    if unknown:
        return Status.UNKNOWN
    return Status.BUILT if built else Status.CACHED if cached else Status.NOT_BUILT


def verdict(plan: Plan) -> None:
    """Exit 2 when no engine could say what is built: the keys are right, the statuses not
    known (for scripts that read format=json, as for people)."""
    if plan.engine:
        raise Unchecked(f"built status unknown: {plan.engine}")


def as_json(run: Run, plan: Plan) -> str:
    document = {
        "arch": list(run.archs),
        "source_arch": list(run.pins.build.compiled_for(run.archs)),
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
                "estimate": None
                if stage.estimate is None
                else {"seconds": stage.estimate.seconds, "from": str(stage.estimate.source)},
                "hermetic": stage.hermetic,
            }
            for stage in plan.stages
        ],
        "estimate": {
            "stages": plan.total.stages,
            "work_seconds": plan.total.work,
            "wall_seconds": plan.total.wall,
            "builders": plan.total.builders,
            "critical_path": list(plan.total.critical),
        },
    }
    return json.dumps(document, indent=2)


def _network(run: Run, plan: Plan) -> list[str]:
    """How the stages reach the network: off from their locked closures (hermetic, the
    default), on for all (hermetic=0); and which stages a build refuses, built or not, for
    having no closure locked (hermetic, or locked=1), or, in a demo profile, locks first."""
    names = [stage.name for stage in plan.stages]
    missing = [name for name in names if name in run.unlocked]
    fix = "doit lock closures=1" + ("" if run.options.locked else ", or hermetic=0")
    refused = f"all {len(names)} stages" if len(missing) == len(names) else ", ".join(missing)
    if not run.options.hermetic:
        line = "network: on for every stage (hermetic=0)"
        if run.options.locked and missing:
            line += f"; locked=1 refuses {refused}: no closure locked (doit lock closures=1)"
        return [line]
    if missing and run.options.profile and not run.options.locked:
        # a demo's inputs are all made here: its build locks them (tasks.py)
        return [f"network: off; a build locks the closures of {refused} first: none locked"]
    if missing:
        return [f"network: off; a build refuses {refused}: no closure locked ({fix})"]
    todo = [stage for stage in plan.stages if stage.status is Status.NOT_BUILT]
    return [f"network: off for all {len(todo)} stages to build (closures locked)"] if todo else []


def critical(plan: Plan) -> list[str]:
    """The longest chain of stages to build, where the estimates give it any length: what
    more builders cannot shorten."""
    costs = {s.name: s.estimate.seconds for s in plan.stages if s.estimate is not None}
    chain = plan.total.critical
    length = sum(costs.get(name, 0.0) for name in chain)
    if not length:
        return []
    return [f"critical path: {' → '.join(chain)} ({estimate.duration(length)})"]


def _source_archs(run: Run) -> list[str]:
    """What the source stages compile for, where it is more than the image's archs."""
    compiled = run.pins.build.compiled_for(run.archs)
    if compiled == run.archs:
        return []
    return [f"source stages compile for {','.join(compiled)} ([build].source_archs)"]


def as_text(run: Run, plan: Plan) -> str:
    width = max(len(stage.name) for stage in plan.stages) + 2
    lines = [
        f"plan for arch {','.join(run.archs)} from {run.options.pins}",
        *_source_archs(run),
        *([f"engine: {plan.engine}"] if plan.engine else []),
        f"{'stage':<{width}}{'key':<14}{'arch':<6}{'status':<11}{'estimate':<19}why",
    ]
    pad = " " * (width + 14 + 6 + 11 + 19)
    for stage in plan.stages:
        why = "; ".join([*stage.reasons, *([stage.note] if stage.note else [])]) or "-"
        arch = "yes" if stage.arch_dependent else "-"
        cost = stage.estimate.text() if stage.estimate else "-"
        lines.append(
            f"{stage.name:<{width}}{stage.key[:12]:<14}{arch:<6}{stage.status:<11}{cost:<19}{why}"
        )
        lines += [f"{pad}missing: {m}" for m in stage.missing]
    built = sum(stage.status is Status.BUILT for stage in plan.stages)
    cached = sum(stage.status is Status.CACHED for stage in plan.stages)
    total = len(plan.stages)
    if plan.engine:
        lines.append(f"{total} stages: built status unknown (the engine is not reachable)")
    else:
        in_cache = f", {cached} cached" if cached else ""
        lines.append(f"{total} stages: {built} built{in_cache}, {total - built - cached} to build")
    if plan.total.stages:
        lines.append(plan.total.text())
        lines += critical(plan)
    lines += _network(run, plan)
    if plan.total.reference:
        lines.append("(ref): the real image's build time, as cited in docker/durations.toml")
    return "\n".join(lines)
