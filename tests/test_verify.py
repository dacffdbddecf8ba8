"""`doit verify image=<ref>`: an image against the pins that should describe it. Parsing
here; the real checks on the demo's image, a tampered copy and other pins, end to end."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_doit
from demo_e2e import E2E, copy_of_demo, docker

import stages
from rocmgraph.building.provenance import installed
from rocmgraph.commands import verify as verify_
from rocmgraph.commands.verify import StageCheck
from rocmgraph.common.errors import VerifyError
from rocmgraph.common.filetree import Difference

PIP_LIST = """\
Package            Version                          Editable project location
------------------ -------------------------------- -------------------------
amd-aiter          0.1.5                            /workspace/aiter
causal_conv1d      1.5.2
torch              2.12.0+rocm7.14.0.lw.git1a2b3c4d
"""


def test_pip_lists_table_is_read_by_normal_names() -> None:
    assert installed(PIP_LIST) == {
        "amd-aiter": "0.1.5",
        "causal-conv1d": "1.5.2",
        "torch": "2.12.0+rocm7.14.0.lw.git1a2b3c4d",
    }
    assert installed("Flash_Attn==2.8.3\n") == {"flash-attn": "2.8.3"}
    assert installed("Megatron.Core==0.18.0\nruamel__yaml==0.18\n") == {
        "megatron-core": "0.18.0", "ruamel-yaml": "0.18"
    }  # fmt: skip


def test_stages_that_differ_in_their_rebuilds_are_named_with_their_counts() -> None:
    """One stage: its own message, as before stage=all; several: each that differs."""
    same = StageCheck(True, [])
    differing = StageCheck(False, [Difference("/a", "sha256 differs"), Difference("/b", "size")])
    verify_.stages_verdict({"vllm": same, "sglang": same})  # nothing raised
    with pytest.raises(VerifyError) as one:
        verify_.stages_verdict({"vllm": differing})
    assert str(one.value) == "stage vllm is not reproducible: 2 file(s) differ"
    with pytest.raises(VerifyError) as several:
        verify_.stages_verdict({"base": same, "vllm": differing, "verl": differing})
    assert str(several.value) == (
        "2 of 3 stages are not reproducible: vllm (2 file(s) differ), verl (2 file(s) differ)"
    )


def test_verify_asks_for_an_image_or_a_stage() -> None:
    result = run_doit("verify", "arch=gfx942")
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == (
        "error: verify checks image=<ref> against the pins (e.g. image=verl-rocm:gfx942), or "
        "stage=<name> by a rebuild without cache (e.g. stage=vllm, or stage=all): name one"
    )


def verify(world: E2E, image: str) -> tuple[int, list[str], str]:
    result = run_doit("verify", f"profile={world.profile}", f"pins={world.pins}",
                      "arch=gfx942", f"image={image}")  # fmt: skip
    return result.returncode, result.stdout.splitlines(), result.stderr


@pytest.mark.docker
@pytest.mark.usefixtures("e2e")
def test_the_image_the_pins_built_verifies_and_a_changed_one_does_not(tmp_path: Path) -> None:
    world = copy_of_demo(tmp_path / "world")
    assert world.build().returncode == 0
    code, lines, _ = verify(world, "verl-e2e:gfx942")
    assert (code, lines) == (0, [
        f"verl-e2e:gfx942 is what {world.pins} describes: 15 stage keys, its content, every "
        "pinned version, and its SBOM"
    ])  # fmt: skip

    # A file added after the build (docker commit), the image retagged: its labels still
    # claim the keys, its content does not match.
    container = docker("create", "--network=none", "verl-e2e:gfx942", "true").strip()
    tampered = f"verl-e2e:tampered-{time.time_ns()}"
    try:
        docker("cp", "/etc/hostname", f"{container}:/workspace/extra")
        docker("commit", container, tampered)
    finally:
        docker("rm", container)
    code, lines, err = verify(world, tampered)
    docker("image", "rm", tampered)
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith("content: differs: the pins say sha256:")
    assert lines[0].endswith(": changed after its build")
    assert err == f"error: {tampered} is not what the pins describe: 1 difference(s)\n"

    # Other pins: a package the pins name at another version, so every stage that installs it
    # has another key, and the manifest lists the version the image holds.
    other = copy_of_demo(tmp_path / "other")
    other.edit(["python", "stack", "megatron-core"], "0.18.1")
    code, lines, err = verify(other, "verl-e2e:gfx942")
    assert code == 1
    assert "python megatron-core: differs: the pins say 0.18.1, the image has 0.18.0" in lines
    assert {line.split(":")[0] for line in lines} >= {"key verl", "key assemble", "key manifest"}
    assert "content: cannot tell (no build of key " in "\n".join(lines)


@pytest.mark.docker
@pytest.mark.usefixtures("e2e")
def test_every_stage_rebuilds_to_the_same_files_and_a_child_still_ships_on_its_parent(
    tmp_path: Path,
) -> None:
    """Every stage verifies identical (stage=all: their rebuilds side by side, a line each in
    the graph's order). The rebuilds without cache leave BuildKit two results of slim's
    steps; the two builds of one solve of slim and verl may then take one each. verl must
    still ship on slim's image: built again on it, said in one warning, when they differ."""
    world = copy_of_demo(tmp_path)
    assert world.build().returncode == 0
    result = run_doit("verify", f"profile={world.profile}", f"pins={world.pins}",
                      "arch=gfx942", "stage=all")  # fmt: skip
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == list(stages.graph().order), result.stdout
    said = {line.split(":")[0]: (result.returncode, line) for line in lines}
    # The same layer digests, or (Docker 26's exporter keeps the files' build times) the
    # same files.
    same = {
        stage: (0, f"{stage}: identical (a rebuild without cache has the same layer digests)")
        for stage in stages.graph().order
    }
    files = {
        stage: (0, f"{stage}: identical (every file of a rebuild without cache is the same; "
                   "its layer digests differ, as the times of its files do)")
        for stage in stages.graph().order
    }  # fmt: skip
    assert {stage: said[stage] in (same[stage], files[stage]) for stage in said} == dict.fromkeys(
        stages.graph().order, True
    ), said

    plan = world.plan()
    refs = {stage: f"verl-e2e/{stage}:{plan[stage]['key']}" for stage in ("slim", "verl")}
    docker("image", "rm", *refs.values())
    result = run_doit("build:verl", *world.where, "arch=gfx942")
    assert result.returncode == 0, result.stdout + result.stderr
    layers = {
        stage: json.loads(docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", ref))
        for stage, ref in refs.items()
    }
    assert layers["verl"][: len(layers["slim"])] == layers["slim"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings in (
        [],
        ["warning: verl: built on another copy of a parent's layers than its image holds "
         "(BuildKit's cache keeps two of them); building again on the image"],
    ), result.stderr  # fmt: skip


def test_the_manifest_check_reads_versions_as_pip_installs_them() -> None:
    """A pin of 5.0 is the 5.0.0 pip installed for it; an unpinned package (ipython = "")
    only has to be there."""
    from conftest import PINS

    from rocmgraph.graph.invocation import Options, Run

    run = Run(Options(pins=str(PINS)), stages.graph())
    wanted = {name: version for (_, _, name), version in run.pins.python.packages()}
    wanted |= {s.dist or n: s.version for n, s in run.pins.sources.items() if s.version}
    assert wanted["ipython"] == ""
    listed = {**wanted, "ipython": "9.4.0", "datasets": wanted["datasets"].removesuffix(".0")}

    class Image:
        def __init__(self, packages: dict[str, str]) -> None:
            self.text = "".join(f"{name}=={version}\n" for name, version in packages.items())

        def read(self, image: str, path: str) -> str:
            return self.text

    assert verify_._manifest(run, Image(listed), "img") == []  # type: ignore[arg-type]
    del listed["ipython"]
    assert [row.text() for row in verify_._manifest(run, Image(listed), "img")] == [  # type: ignore[arg-type]
        "python ipython: differs: the pins say installed, the image has none"
    ]
