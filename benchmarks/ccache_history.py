"""Benchmark: the share of ROCm compile units that ccache's direct mode would hit across real
upstream bumps of vLLM and of sgl-kernel (the commits of benchmarks/history.toml).

A unit hits when the older commit compiled it too (same path, same target) and its source
and every repository file it includes, transitively, keep their blob ids: ccache's direct
mode then finds its manifest, given the same compiler and flags (headers outside the
repository, torch's and ROCm's, come with the compiler). A second share also asks that the
flags the build files set for the unit stay the same. The units are what the build files
give a ROCm build: vLLM's CMakeLists.txt run by rocmgraph's CMake evaluator (the targets
its calls define, and what it could not decide, printed), sgl-kernel's setup_rocm.py
`sources`.

    python3 benchmarks/ccache_history.py [--vllm-git DIR] [--sglang-git DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import ast
import functools
import itertools
import json
import posixpath
import re
import statistics
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import history

from rocmgraph.trees import cmake

# --- git objects ---------------------------------------------------------------------------


class Objects:
    """The trees and blobs of one bare repository; blobs through one ``git cat-file --batch``
    (a process per blob would cost more than the whole reading)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        # A pipe kept open for the whole run, which rocmgraph's one-shot runner does not offer.
        self._process = subprocess.Popen(
            ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def __enter__(self) -> Objects:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._pipe(self._process.stdin).close()  # cat-file ends at the end of its input
        self._process.wait()
        self._pipe(self._process.stdout).close()

    @staticmethod
    def _pipe(pipe: IO[bytes] | None) -> IO[bytes]:
        assert pipe is not None  # both are pipes: Popen was given PIPE for them
        return pipe

    def blob(self, oid: str) -> bytes | None:
        """The blob's bytes; None if the mirror lacks it."""
        stdin, stdout = self._pipe(self._process.stdin), self._pipe(self._process.stdout)
        stdin.write(f"{oid}\n".encode())
        stdin.flush()
        header = stdout.readline().split()
        if header[1] == b"missing":
            return None
        data = stdout.read(int(header[2]))
        stdout.read(1)  # the newline after each object
        return data

    def tree(self, commit: str) -> dict[str, str]:
        """Every file of the commit: path -> blob id."""
        text = history.git(self.git_dir, "ls-tree", "-r", "-z", commit)
        entries = (entry.split("\t", 1) for entry in text.split("\0") if entry)
        return {path: meta.split()[2] for meta, path in entries if meta.split()[1] == "blob"}


# --- three-valued #if: a branch is taken, not taken, or undecided (None) ------------------


@dataclass(frozen=True)
class Frame:
    """An open #if: its current branch is taken (True), not (False) or undecided (None)."""

    state: bool | None
    done: bool | None  # whether an earlier branch was taken


def or3(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    return None if None in (left, right) else False


def and3(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    return None if None in (left, right) else True


def not3(value: bool | None) -> bool | None:
    return None if value is None else not value


def running(stack: Sequence[Frame]) -> bool | None:
    states = [frame.state for frame in stack]
    if False in states:
        return False
    return None if None in states else True


def next_branch(frame: Frame, value: bool | None) -> Frame:
    """The frame at an #elif whose condition is ``value``."""
    if frame.done is True:
        return replace(frame, state=False)
    state = value if frame.done is False else (False if value is False else None)
    return replace(frame, state=state, done=or3(frame.done, value))


# --- includes ------------------------------------------------------------------------------

DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$", re.MULTILINE)
QUOTED = re.compile(r'[ \t]*([<"])([^>"]+)[>"]')
TERM = re.compile(r"(!?)\s*(?:defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)|(\w+))")
# What a ROCm compile of a .cu defines, both in vLLM's HIP flags (cmake/utils.cmake:
# torch's COMMON_HIP_FLAGS and -DUSE_ROCM) and in torch's BuildExtension (sgl-kernel).
HIP_DEFINES = frozenset({"USE_ROCM", "__HIP_PLATFORM_AMD__"})


@dataclass(frozen=True)
class Include:
    name: str
    angle: bool  # <...>: searched in the include folders only


def includes(text: bytes, defined: frozenset[str]) -> tuple[Include, ...]:
    """The file's #includes but those under an #if that ``defined`` decides against (only
    macros known defined decide: any other branch is followed, so the share errs low)."""
    found: list[Include] = []
    stack: list[Frame] = []
    for match in DIRECTIVE.finditer(text.decode(errors="replace")):
        word, rest = match.groups()
        if word != "include":
            preprocess(word, rest, stack, defined)
        elif running(stack) is not False and (named := QUOTED.match(rest)):
            found.append(Include(named.group(2), named.group(1) == "<"))
    return tuple(found)


def preprocess(word: str, rest: str, stack: list[Frame], defined: frozenset[str]) -> None:
    if word in {"if", "ifdef", "ifndef"}:
        value = macro_condition(word, rest, defined)
        stack.append(Frame(value, value))
    elif word == "elif" and stack:
        stack[-1] = next_branch(stack[-1], macro_condition("if", rest, defined))
    elif word == "else" and stack:
        stack[-1] = replace(stack[-1], state=not3(stack[-1].done))
    elif word == "endif" and stack:
        stack.pop()


def macro_condition(word: str, rest: str, defined: frozenset[str]) -> bool | None:
    expression = re.sub(r"/\*.*?\*/|//.*", "", rest).strip()
    if word == "ifdef":
        return True if expression in defined else None
    if word == "ifndef":
        return False if expression in defined else None
    if "&&" in expression and "||" in expression:
        return None
    joiner, combine = ("&&", and3) if "&&" in expression else ("||", or3)
    values = [macro_term(term, defined) for term in expression.split(joiner)]
    return functools.reduce(combine, values)


def macro_term(term: str, defined: frozenset[str]) -> bool | None:
    """``M``, ``defined(M)``, ``defined M``, each maybe negated; anything else: None."""
    found = TERM.fullmatch(term.strip())
    if found is None:
        return None
    name = found.group(2) or found.group(3) or found.group(4)
    value = {"0": False, "1": True}.get(name, True if name in defined else None)
    return not3(value) if found.group(1) else value


def resolve(
    include: Include, includer: str, tree: Mapping[str, str], dirs: Sequence[str]
) -> str | None:
    """The repository file ``include`` names, searched as the compiler searches; None if it
    is outside the repository (torch's, ROCm's)."""
    bases = dirs if include.angle else (posixpath.dirname(includer), *dirs)
    for base in bases:
        path = posixpath.normpath(posixpath.join(base, include.name))
        if path in tree:
            return path
    return None


def closure(
    unit: str,
    tree: Mapping[str, str],
    dirs: Sequence[str],
    includes_of: Callable[[str, str], tuple[Include, ...]],
) -> dict[str, str]:
    """``unit`` and every repository file it includes, transitively: path -> blob id.

    ``includes_of(path, blob)`` gives a file's includes (the caller reads and remembers them).
    """
    found = {unit: tree[unit]}
    todo = [unit]
    while todo:
        path = todo.pop()
        for include in includes_of(path, tree[path]):
            target = resolve(include, path, tree, dirs)
            if target is not None and target not in found:
                found[target] = tree[target]
                todo.append(target)
    return found


# --- hits ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One compile as ccache sees it: its key (target and path: flags and input path are in
    ccache's hash), the files it reads, and what the build files say of its flags."""

    key: str
    files: frozenset[tuple[str, str]]  # (path, blob id), the source among them
    source: str  # the source's blob id
    flags: tuple[str, ...] = ()

    def content(self) -> tuple[str, frozenset[str]]:
        return self.source, frozenset(blob for _, blob in self.files)


@dataclass(frozen=True)
class Counts:
    units: int
    hits: int
    added: int  # not compiled at the older commit
    changed: int  # compiled there, a file of it changed
    moved: int  # of the misses, the same files compiled there under another path or target
    flag_hits: int  # of the hits, those whose flags the build files left as they were

    @property
    def share(self) -> float:
        return self.hits / self.units if self.units else 0.0

    @property
    def flag_share(self) -> float:
        return self.flag_hits / self.units if self.units else 0.0


def causes(
    old: Mapping[str, Unit], new: Mapping[str, Unit], top: int = 3
) -> tuple[tuple[str, int], ...]:
    """The files whose change made the most units miss (of units compiled at both)."""
    counted: Counter[str] = Counter()
    for key, unit in new.items():
        if key in old:
            counted.update({path for path, _ in unit.files ^ old[key].files})
    return tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:top])


def compare(old: Mapping[str, Unit], new: Mapping[str, Unit]) -> Counts:
    """What ccache's direct mode makes of ``new``'s units with ``old``'s compiles cached: a
    hit keeps every file; ``flag_hits`` asks the same of the flags."""
    kept = [unit for key, unit in new.items() if key in old and old[key].files == unit.files]
    added = [unit for key, unit in new.items() if key not in old]
    before = {unit.content() for unit in old.values()}
    moved = sum(1 for unit in added if unit.content() in before)
    flagged = sum(1 for unit in kept if old[unit.key].flags == unit.flags)
    changed = len(new) - len(kept) - len(added)
    return Counts(len(new), len(kept), len(added), changed, moved, flagged)


# --- vLLM's CMake, through rocmgraph's evaluator -------------------------------------------

# The calls the ROCm build's compile units and their flags come from. Of the commands that
# define a target, a target's first call counts: define_extension_target's own
# Python_add_library of the same target adds nothing.
TARGET_COMMANDS = {"define_extension_target", "define_gpu_extension_target"}
TARGET_KEYWORDS = {
    "DESTINATION", "LANGUAGE", "SOURCES", "COMPILE_FLAGS", "ARCHITECTURES",
    "INCLUDE_DIRECTORIES", "LIBRARIES", "USE_SABI", "WITH_SOABI",
}  # fmt: skip
# Commands that define a target, or add sources to one, in ways this reading does not follow.
UNREAD_TARGETS = {"add_executable", "python_add_library", "hip_add_library", "cuda_add_library"}
UNREAD_SOURCES = "target_sources"
# Commands that set a target's compile flags (the first argument names it), or every
# target's; and the variables that hold every target's flags.
FLAG_COMMANDS = {
    "target_compile_definitions", "target_compile_options", "target_include_directories",
    "set_target_properties", "target_compile_features",
}  # fmt: skip
GLOBAL_FLAG_COMMANDS = {
    "add_compile_definitions", "add_compile_options", "add_definitions", "include_directories",
}  # fmt: skip
HIPIFY = "hipify_sources_target"  # cmake/utils.cmake: (OUT NAME SOURCES), OUT the copies
WATCHED = frozenset(
    {*TARGET_COMMANDS, *UNREAD_TARGETS, *FLAG_COMMANDS, *GLOBAL_FLAG_COMMANDS, HIPIFY,
     UNREAD_SOURCES, "add_library", "set", "set_source_files_properties"}
)  # fmt: skip
FLAG_VARIABLE = re.compile(r"CMAKE_\w+_(FLAGS|STANDARD)\w*")
SOURCE_SUFFIXES = (".cu", ".hip", ".cpp", ".cc", ".cxx", ".c")
LIBRARY_KINDS = {"STATIC", "SHARED", "MODULE", "OBJECT"}
# What the image's ROCm build gives CMake (setup.py's -D, ROCm torch's find_package) as
# rocmgraph reads it; the image sets no CXXFLAGS or HIPFLAGS, so CMake starts those empty
# and a set() that adds to them reads as what it adds.
_ROCM = cmake.rocm(cmake.ROCM_ARCHS)
ROCM_FACTS = replace(
    _ROCM, variables={**_ROCM.variables, "CMAKE_CXX_FLAGS": "", "CMAKE_HIP_FLAGS": ""}
)


@dataclass(frozen=True)
class Target:
    name: str
    language: str  # LANGUAGE's value; "" for an add_library
    sources: tuple[str, ...]  # repository paths
    where: str  # file:line of the call that defines it


@dataclass(frozen=True)
class Reading:
    """What one run of the ROCm build's CMake gives: the targets it compiles, each flag
    call by target name or source path ("" for every target's), what it did not decide."""

    targets: tuple[Target, ...]
    flags: Mapping[str, tuple[str, ...]]
    notes: tuple[str, ...]
    files: tuple[str, ...]  # the build files read: a change to them may change flags


def read_cmake(read: cmake.Read) -> Reading:
    evaluation = cmake.evaluate(read, ".", ROCM_FACTS, WATCHED)
    copies = hipified(evaluation.calls)
    targets: list[Target] = []
    notes = [f"{where(c)}: {c.name}({shown(c.args[:1])}) is not read"
             for c in evaluation.calls if c.name == UNREAD_SOURCES]  # fmt: skip
    for call in defining(evaluation.calls):
        if call.name in UNREAD_TARGETS:
            notes.append(f"{where(call)}: {call.name}({shown(call.args[:1])}) is not read")
        elif call.taken is not cmake.Taken.TAKEN:
            notes.append(f"{where(call)}: {call.args[0]} is defined under {undecided(call)}")
        else:
            target, unknown = target_of(call, copies)
            targets.append(target)
            notes.extend(unknown)
    notes.extend(fetch_notes(evaluation))
    flags = flags_of(evaluation.calls, copies)
    return Reading(tuple(targets), flags, tuple(notes), evaluation.files)


def defining(calls: Sequence[cmake.Called]) -> list[cmake.Called]:
    """Each target's first defining call (CMake refuses a name defined twice, so a later
    call of it is the defining function's own)."""
    commands = {*TARGET_COMMANDS, *UNREAD_TARGETS, "add_library"}
    found: dict[cmake.Value, cmake.Called] = {}
    for call in calls:
        if call.name in commands and call.args and not is_alias(call):
            found.setdefault(call.args[0], call)
    return list(found.values())


def is_alias(call: cmake.Called) -> bool:
    """An imported, alias or interface library compiles nothing."""
    return call.name == "add_library" and bool({"IMPORTED", "ALIAS", "INTERFACE"} & {*call.args})


def target_of(call: cmake.Called, copies: Mapping[str, str]) -> tuple[Target, tuple[str, ...]]:
    """The target a taken call defines, and what of its sources is not known."""
    if call.name == "add_library":
        args = [a for a in call.args[1:] if a not in LIBRARY_KINDS]
        language = ""
    else:
        keywords = keyword_args(call.args[1:])
        args, language = keywords.get("SOURCES", []), shown(keywords.get("LANGUAGE", []))
    sources = tuple(repository_path(s, copies) for s in items(args))
    unknown = tuple(f"{where(call)}: {call.args[0]}: a source is not known"
                    for a in args if a is cmake.UNKNOWN)  # fmt: skip
    return Target(str(call.args[0]), language, sources, where(call)), unknown


def hipified(calls: Sequence[cmake.Called]) -> dict[str, str]:
    """Each hipified copy's path -> its source: cmake/utils.cmake's hipify_sources_target
    names the copy of csrc/x.cu ${CMAKE_CURRENT_BINARY_DIR}/csrc/x.hip, "cuda" made "hip"."""
    found = {}
    for call in calls:
        if call.name == HIPIFY and call.taken is cmake.Taken.TAKEN:
            for source in items(call.args[2:]):
                copy = re.sub("cuda", "hip", re.sub(r"\.cu$", ".hip", source))
                found[posixpath.join(cmake.BUILD_DIR, copy)] = source
    return found


def repository_path(path: str, copies: Mapping[str, str]) -> str:
    path = posixpath.normpath(copies.get(path, path))
    return path.removeprefix(f"{cmake.ROOT}/")


def items(args: Iterable[cmake.Value]) -> list[str]:
    """The list the arguments make (a quoted one split at its semicolons), unknowns left out."""
    return [item for a in args if isinstance(a, str) for item in cmake.split_list(a)]


def flags_of(
    calls: Sequence[cmake.Called], copies: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    found: defaultdict[str, list[str]] = defaultdict(list)
    for call in calls:
        for key in flag_keys(call, copies):
            found[key].append(describe(call))
    return {key: tuple(values) for key, values in found.items()}


def flag_keys(call: cmake.Called, copies: Mapping[str, str]) -> list[str]:
    """Whose flags ``call`` sets: a target's name, a source's path, "" for every target."""
    first = shown(call.args[:1])
    if call.name in FLAG_COMMANDS | TARGET_COMMANDS or call.name == "add_library":
        return [first]
    if call.name in GLOBAL_FLAG_COMMANDS or (call.name == "set" and FLAG_VARIABLE.fullmatch(first)):
        return [""]
    if call.name == "set_source_files_properties":
        end = call.args.index("PROPERTIES") if "PROPERTIES" in call.args else len(call.args)
        return [repository_path(p, copies) for p in items(call.args[:end])]
    return []


def describe(call: cmake.Called) -> str:
    """The call as its flags read: a target's sources are its units, not its flags."""
    args: Sequence[cmake.Value] = call.args
    if call.name in TARGET_COMMANDS:
        kept = {k: v for k, v in keyword_args(call.args[1:]).items() if k != "SOURCES"}
        args = [w for k, v in kept.items() for w in ([k, *v] if k else v)]
    elif call.name == "add_library":
        args = sorted(LIBRARY_KINDS.intersection(call.args))
    undecided_ = "" if call.taken is cmake.Taken.TAKEN else "undecided: "
    return f"{undecided_}{call.name}({shown(args)})"


def keyword_args(args: Sequence[cmake.Value]) -> dict[str, list[cmake.Value]]:
    """A target function's arguments by keyword (cmake/utils.cmake's cmake_parse_arguments)."""
    found: dict[str, list[cmake.Value]] = {}
    current = found.setdefault("", [])
    for arg in args:
        if arg in TARGET_KEYWORDS:
            current = found.setdefault(str(arg), [])
        else:
            current.append(arg)
    return found


def shown(args: Iterable[cmake.Value]) -> str:
    return " ".join("?" if a is cmake.UNKNOWN else str(a) for a in args)


def where(call: cmake.Called) -> str:
    return f"{call.file}:{call.line}"


def undecided(call: cmake.Called) -> str:
    return f"an undecided condition ({call.under})" if call.under else "an undecided condition"


def fetch_notes(evaluation: cmake.Evaluation) -> Iterator[str]:
    if evaluation.stopped:
        yield f"a FATAL_ERROR is reached: {evaluation.stopped}"
    for fetched in evaluation.fetches:
        how = fetched.how if fetched.taken is cmake.Taken.TAKEN else f"{fetched.how}, undecided"
        yield f"{fetched.file}:{fetched.line}: {fetched.name} is fetched ({how}): not read"


# --- sgl-kernel's setup_rocm.py ------------------------------------------------------------

LISTS = {"sources", "include_dirs"}


@dataclass(frozen=True)
class Setup:
    sources: tuple[str, ...]  # relative to setup_rocm.py's folder
    include_dirs: tuple[str, ...]
    notes: tuple[str, ...]  # what the reader could not decide
    flags: tuple[str, ...] = ()  # its other assignments: the flags are among them


def read_setup(text: str) -> Setup:
    """``sources`` and ``include_dirs`` as setup_rocm.py assigns them, literal lists only;
    any other write to them, or an extension given other lists, is a note."""
    module = ast.parse(text)
    assigned = dict(module_assignments(module))
    sources, notes = literal_paths(assigned.get("sources"), "sources")
    include_dirs, dir_notes = literal_paths(assigned.get("include_dirs"), "include_dirs")
    flags = tuple(f"{n} = {ast.unparse(v)}" for n, v in assigned.items() if n not in LISTS)
    return Setup(sources, include_dirs, (*notes, *dir_notes, *other_writes(module)), flags)


def module_assignments(module: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                yield target.id, statement.value


def literal_paths(node: ast.expr | None, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not isinstance(node, ast.List):
        return (), (f"`{name}` is not a list literal at module level",)
    paths = [path_of(element) for element in node.elts]
    notes = tuple(
        f"line {e.lineno}: an element of `{name}` is not read"
        for e, p in zip(node.elts, paths, strict=True)
        if p is None
    )
    return tuple(p for p in paths if p is not None), notes


def path_of(node: ast.expr) -> str | None:
    """``"csrc/x.cu"``, or ``root / "include" / "impl"`` (root: setup_rocm.py's folder)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "root":
        return "."
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = path_of(node.left), path_of(node.right)
        return None if left is None or right is None else posixpath.join(left, right)
    return None


def other_writes(module: ast.Module) -> Iterator[str]:
    """Writes to the lists besides their one assignment, and extensions given other lists."""
    for node in ast.walk(module):
        if isinstance(node, ast.AugAssign | ast.Assign | ast.AnnAssign) and node not in module.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)} & LISTS
            yield from (f"line {node.lineno}: `{n}` is written again" for n in sorted(names))
        if isinstance(node, ast.Call):
            yield from call_notes(node)


def call_notes(call: ast.Call) -> Iterator[str]:
    func = call.func
    if isinstance(func, ast.Attribute) and name_of(func.value) in LISTS and func.attr != "copy":
        yield f"line {call.lineno}: `{name_of(func.value)}.{func.attr}(...)` is not read"
    for keyword in call.keywords:
        if keyword.arg in LISTS and name_of(keyword.value) != keyword.arg:
            yield f"line {call.lineno}: an extension's `{keyword.arg}=` is not the list"


def name_of(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


# --- one commit ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Build:
    """What one commit compiles for ROCm, and what the reading took and could not decide."""

    repo: str
    commit: str
    units: Mapping[str, Unit]
    lists: tuple[str, ...]
    notes: tuple[str, ...]
    build_files: frozenset[tuple[str, str]]  # their change may change the flags


@dataclass(frozen=True)
class Source:
    path: str
    defined: frozenset[str]  # the macros its compile is known to define
    flags: tuple[str, ...]  # what the build files say of its flags


@dataclass
class Files:
    """A repository's objects, each file's includes read once (blob ids repeat across
    commits: most of a tree does not change in a week)."""

    objects: Objects
    read: dict[tuple[str, frozenset[str]], tuple[Include, ...]] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)  # "path (blob id)" of blobs the mirror lacks

    def includes_of(self, path: str, blob: str, defined: frozenset[str]) -> tuple[Include, ...]:
        if (blob, defined) not in self.read:
            data = self.objects.blob(blob)
            if data is None:
                self.missing.add(f"{path} ({blob})")
            self.read[blob, defined] = includes(data or b"", defined)
        return self.read[blob, defined]

    def text(self, tree: Mapping[str, str], path: str) -> str | None:
        data = self.objects.blob(tree[path]) if path in tree else None
        if data is None and path in tree:
            self.missing.add(f"{path} ({tree[path]})")
        return None if data is None else data.decode(errors="replace")

    def units(
        self, tree: Mapping[str, str], keys: Mapping[str, Source], dirs: Sequence[str]
    ) -> dict[str, Unit]:
        """Each unit with its closure."""
        return {key: self.unit(tree, key, source, dirs) for key, source in keys.items()}

    def unit(self, tree: Mapping[str, str], key: str, source: Source, dirs: Sequence[str]) -> Unit:
        def includes_of(path: str, blob: str) -> tuple[Include, ...]:
            return self.includes_of(path, blob, source.defined)

        files = closure(source.path, tree, dirs, includes_of)
        return Unit(key, frozenset(files.items()), tree[source.path], source.flags)


VLLM_INCLUDE_DIRS = ("csrc",)  # cmake/utils.cmake: define_extension_target adds csrc/


def vllm_build(files: Files, commit: str) -> Build:
    tree = files.objects.tree(commit)
    reading = read_cmake(lambda path: files.text(tree, path))
    keys, absent = unit_keys(reading, tree)
    lists = tuple(
        f"{t.name} ({t.language or 'add_library'}): {len(set(t.sources))} from {t.where}"
        for t in reading.targets
    )
    lists = (f"read {', '.join(reading.files)}", *lists)
    built = files.units(tree, keys, VLLM_INCLUDE_DIRS)
    read = build_files(tree, (*reading.files, "cmake/hipify.py"))  # hipify.py rewrites each .cu
    return Build("vllm", commit, built, lists, (*reading.notes, *absent), read)


def unit_keys(
    reading: Reading, tree: Mapping[str, str]
) -> tuple[dict[str, Source], tuple[str, ...]]:
    """``target:path`` -> each source the tree has; the sources it lacks."""
    keys, absent = {}, []
    for target in reading.targets:
        flags = (*reading.flags.get("", ()), *reading.flags.get(target.name, ()))
        for path in (s for s in target.sources if s.endswith(SOURCE_SUFFIXES)):
            if path in tree:
                own = (*flags, *reading.flags.get(path, ()))
                keys[f"{target.name}:{path}"] = Source(path, vllm_defines(target, path), own)
            else:
                absent.append(f"{target.name}: {path} is not in the tree")
    return keys, tuple(absent)


def vllm_defines(target: Target, path: str) -> frozenset[str]:
    # VLLM_GPU_FLAGS reach only the HIP compiles ($<COMPILE_LANGUAGE:HIP>): a .cpp of a HIP
    # target, or a CXX target, is compiled with no macro this reading can vouch for.
    hip = target.language == "HIP" and path.endswith((".cu", ".hip"))
    return HIP_DEFINES if hip else frozenset()


def build_files(tree: Mapping[str, str], paths: Sequence[str]) -> frozenset[tuple[str, str]]:
    return frozenset((path, tree[path]) for path in paths if path in tree)


def kernel_root(tree: Mapping[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """The folder of sgl-kernel's ROCm build (setup_rocm.py beside pyproject_rocm.toml): it
    moved from sgl-kernel/ to python/sglang/kernels/aot/."""
    roots = sorted(
        posixpath.dirname(p)
        for p in tree
        if p.endswith("/setup_rocm.py")
        and posixpath.join(posixpath.dirname(p), "pyproject_rocm.toml") in tree
    )
    if len(roots) == 1:
        return roots[0], ()
    return None, (f"sgl-kernel's ROCm build is in {len(roots)} folders: {roots}; not read",)


def sgl_kernel_build(files: Files, commit: str) -> Build:
    tree = files.objects.tree(commit)
    root, notes = kernel_root(tree)
    if root is None:
        return Build("sgl-kernel", commit, {}, (), notes, frozenset())
    setup = read_setup(files.text(tree, f"{root}/setup_rocm.py") or "")
    paths = {posixpath.normpath(posixpath.join(root, s)) for s in setup.sources}
    absent = tuple(f"{p} is not in the tree" for p in sorted(paths) if p not in tree)
    # torch's BuildExtension puts COMMON_HIP_FLAGS on every compile of a ROCm extension.
    keys = {path: Source(path, HIP_DEFINES, setup.flags) for path in paths if path in tree}
    dirs = tuple(posixpath.normpath(posixpath.join(root, d)) for d in setup.include_dirs)
    lists = (f"{root}/setup_rocm.py: {len(paths)} sources; include_dirs {', '.join(dirs)}",)
    built = files.units(tree, keys, dirs)
    build = build_files(tree, (f"{root}/setup_rocm.py",))
    return Build("sgl-kernel", commit, built, lists, (*setup.notes, *absent), build)


# --- pairs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    repo: str
    old: str
    new: str
    old_date: datetime
    new_date: datetime
    counts: Counts
    build_files_changed: bool
    causes: tuple[tuple[str, int], ...]  # the changed files behind the most misses

    def row(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "from": self.old,
            "to": self.new,
            "from_date": self.old_date.isoformat(),
            "to_date": self.new_date.isoformat(),
            **{
                name: getattr(self.counts, name)
                for name in (
                    "units",
                    "hits",
                    "added",
                    "changed",
                    "moved",
                    "share",
                    "flag_hits",
                    "flag_share",
                )
            },
            "build_files_changed": self.build_files_changed,
            "most_missed_files": dict(self.causes),
        }


def pairs(builds: Sequence[Build], when: Mapping[str, datetime]) -> list[Pair]:
    return [
        Pair(
            new.repo,
            old.commit,
            new.commit,
            when[old.commit],
            when[new.commit],
            compare(old.units, new.units),
            old.build_files != new.build_files,
            causes(old.units, new.units),
        )
        for old, new in itertools.pairwise(builds)
    ]


def median_share(found: Sequence[Pair], share: str = "share") -> float:
    return statistics.median(getattr(pair.counts, share) for pair in found) if found else 0.0


# --- output --------------------------------------------------------------------------------


def reading_lines(builds: Sequence[Build], when: Mapping[str, datetime]) -> Iterator[str]:
    """What the reading took at each commit; a note already printed for the commit before is
    counted, not repeated (its line number aside)."""
    before: set[str] = set()
    for build in builds:
        date = when[build.commit]
        yield f"{build.repo} {build.commit[:10]} {date:%Y-%m-%d}: {len(build.units)} units"
        yield from (f"    {line}" for line in build.lists)
        notes = {re.sub(r":\d+:", ":", note): note for note in build.notes}
        yield from (f"    undecided: {notes[n]}" for n in sorted(notes) if n not in before)
        if set(notes) & before:
            yield f"    (and {len(set(notes) & before)} undecided as at the commit before)"
        before = set(notes)


def table(found: Sequence[Pair]) -> Iterator[str]:
    yield (
        "| repo | from | to | units | hits | share | new | changed | moved "
        "| share, flags too | most missed file |"
    )
    yield "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for pair in found:
        c = pair.counts
        yield (
            f"| {pair.repo} | {pair.old[:9]} {pair.old_date:%m-%d} | {pair.new[:9]} "
            f"{pair.new_date:%m-%d} | {c.units} | {c.hits} | {c.share:.0%} | {c.added} | "
            f"{c.changed} | {c.moved} | {c.flag_share:.0%} | "
            f"{' '.join(f'{path} ({n})' for path, n in pair.causes[:1])} |"
        )


def summary(by_repo: Mapping[str, Sequence[Pair]]) -> dict[str, float]:
    every = [pair for found in by_repo.values() for pair in found]
    units = sum(pair.counts.units for pair in every)
    found = {**by_repo, "overall": every}
    return {
        **{f"median_share_{repo}": median_share(pairs) for repo, pairs in found.items()},
        **{
            f"median_share_flags_too_{repo}": median_share(pairs, "flag_share")
            for repo, pairs in found.items()
        },
        "pooled_share_overall": sum(p.counts.hits for p in every) / units if units else 0.0,
    }


# --- the run -------------------------------------------------------------------------------

REPOS = (("vllm", "vllm", vllm_build), ("sgl-kernel", "sglang", sgl_kernel_build))


def measure(
    choice: history.Choice, git_dir: Path, build: Callable[[Files, str], Build]
) -> tuple[list[Build], dict[str, datetime], set[str]]:
    with Objects(git_dir) as objects:
        files = Files(objects)
        builds = [build(files, commit) for commit in choice.commits]
    return builds, history.dates(git_dir, choice.commits), files.missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-git", type=Path, help="bare repository of the vLLM fork")
    parser.add_argument("--sglang-git", type=Path, help="bare repository of the SGLang fork")
    parser.add_argument("--history", type=Path, default=history.HISTORY)
    parser.add_argument("--json", type=Path, help="write the pairs and medians here")
    args = parser.parse_args()
    started = time.monotonic()
    report = replay(args, history.load(args.history))
    report["seconds"] = round(time.monotonic() - started, 1)
    print("\n".join(f"{key}: {value:.3f}" for key, value in report.items() if key != "repos"))
    for repo, found in report["repos"].items():
        print(f"{repo}: {len(found['missing_blobs'])} blobs missing from the mirror")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


def replay(args: argparse.Namespace, choices: Mapping[str, history.Choice]) -> dict[str, Any]:
    """Each repository's readings printed, then the table; the report to print and write."""
    by_repo: dict[str, list[Pair]] = {}
    report: dict[str, Any] = {"repos": {}}
    for repo, fork, build in REPOS:
        git_dir = getattr(args, f"{fork}_git") or history.mirror(choices[fork].repo)
        builds, when, missing = measure(choices[fork], git_dir, build)
        print("\n".join(reading_lines(builds, when)), end="\n\n")
        by_repo[repo] = pairs(builds, when)
        report["repos"][repo] = repo_report(builds, by_repo[repo], missing)
    print("\n".join(table([pair for found in by_repo.values() for pair in found])), end="\n\n")
    return {**report, **summary(by_repo)}


def repo_report(
    builds: Sequence[Build], found: Sequence[Pair], missing: set[str]
) -> dict[str, Any]:
    readings = [
        {"commit": b.commit, "units": len(b.units), "lists": b.lists, "notes": b.notes}
        for b in builds
    ]
    return {
        "pairs": [pair.row() for pair in found],
        "readings": readings,
        "median_share": median_share(found),
        "missing_blobs": sorted(missing),
    }


if __name__ == "__main__":
    main()
