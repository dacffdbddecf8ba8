"""Build once, reuse everywhere: stage images shared through a real registry, between two
real Docker engines (the second one as another machine: rocmgraph/demo/machine.py)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo_e2e import built, copy_of_demo, docker
from test_faults import other_verl_commit

import stages
from rocmgraph.demo.machine import DOCKER, images, second_engine
from rocmgraph.demo.serve import Registry
from rocmgraph.outside.http import Http
from rocmgraph.outside.registry import Client

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("e2e")]
GRAPH = stages.graph()
PORT = 38472


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    served = Registry(tmp_path_factory.mktemp("fleet-registry"), PORT)
    try:
        yield f"127.0.0.1:{PORT}/fleet-{time.time_ns()}"  # a cache no run filled before
    finally:
        served.stop()


@pytest.fixture(scope="module")
def machine_b() -> Iterator[dict[str, str]]:
    with second_engine() as env:
        yield env


def pushed(result: subprocess.CompletedProcess[str]) -> set[str]:
    return set(re.findall(r"^pushed (\w+) [0-9a-f]{12} to ", result.stdout, re.MULTILINE))


def ours(env: dict[str, str]) -> set[str]:
    """The images of the build's namespace on the engine ``env`` points at."""
    return {ref for ref in images(env) if ref.startswith(("verl-e2e/", "verl-e2e:"))}


def on_b(env: dict[str, str], *args: str) -> str:
    return subprocess.run([DOCKER, *args], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def test_a_second_machine_pulls_what_the_first_built_and_builds_only_what_changed(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    world = copy_of_demo(tmp_path)
    cache = f"cache={registry}"
    # A built every stage before the cache was set: the run shares them all, builds nothing.
    first = world.build("gfx942", cache)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert pushed(first) == set(GRAPH.order)
    assert world.build("gfx942", cache).stdout.count("-- build:") == len(GRAPH.order) + 1

    # B, empty: the plan says every stage is cached; the build pulls the final image alone.
    plan = world.plan(env=machine_b, variables=(cache,))
    assert {stage["status"] for stage in plan.values()} == {"cached"}
    second = world.build("gfx942", cache, "push=1", env=machine_b)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert built(second) == set()
    friendly = f"{registry}/verl-e2e:gfx942"
    assert f"pushed verl-e2e:gfx942 to {friendly}" in second.stdout.splitlines()
    assert Client(Http(attempts=1)).has(friendly)
    final = str(plan["manifest"]["image"])
    # (The demo also made its upstream's base image there: the demo's, not the build's.)
    assert ours(machine_b) == {final, "verl-e2e:gfx942"}

    # One pin changed on B: exactly its closure builds there, on the parents it pulls.
    world.edit(["sources", "verl", "commit"], other_verl_commit(world))
    changed = world.build("gfx942", cache, env=machine_b)
    assert changed.returncode == 0, changed.stdout[-3000:] + changed.stderr
    assert built(changed) == {"verl", "assemble", "manifest"}
    assert pushed(changed) == {"verl", "assemble", "manifest"}
    stages_on_b = {ref.split("/", 1)[1].split(":")[0] for ref in ours(machine_b) if "/" in ref}
    # Pulled: verl's parent, and assemble's other parents (the stages it copies from).
    assert stages_on_b == {"slim", *GRAPH["assemble"].parents, "assemble", "manifest"}


def test_a_cached_image_whose_key_label_lies_is_refused_and_built_here(
    tmp_path: Path, registry: str, machine_b: dict[str, str]
) -> None:
    honest = copy_of_demo(tmp_path / "a").plan()["manifest"]["image"]  # A built it
    world = copy_of_demo(tmp_path / "b")
    world.edit(["sources", "verl", "commit"], other_verl_commit(world))  # B has its parents
    forged_plan = world.plan(env=machine_b, variables=("cache=" + registry, "commit_tag=forged"))
    forged = f"{registry}/{forged_plan['manifest']['image']}"
    docker("tag", str(honest), forged)  # on A: another key's image, under this key's tag
    docker("push", forged)
    docker("image", "rm", forged)
    result = world.build("gfx942", f"cache={registry}", "commit_tag=forged", env=machine_b)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert (
        f"warning: refused {forged}: its key label is {str(honest).rsplit(':', 1)[1][:12]}, "
        "not the key its tag claims; building it here"
    ) in result.stderr.splitlines()
    key = '{{index .Config.Labels "org.verl-rocm-graph.key"}}'
    label = on_b(machine_b, "image", "inspect", "--format", key, "verl-e2e:gfx942")
    assert label.strip() == str(forged_plan["manifest"]["key"])


def test_a_cache_that_does_not_answer_is_said_once_and_built_past(tmp_path: Path) -> None:
    world = copy_of_demo(tmp_path)  # on A, where every stage of it is built
    down = "127.0.0.1:9/nowhere"  # nothing listens on the discard port
    result = world.build("gfx942", f"cache={down}", f"commit_tag=cache-down-{time.time_ns()}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith(f"warning: the stage cache {down} does not answer (")
    assert warnings[0].endswith("); building here")
    assert "manifest" in built(result)
    assert pushed(result) == set()  # no push is tried past a cache that does not answer
