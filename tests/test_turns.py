"""Locks on shared state, between real processes, and two builds of one stage key at once."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import PINS, ROOT, STARTED_AT
from test_plan import SetEngine

import stages
from rocmgraph.building import execute, turns
from rocmgraph.building.session import Session
from rocmgraph.common.engine import BuildJob
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.docker import log_file

VLLM = "it builds vllm 1a2b3c4d5e6f"
HOLDS = """
import sys, time
from pathlib import Path
from rocmgraph.building import turns
with turns.held(Path(sys.argv[1]), turns.Holder.me("gfx942", "builds vllm 1a2b3c4d5e6f")):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""
WHO = r"the build started at " + STARTED_AT + r" by pid {pid} \(arch gfx942\): " + re.escape(VLLM)


def holder(lock: Path, seconds: float) -> subprocess.Popen[str]:
    """Another run, holding ``lock`` for ``seconds``; returned once it holds it."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDS, str(lock), str(seconds)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"
    return process


def me() -> turns.Holder:
    return turns.Holder.me("gfx950", "builds prune 0123456789ab")


def test_a_free_lock_is_held_at_once_says_who_holds_it_and_goes_with_its_holder(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "turns" / "prune-0123456789ab"
    with turns.held(lock, me()) as waited:
        assert not waited
        assert f'"pid": {os.getpid()}' in lock.read_text()
    assert not lock.exists()  # nothing is left in the folder


def test_a_run_told_not_to_wait_names_the_run_that_holds_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "vllm-1a2b3c4d5e6f"
    other = holder(lock, 30)
    try:
        with pytest.raises(turns.Busy) as busy, turns.held(lock, me(), wait=0):
            pass
        assert re.fullmatch(
            f"not waiting \\(wait=0\\) for {WHO.format(pid=other.pid)}; rerun when it ends, or "
            "without wait= to wait as long as it takes",
            str(busy.value),
        ), busy.value
        waited = r"^waited 0\.3 s \(wait=0\.3\) for the build"
        with pytest.raises(turns.Busy, match=waited), turns.held(lock, me(), wait=0.3):
            pass
    finally:
        other.kill()
        other.communicate()


def test_a_waiting_run_says_for_whom_once_and_holds_the_lock_when_it_is_let_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "vllm-1a2b3c4d5e6f"
    other = holder(lock, 1)
    with turns.held(lock, me()) as waited:
        assert waited
        assert f'"pid": {os.getpid()}' in lock.read_text()
    other.communicate()
    err = capsys.readouterr().err
    assert re.fullmatch(f"waiting for {WHO.format(pid=other.pid)}\n", err), err


def test_a_holder_that_has_not_said_who_it_is_yet_gets_a_moment_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The window between a holder's lock and its name: a waiter that came in it names the
    holder once written; one that never is, after UNSAID_GRACE, as unsaid."""
    lock = tmp_path / "vllm-1a2b3c4d5e6f"
    for says in (True, False):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # locked, nothing written yet

        def holder_goes_on(fd: int = fd, says: bool = says) -> None:
            try:
                time.sleep(0.3)
                if says:
                    os.pwrite(fd, json.dumps(dataclasses.asdict(turns.Holder.me(
                        "gfx942", "builds vllm 1a2b3c4d5e6f"))).encode(), 0)  # fmt: skip
                time.sleep(1.5)  # past the waiter's UNSAID_GRACE
            finally:
                lock.unlink()
                os.close(fd)

        thread = threading.Thread(target=holder_goes_on)
        thread.start()
        with turns.held(lock, me()) as waited:
            assert waited
        thread.join()
        err = capsys.readouterr().err
        if says:
            assert re.fullmatch(f"waiting for {WHO.format(pid=os.getpid())}\n", err), err
        else:
            assert err == "waiting for another build (it has not said which yet)\n"


def test_a_killed_holder_lets_go_at_once(tmp_path: Path) -> None:
    lock = tmp_path / "vllm-1a2b3c4d5e6f"
    other = holder(lock, 60)
    other.send_signal(signal.SIGKILL)
    other.communicate()
    with turns.held(lock, me(), wait=0) as waited:  # kill -9 leaves no stale lock
        assert not waited


class SlowEngine(SetEngine):
    """The engine seam, in memory, whose builds take a while: what was built, and when."""

    def __init__(self) -> None:
        super().__init__(set())
        self.builds: list[tuple[str, float, float]] = []
        self.jobs: list[BuildJob] = []

    def build(self, job: BuildJob) -> str:
        self.jobs.append(job)
        started = time.monotonic()
        time.sleep(1)
        image = super().build(job)
        self.builds.append((job.ref, started, time.monotonic()))
        return image


def _build_at_once(tmp_path: Path, engine: SlowEngine, *jobs: tuple[str, str]) -> list[bool]:
    """Build (arch, stage) jobs from two threads at once, as two runs would; what each did."""
    pins = tmp_path / "pins.toml"
    pins.write_text(PINS.read_text())
    graph, outside = stages.graph(), Outside(cache=tmp_path / "cache", logs=tmp_path / "logs")
    done: dict[int, bool] = {}
    for arch, stage in jobs:  # what the stages build on is built
        run = Run(Options(pins=str(pins), arch=arch, hermetic=False), graph)
        engine.refs.update(run.ref(parent) for parent in run.graph.ancestors(stage))

    raised: list[BaseException] = []
    session = Session()  # one run's, shared by its threads

    def one(index: int, arch: str, stage: str) -> None:
        run = Run(Options(pins=str(pins), arch=arch, hermetic=False), graph)
        try:
            done[index] = execute.build_stage(run, engine, outside, session, stage)
        except BaseException as exc:  # raised here, with its traceback, not lost in a thread
            raised.append(exc)

    threads = [threading.Thread(target=one, args=(index, *job)) for index, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for exc in raised:
        raise exc
    return [done[index] for index in range(len(jobs))]


def test_two_runs_build_one_stage_key_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = SlowEngine()
    done = _build_at_once(tmp_path, engine, ("gfx942", "slim"), ("gfx950", "slim"))
    assert sorted(done) == [False, True]  # slim does not depend on the arch: one build
    assert len(engine.builds) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        # the date too when the build began on another day (a run across midnight)
        r"waiting for the build started at (\d{4}-\d\d-\d\d )?\d\d:\d\d by pid \d+ "
        r"\(arch gfx9(42|50)\): it builds slim [0-9a-f]{12}\n",
        err,
    ), err


def test_two_runs_build_the_stages_of_two_archs_side_by_side(tmp_path: Path) -> None:
    engine = SlowEngine()
    done = _build_at_once(tmp_path, engine, ("gfx942", "prune"), ("gfx950", "prune"))
    assert done == [True, True]
    (_, first_start, first_end), (_, second_start, second_end) = engine.builds
    assert first_start < second_end  # at once, not in turn
    assert second_start < first_end


def test_a_stage_that_builds_sweeps_its_old_contexts_but_not_one_in_use(tmp_path: Path) -> None:
    contexts = tmp_path / ".build" / "contexts"
    names = ("slim-aaaaaaaaaaaa", "slim-bbbbbbbbbbbb", "prune-aaaaaaaaaaaa")
    failed, in_use, other = (contexts / name for name in names)
    for folder in (failed, in_use, other):
        folder.mkdir(parents=True)
    other_run = holder(tmp_path / ".build" / "turns" / in_use.name, 30)
    try:
        assert _build_at_once(tmp_path, SlowEngine(), ("gfx942", "slim")) == [True]
    finally:
        other_run.kill()
        other_run.communicate()
    # slim's own folder stays, for the next build of slim to send only what changed
    assert sorted(p.name for p in contexts.iterdir()) == [other.name, "slim", in_use.name]


def test_a_stage_whose_context_folder_is_in_use_builds_from_one_of_its_key(
    tmp_path: Path,
) -> None:
    contexts = tmp_path / ".build" / "contexts"
    (contexts / "slim").mkdir(parents=True)
    (contexts / "slim" / "theirs").write_text("another run's context\n")
    engine = SlowEngine()
    other_run = holder(tmp_path / ".build" / "turns" / "context-slim", 30)
    try:
        assert _build_at_once(tmp_path, engine, ("gfx942", "slim")) == [True]
    finally:
        other_run.kill()
        other_run.communicate()
    assert [re.sub("[0-9a-f]{12}$", "<key>", job.context.name) for job in engine.jobs] == [
        "slim-<key>"
    ]
    assert [p.name for p in contexts.iterdir()] == ["slim"]  # its own went once it built
    assert (contexts / "slim" / "theirs").read_text() == "another run's context\n"


def test_each_stage_key_has_its_log_and_the_stage_name_links_the_latest(tmp_path: Path) -> None:
    for key in ("1" * 64, "2" * 64, "3" * 64, "4" * 64):
        log_file(tmp_path, "vllm", key).write_text(key)
        time.sleep(0.01)  # mtimes apart
    assert sorted(p.name for p in tmp_path.glob("vllm-*.log")) == [
        "vllm-222222222222.log", "vllm-333333333333.log", "vllm-444444444444.log",
    ]  # fmt: skip
    assert (tmp_path / "vllm.log").read_text() == "4" * 64
    assert (tmp_path / "vllm.log").readlink() == Path("vllm-444444444444.log")


def test_a_second_lock_of_closures_waits_for_the_first(tmp_path: Path) -> None:
    """Two `doit lock closures=1` at once would each build every stage and save its own view
    of the lock file: the second waits for the first (here, told not to: it says for whom)."""
    pins = tmp_path / "pins.toml"
    pins.write_text(PINS.read_text())
    other = holder(tmp_path / ".build" / "turns" / "closures-pins.lock.toml", 30)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "doit", "lock", f"pins={pins}", "closures=1", "wait=0"],
            cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
    finally:
        other.kill()
        other.communicate()
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.fullmatch(
        f"error: not waiting \\(wait=0\\) for {WHO.format(pid=other.pid)}; rerun when it "
        "ends, or without wait= to wait as long as it takes",
        result.stderr.splitlines()[-1],
    ), result.stderr
    assert not (tmp_path / "pins.lock.toml").exists()


def test_a_holder_from_another_day_is_named_with_its_date() -> None:
    started = time.mktime((2026, 12, 4, 23, 54, 0, 0, 0, -1))
    who = turns.Holder(12811, started, "gfx942", "builds vllm 1a2b3c4d5e6f")
    said = "by pid 12811 (arch gfx942): it builds vllm 1a2b3c4d5e6f"
    assert who.describe(now=started + 60) == f"the build started at 23:54 {said}"
    assert who.describe(now=started + 600) == f"the build started at 2026-12-04 23:54 {said}"
