"""The chaos suite: real builds killed at marked moments, then resumed (a real engine).

Each test starts a build of the shared demo (its stages built by test_e2e.py, in
the verl-e2e namespace) in a process group of its own, waits for a moment it
names (a failpoint's line, or a build's output) and kills it: SIGKILL to the
group (a machine that loses power), or to doit alone (its children live on). Then:
the rerun succeeds and builds exactly what the plan said, every new tag's key
label is its tag, and nothing is left: no build client, no server, no scratch file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from demo_e2e import E2E, built, copy_of_demo, image_ids, labels
from test_e2e import demo_registries, psutil_like

import stages
from rocmgraph.common import failpoints
from rocmgraph.config.pins import load
from rocmgraph.demo.profile import DEMO_ROOT, pins_path

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("e2e")]


def killed(world: E2E, marker: str, group: bool, *variables: str, cache: Path | None = None,
           failpoint: str = "") -> str:  # fmt: skip
    """Start a build of ``world``; kill it once a line of its output holds ``marker``. Its
    output up to there."""
    env = {**os.environ, failpoints.ENV: failpoint}
    if cache is not None:
        env["VERL_GRAPH_CACHE"] = str(cache)
    process = subprocess.Popen(
        [sys.executable, "-m", "doit", "build:image", *world.where, "arch=gfx942", *variables],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if marker in line:
            break
    if group:
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process.kill()
    process.communicate()
    assert marker in seen[-1], f"the build ended before {marker!r}:\n{''.join(seen)[-3000:]}"
    return "".join(seen)


def resumed(world: E2E, *variables: str, cache: Path | None = None) -> set[str]:
    """Plan, then rerun: the rerun builds exactly what the plan said. What it built."""
    env = {"VERL_GRAPH_CACHE": str(cache)} if cache else {}
    plan = world.plan(env=env, variables=variables)
    expected = {name for name, stage in plan.items() if stage["status"] == "not built"}
    rerun = world.build("gfx942", *variables, env=env)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr
    assert built(rerun) == expected
    return expected


def assert_clean(world: E2E, before: dict[str, str], swept: bool = True) -> None:
    """New tags are whole and no process of the killed run builds on; once ``swept`` (by
    the next run), no demo registry serves and no pip configuration stays."""
    for tag in set(image_ids()) - set(before):
        if ":" in tag and not tag.startswith("verl-e2e:"):
            key = labels(f"verl-e2e/{tag}")["org.verl-rocm-graph.key"]
            assert tag.endswith(f":{key}"), tag
    deadline = time.monotonic() + 15  # a build client told by the kernel cancels, then ends
    while psutil_like(str(world.pins.parent)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil_like(str(world.pins.parent)), "a process of the killed run lives on"
    if swept:
        assert demo_registries() == [], "the demo's registry lives on"
        secrets = world.pins.parent / ".build" / "secrets"
        assert not secrets.is_dir() or list(secrets.iterdir()) == []


def built_copy_of_demo(tmp: Path) -> E2E:
    """A copy of the demo, every stage built: what a kill must leave as it found it (the
    images it starts from are its own, whatever ran before)."""
    world = copy_of_demo(tmp)
    first = world.build()
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    return world


def other_verl_commit(world: E2E) -> str:
    commits = json.loads((DEMO_ROOT / "fixtures" / "built.json").read_text())["commits"]["verl"]
    pinned = load(str(world.pins)).sources["verl"].commit
    return str(next(commit for commit in commits if commit != pinned))


def test_a_machine_that_dies_while_fetching_leaves_nothing_the_next_run_keeps(
    tmp_path: Path,
) -> None:
    world, cache = copy_of_demo(tmp_path / "world"), tmp_path / "cache"
    world.edit(["sources", "verl", "commit"], other_verl_commit(world))
    before = image_ids()
    out = killed(world, "failpoint fetch", True, cache=cache, failpoint="fetch")
    assert "failpoint fetch" in out
    half = list((cache / "tmp").iterdir())
    assert half  # the tree, checked out, not yet renamed into place
    assert {"verl", "assemble", "manifest"} <= resumed(world, cache=cache)
    assert list((cache / "tmp").iterdir()) == []  # the dead run's scratch is swept
    assert_clean(world, before)


def test_doit_killed_during_a_build_leaves_no_build_running_and_no_tag(tmp_path: Path) -> None:
    world = built_copy_of_demo(tmp_path)
    tag = f"commit_tag=build-kill-{time.time_ns()}"  # a manifest no run built before
    before = image_ids()
    killed(world, "[manifest] #", False, tag, "progress=plain")  # its BuildKit output streamed
    # The build client got SIGINT from the kernel and ended; the registry waits for the rerun.
    assert_clean(world, before, swept=False)
    assert set(image_ids()) == set(before)
    assert resumed(world, tag) == {"manifest"}
    assert_clean(world, before)


CONTEXT = f"commit_tag=context-kill-{time.time_ns()}"
TAGGED = f"commit_tag=tagged-kill-{time.time_ns()}"


def test_doit_killed_before_a_context_is_used_rebuilds_it(tmp_path: Path) -> None:
    world = built_copy_of_demo(tmp_path)
    before = image_ids()
    killed(world, "failpoint context", False, CONTEXT, failpoint="context")
    contexts = world.pins.parent / ".build" / "contexts"
    assert [p.name.split("-")[0] for p in contexts.iterdir()] == ["manifest"]
    assert resumed(world, CONTEXT) == {"manifest"}
    assert [p.name for p in contexts.iterdir()] == ["manifest"]  # kept for the next build
    assert_clean(world, before)


def test_a_kill_between_a_tag_and_its_record_builds_nothing_again(tmp_path: Path) -> None:
    world = built_copy_of_demo(tmp_path)
    before = image_ids()
    killed(world, "failpoint tagged", True, TAGGED, failpoint="tagged")
    plan = world.plan(variables=(TAGGED,))
    assert plan["manifest"]["status"] == "built"  # the tag is the truth
    assert resumed(world, TAGGED) == set()
    assert_clean(world, before)


def test_a_kill_while_the_demo_locks_leaves_its_pins_locked(tmp_path: Path) -> None:
    world = built_copy_of_demo(tmp_path)
    generated = pins_path("demo")
    text = generated.read_text()
    before = image_ids()
    tag = f"commit_tag=lock-kill-{time.time_ns()}"  # a manifest to build: the demo serves
    killed(world, "failpoint demo-lock", True, tag, failpoint="demo-lock")
    assert generated.read_text() == text
    assert stages.graph().asked(load(str(generated))) == []  # all a build of it needs
    assert resumed(world, tag) == {"manifest"}
    assert_clean(world, before)
