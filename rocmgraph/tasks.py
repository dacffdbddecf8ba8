"""The doit tasks, as dicts: dodo.py only wires them to doit's variables.

Creators must stay cheap and never fail: doit calls every one of them on
every run (``doit list`` included). Everything that can fail happens in an
action, where the reporter turns it into one line. All tasks of one
invocation share one Run, so the pins are read once.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import stages
from rocmgraph import audit, build, bump, docs, lock, patch_status, plan, render
from rocmgraph.demo.profile import Demo
from rocmgraph.docker import DockerEngine
from rocmgraph.errors import GraphToolError, StaleError, VariableError
from rocmgraph.layout import ROOT
from rocmgraph.report import Reporter, guarded
from rocmgraph.run import Options, Run

Task = dict[str, Any]

DOIT_CONFIG: dict[str, Any] = {
    "default_tasks": ["plan"],
    "reporter": Reporter,
    "par_type": "thread",  # stages build in docker; threads only wait on it
    "verbosity": 2,  # stream build logs as they come
    "subtasks": True,  # `doit list` shows build:<stage> and dockerfile:<stage> too
}

FORMATS = ("text", "json")
PROFILES = ("", "demo")


def resolve(options: Options) -> Options:
    """Fill what a profile implies: ``profile=demo`` brings its pins and host networking."""
    if options.profile == "demo":
        pins = options.pins or str(DEMO.sync_pins())
        return dataclasses.replace(options, pins=pins, network=options.network or "host")
    return dataclasses.replace(options, pins=options.pins or "pins.toml")


DEMO = Demo()


@functools.cache
def run_for(options: Options) -> Run:
    return Run(options, stages.graph())


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise VariableError(f"format={fmt}: unknown format; use format=text or format=json")


def _check_profile(options: Options) -> None:
    if options.profile not in PROFILES:
        raise VariableError(f"profile={options.profile}: unknown profile; use profile=demo or none")


def _report(doc: str, action: Any) -> Task:
    """A task that prints a report: always runs, and keeps stdout for the report alone."""
    return {
        "doc": doc,
        "actions": [guarded(action)],
        "uptodate": [False],
        "meta": {"quiet": True},
        "verbosity": 2,
    }


def plan_task(options: Options, fmt: str) -> Task:
    def show() -> None:
        _check_format(fmt)
        _check_profile(options)
        run = run_for(options)
        plans = plan.make_plan(run)
        print(plan.as_json(run, plans) if fmt == "json" else plan.as_text(run, plans))

    return _report(
        "show every stage: key, arch-dependent, built or not, and why it would build", show
    )


def lock_task(options: Options) -> Task:
    def run_lock() -> None:
        print("\n".join(lock.run_lock(run_for(options))))

    return {
        "doc": "record what only the network knows: wheel files and sha256, full commits, digests",
        "actions": [guarded(run_lock)],
        "uptodate": [False],
        "verbosity": 2,
    }


def patches_task(options: Options, fmt: str) -> Task:
    def show() -> None:
        _check_format(fmt)
        rows = patch_status.table(run_for(options))
        print(patch_status.as_json(rows) if fmt == "json" else patch_status.as_text(rows))
        patch_status.verdict(rows)

    return _report(
        "check every patch against its pinned tree: applies, obsolete or conflicts", show
    )


def bump_tasks(options: Options, to: str, force: bool, dry: bool) -> Iterator[Task]:
    """bump:<source> for every pinned source a stage reads, bump:base, bump:all."""
    names = sorted({source for stage in stages.graph() for source in stage.sources})
    yield {"basename": "bump", "name": None, "doc": "move pins to upstream's newest"}

    def run_bump(targets: list[str]) -> None:
        run = run_for(options)
        if to and len(targets) > 1:
            raise VariableError("to=... moves one source; name it: doit bump:<source> to=...")
        report = bump.run_bump(run, targets, to, force=force, dry=dry)
        print("\n".join(report.lines))
        if report.error:
            raise report.error

    for name in [*names, "base", "all"]:
        targets = [*names, "base"] if name == "all" else [name]
        doc = {
            "base": "move the base image's digest to what its tag points to now",
            "all": "bump every source and the base image",
        }.get(
            name, f"move {name} to upstream's newest commit (or to=<commit|tag>), patches checked"
        )
        yield {
            "basename": "bump",
            "name": name,
            "doc": doc,
            "actions": [guarded(run_bump, targets)],
            "uptodate": [False],
            "meta": {"quiet": True},
            "verbosity": 2,
        }


def audit_task(options: Options, fmt: str, dockerfile: str) -> Task:
    def show() -> None:
        _check_format(fmt)
        if dockerfile:
            path = Path(dockerfile)
            if not path.is_file():
                raise VariableError(f"dockerfile={dockerfile}: no such file")
            rows = audit.audit_dockerfile(path)
        else:
            rows = audit.audit_pins(run_for(options))
        print(audit.as_json(rows) if fmt == "json" else audit.as_text(rows))
        audit.verdict(rows)

    return _report(
        "audit every pin (or dockerfile=<path>): full, upstream, reachable, behind, hashed", show
    )


def render_task(check: bool) -> Task:
    def write() -> None:
        run = run_for(resolve(Options()))  # the docs are of pins.toml, whatever the variables
        stale = [str(path.relative_to(ROOT)) for path in docs.write(run, check=check)]
        if check and stale:
            raise StaleError(f"stale generated docs: {', '.join(stale)}; run `doit render`")
        print("\n".join(f"wrote {path}" for path in stale) or "docs are fresh")

    return {
        "doc": "write the docs made from pins.toml: README key versions, docker/Dockerfile.rocm",
        "actions": [guarded(write)],
        "uptodate": [False],
        "verbosity": 2,
    }


def dockerfile_tasks(options: Options) -> Iterator[Task]:
    yield {"basename": "dockerfile", "name": None, "doc": "print a stage's rendered Dockerfile"}
    for stage in stages.graph():

        def show(name: str = stage.name) -> None:
            run = run_for(options)
            print(render.render(run.graph[name], run.pins, run.archs), end="")

        yield {
            "basename": "dockerfile",
            "name": stage.name,
            "doc": f"print the Dockerfile of stage {stage.name}",
            "actions": [guarded(show)],
            "uptodate": [False],
            "meta": {"quiet": True},
            "verbosity": 2,
        }


def demo_task(options: Options) -> Task:
    """Serves the demo's upstreams while builds of ``profile=demo`` need them."""
    run = run_for(options)

    def start() -> None:
        engine = run.engine
        if not isinstance(engine, DockerEngine):
            raise VariableError("profile=demo builds on the local Docker engine only")
        DEMO.start(engine)
        run.reset()  # its pins may be the generated ones, just locked

    return {
        "doc": "prepare the demo profile: upstreams, base image, pins (profile=demo builds use it)",
        "actions": [guarded(start)],
        "teardown": [DEMO.stop],
        "uptodate": [False],
    }


def build_tasks(options: Options) -> Iterator[Task]:
    run = run_for(options)
    setup = ["demo"] if options.profile == "demo" else []
    yield {"basename": "build", "name": None, "doc": "build a stage and what it needs"}
    for stage in run.graph:
        yield {
            "basename": "build",
            "name": stage.name,
            "doc": stage.doc,
            "actions": [guarded(_build, run, stage.name)],
            "task_dep": [f"build:{parent}" for parent in stage.parents],
            "setup": setup,
            "uptodate": [_uptodate(build.is_built, run, stage.name)],
        }
    yield {
        "basename": "build",
        "name": "image",
        "doc": "build the whole image for arch=... and tag it with its friendly name",
        "actions": [guarded(_tag_final, run)],
        "task_dep": [f"build:{stages.FINAL}"],
        "setup": setup,
        "uptodate": [_uptodate(build.is_tagged, run, stages.FINAL)],
    }


def _uptodate(check: Any, run: Run, stage: str) -> Any:
    def uptodate() -> bool:
        try:
            _check_profile(run.options)
            return bool(check(run, stage))
        except GraphToolError:
            return False  # the action runs and reports the error in one line

    return uptodate


def _build(run: Run, stage: str) -> None:
    _check_profile(run.options)
    started = time.monotonic()
    if build.build_stage(run, stage):
        print(f"built {stage} {run.keys[stage].short} in {time.monotonic() - started:.1f} s")


def _tag_final(run: Run) -> None:
    print(f"tagged {build.tag_final(run, stages.FINAL)} = {run.ref(stages.FINAL)}")
