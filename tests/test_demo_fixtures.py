"""The demo's upstreams are made the same on every machine: both demo pins files pin them."""

from __future__ import annotations

from pathlib import Path

from servers import git

from rocmgraph.config import pins
from rocmgraph.demo import fixtures, primus, rocmfiles
from rocmgraph.demo.profile import PROFILES


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
