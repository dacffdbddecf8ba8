"""The history sampling (benchmarks/history.py) and the ccache hit reading
(benchmarks/ccache_history.py): weekly picks, includes and their closure on a real git
repository, the hit count, and the build-file readers on excerpts of the real files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import ccache_history as ch
import history
import pytest
from conftest import ROOT
from servers import commit, git, make_repo

FIXTURES = ROOT / "tests" / "fixtures" / "history"
UPSTREAM_VLLM = ROOT / "tests" / "fixtures" / "upstream" / "vllm-project" / "vllm"
MONDAY = datetime(2026, 6, 1, 12, tzinfo=UTC)  # ISO week 23


def commits(*days: float) -> list[history.Commit]:
    return [history.Commit(f"c{i}", MONDAY + timedelta(days=d)) for i, d in enumerate(days)]


# --- picking commits -----------------------------------------------------------------------


def test_weekly_takes_the_pin_then_each_weeks_last_commit() -> None:
    # Days after a Monday: the pin (0), week 23 ends at 3, week 24 at 9, week 26 at 22;
    # the commit at 8.5 is out of date order, and the week's last by date is still 9.
    found = history.weekly(commits(0, 1, 3, 7, 9, 8.5, 22))
    assert [c.sha for c in found] == ["c0", "c2", "c4", "c6"]


def test_weeks_are_counted_in_utc() -> None:
    # Sunday 23:30 at UTC-5 is Monday in UTC: the next week.
    late = datetime(2026, 6, 7, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    history_ = [*commits(0, 5), history.Commit("late", late)]
    assert [c.sha for c in history.weekly(history_)] == ["c0", "c1", "late"]


def test_a_history_of_few_weeks_is_spread_evenly_instead() -> None:
    rule, found = history.pick(commits(*range(10)), at_least=4)  # two weeks
    assert rule == history.EVEN
    assert [c.sha for c in found] == ["c0", "c3", "c6", "c9"]


def test_enough_weeks_keep_the_weekly_rule() -> None:
    rule, found = history.pick(commits(0, 7, 14, 21), at_least=4)
    assert (rule, len(found)) == (history.WEEKLY, 4)


def test_a_history_shorter_than_wanted_is_taken_whole() -> None:
    assert history.evenly(commits(0, 1), 5) == commits(0, 1)


def test_the_choice_reads_back_from_its_toml(tmp_path: Path) -> None:
    found = commits(0, 7)
    choice = history.Choice("vllm", "o/vllm", "main", "c0", "c1", history.WEEKLY, ("c0", "c1"))
    when = {c.sha: c.date for c in found}
    text = history.HEADER + "\n" + history.section(choice, when, "# one week")
    (tmp_path / "h.toml").write_text(text)
    assert '"c1",  # 2026-06-08 12:00 UTC' in text
    assert history.load(tmp_path / "h.toml") == {"vllm": choice}


def test_a_fork_is_sampled_from_its_pin_to_its_head(tmp_path: Path) -> None:
    repo = tmp_path / "fork"
    pin = make_repo(repo, {"a": "1"})
    for n in range(5):
        commit(repo, {"a": str(n + 2)}, f"change {n}")
    fork = history.Fork("x", "o/x", pin, "main", at_least=4)
    choice, found = history.choose(fork, repo / ".git")
    assert len(found) == 6
    assert choice.commits[0] == pin
    assert choice.head == choice.commits[-1] == git(repo, "rev-parse", "HEAD")
    # Six commits made within a second: one week (two at most), fewer than four.
    assert (choice.rule, len(choice.commits)) == (history.EVEN, 4)


def test_a_branch_that_does_not_hold_the_pin_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "fork"
    make_repo(repo, {"a": "1"})
    later = commit(repo, {"a": "2"}, "later")
    git(repo, "checkout", "--quiet", "--orphan", "other")
    commit(repo, {"b": "1"}, "unrelated")
    fork = history.Fork("x", "o/x", later, "other", at_least=3)
    with pytest.raises(history.HistoryError, match="does not descend from the pin"):
        history.head(repo / ".git", fork)


# --- includes ------------------------------------------------------------------------------

ROCM_ONLY = b"""#pragma once
#include <torch/all.h>
#ifdef USE_ROCM
  #include "amd/quant.cuh"
#else
  #include "nvidia/quant.cuh"
#endif
#if !defined(USE_ROCM) && defined(ENABLE_FP8)
#include "fp8_cuda.h"
#elif defined(SOMETHING_ELSE)
#include "maybe.h"
#endif
#ifndef GUARD_H  // an include guard: not decided, followed
#include "guarded.h"
#endif
"""


def names(found: tuple[ch.Include, ...]) -> list[str]:
    return [include.name for include in found]


def test_includes_under_a_branch_rocm_rules_out_are_left_out() -> None:
    found = ch.includes(ROCM_ONLY, ch.HIP_DEFINES)
    assert names(found) == ["torch/all.h", "amd/quant.cuh", "maybe.h", "guarded.h"]
    assert found[0].angle
    assert not found[1].angle


def test_with_no_macro_known_every_include_is_followed() -> None:
    assert len(ch.includes(ROCM_ONLY, frozenset())) == 6


@pytest.mark.parametrize(
    ("includer", "name", "angle", "expected"),
    [
        ("csrc/moe/a.cu", "b.h", False, "csrc/moe/b.h"),  # beside the includer first
        ("csrc/moe/a.cu", "core/c.h", False, "csrc/core/c.h"),  # then the include folders
        ("csrc/moe/a.cu", "../core/c.h", False, "csrc/core/c.h"),
        ("csrc/moe/a.cu", "b.h", True, None),  # <...>: include folders only
        ("csrc/moe/a.cu", "torch/all.h", True, None),  # outside the repository
    ],
)
def test_an_include_resolves_as_the_compiler_searches(
    includer: str, name: str, angle: bool, expected: str | None
) -> None:
    tree = {"csrc/moe/a.cu": "1", "csrc/moe/b.h": "2", "csrc/core/c.h": "3"}
    assert ch.resolve(ch.Include(name, angle), includer, tree, ("csrc",)) == expected


def bump(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository of two commits: a header deep in a.cu's closure changes, b.cu does
    not include it, c.cu is new."""
    repo = tmp_path / "upstream"
    first = make_repo(
        repo,
        {
            "csrc/a.cu": '#include "common.h"\nint a;\n',
            "csrc/b.cu": "#include <torch/all.h>\nint b;\n",
            "csrc/common.h": '#include "deep/x.h"\n',
            "csrc/deep/x.h": "int x;\n",
        },
    )
    second = commit(repo, {"csrc/deep/x.h": "int x, y;\n", "csrc/c.cu": "int c;\n"}, "bump")
    return repo / ".git", first, second


def test_a_unit_whose_closure_changed_misses_and_the_others_hit(tmp_path: Path) -> None:
    git_dir, first, second = bump(tmp_path)
    with ch.Objects(git_dir) as objects:
        files = ch.Files(objects)
        units = []
        for sha, paths in ((first, ("a", "b")), (second, ("a", "b", "c"))):
            tree = objects.tree(sha)
            keys = {p: ch.Source(f"csrc/{p}.cu", ch.HIP_DEFINES, ()) for p in paths}
            units.append(files.units(tree, keys, ("csrc",)))
    assert {path for path, _ in units[0]["a"].files} == {
        "csrc/a.cu",
        "csrc/common.h",
        "csrc/deep/x.h",
    }
    old, new = units
    assert ch.compare(old, new) == ch.Counts(3, hits=1, added=1, changed=1, moved=0, flag_hits=1)
    assert ch.causes(old, new) == (("csrc/deep/x.h", 1),)


def test_a_blob_the_mirror_lacks_reads_as_none(tmp_path: Path) -> None:
    git_dir, _, _ = bump(tmp_path)
    with ch.Objects(git_dir) as objects:
        assert objects.blob("0" * 40) is None
        assert objects.blob(git(git_dir.parent, "rev-parse", "HEAD:csrc/c.cu")) == b"int c;\n"


def unit(key: str, *files: tuple[str, str], flags: tuple[str, ...] = ()) -> ch.Unit:
    return ch.Unit(key, frozenset(files), files[0][1], flags)


def test_the_same_files_under_another_key_are_a_miss_that_moved() -> None:
    old = {"x:a.cu": unit("x:a.cu", ("a.cu", "1"), ("h.h", "2"))}
    new = {"y:moved/a.cu": unit("y:moved/a.cu", ("moved/a.cu", "1"), ("moved/h.h", "2"))}
    assert ch.compare(old, new) == ch.Counts(1, hits=0, added=1, changed=0, moved=1, flag_hits=0)
    assert ch.compare(old, new).share == 0.0


def test_a_hit_whose_flags_changed_counts_only_as_a_hit() -> None:
    old = {"x:a.cu": unit("x:a.cu", ("a.cu", "1"), flags=("-DV=1",))}
    new = {"x:a.cu": unit("x:a.cu", ("a.cu", "1"), flags=("-DV=2",))}
    counts = ch.compare(old, new)
    assert (counts.share, counts.flag_share) == (1.0, 0.0)


# --- CMake, through rocmgraph's evaluator --------------------------------------------------


def sources(found: ch.Reading) -> dict[str, tuple[str, ...]]:
    return {target.name: tuple(dict.fromkeys(target.sources)) for target in found.targets}


def test_the_rocm_lists_of_the_real_cmakelists_excerpt() -> None:
    # The real file's find_package(Torch), above the excerpt, is what tells it HIP.
    text = "find_package(Torch REQUIRED)\n"
    text += (FIXTURES / "vllm_CMakeLists_excerpt.txt").read_text()
    found = ch.read_cmake({"CMakeLists.txt": text}.get)
    assert sources(found) == {
        "spinloop": ("csrc/spinloop.cpp",),
        "_C": (
            "csrc/quantization/activation_kernels.cu",
            "csrc/torch_bindings.cpp",
            "csrc/custom_quickreduce.cu",
            "csrc/cuda_view.cu",
            "csrc/libtorch_stable/cuda_utils_kernels.cu",
        ),
        "_moe_C": (
            "csrc/moe/torch_bindings.cpp",
            "csrc/moe/moe_align_sum_kernels.cu",
            "csrc/moe/topk_softmax_kernels.cu",
            "csrc/moe/topk_softplus_sqrt_kernels.cu",
        ),
        "_rocm_C": (
            "csrc/rocm/torch_bindings.cpp",
            "csrc/rocm/skinny_gemms.cu",
            "csrc/rocm/attention.cu",
        ),
    }
    assert [t.language for t in found.targets] == ["CXX", "HIP", "HIP", "HIP"]
    assert found.notes == ()  # every branch the excerpt takes or skips is decided


def test_the_whole_cmakelists_at_the_pin_with_the_files_it_includes() -> None:
    def read(path: str) -> str | None:
        file = UPSTREAM_VLLM / path
        return file.read_text() if file.is_file() else None

    found = ch.read_cmake(read)
    counts = {name: len(paths) for name, paths in sources(found).items()}
    assert counts == {
        "spinloop": 1,
        "cumem_allocator": 1,
        "_C": 5,
        "_C_stable_libtorch": 25,
        "_moe_C": 4,
        "_rocm_C": 3,
    }
    assert found.files == (
        "CMakeLists.txt",
        "cmake/utils.cmake",
        "cmake/external_projects/triton_kernels.cmake",
    )
    assert [note.split(": ", 1)[1] for note in found.notes] == [
        "triton_kernels is fetched (made available): not read"
    ]


UNDECIDED = """
set(SRCS "csrc/a.cu")
if(SOME_OPTION)
  list(APPEND SRCS "csrc/b.cu")
endif()
define_extension_target(_x LANGUAGE HIP SOURCES ${SRCS} csrc/c.cu)
if(SOME_OPTION)
  define_extension_target(_y LANGUAGE HIP SOURCES csrc/y.cu)
endif()
target_sources(_x PRIVATE csrc/d.cu)
"""


def test_what_the_evaluator_cannot_decide_is_said_not_guessed() -> None:
    found = ch.read_cmake({"CMakeLists.txt": UNDECIDED}.get)
    assert sources(found) == {"_x": ("csrc/c.cu",)}  # SRCS may or may not hold b.cu
    assert found.notes == (
        "CMakeLists.txt:10: target_sources(_x) is not read",
        "CMakeLists.txt:6: _x: a source is not known",
        "CMakeLists.txt:8: _y is defined under an undecided condition"
        " (CMakeLists.txt:7: if(SOME_OPTION))",
    )


HIPIFIED = """
function(hipify_sources_target OUT_SRCS NAME ORIG_SRCS)
  set(${OUT_SRCS} ${CMAKE_CURRENT_BINARY_DIR}/csrc/hip_view.hip PARENT_SCOPE)
endfunction()
hipify_sources_target(HIP_SRCS _skinny "csrc/cuda_view.cu")
add_library(_skinny OBJECT ${HIP_SRCS})
add_library(torch_alias ALIAS torch)
set_source_files_properties(${HIP_SRCS} PROPERTIES LANGUAGE HIP)
"""


def test_an_add_library_of_hipified_copies_compiles_their_sources() -> None:
    found = ch.read_cmake({"CMakeLists.txt": HIPIFIED}.get)
    assert sources(found) == {"_skinny": ("csrc/cuda_view.cu",)}
    assert found.flags["_skinny"] == ("add_library(OBJECT)",)
    assert found.flags["csrc/cuda_view.cu"] == (
        "set_source_files_properties(/build/csrc/hip_view.hip PROPERTIES LANGUAGE HIP)",
    )


# --- sgl-kernel's setup_rocm.py ------------------------------------------------------------


def test_setup_rocm_sources_and_include_dirs_from_the_real_excerpt() -> None:
    setup = ch.read_setup((FIXTURES / "sglang_setup_rocm_excerpt.py.txt").read_text())
    assert len(setup.sources) == 16
    assert setup.sources[0] == "csrc/allreduce/custom_all_reduce.hip"
    assert setup.include_dirs == ("./include", "./include/impl", "./csrc")
    assert setup.notes == ()


def test_setup_rocm_lists_changed_elsewhere_are_noted() -> None:
    text = (
        'sources = ["a.cu", helper()]\n'
        'include_dirs = [root / "include"]\n'
        'if arch == "gfx1250":\n    sources += ["b.cu"]\n'
        "sources.append('c.cu')\n"
        "CUDAExtension(name='x', sources=sources + extra, include_dirs=include_dirs)\n"
    )
    setup = ch.read_setup(text)
    assert setup.sources == ("a.cu",)
    assert setup.notes == (
        "line 1: an element of `sources` is not read",
        "line 4: `sources` is written again",
        "line 5: `sources.append(...)` is not read",
        "line 6: an extension's `sources=` is not the list",
    )


def test_sgl_kernel_is_found_where_it_moved_and_never_in_two_places() -> None:
    moved = {"python/k/aot/setup_rocm.py": "1", "python/k/aot/pyproject_rocm.toml": "2"}
    assert ch.kernel_root(moved) == ("python/k/aot", ())
    both = {**moved, "sgl-kernel/setup_rocm.py": "3", "sgl-kernel/pyproject_rocm.toml": "4"}
    root, notes = ch.kernel_root(both)
    assert root is None
    assert "2 folders" in notes[0]


def test_a_note_seen_at_the_commit_before_is_counted_not_repeated() -> None:
    when = {"a" * 40: MONDAY, "b" * 40: MONDAY}
    builds = [
        ch.Build(
            "vllm", sha, {}, (), (f"CMakeLists.txt:{n}: return() under an undecided",), frozenset()
        )
        for n, sha in enumerate(when)
    ]
    lines = list(ch.reading_lines(builds, when))
    assert [line.strip() for line in lines[1:]] == [
        "undecided: CMakeLists.txt:0: return() under an undecided",
        "vllm bbbbbbbbbb 2026-06-01: 0 units",
        "(and 1 undecided as at the commit before)",
    ]


FLAGS = """
set(CMAKE_HIP_FLAGS "${CMAKE_HIP_FLAGS} -Wno-unused-result")
define_extension_target(_x LANGUAGE HIP SOURCES csrc/a.cu csrc/b.cu COMPILE_FLAGS -O3)
target_compile_definitions(_x PRIVATE TORCH_TARGET_VERSION=0x020B)
set_source_files_properties(csrc/b.cu PROPERTIES COMPILE_FLAGS -O1)
if(VLLM_GPU_LANG STREQUAL "CUDA")
  target_compile_definitions(_x PRIVATE CUDA_ONLY)
endif()
if(SOME_OPTION)
  target_compile_options(_x PRIVATE -g)
endif()
"""


def test_flags_are_read_per_target_and_per_source() -> None:
    found = ch.read_cmake({"CMakeLists.txt": 'set(VLLM_GPU_LANG "HIP")' + FLAGS}.get)
    assert found.flags[""] == ("set(CMAKE_HIP_FLAGS  -Wno-unused-result)",)
    assert found.flags["_x"] == (
        "define_extension_target(LANGUAGE HIP COMPILE_FLAGS -O3)",
        "target_compile_definitions(_x PRIVATE TORCH_TARGET_VERSION=0x020B)",
        "undecided: target_compile_options(_x PRIVATE -g)",
    )
    assert found.flags["csrc/b.cu"] == (
        "set_source_files_properties(csrc/b.cu PROPERTIES COMPILE_FLAGS -O1)",
    )
