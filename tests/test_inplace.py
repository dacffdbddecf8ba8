"""inplace.py: what a build generated goes back into its tree, as an editable install has it."""

from __future__ import annotations

import zipfile
from pathlib import Path

from rocmgraph.inimage import inplace


def test_only_what_the_tree_lacks_under_its_own_packages_is_written(tmp_path: Path) -> None:
    tree = tmp_path / "vllm"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("# the tree's own\n")
    wheel = tmp_path / "vllm-0.22.1rc1-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("vllm/__init__.py", "# the wheel's copy\n")
        archive.writestr("vllm/_C.abi3.so", "compiled")
        archive.writestr("vllm/third_party/triton_kernels/matmul_ogs.py", "BLOCK = 128\n")
        archive.writestr("vllm-0.22.1rc1.dist-info/METADATA", "Name: vllm\n")
        archive.writestr("tilelang/__init__.py", "")  # no package of this tree
    assert inplace.main([str(tree), str(wheel)]) == 0
    written = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert written == [
        "vllm/_C.abi3.so",
        "vllm/__init__.py",
        "vllm/third_party/triton_kernels/matmul_ogs.py",
    ]
    assert (tree / "vllm" / "__init__.py").read_text() == "# the tree's own\n"
