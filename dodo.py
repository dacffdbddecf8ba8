"""doit tasks of the verl ROCm image. Wiring only: the work lives in rocmgraph.

The one place that puts the stages (stages/) and the tasks (rocmgraph.cli.tasks)
together; each task's doc lives with the task (`doit list` shows it).

doit plan arch=gfx942 [format=json] [pins=other.toml]
doit dockerfile:vllm arch=gfx942
doit build:image arch=gfx942
"""

import sys
from collections.abc import Iterator
from typing import Any

import stages
from rocmgraph.cli import tasks
from rocmgraph.cli.reporter import usage_exit
from rocmgraph.cli.variables import Variables, command_line, hosts, seconds
from rocmgraph.common.errors import UsageError
from rocmgraph.graph.invocation import Options

TASKS = tasks.Tasks(stages.graph())
DOIT_CONFIG = TASKS.doit_config()
TASKS.on_interrupt()


def _variables() -> Variables:
    # Every creator starts here: a wrong variable (unknown, or a value such as
    # arch=gfx943 or force=maybe) ends the run with exit 3 before any task is made.
    try:
        return Variables.checked(command_line(sys.argv[1:]))
    except UsageError as error:
        usage_exit(error)


def _options(variables: Variables) -> Options:
    return tasks.resolve(
        Options(
            pins=variables.text("pins"),
            arch=variables.text("arch"),
            locked=variables.flag("locked"),
            network=variables.text("network"),
            profile=variables.text("profile"),
            commit_tag=variables.text("commit_tag", "DEV"),
            wait=seconds("wait", variables.text("wait")),
            cache=variables.text("cache"),
            cache_required=variables.flag("cache_required"),
            push=variables.flag("push"),
            builders=hosts(variables.text("builders")),
            builder=variables.text("builder"),
            compile_cache=variables.text("compile_cache"),
            progress=variables.text("progress", "auto"),
            hermetic=variables.flag("hermetic", default=True),
            trace=variables.text("trace"),
        )
    )


def task_plan() -> dict[str, Any]:
    variables = _variables()
    return TASKS.plan_task(
        _options(variables), variables.text("format", "text"), int(variables.text("jobs", "2"))
    )


def task_graph() -> dict[str, Any]:
    variables = _variables()
    return TASKS.graph_task(
        _options(variables),
        variables.text("format", "svg"),
        variables.text("out"),
        int(variables.text("jobs", "2")),
    )


def task_lock() -> dict[str, Any]:
    variables = _variables()
    return TASKS.lock_task(_options(variables), variables.flag("closures"))


def task_patches() -> dict[str, Any]:
    variables = _variables()
    return TASKS.patches_task(_options(variables), variables.text("format", "text"))


def task_preflight() -> dict[str, Any]:
    variables = _variables()
    return TASKS.preflight_task(_options(variables), variables.text("format", "text"))


def task_bump() -> Iterator[dict[str, Any]]:
    variables = _variables()
    return TASKS.bump_tasks(
        _options(variables), variables.text("to"), variables.flag("force"), variables.flag("dry")
    )


def task_audit() -> dict[str, Any]:
    variables = _variables()
    return TASKS.audit_task(
        _options(variables),
        variables.text("format", "text"),
        variables.text("dockerfile"),
        variables.text("image"),
    )


def task_compare() -> dict[str, Any]:
    variables = _variables()
    return TASKS.compare_task(
        _options(variables),
        variables.text("format", "text"),
        variables.text("dockerfile"),
        variables.text("recipe"),
    )


def task_verify() -> dict[str, Any]:
    variables = _variables()
    return TASKS.verify_task(_options(variables), variables.text("image"), variables.text("stage"))


def task_render() -> dict[str, Any]:
    return TASKS.render_task(check=_variables().flag("check"))


def task_dockerfile() -> Iterator[dict[str, Any]]:
    return TASKS.dockerfile_tasks(_options(_variables()))


def task_demo() -> dict[str, Any]:
    return TASKS.demo_task(_options(_variables()))


def task_build() -> Iterator[dict[str, Any]]:
    return TASKS.build_tasks(_options(_variables()))
