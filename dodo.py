"""doit tasks of the verl ROCm image. Wiring only: the work lives in rocmgraph.

doit plan arch=gfx942 [format=json] [pins=other.toml]
doit render:vllm arch=gfx942
doit build:image arch=gfx942
"""

from collections.abc import Iterator
from typing import Any

from doit import get_var

from rocmgraph import tasks
from rocmgraph.run import Options

DOIT_CONFIG = tasks.DOIT_CONFIG


def _options() -> Options:
    return tasks.resolve(
        Options(
            pins=get_var("pins", ""),
            arch=get_var("arch", ""),
            locked=_flag("locked"),
            network=get_var("network", ""),
            profile=get_var("profile", ""),
        )
    )


def task_plan() -> dict[str, Any]:
    """Show every stage: key, arch-dependent, built or not, and why it would build."""
    return tasks.plan_task(_options(), get_var("format", "text"))


def task_lock() -> dict[str, Any]:
    """Record what only the network knows; locked=1 fails when anything is unlocked."""
    return tasks.lock_task(_options())


def task_patches() -> dict[str, Any]:
    """Check every patch against its pinned tree."""
    return tasks.patches_task(_options(), get_var("format", "text"))


def _flag(name: str) -> bool:
    return get_var(name, "") not in ("", "0")


def task_bump() -> Iterator[dict[str, Any]]:
    """Move a pin to upstream's newest (bump:<source>, bump:base, bump:all)."""
    return tasks.bump_tasks(_options(), get_var("to", ""), _flag("force"), _flag("dry"))


def task_audit() -> dict[str, Any]:
    """Audit every pin, or a plain Dockerfile (dockerfile=<path>)."""
    return tasks.audit_task(_options(), get_var("format", "text"), get_var("dockerfile", ""))


def task_render() -> dict[str, Any]:
    """Write the docs generated from pins.toml (README key versions, docker/Dockerfile.rocm)."""
    return tasks.render_task(check=_flag("check"))


def task_dockerfile() -> Iterator[dict[str, Any]]:
    """Print a stage's rendered Dockerfile."""
    return tasks.dockerfile_tasks(_options())


def task_demo() -> dict[str, Any]:
    """Prepare and serve the offline demo profile (builds with profile=demo use it)."""
    return tasks.demo_task(_options())


def task_build() -> Iterator[dict[str, Any]]:
    """Build a stage (and what it needs), or the whole image."""
    return tasks.build_tasks(_options())
