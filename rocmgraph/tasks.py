"""The doit tasks, as dicts: dodo.py only wires them to doit's variables.

Creators must stay cheap and never fail: doit calls every one of them on
every run (``doit list`` included). Everything that can fail happens in an
action, where the reporter turns it into one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import stages
from rocmgraph import build, lock, patch_status, plan, render
from rocmgraph.errors import GraphToolError, PatchError, VariableError
from rocmgraph.report import Reporter, guarded
from rocmgraph.run import Options, Run

Task = dict[str, Any]

DOIT_CONFIG: dict[str, Any] = {
    "default_tasks": ["plan"],
    "reporter": Reporter,
    "par_type": "thread",  # stages build in docker; threads only wait on it
    "verbosity": 2,  # stream build logs as they come
    "subtasks": True,  # `doit list` shows build:<stage> and render:<stage> too
}

FORMATS = ("text", "json")


def plan_task(options: Options, fmt: str) -> Task:
    def show() -> None:
        _check_format(fmt)
        run = Run(options, stages.graph())
        plans = plan.make_plan(run)
        print(plan.as_json(run, plans) if fmt == "json" else plan.as_text(run, plans))

    return {
        "doc": "show every stage: key, arch-dependent, built or not, and why it would build",
        "actions": [guarded(show)],
        "uptodate": [False],
        "meta": {"quiet": True},
        "verbosity": 2,
    }


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise VariableError(f"format={fmt}: unknown format; use format=text or format=json")


def lock_task(options: Options) -> Task:
    def run_lock() -> None:
        print("\n".join(lock.run_lock(Run(options, stages.graph()))))

    return {
        "doc": "record what only the network knows: wheel files and sha256, full commits, digests",
        "actions": [guarded(run_lock)],
        "uptodate": [False],
        "verbosity": 2,
    }


def patches_task(options: Options, fmt: str) -> Task:
    def show() -> None:
        _check_format(fmt)
        rows = patch_status.table(Run(options, stages.graph()))
        print(patch_status.as_json(rows) if fmt == "json" else patch_status.as_text(rows))
        conflicts = [row for row in rows if row.status == "conflicts"]
        if conflicts:
            raise PatchError(f"{len(conflicts)} patches conflict with their pinned tree")

    return {
        "doc": "check every patch against its pinned tree: applies, obsolete or conflicts",
        "actions": [guarded(show)],
        "uptodate": [False],
        "meta": {"quiet": True},
        "verbosity": 2,
    }


def render_tasks(options: Options) -> Iterator[Task]:
    yield {"basename": "render", "name": None, "doc": "print a stage's rendered Dockerfile"}
    for stage in stages.graph():

        def show(name: str = stage.name) -> None:
            run = Run(options, stages.graph())
            print(render.render(run.graph[name], run.pins, run.archs), end="")

        yield {
            "basename": "render",
            "name": stage.name,
            "doc": f"print the Dockerfile of stage {stage.name}",
            "actions": [guarded(show)],
            "uptodate": [False],
            "meta": {"quiet": True},
            "verbosity": 2,
        }


def build_tasks(options: Options) -> Iterator[Task]:
    run = Run(options, stages.graph())
    yield {"basename": "build", "name": None, "doc": "build a stage and what it needs"}
    for stage in run.graph:
        yield {
            "basename": "build",
            "name": stage.name,
            "doc": stage.doc,
            "actions": [guarded(build.build_stage, run, stage.name)],
            "task_dep": [f"build:{parent}" for parent in stage.parents],
            "uptodate": [_built(run, stage.name)],
        }
    yield {
        "basename": "build",
        "name": "image",
        "doc": "build the whole image for arch=... and tag it with its friendly name",
        "actions": [guarded(_tag_final, run)],
        "task_dep": [f"build:{stages.FINAL}"],
        "uptodate": [False],
    }


def _built(run: Run, stage: str) -> Any:
    def check() -> bool:
        try:
            return build.is_built(run, stage)
        except GraphToolError:
            return False  # the action runs and reports the error in one line

    return check


def _tag_final(run: Run) -> None:
    print(f"tagged {build.tag_final(run, stages.FINAL)}")
