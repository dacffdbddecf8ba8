"""End to end on a real Docker engine: the demo graph, built, rebuilt, switched, broken, resumed.

The tests run in order and share one build: cold, no-op, .doit.db gone, one
pin changed, arch switched, a stage made to fail and then fixed. Their images
live in their own namespace (verl-e2e), removed first, so the cold build is
cold whatever the machine built before.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml, need_docker, run_doit

import rocmgraph
import stages
from rocmgraph import pins, prune
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

    def build(self, arch: str = "gfx942", *doit: str) -> subprocess.CompletedProcess[str]:
        return run_doit(*doit, "build:image", "profile=demo", f"pins={self.pins}", f"arch={arch}")

    def plan(self, arch: str = "gfx942") -> dict[str, dict[str, object]]:
        result = run_doit(
            "plan", "profile=demo", f"pins={self.pins}", f"arch={arch}", "format=json"
        )
        assert result.returncode == 0, result.stderr
        return {stage["name"]: stage for stage in json.loads(result.stdout)["stages"]}


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
        "build.json", "dpkg-list.txt", "env.txt", "prune.json", "requirements.txt",
        "training_docker_version",
        "2", "1", "0",
    ]  # fmt: skip
    labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image)
    assert '"org.verl-rocm-graph.stage":"manifest"' in labels
    vllm_log = (e2e.pins.parent / ".build" / "logs" / "vllm.log").read_text()
    assert "ccache" in vllm_log.lower()


def labels(image: str) -> dict[str, str]:
    return dict(
        json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", image))
    )


def size(image: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", image))


def manifest_file(image: str, name: str) -> str:
    return docker("run", "--rm", "--network=none", image, "cat", f"/workspace/.manifest/{name}")


def kernel_archs(image: str) -> set[str | None]:
    found = docker("run", "--rm", "--network=none", image, "find", "/opt/rocm", "-name", "*gfx*")
    return {prune.arch_of(path) for path in found.split()}


def test_the_pruned_image_keeps_its_arch_only_and_really_shrank(e2e: E2E) -> None:
    assert kernel_archs("verl-e2e:gfx942") == {"gfx942"}
    report = json.loads(manifest_file("verl-e2e:gfx942", "prune.json"))
    assert report["removed_files"] > 0
    assert set(report["removed_by_arch"]) == {"gfx90a", "gfx950"}
    keys = labels("verl-e2e:gfx942")
    before = size(f"verl-e2e/assemble:{keys['org.verl-rocm-graph.key.assemble']}")
    after = size(f"verl-e2e/prune:{keys['org.verl-rocm-graph.key.prune']}")
    assert before - after >= 0.95 * report["removed_bytes"], (before, after, report)


def test_the_manifest_and_labels_record_how_the_image_was_built(e2e: E2E) -> None:
    image = "verl-e2e:gfx942"
    build = json.loads(manifest_file(image, "build.json"))
    keys = labels(image)
    assert [stage["name"] for stage in build["stages"]] == list(GRAPH.order)
    for stage in build["stages"]:
        assert stage["key"] == keys[f"org.verl-rocm-graph.key.{stage['name']}"]
        assert (stage["image_id"] is None) == (stage["name"] == "manifest")
    sglang = next(stage for stage in build["stages"] if stage["name"] == "sglang")
    assert "[sources.sglang].commit" in sglang["pins"]
    assert sglang["arch"] == ["gfx942"]
    assert build["tool"] == {"name": "verl-rocm-graph", "version": rocmgraph.__version__}
    assert build["prune"]["kept_archs"] == ["gfx942"]
    verl_commit = pins.load(e2e.pins).sources["verl"].commit
    assert keys["org.opencontainers.image.revision"] == verl_commit
    assert keys["org.opencontainers.image.source"] == "https://github.com/verl-project/verl"
    assert keys["org.opencontainers.image.version"] == "demo_rocm7.14_torch2.12"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", keys["org.opencontainers.image.created"]
    )
    env = manifest_file(image, "env.txt").splitlines()
    assert "PYTORCH_ROCM_ARCH=gfx942" in env
    # verl's recipe: training_docker_version is the GIT_COMMIT_TAG build argument (commit_tag=),
    # DEV by default; the pinned version is this project's label.
    assert manifest_file(image, "training_docker_version") == "DEV\n"
    assert "DEBIAN_FRONTEND=noninteractive" not in env  # build-only, dropped when flattened
    assert not any(line.startswith("CCACHE_") for line in env)


def test_a_secret_package_index_never_reaches_a_layer(e2e: E2E, tmp_path: Path) -> None:
    # The pins name the index; its login is in the user's netrc, as pip and curl keep it.
    token = "s3cr3t-t0ken-4242"
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login demo password {token}\n")
    netrc.chmod(0o600)
    secret = E2E(tmp_path / "pins.toml")
    secret.pins.write_text(e2e.pins.read_text())
    secret.edit(["image", "name"], "verl-secret")
    stale = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "verl-secret/*").split()
    if stale:
        docker("image", "rm", "--force", *stale)
    result = run_doit(
        "build:base", "profile=demo", f"pins={secret.pins}", env={"NETRC": str(netrc)}
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert token not in result.stdout + result.stderr
    (image,) = docker(
        "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "verl-secret/base"
    ).split()
    archive = tmp_path / "image.tar"
    docker("save", "--output", str(archive), image)
    with tarfile.open(archive) as saved:
        members = [m for m in saved.getmembers() if m.isfile()]
        assert any(m.name.endswith("layer.tar") for m in members)
        for member in members:  # every layer, the config, the manifest
            data = saved.extractfile(member)
            assert data is not None
            blob = data.read()
            if member.name.endswith(".tar"):
                with tarfile.open(fileobj=io.BytesIO(blob)) as layer:
                    for entry in layer.getmembers():
                        content = layer.extractfile(entry) if entry.isfile() else None
                        assert content is None or token.encode() not in content.read(), entry.name
            assert token.encode() not in blob, member.name
    assert token not in docker("history", "--no-trunc", image)
    assert token not in (tmp_path / ".build" / "logs" / "base.log").read_text()


def test_a_second_run_builds_nothing(e2e: E2E) -> None:
    before = image_ids()
    since = f"{time.time():.3f}"  # to the millisecond: not the last test's events
    result = e2e.build()
    assert result.returncode == 0, result.stderr
    assert built(result) == set()
    assert image_ids() == before
    # The engine's own record: a build ends by naming (tagging) its image.
    until = str(int(time.time()) + 1)
    events = docker(
        "events", "--since", since, "--until", until,
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
    first = pins.load(e2e.pins).sources["sglang"].commit
    e2e.edit(["sources", "sglang", "commit"], second)
    plan = e2e.plan()  # before building: what will build, and why
    assert plan["vllm"]["status"] == "built"
    assert plan["sglang"]["status"] == "not built"
    assert plan["sglang"]["reasons"] == [
        f"pin [sources.sglang].commit changed: {first[:12]} -> {second[:12]}"
    ]
    assert plan["assemble"]["reasons"] == ["parent sglang changed"]
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
    both = e2e.build("gfx942,gfx950", "-n", "2")  # independent stages build at once
    assert both.returncode == 0, both.stdout[-3000:] + both.stderr
    assert ARCH_INDEPENDENT.isdisjoint(built(both))
    assert kernel_archs("verl-e2e:gfx942-gfx950") == {"gfx942", "gfx950"}


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
    return list(json.loads((demo.root / "fixtures" / "built.json").read_text())["commits"][source])
