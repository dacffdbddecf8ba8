"""Benchmark: the share of ROCm compile units that ccache's direct mode would hit across real
upstream bumps of vLLM and of sgl-kernel (the commits of benchmarks/history.toml).

A unit hits when the older commit compiled it too (same path, same target) and its source
and every repository file it includes, transitively, keep their blob ids: ccache's direct
mode then finds its manifest, given the same compiler and flags (headers outside the
repository, torch's and ROCm's, come with the compiler). A second share also asks that the
flags the build files set for the unit stay the same. The units are what the build files
give a ROCm build: vLLM's CMakeLists.txt through a small reader that prints the lists it
took and what it could not decide, sgl-kernel's setup_rocm.py `sources`.

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


# --- three-valued logic: a branch is taken, not taken, or undecided (None) ----------------


@dataclass(frozen=True)
class Frame:
    """An open block: its current branch is taken (True), not (False) or undecided (None)."""

    kind: str
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
    """The frame at an elseif/#elif whose condition is ``value``."""
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
        stack.append(Frame("#if", value, value))
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


# --- CMake ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    text: str
    quoted: bool


@dataclass(frozen=True)
class Command:
    name: str  # lower case: CMake's command names are case-blind
    args: tuple[Arg, ...]
    where: str  # file:line


TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
      | (?P<comment>\#\[(?P<ceq>=*)\[.*?\](?P=ceq)\]|\#[^\n]*)
      | (?P<open>\() | (?P<close>\))
      | (?P<quoted>"(?:[^"\\]|\\.)*")
      | (?P<bracket>\[(?P<beq>=*)\[.*?\](?P=beq)\])
      | (?P<word>(?:[^\s()"\#\\]|\\.)+)""",
    re.VERBOSE | re.DOTALL,
)


class CMakeError(Exception):
    """A build file the reader cannot parse; the message names the file and line."""


def tokens(text: str, name: str) -> Iterator[tuple[str, str, int]]:
    """(kind, text, line) of each token but spaces and comments."""
    line, pos = 1, 0
    while pos < len(text):
        found = TOKEN.match(text, pos)
        if found is None:
            raise CMakeError(f"{name}:{line}: cannot read {text[pos : pos + 20]!r}")
        kind = found.lastgroup or ""
        if kind not in {"space", "comment"}:
            yield ("bracket" if kind == "bracket" else kind), found.group(), line
        line += found.group().count("\n")
        pos = found.end()


def argument(kind: str, text: str) -> Arg:
    if kind == "quoted":
        return Arg(re.sub(r"\\(.)", r"\1", text[1:-1]), True)
    if kind == "bracket":
        return Arg(text[text.index("[", 1) + 1 : text.rindex("]", 0, -1)], True)
    return Arg(text, False)


def commands(text: str, name: str) -> list[Command]:
    """The file's command invocations; nested parentheses stay as ``(`` and ``)`` args."""
    found: list[Command] = []
    stream = tokens(text, name)
    for kind, word, line in stream:
        if kind != "word" or next(stream, ("", "", 0))[0] != "open":
            raise CMakeError(f"{name}:{line}: expected a command, found {word!r}")
        found.append(Command(word.lower(), tuple(arguments(stream, name, line)), f"{name}:{line}"))
    return found


def arguments(stream: Iterator[tuple[str, str, int]], name: str, line: int) -> Iterator[Arg]:
    depth = 1
    for kind, text, _ in stream:
        depth += {"open": 1, "close": -1}.get(kind, 0)
        if depth == 0:
            return
        yield argument(kind, text)
    raise CMakeError(f"{name}:{line}: the command's parenthesis is never closed")


@dataclass(frozen=True)
class Var:
    items: tuple[str, ...] | None  # None: the reader could not read its value
    where: tuple[str, ...] = ()  # where it was set or appended to
    doubts: tuple[str, ...] = ()  # what the reader could not decide about it


@dataclass(frozen=True)
class Target:
    name: str
    language: str
    sources: tuple[str, ...]
    lists: tuple[str, ...]  # the variables its SOURCES named, each with where it was set
    doubts: tuple[str, ...]


# What the image's ROCm build gives CMake: setup.py passes -DVLLM_TARGET_DEVICE=rocm (it
# finds torch.version.hip), find_package(Torch) on ROCm torch sets PYTORCH_FOUND_HIP, the
# image's Python is 3.12, and override_gpu_arches() (not read) keeps the target archs.
ROCM_FACTS = {
    "VLLM_TARGET_DEVICE": "rocm",
    "PYTORCH_FOUND_HIP": "TRUE",
    "Python_VERSION": "3.12",
    "VLLM_GPU_ARCHES": "gfx942;gfx950",
}
ROOT_DIRS = ("CMAKE_SOURCE_DIR", "CMAKE_CURRENT_SOURCE_DIR", "PROJECT_SOURCE_DIR")
TARGET_COMMANDS = {"define_extension_target", "define_gpu_extension_target"}
TARGET_KEYWORDS = {
    "DESTINATION", "LANGUAGE", "SOURCES", "COMPILE_FLAGS", "ARCHITECTURES",
    "INCLUDE_DIRECTORIES", "LIBRARIES", "USE_SABI", "WITH_SOABI",
}  # fmt: skip
# Commands that compile, or bring in compiles, in ways the reader does not follow.
UNREAD_COMMANDS = {
    "target_sources", "add_executable", "python_add_library", "hip_add_library",
    "cuda_add_library", "add_subdirectory", "fetchcontent_makeavailable", "externalproject_add",
}  # fmt: skip
# Commands that set a target's compile flags (the first argument names it), or every
# target's; and the variables that hold every target's flags.
FLAG_COMMANDS = {
    "target_compile_definitions", "target_compile_options", "target_include_directories",
    "set_target_properties", "target_compile_features",
}  # fmt: skip
GLOBAL_FLAG_COMMANDS = {
    "add_compile_definitions", "add_compile_options", "add_definitions", "include_directories",
}  # fmt: skip
FLAG_VARIABLE = re.compile(r"CMAKE_\w+_(FLAGS|STANDARD)\w*")
SOURCE_SUFFIXES = (".cu", ".hip", ".cpp", ".cc", ".cxx", ".c")
TRUE_WORDS = {"1", "ON", "YES", "TRUE", "Y"}
FALSE_WORDS = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REFERENCE = re.compile(r"\$(ENV|CACHE)?\{([^${}]*)\}")


class Reading:
    """One pass over CMakeLists.txt (and the repository files it includes) as a ROCm build
    runs it: branches decided from ROCM_FACTS where they can be, the rest printed."""

    def __init__(self, read: Callable[[str], str | None], facts: Mapping[str, str]) -> None:
        self.read = read
        self.vars = {name: Var(tuple(value.split(";"))) for name, value in facts.items()}
        self.vars.update({name: Var((".",)) for name in ROOT_DIRS})  # paths: the tree's
        self.targets: list[Target] = []
        self.notes: list[str] = []
        self.files: list[str] = []  # the build files read: a change to them may change flags
        # Flags by target name or source path; "": every target's.
        self.flags: dict[str, list[str]] = defaultdict(list)
        self.depth = 0  # of include()

    # Values

    def expand(self, text: str) -> tuple[str, tuple[str, ...]]:
        """``text`` with its ${...} replaced, and why any of them could not be."""
        doubts: list[str] = []

        def value(found: re.Match[str]) -> str:
            var = self.vars.get(found.group(2)) if found.group(1) is None else None
            if var is None or var.items is None:
                doubts.append(f"{found.group()} is not set by the file")
            else:
                doubts.extend(var.doubts)
            return ";".join(var.items or ()) if var else ""

        for _ in range(8):  # ${${name}}: innermost first
            text, count = REFERENCE.subn(value, text)
            if not count:
                break
        return text, tuple(doubts)

    def items(self, args: Iterable[Arg]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The list ``args`` make (each split at its semicolons), and what was not set."""
        values: list[str] = []
        doubts: list[str] = []
        for arg in args:
            text, why = self.expand(arg.text)
            values.extend(item for item in text.split(";") if item)
            doubts.extend(why)
        return tuple(values), tuple(doubts)

    def known(self, name: str) -> Var | None:
        var = self.vars.get(name)
        return var if var is not None and var.items is not None and not var.doubts else None

    # Conditions (precedence as CMake's: parentheses, unary and binary tests, NOT, AND, OR)

    def condition(self, args: Sequence[Arg]) -> bool | None:
        end, value = self.any_of(args, 0)
        return value if end == len(args) else None  # something it did not understand

    def any_of(self, args: Sequence[Arg], pos: int) -> tuple[int, bool | None]:
        pos, value = self.all_of(args, pos)
        while pos < len(args) and args[pos] == Arg("OR", False):
            pos, right = self.all_of(args, pos + 1)
            value = or3(value, right)
        return pos, value

    def all_of(self, args: Sequence[Arg], pos: int) -> tuple[int, bool | None]:
        pos, value = self.negation(args, pos)
        while pos < len(args) and args[pos] == Arg("AND", False):
            pos, right = self.negation(args, pos + 1)
            value = and3(value, right)
        return pos, value

    def negation(self, args: Sequence[Arg], pos: int) -> tuple[int, bool | None]:
        if pos < len(args) and args[pos] == Arg("NOT", False):
            pos, value = self.negation(args, pos + 1)
            return pos, not3(value)
        return self.test(args, pos)

    def test(self, args: Sequence[Arg], pos: int) -> tuple[int, bool | None]:
        if pos >= len(args):
            return pos, None
        if args[pos] == Arg("(", False):
            pos, value = self.any_of(args, pos + 1)
            return pos + 1, value if pos < len(args) and args[pos] == Arg(")", False) else None
        if args[pos] == Arg("DEFINED", False) and pos + 1 < len(args):
            return pos + 2, True if self.known(args[pos + 1].text) else None
        if pos + 2 < len(args) and not args[pos + 1].quoted and args[pos + 1].text in BINARY:
            return pos + 3, self.binary(args[pos + 1].text, args[pos], args[pos + 2])
        # Any other test (EXISTS, EQUAL, IN_LIST...) leaves words unread: undecided.
        return pos + 1, self.truth(args[pos])

    def operand(self, arg: Arg) -> str | None:
        text, doubts = self.expand(arg.text)
        if doubts:
            return None
        var = None if arg.quoted else self.vars.get(text)
        if var is not None:
            known = self.known(text)
            return ";".join(known.items or ()) if known else None
        # An unset name may be a variable the build environment sets (-D, find_package).
        return None if not arg.quoted and NAME.fullmatch(text) else text

    def truth(self, arg: Arg) -> bool | None:
        text, doubts = self.expand(arg.text)
        if doubts:
            return None
        if text.upper() in TRUE_WORDS or text.upper() in FALSE_WORDS or arg.quoted:
            return text.upper() in TRUE_WORDS
        value = self.operand(arg)
        return None if value is None else not is_false(value)

    def binary(self, op: str, left: Arg, right: Arg) -> bool | None:
        a, b = self.operand(left), self.operand(right)
        return None if a is None or b is None else BINARY[op](a, b)

    # Commands

    def run(self, name: str) -> None:
        text = self.read(name) if self.depth < 8 else None  # include() cycles end here
        if text is None:
            self.notes.append(f"{name}: not in the tree, not read")
            return
        self.files.append(name)
        outer = self.vars.get("CMAKE_CURRENT_LIST_DIR", Var(None))
        self.vars["CMAKE_CURRENT_LIST_DIR"] = Var((posixpath.dirname(name) or ".",))
        self.run_commands(commands(text, name), name)
        self.vars["CMAKE_CURRENT_LIST_DIR"] = outer

    def run_commands(self, found: Sequence[Command], name: str) -> None:
        stack: list[Frame] = []
        for command in found:
            if self.step(command, stack):
                return
        if stack:
            self.notes.append(f"{name}: {len(stack)} blocks never closed")

    def step(self, command: Command, stack: list[Frame]) -> bool:
        """Runs ``command``; True at a return() that ends the file."""
        if self.flow(command, stack) or running(stack) is False:
            return False
        handler = self.handlers.get(command.name)
        if handler is not None:
            handler(command, running(stack))
        return command.name == "return" and running(stack) is True

    @functools.cached_property
    def handlers(self) -> dict[str, Callable[[Command, bool | None], None]]:
        targets = dict.fromkeys(TARGET_COMMANDS, self.target)
        unread = dict.fromkeys(UNREAD_COMMANDS, self.unread)
        flags = dict.fromkeys(FLAG_COMMANDS | GLOBAL_FLAG_COMMANDS, self.flag)
        flags["set_source_files_properties"] = self.source_flags
        return {
            "set": self.set,
            "list": self.list,
            "file": self.file,
            "include": self.include,
            "add_library": self.library,
            "hipify_sources_target": self.hipify,
            "return": self.returns,
            "message": self.message,
            **targets,
            **unread,
            **flags,
        }

    def flow(self, command: Command, stack: list[Frame]) -> bool:
        """Opens, moves on or closes a block; False if ``command`` is none of those."""
        if command.name in OPENERS:
            stack.append(self.open(command, running(stack) is False))
        elif command.name in {"elseif", "else"}:
            if not stack or stack[-1].kind != "if":
                raise CMakeError(f"{command.where}: {command.name}() outside an if()")
            stack[-1] = self.branch(stack[-1], command)
        elif command.name in BLOCK_ENDS:
            if not stack:
                raise CMakeError(f"{command.where}: {command.name}() closes no block")
            stack.pop()
        else:
            return False
        return True

    def open(self, command: Command, outside: bool) -> Frame:
        if command.name != "if":
            return Frame(command.name, *OPENERS[command.name])
        value = False if outside else self.condition(command.args)
        return Frame("if", value, True if outside else value)

    def branch(self, frame: Frame, command: Command) -> Frame:
        if command.name == "else":
            return replace(frame, state=not3(frame.done))
        return next_branch(frame, self.condition(command.args))

    def doubt(self, name: str, why: str) -> None:
        var = self.vars.get(name, Var(()))
        self.vars[name] = replace(var, doubts=(*var.doubts, why))

    def set(self, command: Command, state: bool | None) -> None:
        if not command.args:
            return
        name, args = command.args[0].text, list(command.args[1:])
        args = [arg for arg in args if arg != Arg("PARENT_SCOPE", False)]
        if FLAG_VARIABLE.fullmatch(name):
            self.flags[""].append(self.describe(command, state))
        if Arg("CACHE", False) in args:
            if self.known(name) and Arg("FORCE", False) not in args:
                return  # a cache entry keeps what -D gave it (ROCM_FACTS)
            args = args[: args.index(Arg("CACHE", False))]
        if state is None:
            self.doubt(name, f"{command.where}: set under an undecided condition")
            return
        values, doubts = self.items(args)
        self.vars[name] = Var(values, (command.where,), doubts)

    def list(self, command: Command, state: bool | None) -> None:
        if len(command.args) < 2:
            return
        operation, name = command.args[0].text, command.args[1].text
        if state is None:
            self.doubt(name, f"{command.where}: list({operation}) under an undecided condition")
        elif operation in LIST_EDITS or operation == "FILTER":
            var = self.vars.get(name, Var(()))
            items, doubts = self.edit(operation, var.items or (), command.args[2:])
            where = (*var.where, command.where)
            self.vars[name] = Var(items, where, (*var.doubts, *doubts))
        elif operation in LIST_QUERIES:
            self.vars[command.args[-1].text] = Var(None, (command.where,))
        else:
            self.doubt(name, f"{command.where}: list({operation}) is not read")

    def edit(
        self, operation: str, items: tuple[str, ...], args: Sequence[Arg]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if operation == "FILTER":
            return self.filtered(items, args)
        values, doubts = self.items(args)
        return LIST_EDITS[operation](items, values), doubts

    def filtered(
        self, items: tuple[str, ...], args: Sequence[Arg]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """list(FILTER <list> INCLUDE|EXCLUDE REGEX <regex>)."""
        pattern, doubts = self.expand(args[-1].text)
        try:
            compiled = re.compile(pattern)
        except re.error:
            return items, (f"list(FILTER ... REGEX {pattern}) is not read",)
        keep = args[0] != Arg("EXCLUDE", False)
        return tuple(i for i in items if (compiled.search(i) is not None) == keep), doubts

    def file(self, command: Command, state: bool | None) -> None:
        if command.args and command.args[0].text.startswith("GLOB"):
            self.doubt(command.args[1].text, f"{command.where}: file(GLOB) is not read")

    def include(self, command: Command, state: bool | None) -> None:
        path, doubts = self.expand(command.args[0].text)
        path = posixpath.normpath(path)
        ours = "/" in path or path.endswith(".cmake")  # else a CMake module (FetchContent)
        if doubts:
            self.notes.append(f"{command.where}: include({command.args[0].text}) is not read")
        elif ours and state is None:
            self.notes.append(f"{command.where}: include({path}) under an undecided condition")
        elif ours:
            self.depth += 1
            self.run(path)
            self.depth -= 1

    def target(self, command: Command, state: bool | None) -> None:
        keywords = keyword_args(command.args[1:])
        language = " ".join(self.items(keywords.get("LANGUAGE", []))[0])
        self.add_target(command, state, language, keywords.get("SOURCES", []))
        rest = but(keywords, "SOURCES")
        self.flags[first(command)].append(self.describe(replace(command, args=rest), state))

    def flag(self, command: Command, state: bool | None) -> None:
        """A command that sets the flags of a target (its first argument), or of all."""
        target = self.expand(first(command))[0] if command.name in FLAG_COMMANDS else ""
        self.flags[target].append(self.describe(command, state))

    def source_flags(self, command: Command, state: bool | None) -> None:
        """set_source_files_properties(files... PROPERTIES ...): those files' flags."""
        words = [arg.text for arg in command.args]
        end = words.index("PROPERTIES") if "PROPERTIES" in words else len(words)
        for path in self.items(command.args[:end])[0]:
            self.flags[posixpath.normpath(path)].append(self.describe(command, state))

    def describe(self, command: Command, state: bool | None) -> str:
        args = " ".join(self.expand(arg.text)[0] for arg in command.args)
        return f"{'' if state else 'undecided: '}{command.name}({args})"

    def library(self, command: Command, state: bool | None) -> None:
        """add_library(name [STATIC|SHARED|MODULE|OBJECT] sources...), as vLLM's
        _rocm_C_skinny; an imported, alias or interface library compiles nothing."""
        words = {arg.text for arg in command.args if not arg.quoted}
        if not words & {"IMPORTED", "ALIAS", "INTERFACE"}:
            sources = [a for a in command.args[1:] if a.quoted or a.text not in LIBRARY_KINDS]
            self.add_target(command, state, "", sources)
            self.flags[first(command)].append(" ".join(sorted(words & LIBRARY_KINDS)))

    def add_target(
        self, command: Command, state: bool | None, language: str, args: Sequence[Arg]
    ) -> None:
        name = first(command)
        if state is None:
            self.notes.append(f"{command.where}: {name} is defined under an undecided condition")
            return
        sources, doubts = self.items(arg for arg in args if not is_keyword(arg))
        unknown = tuple(
            f"{command.where}: {arg.text}: a keyword?" for arg in args if is_keyword(arg)
        )
        lists = tuple(self.provenance(arg) for arg in args if not is_keyword(arg))
        self.targets.append(Target(name, language, sources, lists, (*doubts, *unknown)))

    def hipify(self, command: Command, state: bool | None) -> None:
        """hipify_sources_target(OUT NAME SOURCES) (cmake/utils.cmake) sets OUT to the
        hipified copies of SOURCES: the same units, so OUT takes SOURCES."""
        copy = [Arg(command.args[0].text, False), *command.args[2:]]
        self.set(replace(command, args=tuple(copy)), state)

    def unread(self, command: Command, state: bool | None) -> None:
        under = "" if state else " (under an undecided condition)"
        self.notes.append(f"{command.where}: {command.name}({first(command)}) is not read{under}")

    def returns(self, command: Command, state: bool | None) -> None:
        if state is None:
            self.notes.append(f"{command.where}: return() under an undecided condition")

    def message(self, command: Command, state: bool | None) -> None:
        if state and command.args[:1] == (Arg("FATAL_ERROR", False),):
            self.notes.append(f"{command.where}: a FATAL_ERROR is reached")

    def provenance(self, arg: Arg) -> str:
        names = [found.group(2) for found in REFERENCE.finditer(arg.text)]
        if not names:
            return arg.text
        return ", ".join(f"{n} ({' '.join(self.vars.get(n, Var(())).where)})" for n in names)


def first(command: Command) -> str:
    return command.args[0].text if command.args else ""


def keyword_args(args: Sequence[Arg]) -> dict[str, list[Arg]]:
    """A target function's arguments by keyword (cmake/utils.cmake's cmake_parse_arguments)."""
    found: dict[str, list[Arg]] = {}
    current = found.setdefault("", [])
    for arg in args:
        if not arg.quoted and arg.text in TARGET_KEYWORDS:
            current = found.setdefault(arg.text, [])
        else:
            current.append(arg)
    return found


def but(keywords: Mapping[str, Sequence[Arg]], dropped: str) -> tuple[Arg, ...]:
    """The arguments ``keywords`` holds, in order, but the ``dropped`` keyword's."""
    found: list[Arg] = []
    for key, values in keywords.items():
        if key != dropped:
            found.extend([Arg(key, False), *values] if key else values)
    return tuple(found)


def is_keyword(arg: Arg) -> bool:
    # A keyword this reader does not know would otherwise read as a source.
    return not arg.quoted and re.fullmatch(r"[A-Z][A-Z0-9_]*", arg.text) is not None


def is_false(value: str) -> bool:
    return value.upper() in FALSE_WORDS or value.upper().endswith("-NOTFOUND")


def version(text: str) -> tuple[int, ...]:
    parts = [int(re.sub(r"\D.*", "", part) or 0) for part in text.split(".")]
    return tuple(parts + [0] * (4 - len(parts)))


def matches(value: str, pattern: str) -> bool | None:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return None


BINARY: dict[str, Callable[[str, str], bool | None]] = {
    "STREQUAL": lambda a, b: a == b,
    "MATCHES": matches,
    "VERSION_LESS": lambda a, b: version(a) < version(b),
    "VERSION_GREATER": lambda a, b: version(a) > version(b),
    "VERSION_EQUAL": lambda a, b: version(a) == version(b),
    "VERSION_LESS_EQUAL": lambda a, b: version(a) <= version(b),
    "VERSION_GREATER_EQUAL": lambda a, b: version(a) >= version(b),
}
LIST_EDITS: dict[str, Callable[[tuple[str, ...], tuple[str, ...]], tuple[str, ...]]] = {
    "APPEND": lambda items, values: (*items, *values),
    "PREPEND": lambda items, values: (*values, *items),
    "REMOVE_ITEM": lambda items, values: tuple(i for i in items if i not in values),
    "REMOVE_DUPLICATES": lambda items, _: tuple(dict.fromkeys(items)),
}
OPENERS: dict[str, tuple[bool | None, bool | None]] = {
    "if": (None, None),  # decided by its condition
    "function": (False, True),  # a definition runs only when called
    "macro": (False, True),
    "foreach": (None, None),  # not unrolled: what a loop does is undecided
    "while": (None, None),
    "block": (True, True),
}
LIBRARY_KINDS = {"STATIC", "SHARED", "MODULE", "OBJECT"}
BLOCK_ENDS = {"endif", "endfunction", "endmacro", "endforeach", "endwhile", "endblock"}
LIST_QUERIES = {"LENGTH", "GET", "JOIN", "SUBLIST", "FIND"}


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
    reading = Reading(lambda path: files.text(tree, path), ROCM_FACTS)
    try:
        reading.run("CMakeLists.txt")
    except CMakeError as error:
        reading.notes.append(str(error))
    keys, absent = unit_keys(reading, tree)
    lists = tuple(
        f"{t.name} ({t.language or 'add_library'}): {len(set(t.sources))} from {'; '.join(t.lists)}"
        for t in reading.targets
    )
    lists = (f"read {', '.join(reading.files)}", *lists)
    doubts = tuple(d for t in reading.targets for d in t.doubts)
    built = files.units(tree, keys, VLLM_INCLUDE_DIRS)
    notes = (*reading.notes, *doubts, *absent)
    read = build_files(tree, (*reading.files, "cmake/hipify.py"))  # hipify.py rewrites each .cu
    return Build("vllm", commit, built, lists, notes, read)


def unit_keys(
    reading: Reading, tree: Mapping[str, str]
) -> tuple[dict[str, Source], tuple[str, ...]]:
    """``target:path`` -> each source the tree has; the sources it lacks."""
    keys, absent = {}, []
    for target in reading.targets:
        flags = (*reading.flags[""], *reading.flags[target.name])
        for path in (posixpath.normpath(s) for s in target.sources if s.endswith(SOURCE_SUFFIXES)):
            if path in tree:
                own = (*flags, *reading.flags[path])
                keys[f"{target.name}:{path}"] = Source(path, vllm_defines(target, path), own)
            else:
                absent.append(f"{target.name}: {path} is not in the tree")
    return keys, tuple(absent)


def vllm_defines(target: Target, path: str) -> frozenset[str]:
    # VLLM_GPU_FLAGS reach only the HIP compiles ($<COMPILE_LANGUAGE:HIP>): a .cpp of a HIP
    # target, or a CXX target, is compiled with no macro this reader can vouch for.
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
    """What the reader took at each commit; a note already printed for the commit before is
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
