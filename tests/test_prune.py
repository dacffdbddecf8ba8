"""Pruning: a pure classifier of kernel file names, and a prune that keeps what it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmgraph.inimage import prune

# Real names from ROCm's libraries (rocBLAS, hipBLASLt, hipSPARSELt, MIOpen), and the arch each is for.
NAMES = {
    # rocBLAS: lib/rocblas/library
    "lib/rocblas/library/TensileLibrary_lazy_gfx942.dat": "gfx942",
    "lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat": "gfx1100",
    "lib/rocblas/library/Kernels.so-000-gfx942.hsaco": "gfx942",
    "lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco": "gfx90a",
    "lib/rocblas/library/Kernels.so-000-gfx90a-xnack-.hsaco": "gfx90a",
    "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.co": "gfx942",
    "lib/rocblas/library/TensileLibrary_Type_SS_Contraction_l_Alik_Bljk_Cijk_Dijk_gfx950.dat": "gfx950",
    "lib/rocblas/library/TensileManifest.txt": None,
    # hipBLASLt: lib/hipblaslt/library, with per-arch folders
    "lib/hipblaslt/library/TensileLibrary_lazy_gfx950.dat": "gfx950",
    "lib/hipblaslt/library/TensileLibrary_lazy_gfx950.dat.zlib": "gfx950",
    "lib/hipblaslt/library/TensileLiteLibrary_lazy_gfx950_Mapping.dat": "gfx950",
    "lib/hipblaslt/library/TensileLiteLibrary_lazy_gfx942_Mapping.dat.zlib": "gfx942",
    "lib/hipblaslt/library/extop_gfx942.co": "gfx942",
    "lib/hipblaslt/library/hipblasltExtOpLibrary.dat": None,
    "lib/hipblaslt/library/gfx942/TensileLiteLibrary_HH_HH_HA_Bias_SAV_Type_HH_HPA_Contraction.co": "gfx942",
    "lib/hipblaslt/library/gfx1201/Kernels.co": "gfx1201",
    # hipSPARSELt: lib/hipsparselt/library
    "lib/hipsparselt/library/Kernels.so-000-gfx942.hsaco": "gfx942",
    "lib/hipsparselt/library/TensileLibrary_lazy_gfx950.dat": "gfx950",
    # MIOpen: the arch joined to a hex CU count, or plain
    "share/miopen/db/gfx942130.HIP.fdb.txt": "gfx942",
    "share/miopen/db/gfx90a6e.kdb": "gfx90a",
    "share/miopen/db/gfx90a68.HIP.fdb.txt": "gfx90a",
    "share/miopen/db/gfx942.kdb": "gfx942",
    "share/miopen/db/gfx942_68.HIP.model": "gfx942",
    "share/miopen/db/gfx1030_36.kdb": "gfx1030",
    "share/miopen/db/gfx1151_40.kdb": "gfx1151",
    "lib/libMIOpenCKGroupedConv_gfx942.so": "gfx942",
    "lib/libMIOpenCKGroupedConv_gfx950.so.1.0": "gfx950",
    # nothing to read, or nothing known: kept whatever the targets
    "lib/libMIOpen.so.1": None,
    "lib/librocblas.so.4.4": None,
    "lib/hipblaslt/library/gfx9-4-generic_kernels.co": None,
    "lib/hipblaslt/library/gfx11-generic/Kernels.co": None,
    "lib/rocblas/library/fat_gfx942_gfx950.co": None,  # two archs: cannot say
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(NAMES))
def test_each_real_file_name_reads_as_its_arch(path: str) -> None:
    assert prune.arch_of(path) == NAMES[path]


def test_the_longest_known_arch_wins() -> None:
    assert prune.arch_of_token("gfx942130") == "gfx942"
    assert prune.arch_of_token("gfx1151") == "gfx1151"
    assert prune.arch_of_token("gfx1150") == "gfx1150"
    assert prune.arch_of_token("gfx11") is None


def test_only_files_of_other_known_archs_are_removed() -> None:
    removed = set(prune.to_remove(NAMES, ["gfx942"]))
    assert removed == {p for p, arch in NAMES.items() if arch is not None and arch != "gfx942"}
    assert "share/miopen/db/gfx942130.HIP.fdb.txt" not in removed
    both = set(prune.to_remove(NAMES, ["gfx942", "gfx950"]))
    assert not any(NAMES[p] in ("gfx942", "gfx950") for p in both)
    assert "lib/hipblaslt/library/gfx11-generic/Kernels.co" not in both


def test_prune_deletes_counts_and_empties_per_arch_folders(tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * 100)
    report = tmp_path / "report" / "prune.json"
    assert prune.main(["--keep", "gfx942", "--report", str(report), str(tmp_path / "lib"),
                       str(tmp_path / "share"), str(tmp_path / "missing")]) == 0  # fmt: skip
    data = json.loads(report.read_text())
    gone = [p for p, arch in NAMES.items() if arch is not None and arch != "gfx942"]
    assert data["removed_files"] == len(gone)
    assert data["removed_bytes"] == 100 * len(gone)
    assert data["removed_by_arch"]["gfx90a"] == {"files": 4, "bytes": 400}
    assert all(not (tmp_path / p).exists() for p in gone)
    kept = [p for p in NAMES if p not in gone]
    assert all((tmp_path / p).is_file() for p in kept)
    assert not (tmp_path / "lib/hipblaslt/library/gfx1201").exists()  # emptied, removed
    assert (tmp_path / "lib/hipblaslt/library/gfx942").is_dir()


def test_an_unknown_target_arch_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        prune.main(["--keep", "gfx943", "/opt/rocm/lib"])
    assert "unknown arch 'gfx943'" in capsys.readouterr().err


@pytest.mark.parametrize("root", ["opt/rocm-gfx942/lib", "gfx90a", "build_gfx1100_gfx950/rocm"])
def test_the_arch_is_read_below_the_prune_dir_never_above_it(tmp_path: Path, root: str) -> None:
    top = tmp_path / root
    for name in NAMES:
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_bytes(b"x")
    report = prune.prune([str(top)], ["gfx950"])
    gone = {p for p, arch in NAMES.items() if arch is not None and arch != "gfx950"}
    assert {p for p in NAMES if not (top / p).exists()} == gone  # as under a neutral root
    assert report["removed_files"] == len(gone)
    by_arch = report["removed_by_arch"]
    assert isinstance(by_arch, dict)
    assert set(by_arch) == {NAMES[p] for p in gone}


def make_tree(top: Path, files: list[str], links: dict[str, str]) -> None:
    for name in files:
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_bytes(b"kernel")
    for name, target in links.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).symlink_to(target)


LIBRARY = "lib/hipblaslt/library"
FILES = [f"{LIBRARY}/gfx942/Kernels.co", f"{LIBRARY}/gfx950/Kernels.co", f"{LIBRARY}/Kernels.so-000-gfx942.hsaco"]  # fmt: skip
# A link's name decides, whatever it points to: name -> (target, removed when keeping gfx942)
LINKS = {
    f"{LIBRARY}/Kernels.so-000-gfx90a.hsaco": ("Kernels.so-000-gfx942.hsaco", True),  # to a kept file
    f"{LIBRARY}/gfx90a": ("gfx942", True),  # to a kept folder: not followed, its files stay
    f"{LIBRARY}/gfx1100": ("gfx950", True),  # to a folder that is pruned itself
    f"{LIBRARY}/gfx1201": ("empty", True),  # to an empty folder (rmdir would fail on a link)
    f"{LIBRARY}/gfx1030.kdb": ("nowhere", True),  # dangling
    f"{LIBRARY}/gfx908": ("../../../outside", True),  # to a folder outside the prune dir
    f"{LIBRARY}/current": ("gfx942", False),  # no arch in its name: kept
    f"{LIBRARY}/TensileLibrary_lazy_gfx942.dat": ("gfx950/Kernels.co", False),  # a kept arch
}  # fmt: skip


def test_links_named_for_a_removed_arch_go_as_links(tmp_path: Path) -> None:
    top = tmp_path / "rocm"
    make_tree(top, [*FILES, "outside/gfx908.kdb"], {name: t for name, (t, _) in LINKS.items()})
    (top / LIBRARY / "empty").mkdir()
    report = prune.prune([str(top / "lib")], ["gfx942"])
    removed = {name for name, (_, gone) in LINKS.items() if gone}
    assert {name for name in LINKS if not (top / name).is_symlink()} == removed
    assert (top / LIBRARY / "gfx942" / "Kernels.co").is_file()  # behind a removed link
    assert (top / "outside" / "gfx908.kdb").is_file()  # outside the prune dir: not ours
    assert (top / LIBRARY / "empty").is_dir()  # a folder with no arch, behind a removed link
    assert not (top / LIBRARY / "gfx950").exists()  # a real folder of another arch
    assert report["removed_files"] == len(removed) + 1  # the links and gfx950/Kernels.co
