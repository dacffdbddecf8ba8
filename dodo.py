"""doit tasks of the verl ROCm image. Wiring only: the work lives in rocmgraph.

doit plan arch=gfx942 [format=json] [pins=other.toml]
doit render:vllm arch=gfx942
doit build:image arch=gfx942
"""

from collections.abc import Iterator
from typing import Any

from rocmgraph import tasks
from rocmgraph.errors import UsageError
from rocmgraph.report import usage_exit
from rocmgraph.run import Options

DOIT_CONFIG = tasks.DOIT_CONFIG


def _variables() -> tasks.Variables:
    # Every creator starts here: a wrong variable (unknown, or a value such as
    # arch=gfx943 or force=maybe) ends the run with exit 3 before any task is made.
    try:
        return tasks.Variables.checked(tasks.command_line())
    except UsageError as error:
        usage_exit(error)


def _options(variables: tasks.Variables) -> Options:
    return tasks.resolve(
        Options(
            pins=variables.text("pins"),
            arch=variables.text("arch"),
            locked=variables.flag("locked"),
            network=variables.text("network"),
            profile=variables.text("profile"),
            commit_tag=variables.text("commit_tag", "DEV"),
        )
    )


def task_plan() -> dict[str, Any]:
    """Show every stage: key, arch-dependent, built or not, and why it would build."""
    variables = _variables()
    return tasks.plan_task(_options(variables), variables.text("format", "text"))


def task_lock() -> dict[str, Any]:
    """Record what only the network knows; locked=1 fails when anything is unlocked."""
    return tasks.lock_task(_options(_variables()))


def task_patches() -> dict[str, Any]:
    """Check every patch against its pinned tree."""
    variables = _variables()
    return tasks.patches_task(_options(variables), variables.text("format", "text"))


def task_bump() -> Iterator[dict[str, Any]]:
    """Move a pin to upstream's newest (bump:<source>, bump:base, bump:all)."""
    variables = _variables()
    return tasks.bump_tasks(
        _options(variables), variables.text("to"), variables.flag("force"), variables.flag("dry")
    )


def task_audit() -> dict[str, Any]:
    """Audit every pin, or a plain Dockerfile (dockerfile=<path>)."""
    variables = _variables()
    return tasks.audit_task(
        _options(variables), variables.text("format", "text"), variables.text("dockerfile")
    )


def task_compare() -> dict[str, Any]:
    """Set an upstream recipe (dockerfile=<path>) beside the graph, fact by fact."""
    variables = _variables()
    return tasks.compare_task(
        _options(variables), variables.text("format", "text"), variables.text("dockerfile")
    )


def task_render() -> dict[str, Any]:
    """Write the docs generated from pins.toml (README key versions, docker/Dockerfile.rocm)."""
    return tasks.render_task(check=_variables().flag("check"))


def task_dockerfile() -> Iterator[dict[str, Any]]:
    """Print a stage's rendered Dockerfile."""
    return tasks.dockerfile_tasks(_options(_variables()))


def task_demo() -> dict[str, Any]:
    """Prepare and serve the offline demo profile (builds with profile=demo use it)."""
    return tasks.demo_task(_options(_variables()))


def task_build() -> Iterator[dict[str, Any]]:
    """Build a stage (and what it needs), or the whole image."""
    return tasks.build_tasks(_options(_variables()))
