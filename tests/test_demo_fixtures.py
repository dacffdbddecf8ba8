"""The demo's upstreams are made the same on every machine: both demo pins files pin them."""

from __future__ import annotations

from pathlib import Path

import pytest
from servers import git

from rocmgraph.config import pins
from rocmgraph.demo import fixtures, kernels, primus, rocmfiles
from rocmgraph.demo.profile import PROFILES
from rocmgraph.graph.estimate import load_references


def test_the_demo_upstreams_are_what_demo_pins_pin(tmp_path: Path) -> None:
    built = fixtures.build(tmp_path / "fixtures")
    for profile in PROFILES.values():
        demo = pins.load(profile.template)
        for name, source in demo.sources.items():
            repo = source.repo.rsplit("/", 1)[1].removesuffix(".git")  # sgl_kernel: sglang's
            assert source.commit == built.commits[repo][0], (profile.template.name, name)
            if source.subtree:
                served = tmp_path / "fixtures" / "www" / "git" / f"{repo}.git"
                tree = git(served, "rev-parse", f"{source.commit}:{source.subtree}")
                assert source.tree == tree, (profile.template.name, name)
        for name, wheel in demo.wheels.items():
            assert (wheel.file, wheel.sha256) == built.wheels[name], (profile.template.name, name)
    www = tmp_path / "fixtures" / "www"
    assert (www / "apt/7.14/dists/demo/InRelease").read_text().startswith("-----BEGIN PGP SIGNED")
    assert (www / "git/vllm.git/info/refs").is_file()  # served over git's dumb protocol


def test_the_demo_ships_kernel_files_of_several_archs() -> None:
    files = [name for package in rocmfiles.kernel_files().values() for name in package]
    assert "lib/rocblas/library/TensileLibrary_lazy_gfx942.dat" in files
    assert "share/miopen/db/gfx942130.HIP.fdb.txt" in files
    assert "share/miopen/db/gfx90a6e.HIP.fdb.txt" in files
    assert "lib/hipblaslt/library/gfx950/Kernels_gfx950.co" in files
    assert "lib/libMIOpenCKGroupedConv_gfx950.so" in files


def test_the_primus_base_is_keyed_by_its_dockerfile_and_context(tmp_path: Path) -> None:
    # Rebuilt only when its own inputs change: the same context and text, the same key.
    context = tmp_path / "context"
    (context / "wheels").mkdir(parents=True)
    (context / "wheels" / "a.whl").write_bytes(b"a")
    key = primus.inputs_key(context, "FROM rootfs:1\n")
    (context / "Dockerfile").write_text("FROM rootfs:1\n")  # what a build writes there
    assert primus.inputs_key(context, "FROM rootfs:1\n") == key
    assert primus.inputs_key(context, "FROM rootfs:2\n") != key
    (context / "wheels" / "a.whl").write_bytes(b"b")
    assert primus.inputs_key(context, "FROM rootfs:1\n") != key


def test_the_demo_kernels_cost_the_real_builds_minutes_at_the_test_scale() -> None:
    references = load_references()
    for profile in PROFILES.values():
        demo = pins.load(profile.template)
        for name, count in kernels.KERNELS.items():
            if name not in demo.sources:
                continue
            expected = kernels.steps(name, references[name].seconds / 60, kernels.TEST_SCALE)
            assert demo.sources[name].env["DEMO_KERNEL_STEPS"] == str(expected), name
            assert count * expected / kernels.STEPS_PER_SECOND == pytest.approx(
                references[name].seconds / 60 * kernels.TEST_SCALE
            )
    assert kernels.steps("vllm", 60, 1.0) == 1_875_000  # vLLM's hour: 60 s of compiling
    made = kernels.files("causal_conv1d", "causal-conv1d")
    assert sorted(made) == [f"csrc/kernels/{name}" for name in
                            ("k00.cpp", "k01.cpp", "k02.cpp", "k03.cpp", "spin.h")]  # fmt: skip
    assert "demo::spin(DEMO_KERNEL_STEPS, 2UL)" in made["csrc/kernels/k01.cpp"]
    assert "demo::spin(DEMO_KERNEL_STEPS, 1002UL)" in kernels.unit("vLLM", 1, variant=1)
