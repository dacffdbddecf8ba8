"""The CMake evaluator (rocmgraph.trees.cmake): its tokenizer and condition grammar with
CMake's own semantics, and vLLM's real history run as the ROCm build runs it, against what
real CMake fetched (tests/fixtures/history/vllm/expected.toml)."""

from __future__ import annotations

import buildfiles
import pytest
import tomli
from conftest import ROOT

from rocmgraph.trees import cmake, treefacts
from rocmgraph.trees.cmake import UNKNOWN, Arg, Kind, Operand, Taken

EXPECTED = ROOT / "tests" / "fixtures" / "history" / "vllm" / "expected.toml"
ROCM = cmake.rocm(cmake.ROCM_ARCHS, ("TRITON_KERNELS_SRC_DIR", "TORCH_NIGHTLY"))


# ---------------------------------------------------------------- the tokenizer


def test_commands_are_read_with_their_lines_and_comments_left_out() -> None:
    text = 'set(A 1) # a comment\n#[[ a bracket\ncomment ]]\nIF (A)\n  message("x")\nendif()\n'
    found = cmake.tokenize(text)
    assert [(c.name, c.line) for c in found] == [("set", 1), ("if", 4), ("message", 5),
                                                 ("endif", 6)]  # fmt: skip
    assert found[1].args == (Arg("A", Kind.UNQUOTED),)


def test_quoted_bracket_and_unquoted_arguments() -> None:
    (command,) = cmake.tokenize('f("a \\"b\\" c" [==[x ]] "y"]==] d;e ${V} (g))')
    assert command.args == (
        Arg('a \\"b\\" c', Kind.QUOTED),
        Arg('x ]] "y"', Kind.BRACKET),
        Arg("d;e", Kind.UNQUOTED),
        Arg("${V}", Kind.UNQUOTED),
        Arg("(", Kind.UNQUOTED),
        Arg("g", Kind.UNQUOTED),
        Arg(")", Kind.UNQUOTED),
    )


def test_a_parenthesis_never_closed_is_a_syntax_problem() -> None:
    with pytest.raises(cmake.SyntaxProblem, match="line 1: '\\(' never closed"):
        cmake.tokenize("set(A\n")


def test_references_expand_nested_and_from_the_environment() -> None:
    names = {"A": "x", "B": "A", "x": "deep"}

    def lookup(name: str) -> cmake.Value:
        return names.get(name, UNKNOWN)

    def env(name: str) -> cmake.Value:
        return {"HOME": "/root"}.get(name, UNKNOWN)

    assert cmake.expand("${A}-${${B}}-${${A}}", lookup, env) == "x-x-deep"
    assert cmake.expand("$ENV{HOME}/a\\;b", lookup, env) == "/root/a\x00b"
    assert cmake.expand("${NOPE}", lookup, env) is UNKNOWN
    assert cmake.split_list("a;b;;c\x00d") == ["a", "b", "c;d"]


# ---------------------------------------------------------------- conditions


def truth(text: str, variables: dict[str, cmake.Value] | None = None) -> cmake.Truth:
    """if(<text>) with ``variables`` set; any other variable never set."""
    known = variables or {}
    (command,) = cmake.tokenize(f"if({text})")
    context = cmake.Context(
        variable=known.get,
        env={"SET": "1", "UNSET": None}.get,
        exists=lambda path: True if path == "/src/here" else UNKNOWN,
        command=lambda name: name == "set",
    )
    operands = [
        Operand(a.text if a.kind is not Kind.UNQUOTED else a.text.strip(), a.kind)
        for a in command.args
    ]
    return cmake.condition(operands, context)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ON", True), ("yes", True), ("Y", True), ("2", True), ("0.5", True),
        ("OFF", False), ("no", False), ("IGNORE", False), ("X-NOTFOUND", False), ("0", False),
        ('""', False), ('"text"', False), ("V", True), ("EMPTY", False), ("NEVER", UNKNOWN),
    ],
)  # fmt: skip
def test_constants_and_variables_are_true_as_cmake_says(text: str, expected: object) -> None:
    assert truth(text, {"V": "hello", "EMPTY": "off"}) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('L STREQUAL "HIP"', True), ("L STREQUAL CUDA", False), ("2 LESS 10", True),
        ("10 GREATER_EQUAL 10", True), ("3.26.4 VERSION_LESS 3.26.10", True),
        ("1.2 VERSION_EQUAL 1.2.0", True), ('"x86_64" MATCHES "x86_64|amd64"', True),
        ("HIP IN_LIST LANGS", True), ("CUDA IN_LIST LANGS", False), ("a STRLESS b", True),
        ("abc EQUAL 1", False), ("NEVER STREQUAL x", False), ("U STREQUAL x", UNKNOWN),
    ],
)  # fmt: skip
def test_binary_tests(text: str, expected: object) -> None:
    known: dict[str, cmake.Value] = {"L": "HIP", "LANGS": "CXX;HIP"}
    assert truth(text, {**known, "U": UNKNOWN}) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DEFINED L", True), ("DEFINED NEVER", UNKNOWN), ("DEFINED ENV{SET}", True),
        ("DEFINED ENV{UNSET}", False), ("COMMAND set", True), ("COMMAND nope", False),
        ("EXISTS /src/here", True), ("EXISTS /opt/rocm", UNKNOWN), ("IS_ABSOLUTE /a", True),
        ("TARGET t", UNKNOWN),
    ],
)  # fmt: skip
def test_unary_tests(text: str, expected: object) -> None:
    assert truth(text, {"L": "HIP"}) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NOT OFF", True), ("NOT NEVER", UNKNOWN), ("OFF AND NEVER", False),
        ("ON OR NEVER", True), ("ON AND NEVER", UNKNOWN), ("NOT (ON AND OFF)", True),
        # AND and OR at one level, left to right (CMake's docs; cmake -P agrees):
        ("ON OR ON AND OFF", False), ("NOT L STREQUAL CUDA", True),
    ],
)  # fmt: skip
def test_logic_is_three_valued_with_cmakes_precedence(text: str, expected: object) -> None:
    assert truth(text, {"L": "HIP"}) is expected


# ---------------------------------------------------------------- running files


def run(files: dict[str, str], facts: cmake.Facts = ROCM) -> cmake.Evaluation:
    return cmake.evaluate(files.get, ".", facts)


def test_only_the_branch_the_facts_decide_fetches_and_the_last_set_there_counts() -> None:
    evaluation = run(
        {
            "CMakeLists.txt": """
include(FetchContent)
if(VLLM_TARGET_DEVICE STREQUAL "rocm")
  set(GIT https://github.com/ROCm/triton.git)
else()
  set(GIT https://github.com/triton-lang/triton.git)
  FetchContent_Declare(cuda GIT_REPOSITORY https://example.org/cuda.git)
  FetchContent_MakeAvailable(cuda)
endif()
FetchContent_Declare(tk GIT_REPOSITORY ${GIT} GIT_TAG abc)
FetchContent_MakeAvailable(tk)
FetchContent_Declare(never GIT_REPOSITORY https://example.org/never.git)
"""
        }
    )
    assert [(f.name, f.url, f.tag, f.line, f.how, f.taken) for f in evaluation.fetches] == [
        ("tk", "https://github.com/ROCm/triton.git", "abc", 10, "made available", Taken.TAKEN)
    ]


def test_a_fetch_under_an_undecided_condition_is_undecided_and_the_condition_recorded() -> None:
    evaluation = run(
        {
            "CMakeLists.txt": """
if(SOMETHING_NEVER_SET)
  FetchContent_Populate(dg GIT_REPOSITORY https://example.org/dg.git GIT_TAG 1)
endif()
"""
        }
    )
    (fetched,) = evaluation.fetches
    unknown = cmake.Unknown("CMakeLists.txt", 2, "SOMETHING_NEVER_SET")
    assert (fetched.taken, fetched.how, fetched.under) == (Taken.UNDECIDED, "populated", unknown)
    assert evaluation.unknowns == (unknown,)
    assert str(unknown) == "CMakeLists.txt:2: if(SOMETHING_NEVER_SET)"


def test_functions_macros_includes_and_loops() -> None:
    evaluation = run({
        "CMakeLists.txt": """
include(${CMAKE_CURRENT_LIST_DIR}/cmake/f.cmake)
function(fetch_it name url)
  cmake_parse_arguments(ARG "" "TAG" "" ${ARGN})
  set(OUT_${name} ${url} PARENT_SCOPE)
  FetchContent_Declare(${name} GIT_REPOSITORY ${url} GIT_TAG ${ARG_TAG})
  FetchContent_MakeAvailable(${name})
endfunction()
foreach(n IN ITEMS a b)
  fetch_it(${n} https://example.org/${n}.git TAG v1)
endforeach()
twice(COUNT extra)
if(NOT COUNT EQUAL 2 OR NOT OUT_b STREQUAL "https://example.org/b.git")
  message(FATAL_ERROR "wrong")
endif()
""",
        "cmake/f.cmake": "macro(twice out)\n list(LENGTH ARGV n)\n set(${out} ${n})\nendmacro()\n",
    })  # fmt: skip
    assert evaluation.stopped == ""
    assert [(f.name, f.url, f.tag) for f in evaluation.taken] == [
        ("a", "https://example.org/a.git", "v1"), ("b", "https://example.org/b.git", "v1")
    ]  # fmt: skip
    assert evaluation.files == ("CMakeLists.txt", "cmake/f.cmake")


def test_lists_are_filtered_by_regex_as_cmake_filters_them() -> None:
    evaluation = run({
        "CMakeLists.txt": """
set(SRCS a.cu b.cpp c.hip)
list(FILTER SRCS EXCLUDE REGEX "\\.(cpp|hip)$")
set(ARCHES gfx942 gfx1250)
list(FILTER ARCHES INCLUDE REGEX "gfx9")
if(NOT SRCS STREQUAL "a.cu" OR NOT ARCHES STREQUAL "gfx942")
  message(FATAL_ERROR "wrong")
endif()
"""
    })  # fmt: skip
    assert (evaluation.stopped, evaluation.unknowns) == ("", ())


def test_watched_calls_are_recorded_with_their_arguments_as_the_command_sees_them() -> None:
    evaluation = cmake.evaluate(
        {
            "CMakeLists.txt": """
function(define_target name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_library(${name} "${ARG_SOURCES}")
endfunction()
set(SRCS a.cu b.cu)
define_target(_x SOURCES ${SRCS} "c d.cu")
if(SOMETHING_NEVER_SET)
  define_target(_y SOURCES ${NEVER_SET})
endif()
"""
        }.get,
        ".",
        ROCM,
        watch={"define_target", "add_library"},
    )
    shown = [(c.name, c.args, c.line, c.taken, c.under) for c in evaluation.calls]
    unknown = cmake.Unknown("CMakeLists.txt", 8, "SOMETHING_NEVER_SET")
    assert shown == [
        ("define_target", ("_x", "SOURCES", "a.cu", "b.cu", "c d.cu"), 7, Taken.TAKEN, None),
        ("add_library", ("_x", "a.cu;b.cu;c d.cu"), 4, Taken.TAKEN, None),  # quoted: one
        ("define_target", ("_y", "SOURCES", UNKNOWN), 9, Taken.UNDECIDED, unknown),
        ("add_library", ("_y", UNKNOWN), 4, Taken.UNDECIDED, unknown),
    ]
    assert [c.file for c in evaluation.calls] == ["CMakeLists.txt"] * 4


def test_a_fatal_error_in_a_decided_branch_stops_the_run() -> None:
    evaluation = run({"CMakeLists.txt": 'message(FATAL_ERROR "no ${VLLM_TARGET_DEVICE}")\n'})
    assert evaluation.stopped == "CMakeLists.txt:1: no rocm"


# ---------------------------------------------------------------- vLLM's history


def _shown(found: cmake.Fetched) -> str:
    short = found.url.removeprefix("https://github.com/").removesuffix(".git")
    tag = f"@{found.tag[:10]}" if found.tag else ""
    return f"{found.name}: {short}{tag} ({found.how}, {found.file}:{found.line})"


def test_every_vllm_commit_fetches_on_rocm_what_real_cmake_fetched() -> None:
    expected = tomli.loads(EXPECTED.read_text())
    index = buildfiles.load("vllm")
    assert expected["repository"] == index.repository
    assert list(expected["taken"]) == list(index.commits)
    for commit in index.commits:
        evaluation = cmake.evaluate(index.read(commit), ".", ROCM)
        assert [_shown(f) for f in evaluation.taken] == expected["taken"][commit]["fetches"]
        assert evaluation.undecided == ()  # none of the CUDA-only or CPU-only ones
        assert evaluation.stopped == ""
        assert all(u.file and u.line for u in evaluation.unknowns)


def test_what_the_rocm_build_cannot_decide_at_the_head() -> None:
    index = buildfiles.load("vllm")
    evaluation = cmake.evaluate(index.read(index.head), ".", ROCM)
    assert [str(u) for u in evaluation.unknowns] == [
        "cmake/utils.cmake:36: if(NOT PYTHON_ERROR_CODE EQUAL 0)",
        "cmake/utils.cmake:602: if(ARG_USE_SABI AND NOT IS_FREETHREADED_PYTHON)",
        'CMakeLists.txt:311: if(CMAKE_CXX_FLAGS MATCHES "\\-flto")',
        "cmake/utils.cmake:312: foreach(_ARCH ${arg_CUDA_ARCHS})",
        "cmake/utils.cmake:335: if(${arg_BUILD_PTX_FOR_ARCH})",
        "CMakeLists.txt:347: if(AMDHIP64_LIB)",
        "cmake/utils.cmake:55: if(TARGET hipify_all)",
        "cmake/utils.cmake:87: if(DEFINED _VLLM_LAST_HIPIFY_TARGET)",
        "CMakeLists.txt:1189: if(_STABLE_TORCH_AMDHIP64)",
        "CMakeLists.txt:1410: if(_MOE_STABLE_TORCH_AMDHIP64)",
        "CMakeLists.txt:1477: if(TARGET _rocm_C_skinny)",
        "cmake/utils.cmake:101: if(TARGET hipify_all)",
    ]


def test_treefacts_reads_the_taken_fetches_with_their_conditions() -> None:
    index = buildfiles.load("vllm")
    (pin,) = treefacts.cmake_fetches(index.read(index.pin), ".", ROCM)
    assert (pin.what, pin.ref, str(pin.where), pin.how, pin.unless) == (
        "https://github.com/triton-lang/triton.git", "v3.5.1",
        "cmake/external_projects/triton_kernels.cmake:17", "made available",
        "TRITON_KERNELS_SRC_DIR",
    )  # fmt: skip


# ---------------------------------------------------------------- bounded work on any input


def _evaluated(text: str) -> cmake.Evaluation:
    return cmake.evaluate(lambda path: text if path == "CMakeLists.txt" else None, ".", ROCM)


def test_a_value_doubled_in_a_loop_stops_growing_at_a_megabyte() -> None:
    text = 'set(A x)\nforeach(i RANGE 200)\n  set(A "${A}${A}")\nendforeach()\nif(A)\nendif()\n'
    assert [str(u) for u in _evaluated(text).unknowns] == ["CMakeLists.txt:5: if(A)"]


def test_names_nested_past_the_depth_cap_are_unknown_not_a_recursion_error() -> None:
    text = 'set(A "' + "${" * 20_000 + "B" + "}" * 20_000 + '")\nif(A)\nendif()\n'
    assert [str(u) for u in _evaluated(text).unknowns] == ["CMakeLists.txt:2: if(A)"]


def test_parentheses_nested_past_the_cap_leave_the_condition_undecided() -> None:
    text = "if(" + "(" * 20_000 + "ON" + ")" * 20_000 + ")\nendif()\n"
    (unknown,) = _evaluated(text).unknowns
    assert str(unknown) == "CMakeLists.txt:1: if(" + "(" * 117 + "...)"


def test_any_number_of_nots_is_read_without_recursion() -> None:
    fetch = "FetchContent_Declare(x GIT_REPOSITORY u GIT_TAG t)\nFetchContent_MakeAvailable(x)\n"
    odd = _evaluated("if(" + "NOT " * 20_001 + "ON)\n" + fetch + "endif()\n")
    even = _evaluated("if(" + "NOT " * 20_000 + "ON)\n" + fetch + "endif()\n")
    assert (len(odd.taken), len(even.taken)) == (0, 1)
