"""The demo breaks where the real image breaks: each fix of issue 10 taken out, on a real engine.

The demo's upstreams build as the real ones do (rocmgraph/demo/buildfiles.py):
a tree without .git gives vLLM no version at all and SGLang a fallback one,
and causal-conv1d's compiler takes its archs in one comma-separated flag.
Each test takes one fix out of a fresh copy of the demo's pins and builds the
stage that shows it, in the shared namespace (verl-e2e), so every stage whose
inputs the copy does not change is the one test_e2e.py built; then it looks
at what the pins as they are built.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import delete_toml
from demo_e2e import E2E, copy_of_demo, log_lines, masked, wheel_member, wheels

# The shared demo: prepared, its namespace emptied once (the copies start from its pins).
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("e2e")]


def without(tmp_path: Path, path: list[str]) -> E2E:
    """A fresh copy of the demo's pins with the value at ``path`` gone."""
    copy = copy_of_demo(tmp_path)
    copy.pins.write_text(delete_toml(copy.pins.read_text(), path))
    return copy


def test_vllm_without_its_version_fails_as_setuptools_scm_does(tmp_path: Path) -> None:
    # Item 1: vLLM's version comes from setuptools_scm with no fallback; the tree has no
    # .git. Without VLLM_VERSION_OVERRIDE the build stops.
    broken = without(tmp_path, ["sources", "vllm", "version_env"])
    failed = broken.build(target="build:vllm")
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0] == "error: stage vllm: docker build failed (exit 1); its last lines:"
    assert lines[-1] == f"full log: {broken.log('vllm').resolve()}"
    assert "LookupError: setuptools-scm was unable to detect version for /src/vllm." in (
        log_lines(broken.log("vllm"))
    )
    fixed = copy_of_demo(tmp_path / "fixed")
    assert fixed.build(target="build:vllm").returncode == 0
    (wheel,) = wheels(fixed.image("vllm"))
    assert wheel.startswith("vllm-0.22.1rc1-")


def test_sglang_without_its_version_builds_and_the_smoke_check_fails(tmp_path: Path) -> None:
    # Item 2: SGLang falls back to 0.0.0.dev0 without .git, and builds. verl then takes
    # its path for an SGLang older than 0.5.7, which imports what the pinned SGLang
    # lacks: the image would fail at rollout. The smoke check stops it being tagged.
    broken = without(tmp_path, ["sources", "sglang", "version_env"])
    failed = broken.build()
    assert failed.returncode == 1
    assert wheels(broken.image("sglang")) == [  # its kernels are the sgl_kernel stage's
        "sglang-0.0.0.dev0-py3-none-any.whl",
        "torch_memory_saver-0.0.9-py3-none-any.whl",
    ]
    # Its findings go to stderr, its count to stdout: BuildKit's log may interleave them.
    # At build time it imports nothing (there is no GPU): the version setuptools_scm
    # wrote tells; verl's import of the old path fails only under --imports.
    smoke = [line for line in log_lines(broken.log("manifest")) if line.startswith("smoke:")]
    assert sorted(smoke) == sorted(
        [
            "smoke: sglang: 0.0.0.dev0 is installed, the pins say 0.5.15",
            "smoke: sglang.__version__ is 0.0.0.dev0 in sglang/_version.py, the pins say 0.5.15",
            "smoke: 28 checks, 2 failed",  # sgl-kernel checked too
        ]
    )
    lines = failed.stderr.splitlines()
    assert lines[0] == "error: stage manifest: docker build failed (exit 1); its last lines:"
    assert len(lines) == 1 + 30 + 1  # its last 30 lines, then where the rest is
    assert lines[-1] == f"full log: {broken.log('manifest').resolve()}"
    # A pipe's lines: the failure as it happens, then the table, which no image line ends.
    shown = masked(failed.stdout)
    assert "failed manifest <key12> after <time>" in shown
    assert shown[-1] == "manifest failed <time> - -"
    assert "tagged" not in failed.stdout
    fixed = copy_of_demo(tmp_path / "fixed")
    assert fixed.build(target="build:sglang").returncode == 0
    assert "sglang-0.5.15-py3-none-any.whl" in wheels(fixed.image("sglang"))


def test_causal_conv1d_archs_joined_by_semicolons_fail_its_compile(tmp_path: Path) -> None:
    # Item 4: causal-conv1d's setup.py passes HIP_ARCHITECTURES as one --offload-arch,
    # which takes a comma-separated list; a ";" list is no arch the compiler knows.
    broken = copy_of_demo(tmp_path)
    broken.edit(["sources", "causal_conv1d", "arch_separator"], "semicolon")
    failed = broken.build("gfx942,gfx950", target="build:causal_conv1d")
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0] == "error: stage causal_conv1d: docker build failed (exit 1); its last lines:"
    assert (
        "hipcc (demo): error: invalid offload arch 'gfx942;gfx950' in "
        "--offload-arch=gfx942;gfx950" in log_lines(broken.log("causal_conv1d"))
    )
    fixed = copy_of_demo(tmp_path / "fixed")
    assert fixed.build("gfx942,gfx950", target="build:causal_conv1d").returncode == 0
    recorded = wheel_member(
        fixed.image("causal_conv1d", "gfx942,gfx950"),
        "/dist/causal_conv1d-1.5.2-py3-none-any.whl",
        "causal_conv1d/_build.py",
    )
    assert recorded == "ARCHS = 'gfx942,gfx950'\n"


def test_sgl_kernel_looked_for_by_its_folder_s_name_fails_the_smoke_check(tmp_path: Path) -> None:
    # Issue 32, item 1: sgl-kernel's distribution is sglang-kernel (its pyproject_rocm.toml and
    # setup_rocm.py), not sgl_kernel: without [sources.sgl_kernel].dist the manifest's smoke
    # check looks for a distribution no build makes.
    broken = without(tmp_path, ["sources", "sgl_kernel", "dist"])
    failed = broken.build()
    assert failed.returncode == 1
    smoke = [line for line in log_lines(broken.log("manifest")) if line.startswith("smoke:")]
    assert "smoke: sgl_kernel: not installed, the pins say 0.4.2.post2" in smoke
    (wheel,) = wheels(broken.image("sgl_kernel"))
    assert wheel.startswith("sglang_kernel-0.4.2.post2-")


def test_vllm_not_given_triton_kernels_is_refused_before_it_fetches(tmp_path: Path) -> None:
    # Issue 32, item 2: vLLM's build clones triton's triton_kernels at configure time unless
    # TRITON_KERNELS_SRC_DIR gives the folder; a fetch no pin accounts for is refused in one
    # line before the build, not as a clone that fails 200 lines into its log.
    broken = without(tmp_path, ["sources", "vllm", "inputs"])
    failed = broken.build(target="build:vllm")
    assert failed.returncode == 1
    assert (
        "error: stage vllm: its build fetches http://127.0.0.1:28470/git/triton.git v3.5.1 "
        "(cmake/external_projects/triton_kernels.cmake:11); no pin gives it: pin its tree as a "
        "source and set [sources.vllm.inputs].TRITON_KERNELS_SRC_DIR, or mark it in "
        "[sources.vllm].skipped_fetches"
    ) in failed.stderr.splitlines()
    fixed = copy_of_demo(tmp_path / "fixed")
    assert fixed.build(target="build:vllm").returncode == 0
    (wheel,) = wheels(fixed.image("vllm"))
    kernels = wheel_member(
        fixed.image("vllm"), f"/dist/{wheel}", "vllm/third_party/triton_kernels/matmul_ogs.py"
    )
    assert kernels == '"""triton_kernels\' matmul (demo)."""\n\nBLOCK = 128\n'
