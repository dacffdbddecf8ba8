"""Patches: one status each (applies, obsolete, conflicts), never applied twice, never fuzzed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from rocmgraph.common.errors import PatchError
from rocmgraph.config import pins
from rocmgraph.demo import patchimages
from rocmgraph.trees import patches

VLLM = tuple(
    f"docker/patches/vllm/{name}"
    for name in (
        "0001-cumem-zero-mapped-vram-on-rocm.patch",
        "0002-moe-pad-weight-in-place.patch",
        "0003-moe-oracle-keep-weight-storage.patch",
    )
)
CUMEM, PAD, ORACLE = VLLM
PAD_FILE = "vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def upstream_at_pin(root: Path, names: tuple[str, ...] = VLLM) -> Path:
    """A tree with exactly what the patches expect (their pre-images)."""
    files: dict[str, str] = {}
    for name in names:
        files.update(patchimages.preimage(patches.read_patch(name)))
    return write_tree(root, files)


def test_every_pinned_patch_names_its_intent_and_upstream() -> None:
    real = pins.load(ROOT / "pins.toml")
    names = [p for s in real.sources.values() for p in s.patches]
    names += [p for ps in real.python.patches.values() for p in ps]
    assert len(names) == 9
    upstreams = {name.rsplit("/", 1)[-1]: patches.read_patch(name).upstream for name in names}
    assert upstreams == {
        "0001-cumem-zero-mapped-vram-on-rocm.patch": ("vllm-project/vllm", 44972),
        "0002-moe-pad-weight-in-place.patch": ("vllm-project/vllm", 46009),
        "0003-moe-oracle-keep-weight-storage.patch": ("vllm-project/vllm", 46009),
        "0001-layernorm-in-place-fused-add-rms-norm.patch": ("sgl-project/sglang", 32034),
        "0002-pyproject-no-rust-grpc-extension.patch": None,
        "0003-sgl-kernel-build-for-every-target-arch.patch": None,
        "0004-sgl-kernel-fp8-type-by-compiled-arch.patch": None,
        "0001-rollout-rocm-engine-defaults.patch": None,
        "0001-attention-backend-env-warns.patch": None,
    }
    for name in names:
        assert patches.read_patch(name).description


def test_patches_apply_at_the_pin_in_order(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    statuses = patches.apply(tree, VLLM, "vllm")
    assert [s.status for s in statuses] == ["applies", "applies", "applies"]
    assert "hipMemset" in (tree / "csrc/cumem_allocator.cpp").read_text()
    assert "w13_weight.data.copy_(" in (tree / PAD_FILE).read_text()


def test_a_fix_upstream_merged_is_obsolete_and_never_applied_twice(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    write_tree(tree, patchimages.postimage(patches.read_patch(CUMEM)))  # upstream merged #44972
    before = (tree / "csrc/cumem_allocator.cpp").read_text()
    statuses = patches.apply(tree, VLLM, "vllm")
    assert statuses[0] == patches.Status(
        CUMEM, patches.Outcome.OBSOLETE, "upstream has this change already"
    )
    assert (tree / "csrc/cumem_allocator.cpp").read_text() == before
    assert before.count("hipMemset") == 1


def test_changed_context_is_a_conflict_naming_file_and_hunk(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    text = (tree / PAD_FILE).read_text()
    (tree / PAD_FILE).write_text(text.replace("# used by captured CUDA graphs.", "# (reworded)"))
    statuses = patches.check(tree, VLLM)
    assert statuses[1] == patches.Status(
        PAD,
        patches.Outcome.CONFLICTS,
        f"{PAD_FILE}: hunk 1 (@@ -210,8 +210,8 @@) does not apply",
        file=PAD_FILE,  # named apart, for what reads it (bump names its last change)
    )
    assert [s.status for s in statuses] == ["applies", "conflicts", "applies"]


def test_a_moved_file_is_a_conflict_not_silence(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    (tree / "csrc/cumem_allocator.cpp").rename(tree / "csrc/cumem.cpp")
    statuses = patches.check(tree, VLLM)
    assert statuses[0] == patches.Status(
        CUMEM,
        patches.Outcome.CONFLICTS,
        "csrc/cumem_allocator.cpp: no such file (moved or deleted upstream?)",
        missing=("csrc/cumem_allocator.cpp",),
    )


MIXED = """Description: creates one file, changes another, deletes a third
Forwarded: not-needed
---
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1 @@
+created
diff --git a/src/kept.py b/src/kept.py
--- a/src/kept.py
+++ b/src/kept.py
@@ -1 +1 @@
-old = 1
+new = 1
diff --git a/src/gone.py b/src/gone.py
deleted file mode 100644
--- a/src/gone.py
+++ /dev/null
@@ -1 +0,0 @@
-bye = 1
"""


@pytest.mark.parametrize(
    ("tree", "outcome", "missing"),
    [
        ({"src/kept.py": "old = 1\n", "src/gone.py": "bye = 1\n"}, "applies", ()),
        ({"src/kept.py": "new = 1\n", "docs/new.md": "created\n"}, "obsolete", ()),
        ({"src/gone.py": "bye = 1\n"}, "conflicts", ("src/kept.py",)),
        ({}, "conflicts", ("src/gone.py", "src/kept.py")),
    ],
)
def test_only_the_files_a_patch_needs_can_be_missing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tree: dict[str, str],
    outcome: str,
    missing: tuple[str, ...],
) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "mixed.patch").write_text(MIXED)
    monkeypatch.setattr(patches, "ROOT", tmp_path)
    patch = patches.read_patch("docker/mixed.patch")
    assert patch.files == ("docs/new.md", "src/gone.py", "src/kept.py")
    assert patch.needs == ("src/gone.py", "src/kept.py")  # not the file it creates
    [status] = patches.check(write_tree(tmp_path / "tree", tree), ("docker/mixed.patch",))
    assert (status.status, status.missing) == (outcome, missing)


def test_a_conflict_stops_before_anything_is_applied(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    (tree / "csrc/cumem_allocator.cpp").unlink()
    pad_before = (tree / PAD_FILE).read_text()
    with pytest.raises(PatchError) as caught:
        patches.apply(tree, VLLM, "vllm")
    assert str(caught.value) == (
        f"source vllm: {CUMEM} conflicts: "
        "csrc/cumem_allocator.cpp: no such file (moved or deleted upstream?)"
    )
    assert (tree / PAD_FILE).read_text() == pad_before


def test_checking_leaves_the_tree_untouched(tmp_path: Path) -> None:
    tree = upstream_at_pin(tmp_path / "tree")
    before = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}
    patches.check(tree, VLLM)
    assert {p: p.read_text() for p in tree.rglob("*") if p.is_file()} == before


def test_every_real_patch_applies_to_its_own_preimage(tmp_path: Path) -> None:
    real = pins.load(ROOT / "pins.toml")
    groups = [s.patches for s in real.sources.values() if s.patches]
    groups += list(real.python.patches.values())
    for number, group in enumerate(groups):
        tree = upstream_at_pin(tmp_path / str(number), group)
        assert {s.status for s in patches.check(tree, group)} == {"applies"}, group
        post: dict[str, str] = {}
        for name in group:
            post.update(patchimages.postimage(patches.read_patch(name)))
        done = write_tree(tmp_path / f"{number}-merged", post)
        assert {s.status for s in patches.check(done, group)} == {"obsolete"}, group


def test_a_patch_without_its_header_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "bare.patch").write_text("diff --git a/x b/x\n")
    monkeypatch.setattr(patches, "ROOT", tmp_path)
    with pytest.raises(PatchError) as caught:
        patches.read_patch("docker/bare.patch")
    assert str(caught.value) == (
        "docker/bare.patch: the header needs `Description:` and `Forwarded:` "
        "(a pull request URL, or not-needed), then a line `---` before the diff"
    )


def test_a_patch_the_pins_name_that_does_not_exist_is_one_clear_line() -> None:
    with pytest.raises(PatchError) as caught:
        patches.read_patch("docker/patches/sglang/0002-typo.patch")
    assert str(caught.value) == (
        "docker/patches/sglang/0002-typo.patch: no such file; name a patch of this repository "
        "in the pins (paths are relative to its root)"
    )
