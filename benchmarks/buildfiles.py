"""The build files the ROCm check reads, at every commit benchmarks/history.toml picked, kept
as test fixtures; and what the real CMake makes of vLLM's, beside rocmgraph's own reader.

``extract`` reads the files from git objects (a mirror's bare repository, never a checkout)
into tests/fixtures/history/<fork>/: each blob once, under its git id in ``blobs/``, and
``index.toml``, each commit's paths and their blob ids. An object the mirror lacks is
recorded as missing with its path, and the rest goes on.

``cmake`` runs Debian's cmake (3.25) in script mode on each vLLM commit's files, with a
driver that sets what the ROCm build sets and records every fetch the files ask for, and
writes the comparison with ``treefacts.cmake_fetches`` to benchmarks/buildfiles-cmake.md.

``setup`` runs each SGLang commit's setup scripts with recording stubs (setupfacts) beside
the check's facts, and writes benchmarks/buildfiles-sglang.md; with ``--fork vllm``, vLLM's
setup.py and the real CMake's reading of PYTORCH_ROCM_ARCH, to buildfiles-vllm.md.

    python3 benchmarks/buildfiles.py extract [--vllm-git DIR] [--sglang-git DIR]
    python3 benchmarks/buildfiles.py cmake [--cmake PATH]
    python3 benchmarks/buildfiles.py setup [--fork vllm]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import history
import setupfacts
import tomli

from rocmgraph.config import pins as pins_file
from rocmgraph.outside import git, proc
from rocmgraph.trees import cmake as rocm_facts
from rocmgraph.trees import patches, treefacts
from rocmgraph.trees.treefacts import Read

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "history"

# ---------------------------------------------------------------- which files


@dataclass(frozen=True)
class Selection:
    """The files of one fork the ROCm check reads, as patterns on paths from the tree's root:
    ``*`` within one name, ``**`` across folders."""

    fork: str  # the section of history.toml
    patterns: tuple[str, ...]


def patched(*sources: str) -> tuple[str, ...]:
    """The files the pins' patches of ``sources`` touch: a bump checks each patch against
    them at the new commit."""
    pins = pins_file.load(ROOT / "pins.toml")
    return tuple(sorted({file for name in sources for patch in pins.sources[name].patches
                         for file in patches.read_patch(patch).files}))  # fmt: skip


# sgl-kernel moved to python/sglang/kernels/aot (c32c4ef79c, #32648) between the picked
# commits of 2026-07-26 and 2026-08-02: both homes are read, each commit has one.
_KERNEL = ("CMakeLists.txt", "setup_rocm.py", "pyproject*.toml", "cmake/**")

SELECTIONS = (
    Selection(
        "vllm",
        (
            "CMakeLists.txt",
            "cmake/**",  # *.cmake, and hipify.py, which the ROCm build runs from CMake
            "setup.py",
            "pyproject.toml",
            "requirements/rocm*.txt",
            "requirements/common.txt",
            "requirements/build*.txt",
            "requirements/build/rocm*.txt",  # requirements/build/ since before the pin
            # setup.py loads these by path: run, it needs them (setupfacts' second method)
            "vllm/envs.py",
            "tools/build_rust.py",
            *patched("vllm"),
        ),
    ),
    Selection(
        "sglang",
        (
            *(f"sgl-kernel/{pattern}" for pattern in _KERNEL),
            *(f"python/sglang/kernels/aot/{pattern}" for pattern in _KERNEL),
            "python/pyproject*.toml",
            "python/setup.py",  # from 2026-07: builds the Rust extensions (cargo fetches)
            *patched("sglang", "sgl_kernel"),
        ),
    ),
)


def _regex(pattern: str) -> re.Pattern[str]:
    parts = (re.escape(part).replace(r"\*", "[^/]*") for part in pattern.split("**"))
    return re.compile(".*".join(parts))


def selected(path: str, patterns: Sequence[str]) -> bool:
    return any(_regex(pattern).fullmatch(path) for pattern in patterns)


def visited(folder: str, patterns: Sequence[str]) -> bool:
    """Whether a file under ``folder`` may be selected: the folder leads to a pattern's
    fixed part, or lies under a pattern's ``**``."""
    for pattern in patterns:
        *folders, _ = pattern.split("/")
        fixed = "/".join(itertools.takewhile(lambda name: "*" not in name, folders))
        if fixed == folder or fixed.startswith(f"{folder}/"):  # on the way to it
            return True
        if "**" in pattern and folder.startswith(f"{fixed}/"):  # under it
            return True
    return False


# ---------------------------------------------------------------- reading git objects


@dataclass(frozen=True)
class Listing:
    """One commit's selected files: path -> blob id, and the objects the mirror lacks."""

    files: dict[str, str]
    missing: dict[str, str]  # path ("." for the commit itself) -> the object's id


def listing(git_dir: Path, commit: str, patterns: Sequence[str]) -> Listing:
    """The selected files of ``commit``, walking its trees one folder at a time, so that a
    lacking tree is one missing folder rather than a commit that cannot be listed."""
    files: dict[str, str] = {}
    lost: dict[str, str] = {}
    if git.missing(git_dir, [commit]):
        return Listing(files, {".": commit})
    folders = [("", f"{commit}^{{tree}}")]
    while folders:
        folder, treeish = folders.pop()
        if treeish in git.missing(git_dir, [treeish]) or not _has_tree(git_dir, treeish):
            lost[folder or "."] = treeish
            continue
        for entry in git.tree(git_dir, treeish):
            path = f"{folder}/{entry.name}" if folder else entry.name
            if entry.kind == "tree" and visited(path, patterns):
                folders.append((path, entry.sha))
            elif entry.kind == "blob" and selected(path, patterns):
                files[path] = entry.sha
    for path, sha in list(files.items()):
        if sha in git.missing(git_dir, [sha]):
            lost[path] = files.pop(path)
    return Listing(dict(sorted(files.items())), dict(sorted(lost.items())))


def _has_tree(git_dir: Path, treeish: str) -> bool:
    # ``commit^{tree}`` is no object id for batch-check's missing: a commit whose root tree
    # the copy lacks fails here instead.
    try:
        git.tree(git_dir, treeish)
    except proc.CommandFailed:
        return False
    return True


def blob_id(content: bytes) -> str:
    """git's id of a blob: sha1 over "blob <length>\\0" and the content."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


# ---------------------------------------------------------------- the fixtures


@dataclass(frozen=True)
class Index:
    fork: str
    repository: str
    branch: str
    pin: str
    head: str
    commits: dict[str, dict[str, str]]  # commit -> path -> blob id, in history's order
    missing: dict[str, dict[str, str]]  # commit -> path -> object id the mirror lacks

    def read(self, commit: str, folder: Path | None = None) -> Read:
        """A ``treefacts.Read`` of ``commit``'s selected files (None for any other)."""
        blobs = (folder or FIXTURES / self.fork) / "blobs"
        files = self.commits[commit]

        def read(path: str) -> str | None:
            if path.endswith("/."):  # a folder, as preflight asks: there if a file is under it
                folder = path.removesuffix("/.").removeprefix(".").lstrip("/")
                return "" if any(f.startswith(folder) for f in files) else None
            sha = files.get(path.removeprefix("./"))
            return None if sha is None else (blobs / sha).read_bytes().decode()

        return read


def _quoted(text: str) -> str:
    return json.dumps(text)  # a JSON string of these characters is a TOML basic string


def index_text(index: Index, patterns: Sequence[str], dates: Mapping[str, str]) -> str:
    lines = [
        "# Written by `python3 benchmarks/buildfiles.py extract`: the build files the ROCm",
        "# check reads at each commit of benchmarks/history.toml, oldest first. Each file's",
        "# content is blobs/<its git blob id>; `missing` names objects the mirror lacked.",
        f"repository = {_quoted(index.repository)}",
        f"branch = {_quoted(index.branch)}",
        f"pin = {_quoted(index.pin)}",
        f"head = {_quoted(index.head)}",
        "patterns = [",
        *(f"    {_quoted(pattern)}," for pattern in patterns),
        "]",
    ]
    for commit, files in index.commits.items():
        lines += ["", f"[commits.{commit}]  # {dates[commit]}"]
        lines += [f"{_quoted(path)} = {_quoted(sha)}" for path, sha in files.items()]
    for commit, lost in index.missing.items():
        lines += ["", f"[missing.{commit}]"]
        lines += [f"{_quoted(path)} = {_quoted(sha)}" for path, sha in lost.items()]
    return "\n".join([*lines, ""])


def load(fork: str, folder: Path | None = None) -> Index:
    with ((folder or FIXTURES / fork) / "index.toml").open("rb") as stream:
        data = tomli.load(stream)
    return Index(fork, data["repository"], data["branch"], data["pin"], data["head"],
                 data.get("commits", {}), data.get("missing", {}))  # fmt: skip


def extract(selection: Selection, choice: history.Choice, git_dir: Path) -> Index:
    out = FIXTURES / selection.fork
    blobs = out / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    commits: dict[str, dict[str, str]] = {}
    lost: dict[str, dict[str, str]] = {}
    for commit in choice.commits:
        found = listing(git_dir, commit, selection.patterns)
        for path, sha in found.files.items():
            target = blobs / sha
            if not target.exists():
                content = git.blob(git_dir, sha)
                if blob_id(content) != sha:  # the bytes as stored, or the fixture lies
                    raise SystemExit(f"{selection.fork} {commit[:10]} {path}: not blob {sha}")
                target.write_bytes(content)
        commits[commit] = found.files
        if found.missing:
            lost[commit] = found.missing
    index = Index(selection.fork, choice.repo, choice.branch, choice.pin, choice.head,
                  commits, lost)  # fmt: skip
    dates = history.dates(git_dir, choice.commits)
    when = {sha: f"{dates[sha]:%Y-%m-%d %H:%M} UTC" for sha in choice.commits}
    (out / "index.toml").write_text(index_text(index, selection.patterns, when))
    return index


def size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _extract_all(args: argparse.Namespace) -> None:
    choices = history.load()
    for selection in SELECTIONS:
        choice = choices[selection.fork]
        git_dir = getattr(args, f"{selection.fork}_git") or history.mirror(choice.repo)
        index = extract(selection, choice, git_dir)
        blobs = {sha for files in index.commits.values() for sha in files.values()}
        lost = sum(len(paths) for paths in index.missing.values())
        print(f"{selection.fork}: {len(index.commits)} commits, {len(blobs)} blobs, "
              f"{lost} missing, {size(FIXTURES / selection.fork) / 1024:.0f} KiB")  # fmt: skip


# ---------------------------------------------------------------- the real CMake, measured

CMAKE = Path("/usr/bin/cmake")  # Debian 12's 3.25; vLLM asks for 3.26 (the driver allows it)
ARCHS = "gfx942;gfx950"
REPORT = Path(__file__).resolve().parent / "buildfiles-cmake.md"

# Commands CMake refuses in script mode ("not scriptable"): a build's targets, properties and
# install rules, none of which decides a fetch. Each becomes a macro that does nothing.
UNSCRIPTABLE = (
    "add_compile_definitions",
    "add_compile_options",
    "add_custom_command",
    "add_custom_target",
    "add_definitions",
    "add_dependencies",
    "add_executable",
    "add_library",
    "add_link_options",
    "add_test",
    "enable_testing",
    "export",
    "get_directory_property",
    "get_source_file_property",
    "get_target_property",
    "include_directories",
    "install",
    "link_directories",
    "link_libraries",
    "remove_definitions",
    "set_directory_properties",
    "set_source_files_properties",
    "set_target_properties",
    "set_tests_properties",
    "source_group",
    "target_compile_definitions",
    "target_compile_features",
    "target_compile_options",
    "target_include_directories",
    "target_link_directories",
    "target_link_libraries",
    "target_link_options",
    "target_precompile_headers",
    "target_sources",
    "try_compile",
    "try_run",
)

# The driver: what setup.py's ROCm build hands cmake (-DVLLM_TARGET_DEVICE=rocm, the python,
# FETCHCONTENT_BASE_DIR, ROCM_PATH; PYTORCH_ROCM_ARCH in the environment), then the
# tree's CMakeLists.txt, included as it is. project() and enable_language() set what a
# configure would (GCC for C++, clang for HIP); find_package(Torch) reads a stub
# TorchConfig.cmake that says what torch's own says on ROCm (PYTORCH_FOUND_HIP), so the
# tree's CMake selects HIP by itself. The FetchContent and ExternalProject modules are
# stubs on CMAKE_MODULE_PATH: they fetch nothing and say populated, and the trace records
# every call with its arguments expanded, file and line.
DRIVER = """\
cmake_policy(VERSION 3.25)
set(CMAKE_SOURCE_DIR "@SRC@")
set(CMAKE_CURRENT_SOURCE_DIR "@SRC@")
set(CMAKE_BINARY_DIR "@WORK@/build")
set(CMAKE_CURRENT_BINARY_DIR "@WORK@/build")
set(CMAKE_MODULE_PATH "@WORK@/modules")
set(CMAKE_PREFIX_PATH "")
set(CMAKE_BUILD_TYPE RelWithDebInfo)
set(_STUB_DEVICE @DEVICE@)
set(VLLM_TARGET_DEVICE @DEVICE@)
set(VLLM_PYTHON_EXECUTABLE "@PYTHON@")
set(VLLM_PYTHON_PATH "@WORK@/python")
set(FETCHCONTENT_BASE_DIR "@WORK@/deps")
set(ROCM_PATH /opt/rocm)
set(ENV{PYTORCH_ROCM_ARCH} "@ARCHS@")
set(ENV{PYTHONPATH} "@WORK@/python")
unset(ENV{TORCH_NIGHTLY})
foreach(name IN ITEMS @UNSCRIPTABLE@)
  cmake_language(EVAL CODE "macro(${name})\\nendmacro()")
endforeach()
macro(cmake_minimum_required)
endmacro()
macro(project name)
  set(PROJECT_NAME ${name})
  set(CMAKE_PROJECT_NAME ${name})
  set(PROJECT_SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(PROJECT_BINARY_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(CMAKE_CXX_COMPILER_ID GNU)
  set(CMAKE_CXX_COMPILER_VERSION 12.2.0)
  set(CMAKE_SYSTEM_PROCESSOR x86_64)
  set(CMAKE_SIZEOF_VOID_P 8)
endmacro()
macro(enable_language)
  if("${ARGV0}" STREQUAL "HIP")
    set(CMAKE_HIP_COMPILER_ID Clang)
    set(CMAKE_HIP_COMPILER_VERSION 20.0.0)
    set(CMAKE_HIP_COMPILER /opt/rocm/llvm/bin/clang++)
  endif()
endmacro()
# FindPython finds no interpreter in script mode (the platform files that project() loads
# are not): Python is the one package the driver says found by itself.
macro(find_package name)
  if("${name}" STREQUAL "Python")
    set(Python_FOUND TRUE)
    set(Python_EXECUTABLE "@PYTHON@")
    set(Python_VERSION @PYVERSION@)
    string(REPLACE "." ";" _stub_version "${Python_VERSION}")
    list(GET _stub_version 0 Python_VERSION_MAJOR)
    list(GET _stub_version 1 Python_VERSION_MINOR)
  else()
    _find_package(${ARGV})
  endif()
endmacro()
macro(Python_add_library)
endmacro()
macro(add_subdirectory dir)
  # Not followed: the directories a fetch fills are empty here.
endmacro()
include("@SRC@/CMakeLists.txt")
message(STATUS "driver: VLLM_GPU_LANG=${VLLM_GPU_LANG} arches=${VLLM_GPU_ARCHES}")
"""

TORCH_CONFIG = """\
# What torch's TorchConfig.cmake says (on ROCm through Caffe2's LoadHIP.cmake): the version
# the tree asks for, so that no warning of a mismatch says anything of the stub.
set(Torch_FOUND TRUE)
set(Torch_VERSION "${TORCH_SUPPORTED_VERSION_ROCM}")
set(TORCH_LIBRARIES torch)
set(TORCH_INCLUDE_DIRS "")
if(_STUB_DEVICE STREQUAL "rocm")
  set(HIP_FOUND TRUE)
  set(PYTORCH_FOUND_HIP TRUE)
  set(ROCM_VERSION_DEV_MAJOR 7)
else()  # the control: a CUDA 12.9 torch, for Hopper and Blackwell
  set(Torch_VERSION "${TORCH_SUPPORTED_VERSION_CUDA}")
  set(CUDA_FOUND TRUE)
  set(CUDA_VERSION 12.9)
  set(CMAKE_CUDA_COMPILER_VERSION 12.9)
  set(CMAKE_CUDA_FLAGS "-gencode arch=compute_90a,code=sm_90a")
  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_100a,code=sm_100a")
endif()
"""

TORCH_PY = {
    "torch/__init__.py": "from . import utils\n",
    "torch/utils/__init__.py": "import os\ncmake_prefix_path = os.path.join("
    "os.path.dirname(__file__), 'share', 'cmake')\n",
    "torch/utils/cpp_extension.py": "COMMON_HIP_FLAGS = ['-fPIC']\nCOMMON_HIPCC_FLAGS = []\n"
    "COMMON_NVCC_FLAGS = []\n",
    "torch/utils/share/cmake/Torch/TorchConfig.cmake": TORCH_CONFIG,
}

FETCH_CONTENT = """\
# FetchContent as a stub: nothing fetched, each name said populated where it would be.
set(_stub_fetch_root "${FETCHCONTENT_BASE_DIR}")
macro(_stub_fetch_dirs name)
  string(TOLOWER "${name}" _stub_lc)
  set(${_stub_lc}_SOURCE_DIR "${_stub_fetch_root}/${_stub_lc}-src")
  set(${_stub_lc}_BINARY_DIR "${_stub_fetch_root}/${_stub_lc}-build")
  set(${_stub_lc}_POPULATED TRUE)
endmacro()
function(FetchContent_Declare name)
  set_property(GLOBAL PROPERTY _stub_declared_${name} "${ARGN}")
endfunction()
macro(FetchContent_Populate name)
  _stub_fetch_dirs(${name})
endmacro()
macro(FetchContent_MakeAvailable)
  foreach(_stub_name IN ITEMS ${ARGV})
    _stub_fetch_dirs(${_stub_name})
  endforeach()
endmacro()
macro(FetchContent_GetProperties name)
  _stub_fetch_dirs(${name})
  set(${_stub_lc}_POPULATED FALSE)
endmacro()
function(FetchContent_SetPopulated)
endfunction()
"""

EXTERNAL_PROJECT = """\
# ExternalProject as a stub: the trace records the call, nothing is added.
function(ExternalProject_Add name)
endfunction()
function(ExternalProject_Get_Property name)
  foreach(_stub_property IN ITEMS ${ARGN})
    set(${_stub_property} "${FETCHCONTENT_BASE_DIR}/${name}-${_stub_property}" PARENT_SCOPE)
  endforeach()
endfunction()
function(ExternalProject_Add_Step)
endfunction()
function(ExternalProject_Add_StepTargets)
endfunction()
"""

FETCH_COMMANDS = {
    "fetchcontent_declare",
    "fetchcontent_populate",
    "fetchcontent_makeavailable",
    "externalproject_add",
}


@dataclass(frozen=True)
class Call:
    """One fetch command the real CMake ran, its arguments expanded."""

    command: str  # lower case
    args: tuple[str, ...]
    file: str  # relative to the tree
    line: int


@dataclass(frozen=True)
class Fetched:
    """A fetch as the run says it: a name, where from, which ref, how it is taken."""

    name: str
    url: str
    tag: str
    how: str  # "made available", "populated", "external project", "declared only"
    where: str


@dataclass(frozen=True)
class Run:
    returncode: int
    calls: tuple[Call, ...]
    ran: frozenset[tuple[str, int]]  # (file, line) of every command of the tree that ran
    error: str  # the first CMake Error, its file and line; "" when the run got through
    gpu_lang: str
    seconds: float  # the last run's
    touched: tuple[str, ...]  # files the runs read that were not there, made empty
    arches: str = ""  # VLLM_GPU_ARCHES at the end, as the driver prints it


def materialize(read: Read, paths: Sequence[str], into: Path) -> None:
    for path in paths:
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(read(path) or "")


def stubs(work: Path) -> None:
    files = {f"python/{path}": text for path, text in TORCH_PY.items()}
    files["modules/FetchContent.cmake"] = FETCH_CONTENT
    files["modules/ExternalProject.cmake"] = EXTERNAL_PROJECT
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    (work / "build").mkdir(exist_ok=True)


def driver(work: Path, src: Path, python: str, device: str = "rocm", archs: str = ARCHS) -> str:
    values = {
        "@DEVICE@": device,
        "@SRC@": str(src),
        "@WORK@": str(work),
        "@PYTHON@": python,
        "@PYVERSION@": _python_version(python),
        "@ARCHS@": archs,
        "@UNSCRIPTABLE@": " ".join(UNSCRIPTABLE),
    }
    return re.sub("@[A-Z]+@", lambda m: values[m.group(0)], DRIVER)


def _python_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def run_cmake(
    read: Read,
    paths: Sequence[str],
    cmake: Path,
    python: str,
    device: str = "rocm",
    *,
    archs: str = ARCHS,
) -> Run:
    """Script mode on the tree's files, its trace read back for the fetch commands. A file
    the run reads and the fixture lacks (a generator it hashes, a fetched tree's file) is
    made empty and the run started again, at most ``_TRIES`` times: how many it takes is
    how far the build files alone carry the run."""
    with tempfile.TemporaryDirectory(prefix="buildfiles-") as temporary:
        work = Path(temporary)
        src = work / "src"
        materialize(read, paths, src)
        stubs(work)
        (work / "driver.cmake").write_text(driver(work, src, python, device, archs))
        trace = work / "trace.json"
        argv = [str(cmake), "--trace-expand", "--trace-format=json-v1",
                f"--trace-redirect={trace}", "-P", str(work / "driver.cmake")]  # fmt: skip
        touched: list[str] = []
        for _ in range(_TRIES):
            started = time.monotonic()
            done = subprocess.run(argv, cwd=src, capture_output=True, text=True, check=False,
                                  env={"PATH": "/usr/bin:/bin", "HOME": str(work)})  # fmt: skip
            seconds = time.monotonic() - started
            events = [json.loads(line) for line in trace.read_text().splitlines()]
            lacking = _read_and_lacking(events[-1]) if done.returncode and events else None
            if lacking is None:
                break
            lacking.parent.mkdir(parents=True, exist_ok=True)
            lacking.touch()
            touched.append(str(lacking.relative_to(work)))
        calls = tuple(_calls(events, src))
        ran = frozenset(
            (str(e["file"]).removeprefix(f"{src}/"), int(e["line"]))
            for e in events
            if str(e.get("file", "")).startswith(f"{src}/")
        )
    said = re.search(r"driver: VLLM_GPU_LANG=(\S*) arches=(.*)", done.stdout + done.stderr)
    return Run(done.returncode, calls, ran, _first_error(done.stderr, src),
               said.group(1) if said else "", seconds, tuple(touched),
               said.group(2).strip() if said else "")  # fmt: skip


_TRIES = 20


def _read_and_lacking(event: dict[str, object]) -> Path | None:
    """The file a failed file(READ|MD5|STRINGS|SHA256 <path>) asked for, when absent."""
    args = event.get("args")
    if str(event.get("cmd", "")).lower() != "file" or not isinstance(args, list):
        return None
    if len(args) < 2 or args[0] not in {"READ", "MD5", "STRINGS", "SHA256"}:
        return None
    path = Path(str(args[1]))
    return None if path.exists() else path


def _calls(events: Sequence[dict[str, object]], src: Path) -> Iterator[Call]:
    for event in events:
        command = str(event.get("cmd", "")).lower()
        file = str(event.get("file", ""))
        if command in FETCH_COMMANDS and file.startswith(f"{src}/"):
            args = event.get("args")
            yield Call(command, tuple(map(str, args)) if isinstance(args, list) else (),
                       file.removeprefix(f"{src}/"), int(str(event["line"])))  # fmt: skip


def _first_error(stderr: str, src: Path) -> str:
    found = re.search(r"CMake Error at (\S+):(\d+) \((\w+)\):\n((?:  .*\n?)*)", stderr)
    if not found:
        return ""
    file = found.group(1).removeprefix(f"{src}/")
    said = " ".join(found.group(4).split())
    return f"{file}:{found.group(2)} {found.group(3)}(): {said}"


_KEYWORDS = {"GIT_REPOSITORY", "URL", "GIT_TAG", "URL_HASH", "SOURCE_DIR"}


def _options(args: Sequence[str]) -> dict[str, str]:
    return {key: args[i + 1] for i, key in enumerate(args[:-1]) if key in _KEYWORDS}


def fetched(calls: Sequence[Call]) -> list[Fetched]:
    """The fetches the calls make: a declaration taken by MakeAvailable or a one-argument
    Populate, a Populate with its own source, an ExternalProject; declared and never taken
    is listed too, as such."""
    declared: dict[str, Call] = {}
    taken: dict[str, str] = {}
    found: list[Fetched] = []
    for call in calls:
        name, *rest = call.args or ("",)
        where = f"{call.file}:{call.line}"
        options = _options(rest)
        if call.command == "fetchcontent_declare":
            declared.setdefault(name.lower(), call)  # the first declaration wins, as in CMake
        elif call.command == "fetchcontent_makeavailable":
            for each in call.args:
                taken.setdefault(each.lower(), "made available")
        elif call.command == "fetchcontent_populate" and not rest:
            taken.setdefault(name.lower(), "populated")
        elif call.command in {"fetchcontent_populate", "externalproject_add"}:
            how = "populated" if call.command == "fetchcontent_populate" else "external project"
            url = options.get("GIT_REPOSITORY") or options.get("URL", "")
            if url:
                found.append(Fetched(name, url, options.get("GIT_TAG", ""), how, where))
    for lower, call in declared.items():
        options = _options(call.args[1:])
        url = options.get("GIT_REPOSITORY") or options.get("URL", "")
        if url:
            how = taken.get(lower, "declared only")
            found.append(Fetched(call.args[0], url, options.get("GIT_TAG", ""), how,
                                 f"{call.file}:{call.line}"))  # fmt: skip
    return found


@dataclass(frozen=True)
class Comparison:
    commit: str
    run: Run
    cmake: tuple[Fetched, ...]  # what the run fetches (declared only left out)
    reader: tuple[treefacts.Fetch, ...]

    def disagreements(self) -> list[str]:
        """Each fetch one side says and the other does not, with why, as far as the run
        tells: the reader's line never ran on ROCm, or ran with other values."""
        said = {(f.url, f.tag) for f in self.cmake}
        theirs = {(f.what, f.ref) for f in self.reader}
        found = []
        for fetch in self.reader:
            if (fetch.what, fetch.ref) in said:
                continue
            where = (fetch.where.file.removeprefix("./"), fetch.where.line)
            if where in self.run.ran:
                why = "ran on ROCm with other values"
            else:
                why = f"never runs on ROCm (under {_cut(_deciding(fetch.conditions), 48)})"
            found.append(f"reader only: {_fetch_name(fetch.what, fetch.ref)}, {why}")
        for got in self.cmake:
            if (got.url, got.tag) not in theirs:
                found.append(f"cmake only: {_fetch_name(got.url, got.tag)} ({got.where})")
        return found


def _deciding(conditions: Sequence[str]) -> str:
    """The condition that likely keeps a fetch off ROCm, for the reader of the table: the
    innermost on the GPU language or target device (an outer one may hold on ROCm too:
    ``CUDA OR HIP``), or the outermost of all."""
    device = re.compile(r"VLLM_GPU_LANG|VLLM_TARGET_DEVICE|CUDA|HIP")
    on_device = [c for c in conditions if device.search(c)]
    return on_device[-1] if on_device else (conditions[0] if conditions else "")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fetch_name(url: str, tag: str) -> str:
    short = url.removeprefix("https://github.com/").removesuffix(".git")
    return f"{short}@{tag[:10]}" if tag else short


def compare(index: Index, cmake: Path, python: str, device: str = "rocm") -> list[Comparison]:
    found = []
    for commit, files in index.commits.items():
        read = index.read(commit)
        run = run_cmake(read, list(files), cmake, python, device)
        taken = tuple(f for f in fetched(run.calls) if f.how != "declared only")
        facts = rocm_facts.rocm(ARCHS.split(";"), ("TRITON_KERNELS_SRC_DIR", "TORCH_NIGHTLY"))
        reader = tuple(treefacts.cmake_fetches(read, ".", facts))
        found.append(Comparison(commit, run, taken, reader))
        print(f"{device} {commit[:10]}: rc {run.returncode}, {len(taken)} fetches by cmake, "
              f"{len(reader)} by the reader, {len(run.touched)} files made, "
              f"{run.seconds:.1f} s", flush=True)  # fmt: skip
    return found


def _state(run: Run) -> str:
    state = "through" if run.returncode == 0 else f"stopped at {_cut(run.error, 110)}"
    made = f"; {len(run.touched)} lacking files made empty" if run.touched else ""
    return f"{state}; GPU lang {run.gpu_lang or '?'}; {run.seconds:.1f} s{made}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def report(rocm: Sequence[Comparison], cuda: Sequence[Comparison]) -> str:
    lines = [
        "# vLLM's CMake on ROCm: Debian's cmake 3.25 in script mode beside treefacts",
        "",
        "Written by `python3 benchmarks/buildfiles.py cmake` from tests/fixtures/history/vllm",
        "(each commit's CMakeLists.txt and cmake/, nothing else of the tree). cmake: what the",
        "real CMake fetches with the ROCm driver in the script (fetch name, repository@tag,",
        "how it is taken, file:line of the call); reader: `treefacts.cmake_fetches`, the",
        "fetches rocmgraph's own CMake evaluator (rocmgraph/trees/cmake.py) takes on ROCm",
        "from the same facts.",
        "",
        "What script mode needs from the driver: cmake_minimum_required(3.26) allowed on 3.25;",
        "project() and enable_language() (not scriptable) set the compiler facts a configure",
        "would; find_package(Python) said found (FindPython finds no interpreter without the",
        "platform files project() loads); Python_add_library and 36 target, property and",
        "install commands as no-ops; find_package(Torch) reads a stub TorchConfig.cmake;",
        "execute_process runs the real python with a stub `torch` module; FetchContent and",
        "ExternalProject are stub modules. add_subdirectory() is not followed.",
        "",
        "| commit | cmake run | cmake: fetches on ROCm | reader: fetches | disagreements |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in rocm:
        lines.append(_row([
            c.commit[:8],
            _state(c.run),
            "<br>".join(f"{f.name}: {_fetch_name(f.url, f.tag)} ({f.how}, {f.where})"
                        for f in c.cmake) or "none",
            "<br>".join(_fetch_name(f.what, f.ref) for f in c.reader) or "none",
            "<br>".join(c.disagreements()) or "none",
        ]))  # fmt: skip
    lines += [
        "",
        "## Control: the same driver on CUDA",
        "",
        "That the recording is not empty by construction: the driver with a CUDA torch stub",
        "(CUDA 12.9, sm_90a and sm_100a). Files the run reads and the fixtures lack (kernel",
        "generators it hashes, a fetched tree's files) are made empty and the run restarted.",
        "",
        "| commit | cmake run | cmake: fetches on CUDA | the reader misses |",
        "| --- | --- | --- | --- |",
    ]
    for c in cuda:
        lines.append(_row([
            c.commit[:8],
            _state(c.run),
            "<br>".join(f"{f.name}: {_fetch_name(f.url, f.tag)} ({f.how})" for f in c.cmake),
            "<br>".join(d.removeprefix("cmake only: ") for d in c.disagreements()
                        if d.startswith("cmake only")) or "none",
        ]))  # fmt: skip
    return "\n".join([*lines, ""])


def _cmake_all(args: argparse.Namespace) -> None:
    index = load("vllm")
    rocm = compare(index, args.cmake, args.python)
    cuda = compare(index, args.cmake, args.python, "cuda")
    args.out.write_text(report(rocm, cuda))
    print(f"wrote {args.out}")


# ---------------------------------------------------------------- SGLang's setup scripts, run

SGLANG_REPORT = Path(__file__).resolve().parent / "buildfiles-sglang.md"


def sglang_commits(index: Index) -> list[setupfacts.Commit]:
    """Both methods on every SGLang commit of ``index``."""
    pins = pins_file.load(ROOT / "pins.toml")
    found = []
    for commit, files in index.commits.items():
        read = index.read(commit)
        check = setupfacts.check_facts(pins, read)
        found.append(
            setupfacts.Commit(commit, check, setupfacts.run_facts(pins, read, list(files)))
        )
    return found


VLLM_REPORT = Path(__file__).resolve().parent / "buildfiles-vllm.md"


def cmake_arch(read: Read, paths: Sequence[str], cmake: Path, python: str) -> tuple[str, ...]:
    """What the real CMake makes of PYTORCH_ROCM_ARCH: read if one arch in it comes out
    as the arches, split on the separators with which a list of two comes out as two."""
    probe = run_cmake(read, paths, cmake, python, archs=setupfacts.PROBE)
    if probe.arches != setupfacts.PROBE:
        return ()
    works = [
        str(split)
        for split, value in setupfacts.LISTS.items()
        if run_cmake(read, paths, cmake, python, archs=value).arches.split(";")
        == ["gfx942", "gfx950"]
    ]
    said = works[0] if len(works) == 1 else "either" if works else "neither list taken"
    return (f"PYTORCH_ROCM_ARCH: {said}",)


def vllm_commit(
    index: Index, commit: str, cmake: Path = CMAKE, python: str = "python3"
) -> setupfacts.Commit:
    """Both methods on one vLLM commit of ``index``."""
    pins = pins_file.load(ROOT / "pins.toml")
    read, paths = index.read(commit), list(index.commits[commit])
    check = setupfacts.source_facts(pins, "vllm", pins.sources["vllm"], read)
    run = setupfacts.run_vllm(pins, read, paths)
    run = dataclasses.replace(run, arch=cmake_arch(read, paths, cmake, python))
    return setupfacts.Commit(commit, (check,), (run,))


def _setup_all(args: argparse.Namespace) -> None:
    if args.fork == "vllm":
        index = load("vllm")
        commits = [vllm_commit(index, commit, python=args.python) for commit in index.commits]
    else:
        commits = sglang_commits(load("sglang"))
    for c in commits:
        print(f"{c.commit[:10]}: {len(c.disagreements())} disagreements", flush=True)
    if args.fork == "vllm":
        (args.out or VLLM_REPORT).write_text(setupfacts.vllm_report(commits))
    else:
        (args.out or SGLANG_REPORT).write_text(setupfacts.report(commits, setupfacts.control()))
    print(f"wrote {args.out or (VLLM_REPORT if args.fork == 'vllm' else SGLANG_REPORT)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    extracting = commands.add_parser("extract", help="write tests/fixtures/history/<fork>/")
    for selection in SELECTIONS:
        extracting.add_argument(f"--{selection.fork}-git", type=Path,
                                help="a bare repository (default: its mirror)")  # fmt: skip
    measuring = commands.add_parser("cmake", help="the real CMake on each vLLM commit")
    measuring.add_argument("--cmake", type=Path, default=CMAKE)
    measuring.add_argument("--python", default=shutil.which("python3") or "python3")
    measuring.add_argument("--out", type=Path, default=REPORT)
    running = commands.add_parser("setup", help="a fork's setup scripts run, on each commit")
    running.add_argument("--fork", choices=("sglang", "vllm"), default="sglang")
    running.add_argument("--python", default=shutil.which("python3") or "python3")
    running.add_argument("--out", type=Path, help="default: buildfiles-<fork>.md")
    args = parser.parse_args(argv)
    if args.command == "extract":
        _extract_all(args)
    elif args.command == "setup":
        _setup_all(args)
    else:
        _cmake_all(args)


if __name__ == "__main__":
    main()
