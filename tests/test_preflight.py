"""`doit preflight` on the real trees: the upstream files each fact is read from, committed
under tests/fixtures/upstream/ at the pinned commits (SOURCES.toml names each file's
repository, commit and sha256), read against the real pins offline."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tomli
from conftest import ROOT, delete_toml, edit_toml
from world import fixture_folder

from rocmgraph.common.errors import Unchecked
from rocmgraph.config import pins
from rocmgraph.demo import upstreams
from rocmgraph.fetch.objects import Checkout
from rocmgraph.trees import cmake, patches, preflight, treefacts
from rocmgraph.trees.patches import Outcome
from rocmgraph.trees.preflight import Fact, PreflightError, Row, Verdict

UPSTREAM = ROOT / "tests" / "fixtures" / "upstream"
TREES = {  # each source built here, and the committed files of its tree
    "vllm": UPSTREAM / "vllm-project" / "vllm",
    "sglang": UPSTREAM / "sgl-project" / "sglang",
    "sgl_kernel": UPSTREAM / "sgl-project" / "sglang",
    "causal_conv1d": UPSTREAM / "Dao-AILab" / "causal-conv1d",
    "verl": UPSTREAM / "verl-project" / "verl",
}
TREES_702 = {  # what pins-rocm702.toml builds here at other commits than pins.toml
    "aiter": UPSTREAM / "ROCm" / "aiter",
    "vllm": UPSTREAM / "vllm-project" / "vllm@1ff9d3353",
}


def check(text: str, trees: dict[str, Path] = TREES) -> list[Row]:
    """The rows of ``text`` (a pins file) against the committed trees."""
    real = pins.loads(text, "pins.toml")

    def fetch(name: str, _source: pins.GitSource) -> Checkout:
        return Checkout(trees[name])

    return preflight.check(real, fetch, sorted(trees))


def pins_702() -> str:
    return (ROOT / "pins-rocm702.toml").read_text()


def real_pins() -> str:
    return (ROOT / "pins.toml").read_text()


def row(rows: list[Row], source: str, fact: Fact, upstream: str) -> Row:
    (found,) = [r for r in rows if (r.source, r.fact, r.upstream) == (source, fact, upstream)]
    return found


def test_the_fixtures_are_the_upstream_files_they_name() -> None:
    listed = tomli.loads((UPSTREAM / "SOURCES.toml").read_text())["file"]
    for entry in listed:
        data = (UPSTREAM / fixture_folder(entry) / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["path"]
        assert len(entry["commit"]) == 40
        assert entry["commit"].startswith(entry.get("at", ""))
    named = {(fixture_folder(entry), entry["path"]) for entry in listed}
    parts = [
        path.relative_to(UPSTREAM).parts
        for path in UPSTREAM.rglob("*")
        if path.is_file() and path.name != "SOURCES.toml"
    ]
    on_disk = {("/".join(part[:2]), "/".join(part[2:])) for part in parts}
    assert on_disk == named


def test_every_fact_of_the_real_trees_matches_the_real_pins() -> None:
    rows = check(real_pins())
    assert [r for r in rows if r.verdict is not Verdict.OK] == []
    assert preflight.verdict(rows) is None
    assert row(rows, "sgl_kernel", Fact.DIST, "sglang-kernel") == Row(
        "sgl_kernel", Fact.DIST, "sglang-kernel", "sglang-kernel", Verdict.OK,
        "sgl-kernel/pyproject_rocm.toml:11",
    )  # fmt: skip
    assert row(rows, "sgl_kernel", Fact.VERSION, "0.4.2.post2").pins == "0.4.2.post2"
    assert row(rows, "vllm", Fact.VERSION, "from git (setuptools_scm), no fallback").pins == (
        "0.22.1rc1.dev384 in VLLM_VERSION_OVERRIDE"
    )
    triton = row(rows, "vllm", Fact.FETCH, "https://github.com/triton-lang/triton.git v3.5.1")
    assert (triton.pins, triton.where) == (
        "given: TRITON_KERNELS_SRC_DIR",
        "cmake/external_projects/triton_kernels.cmake:17",
    )
    arch = row(rows, "vllm", Fact.ARCH, "PYTORCH_ROCM_ARCH, split on semicolon")
    assert arch.where == "cmake/utils.cmake:519"
    conv = row(rows, "causal_conv1d", Fact.ARCH, "HIP_ARCHITECTURES, split on comma")
    assert (conv.pins, conv.where) == ("given, joined by ','", "setup.py:205")
    kernel = row(rows, "sgl_kernel", Fact.ARCH, "PYTORCH_ROCM_ARCH, split on either")
    assert kernel.where == "sgl-kernel/setup_rocm.py:70"  # patched, copied over setup.py
    assert row(rows, "causal_conv1d", Fact.VERSION, "1.5.0.post8").where == (
        "causal_conv1d/__init__.py:1"
    )
    # sgl-kernel's ROCm build runs setup_rocm.py: its CMakeLists.txt's fetches are not taken.
    assert not [r for r in rows if r.source == "sgl_kernel" and r.fact is Fact.FETCH]


def test_every_fact_of_the_702_trees_matches_the_702_pins() -> None:
    rows = check(pins_702(), TREES_702)
    assert [r for r in rows if r.verdict is not Verdict.OK] == []
    triton = row(rows, "vllm", Fact.FETCH, "https://github.com/triton-lang/triton.git v3.6.0")
    assert (triton.pins, triton.where) == (
        "given: TRITON_KERNELS_SRC_DIR",
        "cmake/external_projects/triton_kernels.cmake:17",
    )
    assert row(rows, "vllm", Fact.ARCH, "PYTORCH_ROCM_ARCH, split on semicolon").where == (
        "cmake/utils.cmake:474"
    )


def test_aiters_facts_are_read_in_what_its_setup_runs() -> None:
    """aiter's setup.py reads GPU_ARCHS in a module it imports, and runs a shell script
    that pip-installs amd-triton: preflight follows both, and the 7.0.2 pins answer each."""
    rows = check(pins_702(), TREES_702)
    assert [r for r in rows if r.verdict is not Verdict.OK] == []
    assert row(rows, "aiter", Fact.ARCH, "GPU_ARCHS, split on semicolon").where == (
        "aiter/jit/core.py:419"
    )
    triton = row(rows, "aiter", Fact.FETCH, ".github/scripts/install_triton.sh:pip:amd-triton")
    assert (triton.pins, triton.where) == (
        "not taken: run only when no triton is installed (setup.py, patched): the torch stack's is",
        ".github/scripts/install_triton.sh:14",
    )
    assert row(rows, "aiter", Fact.FETCH, "setup.py:pip:flydsl==0.1.6").where == "setup.py:64"


def test_a_fetch_in_a_script_the_build_runs_must_be_answered() -> None:
    rows = check(delete_toml(pins_702(), ["sources", "aiter", "skipped_fetches"]), TREES_702)
    fetches = [r for r in rows if r.source == "aiter" and r.fact is Fact.FETCH]
    assert [(r.upstream, r.verdict) for r in fetches] == [
        (".github/scripts/install_triton.sh:pip:amd-triton", Verdict.MISMATCH),
        ("setup.py:pip:flydsl==0.1.6", Verdict.MISMATCH),
    ]
    assert row(rows, "aiter", Fact.FETCH, "setup.py:pip:flydsl==0.1.6").pins == (
        "no pin gives it: mark it in [sources.aiter].skipped_fetches with why the build does "
        "not take it"
    )


def test_a_distribution_named_otherwise_than_the_checks_look_for_is_a_mismatch() -> None:
    rows = check(delete_toml(real_pins(), ["sources", "sgl_kernel", "dist"]))
    assert row(rows, "sgl_kernel", Fact.DIST, "sglang-kernel") == Row(
        "sgl_kernel", Fact.DIST, "sglang-kernel",
        'sgl_kernel; the checks look for it: set [sources.sgl_kernel].dist = "sglang-kernel"',
        Verdict.MISMATCH, "sgl-kernel/pyproject_rocm.toml:11",
    )  # fmt: skip
    error = preflight.verdict(rows)
    assert isinstance(error, PreflightError)
    assert str(error) == "preflight: 1 facts of the trees differ from the pins"


def test_a_fetch_the_build_would_make_with_the_network_off_is_a_mismatch() -> None:
    rows = check(delete_toml(real_pins(), ["sources", "vllm", "inputs"]))
    triton = row(rows, "vllm", Fact.FETCH, "https://github.com/triton-lang/triton.git v3.5.1")
    assert (triton.verdict, triton.pins) == (
        Verdict.MISMATCH,
        "no pin gives it: pin its tree as a source and set "
        "[sources.vllm.inputs].TRITON_KERNELS_SRC_DIR, or mark it in "
        "[sources.vllm].skipped_fetches",
    )


def test_a_given_tree_must_be_the_one_the_fetch_names() -> None:
    rows = check(edit_toml(real_pins(), ["sources", "triton_kernels", "tag"], "v3.6.0"))
    triton = row(rows, "vllm", Fact.FETCH, "https://github.com/triton-lang/triton.git v3.5.1")
    assert (triton.verdict, triton.pins) == (
        Verdict.MISMATCH,
        'given [sources.triton_kernels].tag is v3.6.0: pin "v3.5.1"',
    )


def test_a_mark_for_a_fetch_the_tree_does_not_make_is_stale() -> None:
    text = edit_toml(
        real_pins(), ["sources", "vllm", "skipped_fetches", "https://example.org/gone.git"],
        "no longer fetched",
    )  # fmt: skip
    assert row(check(text), "vllm", Fact.FETCH, "no such fetch").pins == (
        '[sources.vllm.skipped_fetches]."https://example.org/gone.git": remove it'
    )


def test_an_arch_list_joined_otherwise_than_the_build_splits_it_is_a_mismatch() -> None:
    text = edit_toml(real_pins(), ["sources", "causal_conv1d", "arch_separator"], "semicolon")
    conv = row(check(text), "causal_conv1d", Fact.ARCH, "HIP_ARCHITECTURES, split on comma")
    assert (conv.verdict, conv.pins) == (
        Verdict.MISMATCH,
        "joined by ';': set [sources.causal_conv1d].arch_separator = \"comma\"",
    )


def test_a_git_version_without_a_variable_the_build_reads_is_a_mismatch() -> None:
    text = edit_toml(real_pins(), ["sources", "sglang", "version_env"], ["SGLANG_VERSION"])
    found = row(
        check(text), "sglang", Fact.VERSION, "from git (setuptools_scm), 0.0.0.dev0 fallback"
    )
    assert (found.verdict, found.pins) == (
        Verdict.MISMATCH,
        "the tree has no .git: pin [sources.sglang].version and name one of "
        "SETUPTOOLS_SCM_PRETEND_VERSION, SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SGLANG in "
        "[sources.sglang].version_env",
    )


def test_a_pretend_variable_for_vllm_alone_is_a_mismatch() -> None:
    """vLLM's setup.py asks setuptools_scm.get_version() with no dist_name, which reads
    SETUPTOOLS_SCM_PRETEND_VERSION only: the _FOR_VLLM one gives it no version."""
    text = edit_toml(
        real_pins(), ["sources", "vllm", "version_env"], ["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM"]
    )
    found = row(check(text), "vllm", Fact.VERSION, "from git (setuptools_scm), no fallback")
    assert (found.verdict, found.pins) == (
        Verdict.MISMATCH,
        "the tree has no .git: pin [sources.vllm].version and name one of "
        "SETUPTOOLS_SCM_PRETEND_VERSION, VLLM_VERSION_OVERRIDE in [sources.vllm].version_env",
    )


def test_a_tree_that_cannot_be_read_is_unread_and_the_rest_still_shown(tmp_path: Path) -> None:
    real = pins.loads(real_pins(), "pins.toml")

    def fetch(name: str, _source: pins.GitSource) -> Checkout:
        return Checkout(TREES[name] if name != "verl" else tmp_path / "empty")

    rows = preflight.check(real, fetch, sorted(TREES))
    unread = [r for r in rows if r.verdict is Verdict.UNREAD]
    assert [(r.source, r.upstream) for r in unread] == [("verl", "tree not read")]
    assert unread[0].pins.startswith("source verl: docker/patches/verl/0001-rollout-rocm-engine")
    assert any(r.source == "vllm" and r.verdict is Verdict.OK for r in rows)
    error = preflight.verdict(rows)
    assert isinstance(error, Unchecked)
    assert str(error) == "preflight: 1 facts could not be read; see the rows marked unread"


def test_the_text_report_has_one_line_per_fact_and_the_counts() -> None:
    rows = [
        Row("vllm", Fact.DIST, "vllm", "vllm", Verdict.OK, "pyproject.toml:17"),
        Row("verl", Fact.PATH, "tree not read", "no network", Verdict.UNREAD),
    ]
    assert preflight.as_text(rows) == [
        "vllm  dist  vllm           ok        vllm  (pyproject.toml:17)",
        "verl  path  tree not read  unread    no network",
        "1 ok, 0 mismatch, 1 unread",
    ]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_answer_carries_the_verdict(fmt: str) -> None:
    rows = [Row("vllm", Fact.DIST, "vllm", "x", Verdict.MISMATCH)]
    answer = preflight.answer(rows, fmt)
    assert isinstance(answer.error, PreflightError)
    assert ('"verdict": "mismatch"' in answer.lines[0]) == (fmt == "json")


def test_the_demo_trees_carry_the_real_quirks_preflight_reads(tmp_path: Path) -> None:
    """The demo's upstreams, as the demo pins build them, read as the real trees do: an
    sgl-kernel named sglang-kernel, a vLLM that fetches triton_kernels unless given it, an
    aiter whose setup.py runs a script that pip-installs amd-triton."""
    demo = pins.load(ROOT / "demo" / "pins.toml")
    repos = {"sgl_kernel": "sglang", "triton_kernels": "triton"}

    def fetch(name: str, _source: pins.GitSource) -> Checkout:
        tree = tmp_path / "trees" / name
        for path, text in upstreams.histories()[repos.get(name, name)][0][1].items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)
        return Checkout(tree)

    names = ["causal_conv1d", "sgl_kernel", "sglang", "triton_kernels", "verl", "vllm"]
    rows = preflight.check(demo, fetch, names)
    assert [r for r in rows if r.verdict is not Verdict.OK] == []
    assert row(rows, "sgl_kernel", Fact.DIST, "sglang-kernel").pins == "sglang-kernel"
    fetches = [(r.upstream, r.pins) for r in rows if r.source == "vllm" and r.fact is Fact.FETCH]
    assert fetches == [
        ("http://127.0.0.1:28470/git/triton.git v3.5.1", "given: TRITON_KERNELS_SRC_DIR"),
        ("setup.py:triton_kernels", "given: TRITON_KERNELS_SRC_DIR"),
    ]
    demo702 = pins.load(ROOT / "demo" / "pins-rocm702.toml")
    rows = preflight.check(demo702, fetch, ["aiter"])  # its archs are recorded, not split
    triton = row(rows, "aiter", Fact.FETCH, ".github/scripts/install_triton.sh:pip:amd-triton")
    assert (triton.verdict, triton.where) == (Verdict.OK, ".github/scripts/install_triton.sh:8")


def test_a_rust_extension_is_a_fetch_cargo_makes() -> None:
    rows = check(real_pins())
    rust = row(rows, "vllm", Fact.FETCH, "setup.py:rust_extensions")
    assert (rust.verdict, rust.where) == (Verdict.OK, "setup.py:1159")
    # SGLang's gRPC module is in Rust too: its patch takes it out of the build
    assert not [r for r in rows if r.source == "sglang" and r.fact is Fact.FETCH]
    unpatched = edit_toml(real_pins(), ["sources", "sglang", "patches"], [
        "docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch",
    ])  # fmt: skip
    grpc = row(check(unpatched), "sglang", Fact.FETCH, "cargo: ../rust/sglang-grpc/Cargo.toml")
    assert (grpc.verdict, grpc.where) == (Verdict.MISMATCH, "python/pyproject.toml:212")


def test_upstream_sgl_kernel_takes_its_one_arch_from_amdgpu_target() -> None:
    # Without the pins' patch setup_rocm.py reads AMDGPU_TARGET, a name with no ARCH in it.
    unpatched = edit_toml(real_pins(), ["sources", "sgl_kernel", "patches"], [])
    kernel = row(check(unpatched), "sgl_kernel", Fact.ARCH, "AMDGPU_TARGET, split on unknown")
    assert (kernel.pins, kernel.verdict, kernel.where) == (
        "not given: add it to [sources.sgl_kernel].arch_env", Verdict.MISMATCH,
        "sgl-kernel/setup_rocm.py:67",
    )  # fmt: skip


def test_every_fetch_of_a_script_the_setup_runs_is_named_with_its_line() -> None:
    files = {
        "setup.py": (
            "import os, subprocess, sys\n"
            "here = os.path.dirname(__file__)\n"
            "PKG = 'helper==1.0'\n"
            "script = os.path.join(here, 'tools', 'get.sh')\n"
            "subprocess.check_call(['bash', script])\n"
            "subprocess.check_call([sys.executable, '-m', 'pip', 'install', PKG])\n"
            "subprocess.check_call([sys.executable, '-m', 'pip', 'uninstall', '-y', PKG])\n"
        ),
        "tools/get.sh": (
            "set -e\n"
            "pip uninstall -y old || true\n"
            'if [ -n "$X" ]; then git clone https://example.org/a.git deps/a; fi\n'
            "curl -fsSL https://example.org/b.tar.gz | tar xz\n"
            "python3 -m pip install --index-url https://example.org/simple c d==2\n"
            "wget -q https://example.org/e.bin\n"
        ),
    }
    found = treefacts.command_fetches(files.get, "setup.py")
    assert [(f.what, str(f.where)) for f in found] == [
        ("tools/get.sh:git:https://example.org/a.git", "tools/get.sh:3"),
        ("tools/get.sh:curl:https://example.org/b.tar.gz", "tools/get.sh:4"),
        ("tools/get.sh:pip:c,d==2", "tools/get.sh:5"),
        ("tools/get.sh:wget:https://example.org/e.bin", "tools/get.sh:6"),
        ("setup.py:pip:helper==1.0", "setup.py:6"),
    ]


def test_a_script_nested_past_what_is_read_gives_no_fetch_and_no_traceback() -> None:
    files = {"deep.sh": "( " * 200 + "curl -O https://example.org/x" + " )" * 200 + "\n"}
    assert treefacts.shell_fetches(files.get, "deep.sh") == []


def test_a_build_requirement_a_pinned_tool_does_not_meet_is_a_mismatch() -> None:
    """pip's --no-build-isolation neither installs nor checks [build-system] requires: the
    build imports what the image has, and aiter's asks for a pybind11 the pins must give."""
    rows = check(pins_702(), TREES_702)
    assert row(rows, "aiter", Fact.REQUIRES, "pybind11>=3.0.1") == Row(
        "aiter", Fact.REQUIRES, "pybind11>=3.0.1", "3.0.4 in [python.tools].pybind11",
        Verdict.OK, "pyproject.toml:3",
    )  # fmt: skip
    old = check(edit_toml(pins_702(), ["python", "tools", "pybind11"], "2.13.6"), TREES_702)
    assert row(old, "aiter", Fact.REQUIRES, "pybind11>=3.0.1").pins == (
        "2.13.6 in [python.tools].pybind11: pin one that meets pybind11>=3.0.1"
    )
    assert isinstance(preflight.verdict(old), PreflightError)


def test_a_pep_639_license_needs_a_setuptools_that_reads_it() -> None:
    rows = check(edit_toml(real_pins(), ["python", "tools", "setuptools"], "75.1.0"))
    vllm = [(r.upstream, r.pins, r.where) for r in rows
            if r.source == "vllm" and r.fact is Fact.REQUIRES]  # fmt: skip
    assert vllm == [
        ("setuptools>=77.0.3,<81.0.0",
         "75.1.0 in [python.tools].setuptools: pin one that meets setuptools>=77.0.3,<81.0.0",
         "pyproject.toml:7"),
        ("setuptools-scm>=8.0", "10.2.0 in [python.tools].setuptools-scm", "pyproject.toml:8"),
        ("setuptools>=77.0.0 (a PEP 639 license)",
         "75.1.0 in [python.tools].setuptools: pin one that meets setuptools>=77.0.0",
         "pyproject.toml:19"),
    ]  # fmt: skip


def test_a_tool_left_for_the_lock_is_unread_until_it_is_pinned() -> None:
    rows = check(edit_toml(real_pins(), ["python", "tools", "setuptools"], ""))
    unread = {(r.source, r.upstream, r.pins) for r in rows if r.verdict is Verdict.UNREAD}
    wait = "[python.tools].setuptools not pinned yet: `doit lock` pins it"
    assert unread == {
        ("sglang", "setuptools>=61.0", wait),
        ("sgl_kernel", "setuptools>=75.0", wait),  # its pyproject_rocm.toml
        ("verl", "setuptools>=61.0", wait),
        ("vllm", "setuptools>=77.0.3,<81.0.0", wait),
        ("vllm", "setuptools>=77.0.0 (a PEP 639 license)", wait),
    }
    assert isinstance(preflight.verdict(rows), Unchecked)


def test_build_requires_that_is_not_a_list_names_no_requirement() -> None:
    """A string where pyproject's [build-system] requires wants a list: pip refuses the
    build in its own words, and preflight reads no requirement out of its letters."""
    text = '[build-system]\nrequires = "setuptools>=61"\n'
    assert treefacts.build_requirements({"pyproject.toml": text}.get) == []


HISTORY = ROOT / "tests" / "fixtures" / "history" / "vllm"


def vllm_at(commit: str, into: Path) -> Path:
    """The build files of rasmith/vllm at ``commit`` (tests/fixtures/history), as a tree."""
    index = tomli.loads((HISTORY / "index.toml").read_text())
    for path, blob in index["commits"][commit].items():
        (into / path).parent.mkdir(parents=True, exist_ok=True)
        (into / path).write_bytes((HISTORY / "blobs" / blob).read_bytes())
    return into


PIN, HEAD = "18d87a87dc39c1a50f452b218fdcc3aeec48d18e", "397094da1768c7a6f29dfa4f70079d793ac747df"
CUMEM, PAD, ORACLE = (
    "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch",
    "docker/patches/vllm/0002-moe-pad-weight-in-place.patch",
    "docker/patches/vllm/0003-moe-oracle-keep-weight-storage.patch",
)


def test_at_the_pin_every_patch_applies_to_the_forks_files(tmp_path: Path) -> None:
    source = pins.loads(real_pins(), "pins.toml").sources["vllm"]
    statuses = patches.check(vllm_at(PIN, tmp_path), source.patches)
    assert [(s.patch, s.status) for s in statuses] == [
        (CUMEM, Outcome.APPLIES), (PAD, Outcome.APPLIES), (ORACLE, Outcome.APPLIES)
    ]  # fmt: skip


def test_at_the_forks_head_the_patches_and_the_one_moved_fetch_are_said(tmp_path: Path) -> None:
    """The head of the vLLM fork (397094da), its files as committed in the history fixtures,
    read as `doit bump:vllm` reads them: each patch, then the facts of the tree the patches
    that still apply make. Its CMake declares eleven fetches (CUDA's and the CPU build's among
    them) and takes one on ROCm, triton_kernels, moved there to ROCm's fork: that one is the
    mismatch. Nothing CUDA-only is
    demanded, no mark is stale, nothing undecided."""
    head = vllm_at(HEAD, tmp_path)
    source = pins.loads(real_pins(), "pins.toml").sources["vllm"]
    statuses = patches.check(head, source.patches)
    oracle = "vllm/model_executor/layers/fused_moe/oracle/unquantized.py"
    assert [(s.patch, s.status, s.detail) for s in statuses] == [
        (CUMEM, Outcome.CONFLICTS,
         "csrc/cumem_allocator.cpp: hunk 1 (@@ -212,6 +212,14 @@) does not apply"),
        (PAD, Outcome.APPLIES, ""),
        (ORACLE, Outcome.CONFLICTS, f"{oracle}: hunk 1 (@@ -323,7 +323,7 @@) does not apply"),
    ]  # fmt: skip
    text = edit_toml(real_pins(), ["sources", "vllm", "patches"], [PAD])
    fetches = [r for r in check(text, {**TREES, "vllm": head}) if r.fact is Fact.FETCH]
    vllm = [(r.upstream, r.verdict, r.pins) for r in fetches if r.source == "vllm"]
    assert [row for row in vllm if row[1] is not Verdict.OK] == [
        (
            "https://github.com/ROCm/triton.git 0f380657dbf3ee86eb57558ff71df24f03b5d4e7",
            Verdict.MISMATCH,
            "given [sources.triton_kernels].repo is https://github.com/triton-lang/triton: pin "
            '"https://github.com/ROCm/triton.git" at 0f380657dbf3ee86eb57558ff71df24f03b5d4e7',
        )
    ]
    assert [r for r in vllm if "cannot decide" in r[0] or r[0] == "no such fetch"] == []


def test_a_fetch_under_a_condition_the_rocm_build_cannot_decide_is_named_not_checked() -> None:
    files = {
        "setup.py": 'import subprocess\nsubprocess.check_call(["cmake", "."])\n',
        "CMakeLists.txt": "if($ENV{FETCH_EXTRAS})\n"
        "  FetchContent_Declare(x GIT_REPOSITORY https://example.org/x.git GIT_TAG v1)\n"
        "  FetchContent_MakeAvailable(x)\nendif()\n",
    }
    rows = preflight.undecided_rows("vllm", files.get, ".", cmake.rocm(("gfx942",)))
    assert [(r.upstream, r.pins, r.verdict, r.where) for r in rows] == [
        (
            "cannot decide if($ENV{FETCH_EXTRAS}) for the ROCm build",
            "fetches under it are not checked",
            Verdict.UNREAD,
            "CMakeLists.txt:1",
        )
    ]
