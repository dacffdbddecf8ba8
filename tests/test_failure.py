"""A failed build, said as the stage whose step failed, with pip's lines and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_plan import SetEngine
from test_solve import PRUNE_FAILS_AT_WHEELS
from test_wheels import flip_in_place
from world import World, locked_run

import stages
from rocmgraph.building import execute
from rocmgraph.building.failure import Mismatch, hash_mismatches
from rocmgraph.building.session import Session
from rocmgraph.common.engine import BuildJob
from rocmgraph.common.errors import BuildFailed
from rocmgraph.common.fsutil import sha256_file
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.docker import TAIL

# What the log's pip found: the torch wheel of the world (tests/world.py), one byte flipped.
TORCH = "4f31733605338e7808d03a8bea42b2ae865f97783e0ce5b2441ac5164fd9ee79"
FLIPPED = "2d9aa30181244125495677a6121b99412064c339822796339230e14d08ce5284"


def test_pip_s_refusals_are_read_once_each() -> None:
    lines = PRUNE_FAILS_AT_WHEELS.read_text().splitlines()  # the step's lines, then its summary
    assert hash_mismatches(lines) == [Mismatch(TORCH, FLIPPED)]
    several = [  # a requirement allowing several hashes; one pip cannot name
        "#9 4.2     torch==2.12.0 from file:///tmp/wheels/torch.whl (from -r r.txt (line 1)):",
        f"#9 4.2         Expected sha256 {TORCH}",
        f"#9 4.2         Expected     or {'1' * 64}",
        f"#9 4.2              Got        {FLIPPED}",
        "#9 4.2     unknown package:",
        f"#9 4.2         Expected sha256 {'2' * 64}",
        f"#9 4.2              Got        {'3' * 64}",
    ]
    assert hash_mismatches(several) == [Mismatch(TORCH, FLIPPED), Mismatch("2" * 64, "3" * 64)]
    assert hash_mismatches(["#9 4.2 Got it", "#9 DONE 4.3s"]) == []


class Replay(SetEngine):
    """The engine seam, in memory: prune's build says what the log says and fails, with the
    stored torch wheel changed meanwhile when ``flip`` (after its context checked it);
    the others build. (Docker is tested for real.)"""

    def __init__(self, stored: Path, flip: bool) -> None:
        super().__init__(set())
        self.stored, self.flip = stored, flip

    def build(self, job: BuildJob) -> str:
        if job.stage != "prune":
            return super().build(job)
        assert job.on_line is not None
        lines = PRUNE_FAILS_AT_WHEELS.read_text().splitlines()
        for line in lines:
            job.on_line(line)
        if self.flip:
            assert flip_in_place(self.stored) == FLIPPED
        raise BuildFailed(job.stage, 1, lines[-TAIL:], job.log)


def failed_build(world: World, monkeypatch: pytest.MonkeyPatch, flip: bool) -> tuple[str, Path]:
    """`doit build:prune` in the world, on nothing built: base, rocm, wheels and prune in one
    solve, prune's build failing at wheels' step. Its error, and the stored torch wheel."""
    locked_run(world, monkeypatch)
    run = Run(Options(pins=str(world.pins), arch="gfx942", hermetic=False), stages.graph())
    outside = Outside(logs=world.root / "logs")
    stored = outside.store.path(TORCH, run.pins.wheels["torch"].file)
    engine = Replay(stored, flip)
    with pytest.raises(BuildFailed) as caught:
        execute.build_stages(run, engine, outside, Session(), ["prune"])
    assert engine.refs == {run.ref(name) for name in ("base", "rocm", "wheels")}
    return str(caught.value), stored


def said(world: World, fix: str) -> str:
    """The error: wheels' failure, with the last lines of wheels' own log: its step's lines
    from prune's build (numbered #1 there, its first step), their repeat in BuildKit's
    summary; then the log, and the fix."""
    lines = PRUNE_FAILS_AT_WHEELS.read_text().splitlines()
    step = [line.replace("#14 ", "#1 ", 1) for line in lines if line.startswith("#14 ")]
    (log,) = (world.root / "logs").glob("wheels-*.log")
    shown = "\n".join(f"  {line}" for line in step)
    return (
        f"stage wheels: docker build failed (exit 1); its last lines:\n{shown}\n"
        f"full log: {log}\n{fix}"
    )


def test_a_build_that_failed_at_another_stage_s_step_is_that_stage_s_failure_with_pip_s_lines(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel changed in the store after its context checked it: checked again, found
    wrong, removed (the next run fetches it again), and said."""
    error, stored = failed_build(world, monkeypatch, flip=True)
    assert error == said(
        world,
        f"{stored} in the store had lost its sha256 (its bytes hash to {FLIPPED}): removed; "
        "build again to fetch it again",
    )
    assert not stored.exists()


def test_a_wheel_the_store_holds_intact_points_at_buildkit_s_copy_of_the_context(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    error, stored = failed_build(world, monkeypatch, flip=False)
    assert error == said(
        world,
        f"{stored} in the store has its sha256, but the build was given other bytes (sha256 "
        f"{FLIPPED}): BuildKit's copy of the build context; clear it (`docker builder prune`) "
        "and build again",
    )
    assert sha256_file(stored) == TORCH  # kept
