"""End to end, the other pipeline: profile=demo702, verl's ROCm 7.0.2 recipe in miniature.

From a plain OS base every stage installs: ROCm from the demo's signed apt
repository (amd_smi pip-installed from /opt/rocm/share/amd_smi), the torch stack
from its wheel index, Flash Attention, TransformerEngine, aiter and vLLM from
source; no SGLang and no causal-conv1d, whose stages the profile drops. One
cold build, in its own namespace (verl-e2e702), emptied first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_e2e import (
    built,
    copy_of_demo,
    docker,
    empty_namespace,
    manifest_file,
    prepare,
    run_in,
    shell,
    wheel_member,
    wheels,
)

import stages
from rocmgraph.config.pins import load as load_pins
from rocmgraph.inimage import prune

pytestmark = pytest.mark.docker
DROPPED = {"sgl_kernel", "sglang", "causal_conv1d"}


def test_a_cold_build_of_the_702_pipeline_passes_its_smoke_check(tmp_path: Path) -> None:
    # The manifest stage runs the smoke check: the image is tagged only when it passes.
    empty_namespace("verl-e2e702")
    prepare("demo702")
    demo = copy_of_demo(tmp_path, "demo702", "verl-e2e702")
    result = demo.build()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == set(stages.graph().order) - DROPPED
    image = "verl-e2e702:gfx942"
    facts = run_in(
        image,
        "import vllm, verl, amdsmi, aiter, flash_attn, transformer_engine, torch;"
        "print(vllm.__version__, verl.Engine, aiter.ARCHS, flash_attn.ARCHS, torch.__version__)",
    )
    assert facts == "0.22.1rc1 None gfx942 gfx942 2.12.0+rocm7.14.0.lw.git1a2b3c4d"
    te_utils = run_in(  # the line verl's sed edits by number, patched before the build
        image,
        "import os, transformer_engine as te; print(open(os.path.dirname(te.__file__)"
        " + '/pytorch/attention/dot_product_attention/utils.py').read().splitlines()[120])",
    )
    assert te_utils == 'max_version = PkgVersion("2.8.4")'
    found = shell(
        image, "cat /opt/rocm/.info/version; readlink /usr/lib/libamdhip64.so; ls /workspace"
    )
    assert found == ["7.14.0-70140", "/opt/rocm/lib/libamdhip64.so", "aiter", "verl", "vllm"]
    kernels = shell(image, "find /opt/rocm -name '*gfx*'")
    assert {prune.arch_of(path) for path in kernels} == {"gfx942"}
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image))
    assert (config["Cmd"], config["WorkingDir"]) == (["/bin/bash"], "/workspace/verl")
    # A plain OS base: the wheels stage installs the pinned wheels, each traced by its sha256.
    sbom = json.loads(manifest_file(image, "sbom.cdx.json"))
    by_wheel = {
        c["name"]: c["hashes"][0]["content"]
        for c in sbom["components"]
        if {"name": "verl-rocm-graph:origin", "value": "wheel"} in c["properties"]
    }
    pins = load_pins(demo.pins)
    assert by_wheel == {name: wheel.sha256 for name, wheel in pins.wheels.items()}


def test_aiter_unpatched_builds_without_the_stack_s_triton(tmp_path: Path) -> None:
    # Issue 32: at 45c428e54 aiter's setup.py runs install_triton.sh in any build but
    # `setup.py develop` (verl's): it uninstalls triton and pip-installs amd-triton from
    # AMD's index, which no pin gives (the demo's serves none: the install fails, and the
    # build goes on). The graph builds a wheel; its patch keeps the installed triton. The
    # demo's wheel records the triton its build ran with.
    prepare("demo702")
    broken = copy_of_demo(tmp_path / "broken", "demo702", "verl-e2e702")
    broken.edit(["sources", "aiter", "patches"], [])
    assert broken.build(target="build:aiter").returncode == 0
    (wheel,) = wheels(broken.image("aiter"))
    assert wheel_member(broken.image("aiter"), wheel, "aiter/_build.py") == (
        "TRITON = None\nARCHS = 'gfx942'\n"
    )
    fixed = copy_of_demo(tmp_path / "fixed", "demo702", "verl-e2e702")
    assert fixed.build(target="build:aiter").returncode == 0
    (wheel,) = wheels(fixed.image("aiter"))
    assert wheel_member(fixed.image("aiter"), wheel, "aiter/_build.py") == (
        "TRITON = ('triton', '3.7.0+rocm7.14.0.git0badcafe')\nARCHS = 'gfx942'\n"
    )
