"""End to end on a real Docker engine: the demo graph, built, rebuilt, switched, broken, resumed.

The tests run in order and share one build: cold, no-op, .doit.db gone, one
pin changed, arch switched, a stage made to fail and then fixed. Their images
live in their own namespace (verl-e2e), removed first, so the cold build is
cold whatever the machine built before.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml, need_docker, run_doit

import stages
from rocmgraph.demo.profile import Demo

pytestmark = pytest.mark.docker
DOCKER = "/usr/bin/docker"
GRAPH = stages.graph()
ARCH_INDEPENDENT = {s.name for s in GRAPH if not s.arch_dependent}


@dataclass
class E2E:
    pins: Path

    def edit(self, path: list[str], value: object) -> None:
        self.pins.write_text(edit_toml(self.pins.read_text(), path, value))

    def build(self, arch: str = "gfx942") -> subprocess.CompletedProcess[str]:
        return run_doit("build:image", "profile=demo", f"pins={self.pins}", f"arch={arch}")


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout


def built(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The stages this run built (doit's '.  build:x' lines; '-- build:x' is up to date)."""
    return set(re.findall(r"^\.  build:(\w+)$", result.stdout, re.MULTILINE)) - {"image"}


def image_ids() -> dict[str, str]:
    """Stage -> image id, for the stage images of the e2e namespace."""
    out = docker("image", "ls", "--no-trunc", "--format", "{{.Repository}} {{.Tag}} {{.ID}}")
    ids = {}
    for line in out.splitlines():
        repo, tag, image = line.split()
        if repo.startswith("verl-e2e/"):
            ids[f"{repo.removeprefix('verl-e2e/')}:{tag}"] = image
    return ids


def run_in(image: str, code: str) -> str:
    return docker("run", "--rm", "--network=none", image, "python", "-c", code).strip()


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> E2E:
    need_docker()
    stale = [f"{repo}:{tag}" for repo_tag in image_ids() for repo, tag in [repo_tag.split(":")]]
    if stale:
        docker("image", "rm", "--force", *(f"verl-e2e/{name}" for name in stale))
    prepared = run_doit("demo", "profile=demo")  # fixtures, base image, locked demo pins
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    pins = tmp_path_factory.mktemp("e2e") / "pins.toml"
    pins.write_text(Demo().pins.read_text())
    world = E2E(pins)
    world.edit(["image", "name"], "verl-e2e")
    return world


def test_cold_build_makes_an_image_that_holds_what_every_stage_put_there(e2e: E2E) -> None:
    result = e2e.build()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == set(GRAPH.order)
    assert "tagged verl-e2e:gfx942 = verl-e2e/manifest:" in result.stdout
    image = "verl-e2e:gfx942"
    facts = run_in(
        image,
        "import vllm, sglang, verl, torch, flash_attn, sgl_kernel, os;"
        "print(vllm.add(2, 3), sglang.VARIANT, torch.__version__, flash_attn.ARCHS,"
        " sgl_kernel.ARCHS, os.environ['PYTORCH_ROCM_ARCH'])",
    )
    assert facts == "5 first 2.12.0+rocm7.14.0.lw.git1a2b3c4d gfx942 ['gfx942'] gfx942"
    site = "/opt/venv/lib/python3.11/site-packages"
    rollout = f"{site}/verl/trainer/config/rollout/rollout.yaml"
    megatron = f"{site}/megatron/core/models/common/language_module/language_module.py"
    shell = docker(
        "run", "--rm", "--network=none", image, "sh", "-c",
        "cat /opt/rocm/.info/version; ls /workspace/.manifest;"
        f"grep -c 'disable_custom_all_reduce: True' {rollout};"
        f"grep -c warnings.warn {megatron};"
        "pip list 2>/dev/null | grep -c demo-tilelang || true",
    )  # fmt: skip
    assert shell.split() == [
        "7.14.0-70140",
        "dpkg-list.txt", "env.txt", "requirements.txt", "training_docker_version",
        "2", "1", "0",
    ]  # fmt: skip
    labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image)
    assert '"org.verl-rocm-graph.stage":"manifest"' in labels
    vllm_log = (e2e.pins.parent / ".build" / "logs" / "vllm.log").read_text()
    assert "ccache" in vllm_log.lower()


def test_a_second_run_builds_nothing(e2e: E2E) -> None:
    before = image_ids()
    since = int(time.time())
    result = e2e.build()
    assert result.returncode == 0, result.stderr
    assert built(result) == set()
    assert image_ids() == before
    # The engine's own record: a build ends by naming (tagging) its image.
    until = str(int(time.time()) + 1)
    events = docker(
        "events", "--since", str(since), "--until", until,
        "--filter", "type=image", "--filter", "event=tag", "--format", "{{.Actor.ID}}",
    )  # fmt: skip
    assert events == ""


def test_losing_the_doit_database_rebuilds_nothing(e2e: E2E) -> None:
    for path in ROOT.glob(".doit.db*"):
        path.unlink()
    result = e2e.build()
    assert result.returncode == 0, result.stderr
    assert built(result) == set()


def test_one_pin_changed_rebuilds_exactly_its_stage_and_descendants(e2e: E2E) -> None:
    demo = Demo()
    second = _commits(demo, "sglang")[1]
    vllm_before = {k: v for k, v in image_ids().items() if k.startswith("vllm:")}
    e2e.edit(["sources", "sglang", "commit"], second)
    result = e2e.build()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == {"sglang", "assemble", "prune", "manifest"}
    assert {k: v for k, v in image_ids().items() if k.startswith("vllm:")} == vllm_before
    assert run_in("verl-e2e:gfx942", "import sglang; print(sglang.VARIANT)") == "second"


def test_switching_arch_reuses_every_arch_independent_stage(e2e: E2E) -> None:
    result = e2e.build("gfx950")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == {s.name for s in GRAPH if s.arch_dependent}
    assert ARCH_INDEPENDENT.isdisjoint(built(result))
    facts = run_in(
        "verl-e2e:gfx950",
        "import flash_attn, sgl_kernel; print(flash_attn.ARCHS, sgl_kernel.ARCHS)",
    )
    assert facts == "gfx950 ['gfx950']"
    back = e2e.build("gfx942")  # and back: every stage of gfx942 is still there
    assert built(back) == set()


def test_a_failing_stage_leaves_no_tag_and_the_rerun_resumes_there(e2e: E2E) -> None:
    e2e.edit(["sources", "causal_conv1d", "env", "MAMBA_FORCE_BUILD"], "FALSE")
    e2e.edit(["sources", "causal_conv1d", "subdirs"], ["no-such-dir"])
    before = image_ids()
    failed = e2e.build()
    assert failed.returncode == 1
    log = e2e.pins.parent / ".build" / "logs" / "causal_conv1d.log"
    lines = failed.stderr.splitlines()
    assert lines[0] == "error: stage causal_conv1d: docker build failed (exit 1); its last lines:"
    assert lines[-1] == f"full log: {log}"
    assert "no-such-dir" in failed.stderr
    assert built(failed) == {"causal_conv1d"}
    assert image_ids() == before  # nothing tagged: the failed stage left no image
    e2e.edit(["sources", "causal_conv1d", "subdirs"], ["."])
    resumed = e2e.build()
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert built(resumed) == {"causal_conv1d", "assemble", "prune", "manifest"}


def _commits(demo: Demo, source: str) -> list[str]:
    import json

    return list(json.loads((demo.root / "fixtures" / "built.json").read_text())["commits"][source])
