"""A build on the docker client that fails: run once more when BuildKit lost a race of its
own (and said so on stderr), never otherwise. (The runner is patched to play BuildKit's
lines as a real cold build printed them; builds on a real engine are in test_e2e.)"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from rocmgraph.common.engine import BuildJob, ImageStore
from rocmgraph.common.errors import BuildFailed
from rocmgraph.outside import proc
from rocmgraph.outside.docker import Client, DockerEngine

RACE = [
    "#5 [causal_conv1d_build 2/4] COPY src/causal_conv1d /src/causal_conv1d",
    "#5 ERROR: flightcontrol: exceeded retry timeout",
    "failed to compute cache key: flightcontrol: exceeded retry timeout",
]
BROKEN = ["#7 [vllm_build 3/4] RUN pip wheel .", "#7 ERROR: executor failed: exit code: 1"]
PASSED = ["#5 [causal_conv1d_build 2/4] COPY src/causal_conv1d /src/causal_conv1d", "#5 DONE 0.1s"]


class Played:
    """Each build prints the next of ``runs`` (its lines, its exit status)."""

    def __init__(self, runs: list[tuple[list[str], int]]) -> None:
        self.runs, self.argvs = runs, list[list[str]]()

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None], **kw: Any) -> int:
        self.argvs.append(list(argv))
        lines, code = self.runs[len(self.argvs) - 1]
        for line in lines:
            on_line(line)
        return code


def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, played: Played) -> Path:
    monkeypatch.setattr(proc, "stream", played.stream)
    client = Client("/usr/bin/docker", "26.1.5", "0.13.1")
    engine = DockerEngine(client, tmp_path / "logs", out=io.StringIO(), store=ImageStore.CLASSIC)
    engine.build(BuildJob(stage="causal_conv1d", ref="ns/causal_conv1d:" + "c" * 64,
                          context=tmp_path))  # fmt: skip
    return tmp_path / "logs" / "causal_conv1d-cccccccccccc.log"


def test_a_build_that_lost_buildkits_race_runs_once_more_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    played = Played([(RACE, 1), (PASSED, 0)])
    log = build(tmp_path, monkeypatch, played).read_text().splitlines()
    assert capsys.readouterr().err == (
        "warning: stage causal_conv1d: BuildKit lost a race between builds "
        "(flightcontrol: exceeded retry timeout); building it once more\n"
    )
    assert len(played.argvs) == 2
    assert played.argvs[0] == played.argvs[1]  # the same build, the same way
    assert log[1:] == [
        *RACE,
        "retrying once: BuildKit lost a race between builds "
        "(flightcontrol: exceeded retry timeout)",
        *PASSED,
    ]


def test_an_unpack_onto_a_snapshot_collected_meanwhile_runs_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The containerd store's race between one export's unpack and another's collection
    (moby/buildkit#6521), as the change-log benchmark met it."""
    lost = [
        "#99 unpacking to docker.io/verl-bench-monolith:gfx942",
        'ERROR: failed to solve: failed to prepare extraction snapshot "extract-5 sha256:58": '
        "parent snapshot sha256:ce13 does not exist: not found",
    ]
    played = Played([(lost, 1), (PASSED, 0)])
    build(tmp_path, monkeypatch, played)
    assert capsys.readouterr().err == (
        "warning: stage causal_conv1d: BuildKit lost a race between builds "
        "(failed to prepare extraction snapshot); building it once more\n"
    )
    assert len(played.argvs) == 2


def test_a_race_lost_twice_fails_with_both_tries_in_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    played = Played([(RACE, 1), (RACE, 1)])
    with pytest.raises(BuildFailed) as failed:
        build(tmp_path, monkeypatch, played)
    assert len(played.argvs) == 2
    assert str(failed.value).splitlines()[-3:] == [
        "  #5 ERROR: flightcontrol: exceeded retry timeout",
        "  failed to compute cache key: flightcontrol: exceeded retry timeout",
        f"full log: {tmp_path / 'logs' / 'causal_conv1d-cccccccccccc.log'}",
    ]
    assert "  retrying once: BuildKit lost a race between builds" in str(failed.value)


def test_a_build_that_failed_on_its_own_is_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    played = Played([(BROKEN, 1), (PASSED, 0)])
    with pytest.raises(BuildFailed, match=r"stage causal_conv1d: docker build failed \(exit 1\)"):
        build(tmp_path, monkeypatch, played)
    assert len(played.argvs) == 1
    assert capsys.readouterr().err == ""
