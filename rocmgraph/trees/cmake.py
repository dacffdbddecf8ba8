"""A small CMake evaluator: what a project's CMake fetches in one build, the ROCm one.

Reading every FetchContent_Declare whatever if() it sits in demands the CUDA-only and
CPU-only fetches of vLLM, and taking the last set() of a variable whatever branch set it
names the wrong repository (triton_kernels: ROCm's fork on ROCm, triton-lang's elsewhere).
So the files are run as CMake runs them, from the facts a ROCm build starts with
(``Facts``): variables, if() with CMake's condition grammar, include(), functions and
macros, loops. What the facts do not decide stays Unknown, never guessed: a condition that
depends on it takes neither branch, is recorded with its file and line, and every fetch
under it is UNDECIDED (neither demanded nor dropped). Pure: files come from a ``Read``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum

Read = Callable[[str], "str | None"]

ROOT = "/src"  # where the tree sits for the CMake files: a path under it is read
BUILD_DIR = "/build"  # CMAKE_BINARY_DIR: what the build generates is there
MAX_ITERATIONS = 10_000  # a loop past this decides nothing more
MAX_DEPTH = 100  # nested include()s and calls: CMake's own limit is near 1000
SHOWN = 120  # characters of a condition a message quotes
MAX_VALUE = 1 << 20  # a value past a megabyte (doubled in a loop) is Unknown, not grown
_REFERENCE = re.compile(r"\$(ENV|CACHE)?\{")


class _Unknown(Enum):
    UNKNOWN = "?"


UNKNOWN = _Unknown.UNKNOWN
Value = str | _Unknown  # a variable's value, or Unknown
Truth = bool | _Unknown  # a condition's value: tri-state


# ---------------------------------------------------------------- the tokenizer


class Kind(StrEnum):
    UNQUOTED = "unquoted"
    QUOTED = "quoted"
    BRACKET = "bracket"


@dataclass(frozen=True)
class Arg:
    text: str  # as written: escapes and ${} not yet evaluated (a bracket's content as is)
    kind: Kind


@dataclass(frozen=True)
class Command:
    name: str  # lower case: CMake's command names are case-insensitive
    args: tuple[Arg, ...]
    line: int
    text: str = ""  # the arguments as written, whitespace collapsed (a condition)


class SyntaxProblem(ValueError):
    """Text CMake itself would refuse to parse."""


_BRACKET_OPEN = re.compile(r"\[(=*)\[")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokenize(text: str) -> list[Command]:
    """The command invocations of ``text`` with their arguments, comments left out."""
    found: list[Command] = []
    i = _blank_end(text, 0)
    while i < len(text):
        name = _NAME.match(text, i)
        if not name:
            raise SyntaxProblem(f"line {_line(text, i)}: expected a command, found {text[i]!r}")
        j = name.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j >= len(text) or text[j] != "(":
            raise SyntaxProblem(f"line {_line(text, i)}: {name.group()} without '('")
        args, end = _arguments(text, j + 1)
        written = " ".join(text[j + 1 : end - 1].split())
        found.append(Command(name.group().lower(), tuple(args), _line(text, i), written))
        i = _blank_end(text, end)
    return found


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _blank_end(text: str, at: int) -> int:
    """Past the whitespace and comments from ``at``."""
    while at < len(text):
        if text[at].isspace():
            at += 1
        elif text[at] == "#":
            at = _comment_end(text, at)
        else:
            break
    return at


def _comment_end(text: str, at: int) -> int:
    """Past the comment at ``at``: a bracket comment ``#[[...]]``, or to the line's end."""
    bracket = _BRACKET_OPEN.match(text, at + 1)
    if bracket:
        return _bracket(text, bracket, "comment")[1]
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _bracket(text: str, opened: re.Match[str], what: str) -> tuple[str, int]:
    """The content of the bracket ``opened`` starts (``[==[``) and the index past its end."""
    close = text.find(f"]{opened.group(1)}]", opened.end())
    if close < 0:
        raise SyntaxProblem(f"line {_line(text, opened.start())}: bracket {what} never closed")
    return text[opened.end() : close], close + len(opened.group(1)) + 2


def _arguments(text: str, at: int) -> tuple[list[Arg], int]:
    """The arguments from ``at`` (past the '(') to the matching ')', and the index past it.
    Nested parentheses are arguments of their own, as CMake gives them to if()."""
    args: list[Arg] = []
    depth, i = 1, at
    while (i := _blank_end(text, i)) < len(text):
        char = text[i]
        if char == "(":
            depth += 1
            args.append(Arg("(", Kind.UNQUOTED))
            i += 1
        elif char == ")":
            depth -= 1
            i += 1
            if not depth:
                return args, i
            args.append(Arg(")", Kind.UNQUOTED))
        elif char == '"':
            end = _quoted_end(text, i + 1)
            args.append(Arg(text[i + 1 : end], Kind.QUOTED))
            i = end + 1
        elif bracket := _BRACKET_OPEN.match(text, i):
            content, i = _bracket(text, bracket, "argument")
            args.append(Arg(content.removeprefix("\n"), Kind.BRACKET))
        else:
            end = _unquoted_end(text, i)
            args.append(Arg(text[i:end], Kind.UNQUOTED))
            i = end
    raise SyntaxProblem(f"line {_line(text, at)}: '(' never closed")


def _quoted_end(text: str, at: int) -> int:
    i = at
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i
        else:
            i += 1
    raise SyntaxProblem(f"line {_line(text, at)}: quoted argument never closed")


def _unquoted_end(text: str, at: int) -> int:
    """Past an unquoted argument: up to whitespace, '(', ')' or '#'; an escape and a
    ``"..."`` inside it (the legacy ``-Da="b c"``) are part of it."""
    i = at
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
        elif char == '"' and i > at:
            i = _quoted_end(text, i + 1) + 1
        elif char.isspace() or char in '()#"':
            return i
        else:
            i += 1
    return i


# ---------------------------------------------------------------- evaluating references

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_SEMICOLON = "\x00"  # an escaped ';' in an unquoted argument: not a list separator


def expand(text: str, lookup: Callable[[str], Value], env: Callable[[str], Value]) -> Value:
    """``text`` with its escapes and ``${VAR}``, ``$ENV{VAR}``, ``$CACHE{VAR}`` evaluated,
    nested references from the inside out; Unknown when any reference is."""
    out, _ = _expand_from(text, 0, lookup, env, stop="")
    return out


def _expand_from(
    text: str,
    at: int,
    lookup: Callable[[str], Value],
    env: Callable[[str], Value],
    stop: str,
    depth: int = 0,
) -> tuple[Value, int]:
    if depth > MAX_DEPTH:  # ${${${...: no build file nests names this deep
        return UNKNOWN, len(text)
    parts: list[str] = []
    unknown = False
    i = at
    while i < len(text):
        char = text[i]
        if stop and char == stop:
            break
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            parts.append(_SEMICOLON if nxt == ";" else _ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if char == "\n" and i > 0 and text[i - 1] == "\\":
            i += 1
            continue
        opened = _REFERENCE.match(text, i)
        if opened:
            name, end = _expand_from(text, opened.end(), lookup, env, "}", depth + 1)
            if end >= len(text):
                parts.append(text[i:])  # no closing brace: CMake refuses it; kept as text
                break
            value = (
                UNKNOWN
                if isinstance(name, _Unknown)
                else env(name)
                if opened.group(1) == "ENV"
                else lookup(name)
            )
            if isinstance(value, _Unknown):
                unknown = True
            else:
                parts.append(value)
            i = end + 1
            continue
        parts.append(char)
        i += 1
    return (UNKNOWN if unknown else "".join(parts)), i


def split_list(value: str) -> list[str]:
    """A CMake list's elements: split on ';' not escaped, empty ones dropped."""
    return [item.replace(_SEMICOLON, ";") for item in value.split(";") if item]


def join_list(items: Sequence[Value]) -> Value:
    if any(isinstance(item, _Unknown) for item in items):
        return UNKNOWN
    return ";".join(str(item) for item in items)


# ---------------------------------------------------------------- conditions

_ON = {"1", "ON", "YES", "TRUE", "Y"}
_OFF = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
_UNARY = {
    "EXISTS", "COMMAND", "DEFINED", "TARGET", "TEST", "POLICY", "IS_DIRECTORY",
    "IS_SYMLINK", "IS_ABSOLUTE", "IS_READABLE", "IS_WRITABLE", "IS_EXECUTABLE",
}  # fmt: skip
_BINARY = {
    "EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
    "STREQUAL", "STRLESS", "STRLESS_EQUAL", "STRGREATER", "STRGREATER_EQUAL",
    "VERSION_EQUAL", "VERSION_LESS", "VERSION_LESS_EQUAL", "VERSION_GREATER",
    "VERSION_GREATER_EQUAL", "MATCHES", "IN_LIST", "IS_NEWER_THAN", "PATH_EQUAL",
}  # fmt: skip


def is_off(value: str) -> bool:
    """CMake's false constants: OFF, NO, FALSE, N, IGNORE, NOTFOUND, *-NOTFOUND, 0, ""."""
    return value.upper() in _OFF or value.upper().endswith("-NOTFOUND")


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Operand:
    value: Value  # the argument once ${} are evaluated
    kind: Kind

    @property
    def keyword(self) -> str:
        """The operator or keyword it is: only an unquoted argument is one (CMP0054)."""
        return self.value if self.kind is Kind.UNQUOTED and isinstance(self.value, str) else ""


@dataclass(frozen=True)
class Context:
    """What a condition asks of the evaluator beyond its arguments."""

    variable: Callable[[str], Value | None]  # None: never set
    env: Callable[[str], Value | None]  # None: known unset
    exists: Callable[[str], Truth]
    command: Callable[[str], bool]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in text.split("."))  # type: ignore[union-attr]


def _compare(op: str, left: str, right: str) -> bool:
    """A binary test of two known values."""
    if op.startswith("VERSION_"):
        a, b = _version(left), _version(right)
        width = max(len(a), len(b))
        a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
        return _ordered(op.removeprefix("VERSION_"), a, b)
    if op.startswith("STR"):
        return _ordered(op.removeprefix("STR") or "EQUAL", left, right)
    x, y = _number(left), _number(right)
    if x is None or y is None:
        return False
    return _ordered(op, x, y)


def _ordered(op: str, a: object, b: object) -> bool:
    tests: dict[str, Callable[[], bool]] = {
        "EQUAL": lambda: a == b,
        "LESS": lambda: a < b,  # type: ignore[operator]
        "LESS_EQUAL": lambda: a <= b,  # type: ignore[operator]
        "GREATER": lambda: a > b,  # type: ignore[operator]
        "GREATER_EQUAL": lambda: a >= b,  # type: ignore[operator]
    }
    return tests[op]()


def _and(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    return UNKNOWN if UNKNOWN in (a, b) else True


def _or(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    return UNKNOWN if UNKNOWN in (a, b) else False


def _not(a: Truth) -> Truth:
    return a if isinstance(a, _Unknown) else not a


class _Condition:
    """CMake's if() grammar, over arguments already expanded. Precedence as CMake's docs
    give it: parentheses, unary tests, binary tests, NOT, then AND and OR together from
    left to right."""

    def __init__(self, args: Sequence[Operand], context: Context) -> None:
        self.args, self.at, self.context = list(args), 0, context
        self.depth = 0  # open parentheses: past MAX_DEPTH the condition is not decided
        self.matches: list[str] | None = None  # CMAKE_MATCH_<n> of the last MATCHES

    def evaluate(self) -> Truth:
        if not self.args:
            return False
        value = self._logic()
        if self.at != len(self.args):
            raise SyntaxProblem("unbalanced or misplaced arguments")
        return value

    def _peek(self) -> str:
        return self.args[self.at].keyword if self.at < len(self.args) else ""

    def _take(self) -> Operand:
        if self.at >= len(self.args):
            raise SyntaxProblem("an operand is missing")
        self.at += 1
        return self.args[self.at - 1]

    def _logic(self) -> Truth:
        value = self._negation()
        while self._peek() in {"AND", "OR"}:
            op = self._take().keyword
            right = self._negation()
            value = _and(value, right) if op == "AND" else _or(value, right)
        return value

    def _negation(self) -> Truth:
        negated = False
        while self._peek() == "NOT":  # a loop, not a call a NOT: any number of them
            self._take()
            negated = not negated
        value = self._test()
        return _not(value) if negated else value

    def _test(self) -> Truth:
        word = self._peek()
        if word == "(":
            self._take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise SyntaxProblem(f"parentheses nested past {MAX_DEPTH}")
            value = self._logic()
            self.depth -= 1
            if self._take().keyword != ")":
                raise SyntaxProblem("'(' never closed")
            return value
        if word in _UNARY:
            self._take()
            return self._unary(word, self._take())
        left = self._take()
        if self._peek() in _BINARY:
            op = self._take().keyword
            return self._binary(op, left, self._take())
        return self._truth(left)

    def _defined(self, operand: Operand) -> Value | None:
        """The value of the variable an unquoted argument names; None when never set."""
        if operand.kind is not Kind.UNQUOTED or isinstance(operand.value, _Unknown):
            return None
        return self.context.variable(operand.value)

    def _value(self, operand: Operand) -> Value:
        """A binary test's operand: the variable it names, or itself."""
        named = self._defined(operand)
        return operand.value if named is None else named

    def _truth(self, operand: Operand) -> Truth:
        value = operand.value
        if isinstance(value, _Unknown):
            return UNKNOWN
        if value.upper() in _ON:
            return True
        if is_off(value):
            return False
        number = _number(value)
        if number is not None:
            return number != 0
        if operand.kind is not Kind.UNQUOTED:
            return False  # a quoted string that is no constant (CMP0054)
        named = self.context.variable(value)
        if named is None:
            return UNKNOWN  # never set here: the facts do not say it is unset
        return named if isinstance(named, _Unknown) else not is_off(named)

    def _unary(self, op: str, operand: Operand) -> Truth:
        value = operand.value
        if isinstance(value, _Unknown):
            return UNKNOWN
        if op == "DEFINED":
            env = re.fullmatch(r"ENV\{(.*)\}", value)
            if env:
                return self.context.env(env.group(1)) is not None
            named = self.context.variable(re.sub(r"^CACHE\{(.*)\}$", r"\1", value))
            return UNKNOWN if named is None or isinstance(named, _Unknown) else True
        if op == "COMMAND":
            return self.context.command(value)
        if op == "POLICY":
            return True
        if op == "IS_ABSOLUTE":
            return value.startswith("/")
        if op in {"EXISTS", "IS_DIRECTORY", "IS_READABLE"}:
            return self.context.exists(value)
        return UNKNOWN  # TARGET, TEST, IS_SYMLINK, IS_EXECUTABLE...: the build's, not read

    def _binary(self, op: str, left: Operand, right: Operand) -> Truth:
        if op == "IN_LIST":
            items = self._defined(right)
            if items is None:
                return False if isinstance(right.value, str) else UNKNOWN
            element = self._value(left)
            if isinstance(items, _Unknown) or isinstance(element, _Unknown):
                return UNKNOWN
            return element in split_list(items)
        a, b = self._value(left), self._value(right)
        if isinstance(a, _Unknown) or isinstance(b, _Unknown) or op == "IS_NEWER_THAN":
            return UNKNOWN
        if op == "MATCHES":
            found = re.search(_python_regex(b), a)
            self.matches = [found.group(0), *(g or "" for g in found.groups())] if found else []
            return found is not None
        if op == "PATH_EQUAL":
            return posixpath.normpath(a) == posixpath.normpath(b)
        return _compare(op, a, b)


def _python_regex(pattern: str) -> str:
    """CMake's regular expressions are close to Python's; its ``[[:alpha:]]``-free ones the same."""
    return pattern


def condition(args: Sequence[Operand], context: Context) -> Truth:
    """The value of an if() or while() over expanded arguments: True, False or Unknown."""
    return _Condition(args, context).evaluate()


# ---------------------------------------------------------------- the facts, the results


@dataclass(frozen=True)
class Facts:
    """What a build starts from: the variables its caller defines (setup.py's -D, CMake's
    own), the environment, and what find_package() of a package sets. A variable or
    environment variable not named here is Unknown; an environment variable named None is
    known unset."""

    variables: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str | None] = field(default_factory=dict)
    packages: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


# What CMake 3.26 on Linux defines itself, before any file runs.
CMAKE_OWN = {
    "UNIX": "1",
    "LINUX": "1",
    "CMAKE_SYSTEM_NAME": "Linux",
    "CMAKE_HOST_SYSTEM_NAME": "Linux",
    "CMAKE_HOST_UNIX": "1",
    "CMAKE_SYSTEM_PROCESSOR": "x86_64",
    "CMAKE_HOST_SYSTEM_PROCESSOR": "x86_64",
    "CMAKE_SIZEOF_VOID_P": "8",
    "CMAKE_VERSION": "3.26.4",
    "CMAKE_MAJOR_VERSION": "3",
    "CMAKE_MINOR_VERSION": "26",
    "CMAKE_COMMAND": "/usr/bin/cmake",
    "WIN32": "",
    "APPLE": "",
    "MSVC": "",
}


ROCM_ARCHS = ("gfx942", "gfx950")  # MI300 and MI350: what the pins build by default


def rocm(archs: Sequence[str], unset_env: Sequence[str] = ()) -> Facts:
    """A ROCm source build as setup.py runs CMake: VLLM_TARGET_DEVICE=rocm (its
    -DVLLM_TARGET_DEVICE), the arch set in PYTORCH_ROCM_ARCH, and what a ROCm torch's
    TorchConfig.cmake sets (through Caffe2's LoadHIP.cmake): HIP found, CUDA not. The build's
    own CMake picks VLLM_GPU_LANG from those. ``unset_env``: variables known unset."""
    variables = {
        **CMAKE_OWN,
        "VLLM_TARGET_DEVICE": "rocm",
        "CMAKE_BUILD_TYPE": "RelWithDebInfo",
        "VLLM_PYTHON_EXECUTABLE": "/opt/venv/bin/python3",
        "VLLM_PYTHON_PATH": "/opt/venv/lib/python3.12/site-packages",
        "FETCHCONTENT_BASE_DIR": "/tmp/deps",
        "ROCM_PATH": "/opt/rocm",
        "CMAKE_PREFIX_PATH": "",
        "CMAKE_MODULE_PATH": "",
        "CUDA_FOUND": "",  # read before find_package(Torch), unset then as on any ROCm host
    }
    torch = {
        "Torch_FOUND": "1",
        "HIP_FOUND": "1",
        "PYTORCH_FOUND_HIP": "1",
        "CUDA_FOUND": "",
        "TORCH_LIBRARIES": "torch",
        "TORCH_INCLUDE_DIRS": "",
        "ROCM_VERSION_DEV_MAJOR": "7",
    }
    python = {"Python_FOUND": "1", "Python_VERSION": "3.12.3",
              "Python_VERSION_MAJOR": "3", "Python_VERSION_MINOR": "12",
              "Python_EXECUTABLE": "/opt/venv/bin/python3"}  # fmt: skip
    env: dict[str, str | None] = {"PYTORCH_ROCM_ARCH": ";".join(archs)}
    env.update(dict.fromkeys(unset_env))
    return Facts(variables, env, {"Torch": torch, "Python": python})


class Taken(StrEnum):
    TAKEN = "taken"  # run in branches the facts decide: the build fetches it
    UNDECIDED = "undecided"  # under a condition the facts do not decide


@dataclass(frozen=True)
class Unknown:
    """A condition the facts do not decide: neither of its branches is taken."""

    file: str
    line: int
    condition: str  # as written
    command: str = "if"  # or elseif, while, foreach (a loop over what is not known)

    @property
    def shown(self) -> str:
        """The condition as a message quotes it: one short line, whatever the file holds."""
        if len(self.condition) > SHOWN:
            return f"{self.condition[: SHOWN - 3]}..."
        return self.condition

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.command}({self.shown})"


@dataclass(frozen=True)
class Fetched:
    """A fetch the files make: FetchContent_Declare (made available or populated),
    FetchContent_Populate with its own repository, ExternalProject_Add."""

    name: str
    url: str  # GIT_REPOSITORY or URL; "?" when an unknown variable gives it
    tag: str  # GIT_TAG or URL_HASH, "" when none is named
    file: str
    line: int  # of the call that names the repository
    how: str  # "made available", "populated", "external project"
    taken: Taken
    conditions: tuple[str, ...] = ()  # the decided branches it runs in, outermost first
    under: Unknown | None = None  # for an undecided one: the condition it waits on


@dataclass(frozen=True)
class Called:
    """A call of a command the caller asked to watch (a builtin or a function the files
    define), its arguments as the command sees them: expanded, unquoted lists split."""

    name: str  # lower case
    args: tuple[Value, ...]
    file: str
    line: int
    taken: Taken
    under: Unknown | None = None  # for an undecided one: the condition it waits on, if any


@dataclass(frozen=True)
class Evaluation:
    fetches: tuple[Fetched, ...]
    unknowns: tuple[Unknown, ...]  # in the order met, each once
    files: tuple[str, ...]  # every file read, in the order first read
    stopped: str = ""  # a message(FATAL_ERROR) reached in a decided branch, with file:line
    calls: tuple[Called, ...] = ()  # of the watched commands, in the order run

    @property
    def taken(self) -> tuple[Fetched, ...]:
        return tuple(f for f in self.fetches if f.taken is Taken.TAKEN)

    @property
    def undecided(self) -> tuple[Fetched, ...]:
        return tuple(f for f in self.fetches if f.taken is Taken.UNDECIDED)


def evaluate(read: Read, folder: str, facts: Facts, watch: Collection[str] = ()) -> Evaluation:
    """Run ``folder``/CMakeLists.txt as CMake would from ``facts``; every call of a command
    named in ``watch`` (lower case) is recorded with its arguments."""
    run = _Run(read, facts, frozenset(watch))
    source = posixpath.normpath(posixpath.join(ROOT, folder))
    scope = _Scope(dict(facts.variables), None)
    for name in ("CMAKE_SOURCE_DIR", "CMAKE_CURRENT_SOURCE_DIR", "PROJECT_SOURCE_DIR"):
        scope.vars[name] = source
    for name in ("CMAKE_BINARY_DIR", "CMAKE_CURRENT_BINARY_DIR"):
        scope.vars[name] = BUILD_DIR
    try:
        run.file(f"{source}/CMakeLists.txt", scope, _Where(True, (), None), 0)
    except _Stop as stop:
        run.stopped = str(stop)
    unknowns = tuple(dict.fromkeys(run.unknowns))
    return Evaluation(tuple(run.fetched), unknowns, tuple(run.seen), run.stopped, tuple(run.calls))


# ---------------------------------------------------------------- running the files


class _Stop(Exception):
    """message(FATAL_ERROR) in a decided branch: CMake stops there."""


class _Flow(Enum):
    NEXT = "next"
    BREAK = "break"
    CONTINUE = "continue"
    RETURN = "return"


@dataclass
class _Scope:
    vars: dict[str, Value]
    parent: _Scope | None
    tainted: bool = False  # a return() under an Unknown: what follows may not run


@dataclass(frozen=True)
class _Where:
    """Where a command runs: decided or not, under which branch conditions."""

    certain: bool
    conditions: tuple[str, ...]
    under: Unknown | None


@dataclass(frozen=True)
class _Definition:
    name: str
    params: tuple[str, ...]
    body: tuple[Command, ...]
    file: str
    macro: bool


@dataclass
class _Declared:
    name: str
    url: str
    tag: str
    file: str
    line: int
    where: _Where
    populated: bool = False


_MODULES = {"fetchcontent", "externalproject", "checkcxxcompilerflag", "checkcsourcecompiles",
            "checkcxxsourcecompiles", "checklanguage", "checkincludefile", "processorcount",
            "cmakeparsearguments", "gnuinstalldirs", "cmakedependentoption",
            "findpackagehandlestandardargs", "checkcompilerflag", "checksymbolexists",
            "checkfunctionexists",
            "checkincludefilecxx", "checklibraryexists"}  # fmt: skip


class _Run:
    def __init__(self, read: Read, facts: Facts, watch: frozenset[str] = frozenset()) -> None:
        self.read, self.facts, self.watch = read, facts, watch
        self.calls: list[Called] = []
        self.parsed: dict[str, list[Command]] = {}
        self.seen: list[str] = []
        self.definitions: dict[str, _Definition] = {}
        self.declared: dict[str, _Declared] = {}
        self.fetched: list[Fetched] = []
        self.unknowns: list[Unknown] = []
        self.env: dict[str, Value | None] = dict(facts.env)
        self.stopped = ""

    # -------------------------------------------------- files and blocks

    def text(self, path: str) -> str | None:
        if not path.startswith(f"{ROOT}/"):
            return None
        return self.read(path.removeprefix(f"{ROOT}/"))

    def commands(self, path: str) -> list[Command] | None:
        if path not in self.parsed:
            text = self.text(path)
            if text is None:
                return None
            try:
                self.parsed[path] = tokenize(text)
            except SyntaxProblem:
                self.parsed[path] = []  # CMake would refuse it: nothing of it is read
            self.seen.append(path.removeprefix(f"{ROOT}/"))
        return self.parsed[path]

    def file(self, path: str, scope: _Scope, where: _Where, depth: int) -> bool:
        commands = self.commands(path)
        if commands is None or depth > MAX_DEPTH:
            return False
        saved = {
            k: scope.vars.get(k) for k in ("CMAKE_CURRENT_LIST_DIR", "CMAKE_CURRENT_LIST_FILE")
        }
        scope.vars["CMAKE_CURRENT_LIST_DIR"] = posixpath.dirname(path)
        scope.vars["CMAKE_CURRENT_LIST_FILE"] = path
        self.block(commands, path, scope, where, depth)
        for key, value in saved.items():
            if value is None:
                scope.vars.pop(key, None)
            else:
                scope.vars[key] = value
        return True

    def block(
        self, commands: Sequence[Command], file: str, scope: _Scope, where: _Where, depth: int
    ) -> _Flow:
        i = 0
        while i < len(commands):
            command = commands[i]
            here = where if not scope.tainted else _Where(False, where.conditions, where.under)
            end = _block_end(commands, i)
            if end is not None:
                flow = self.structured(commands, i, end, file, scope, here, depth)
                i = end + 1
            else:
                flow = self.command(command, file, scope, here, depth)
                i += 1
            if flow is not _Flow.NEXT:
                return flow
        return _Flow.NEXT

    def structured(
        self, commands: Sequence[Command], start: int, end: int, file: str, scope: _Scope,
        where: _Where, depth: int,
    ) -> _Flow:  # fmt: skip
        head = commands[start]
        body = commands[start + 1 : end]
        if head.name in {"function", "macro"}:
            args = [a for a in self.values(head.args, scope) if isinstance(a, str)]
            if args:
                name = args[0].lower()
                self.definitions[name] = _Definition(
                    name, tuple(args[1:]), tuple(body), file, head.name == "macro"
                )
            return _Flow.NEXT
        if head.name == "if":
            return self.if_(commands, start, end, file, scope, where, depth)
        if head.name == "foreach":
            return self.foreach(head, body, file, scope, where, depth)
        if head.name == "while":
            return self.while_(head, body, file, scope, where, depth)
        return self.block(body, file, scope, where, depth)  # block()...endblock()

    def if_(
        self, commands: Sequence[Command], start: int, end: int, file: str, scope: _Scope,
        where: _Where, depth: int,
    ) -> _Flow:  # fmt: skip
        branches = _branches(commands, start, end)
        earlier: list[str] = []
        undecided: Unknown | None = None
        for head, body in branches:
            if undecided is not None:
                self.maybe(body, file, scope, where, undecided, depth)
                continue
            value: Truth = True
            if head.name != "else":
                value = self.truth(head, file, scope, where)
            if value is UNKNOWN:
                undecided = where.under or Unknown(_relative(file), head.line, head.text, head.name)
                if where.certain:
                    self.unknowns.append(undecided)
                self.maybe(body, file, scope, where, undecided, depth)
                continue
            if value:
                taken = _branch(earlier, head.text if head.name != "else" else "")
                inner = _Where(where.certain, (*where.conditions, taken), where.under)
                return self.block(body, file, scope, inner, depth)
            earlier.append(head.text)
        return _Flow.NEXT

    def maybe(
        self, body: Sequence[Command], file: str, scope: _Scope, where: _Where,
        under: Unknown, depth: int,
    ) -> None:  # fmt: skip
        """A branch that may or may not run: run for what it may do, every variable it sets
        Unknown after, its fetches undecided, a return() in it tainting what follows."""
        inner = _Where(False, where.conditions, under)
        flow = self.block(body, file, scope, inner, depth)
        if flow is not _Flow.NEXT:
            scope.tainted = True

    def truth(self, head: Command, file: str, scope: _Scope, where: _Where) -> Truth:
        operands = self.operands(head.args, scope)
        context = Context(
            variable=lambda name: self.lookup(scope, name),
            env=self.env.get,
            exists=self.exists,
            command=lambda name: name.lower() in self.definitions or name.lower() in _BUILTIN,
        )
        evaluated = _Condition(operands, context)
        try:
            value = evaluated.evaluate()
        except (SyntaxProblem, re.error):
            return UNKNOWN
        if evaluated.matches is not None and where.certain:
            for n in range(10):
                key = f"CMAKE_MATCH_{n}"
                found = evaluated.matches[n] if n < len(evaluated.matches) else ""
                scope.vars[key] = found
        return value

    def exists(self, path: str) -> Truth:
        path = posixpath.normpath(path)
        if self.text(path) is not None or self.text(f"{path}/.") is not None:
            return True
        return UNKNOWN  # outside the files read: a fixture may hold only some of the tree

    # -------------------------------------------------- loops

    def foreach(
        self, head: Command, body: Sequence[Command], file: str, scope: _Scope, where: _Where,
        depth: int,
    ) -> _Flow:  # fmt: skip
        args = self.values(head.args, scope)
        if not args or isinstance(args[0], _Unknown):
            return _Flow.NEXT
        var, rest = args[0], args[1:]
        items = _foreach_items(rest, lambda name: self.lookup(scope, name))
        if items is None:
            scope.vars[var] = UNKNOWN
            self.maybe(body, file, scope, where, self.loop_unknown(file, head, where), depth)
            return _Flow.NEXT
        for count, item in enumerate(items):
            if count >= MAX_ITERATIONS:
                self.maybe(body, file, scope, where, self.loop_unknown(file, head, where), depth)
                break
            scope.vars[var] = item
            flow = self.block(body, file, scope, where, depth)
            if flow is _Flow.BREAK:
                break
            if flow is _Flow.RETURN:
                return flow
        return _Flow.NEXT

    def while_(
        self, head: Command, body: Sequence[Command], file: str, scope: _Scope, where: _Where,
        depth: int,
    ) -> _Flow:  # fmt: skip
        for _ in range(MAX_ITERATIONS):
            value = self.truth(head, file, scope, where)
            if value is UNKNOWN:
                break
            if not value:
                return _Flow.NEXT
            flow = self.block(body, file, scope, where, depth)
            if flow is _Flow.BREAK:
                return _Flow.NEXT
            if flow is _Flow.RETURN:
                return flow
        self.maybe(body, file, scope, where, self.loop_unknown(file, head, where), depth)
        return _Flow.NEXT

    def loop_unknown(self, file: str, head: Command, where: _Where) -> Unknown:
        found = where.under or Unknown(_relative(file), head.line, head.text, head.name)
        if where.certain:
            self.unknowns.append(found)
        return found

    # -------------------------------------------------- variables

    def lookup(self, scope: _Scope, name: str) -> Value | None:
        return scope.vars.get(name)

    def values(self, args: Sequence[Arg], scope: _Scope) -> list[Value]:
        """The arguments as the command sees them: expanded, unquoted ones split as lists."""
        return [op.value for op in self.operands(args, scope)]

    def operands(self, args: Sequence[Arg], scope: _Scope) -> list[Operand]:
        found: list[Operand] = []
        for arg in args:
            if arg.kind is Kind.BRACKET:
                found.append(Operand(arg.text, arg.kind))
                continue
            value = expand(arg.text, lambda n: self.var(scope, n), self.env_value)
            if arg.kind is Kind.QUOTED:
                found.append(Operand(_unescape(value), arg.kind))
            elif isinstance(value, _Unknown):
                found.append(Operand(value, arg.kind))
            else:
                found += [Operand(item, arg.kind) for item in split_list(value)]
        return found

    def var(self, scope: _Scope, name: str) -> Value:
        value = scope.vars.get(name)
        return UNKNOWN if value is None else value

    def env_value(self, name: str) -> Value:
        value = self.env.get(name, UNKNOWN)
        return "" if value is None else value

    def set(self, scope: _Scope, name: Value, value: Value, where: _Where) -> None:
        if isinstance(name, str):
            small = isinstance(value, str) and len(value) <= MAX_VALUE
            scope.vars[name] = value if where.certain and small else UNKNOWN

    # -------------------------------------------------- commands

    def command(
        self, command: Command, file: str, scope: _Scope, where: _Where, depth: int
    ) -> _Flow:
        name = command.name
        if name in self.watch:
            self.watched(command, file, scope, where)
        if name in self.definitions:
            return self.call(self.definitions[name], command, scope, where, depth)
        handler = _HANDLERS.get(name)
        if handler is not None:
            return handler(self, command, file, scope, where, depth) or _Flow.NEXT
        if name in _FLOWS:
            if where.certain:
                return _FLOWS[name]
            scope.tainted = True
            return _Flow.NEXT
        for out in _outputs(name, self.values(command.args, scope)):
            self.set(scope, out, UNKNOWN, where)
        return _Flow.NEXT

    def call(
        self, definition: _Definition, command: Command, scope: _Scope, where: _Where,
        depth: int,
    ) -> _Flow:  # fmt: skip
        if depth > MAX_DEPTH:
            return _Flow.NEXT
        args = self.values(command.args, scope)
        bound: dict[str, Value] = {"ARGC": str(len(args)), "ARGV": join_list(args),
                                   "ARGN": join_list(args[len(definition.params):])}  # fmt: skip
        bound.update({f"ARGV{i}": arg for i, arg in enumerate(args)})
        bound.update(zip(definition.params, args, strict=False))
        if definition.macro:  # same scope; the arguments bound for the call, then undone
            saved = {key: scope.vars.get(key) for key in bound}
            scope.vars.update(bound)
            flow = self.block(definition.body, definition.file, scope, where, depth + 1)
            for key, value in saved.items():
                if value is None:
                    scope.vars.pop(key, None)
                else:
                    scope.vars[key] = value
            return flow if flow is not _Flow.RETURN else _Flow.RETURN
        child = _Scope({**scope.vars, **bound}, scope)
        self.block(definition.body, definition.file, child, where, depth + 1)
        return _Flow.NEXT

    def watched(self, command: Command, file: str, scope: _Scope, where: _Where) -> None:
        taken = Taken.TAKEN if where.certain else Taken.UNDECIDED
        args = tuple(self.values(command.args, scope))
        self.calls.append(
            Called(command.name, args, _relative(file), command.line, taken, where.under)
        )

    def record(self, fetched: Fetched) -> None:
        if fetched.url:
            self.fetched.append(fetched)


def _unescape(value: Value) -> Value:
    return value.replace(_SEMICOLON, "\\;") if isinstance(value, str) else value


def _relative(path: str) -> str:
    return path.removeprefix(f"{ROOT}/")


def _branch(earlier: list[str], current: str) -> str:
    """The condition of the branch taken: its own, and not the earlier ones."""
    nots = [f"NOT ({condition})" for condition in earlier]
    return " AND ".join([*nots, current] if current else nots)


_OPENS = {"if": "endif", "foreach": "endforeach", "while": "endwhile",
          "function": "endfunction", "macro": "endmacro", "block": "endblock"}  # fmt: skip
_CLOSES = set(_OPENS.values())


def _block_end(commands: Sequence[Command], start: int) -> int | None:
    """The index of the command closing the block ``start`` opens, or None."""
    if commands[start].name not in _OPENS:
        return None
    depth = 0
    for i in range(start, len(commands)):
        name = commands[i].name
        if name in _OPENS:
            depth += 1
        elif name in _CLOSES:
            depth -= 1
            if not depth:
                return i
    return len(commands) - 1  # never closed: CMake refuses it; read to the end


def _branches(
    commands: Sequence[Command], start: int, end: int
) -> list[tuple[Command, list[Command]]]:
    """An if()'s branches: the if, elseif and else commands, each with its body."""
    found: list[tuple[Command, list[Command]]] = [(commands[start], [])]
    depth = 0
    for command in commands[start + 1 : end]:
        if command.name in _OPENS:
            depth += 1
        elif command.name in _CLOSES:
            depth -= 1
        if not depth and command.name in {"elseif", "else"}:
            found.append((command, []))
        else:
            found[-1][1].append(command)
    return found


def _foreach_items(
    args: Sequence[Value], lookup: Callable[[str], Value | None]
) -> list[str] | None:
    """foreach()'s items: ``RANGE``, ``IN LISTS``/``IN ITEMS``, or the arguments; None
    when Unknown."""
    if args[:1] == ["RANGE"]:
        numbers = [int(a) if isinstance(a, str) and re.fullmatch(r"-?\d+", a) else None
                   for a in args[1:]]  # fmt: skip
        if not numbers or None in numbers or len(numbers) > 3:
            return None
        bounds = [n for n in numbers if n is not None]
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds[:2], 1)
        if len(bounds) == 3:
            step = bounds[2]
        return [str(n) for n in range(start, stop + 1, step or 1)]
    if args[:1] == ["IN"]:
        items: list[Value] = []
        mode = ""
        for arg in args[1:]:
            if arg in {"LISTS", "ITEMS", "ZIP_LISTS"}:
                mode = str(arg)
            elif mode == "LISTS":
                value = lookup(str(arg)) if isinstance(arg, str) else UNKNOWN
                items += split_list(value) if isinstance(value, str) else [UNKNOWN]
            elif mode == "ITEMS":
                items.append(arg)
            else:
                return None
        return None if UNKNOWN in items else [str(i) for i in items]
    return None if UNKNOWN in args else [str(a) for a in args]


# ---------------------------------------------------------------- the commands CMake has

Handler = Callable[[_Run, Command, str, _Scope, _Where, int], "_Flow | None"]
_FLOWS = {"return": _Flow.RETURN, "break": _Flow.BREAK, "continue": _Flow.CONTINUE}


def _set(run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if not args:
        return
    name, values = args[0], list(args[1:])
    parent = bool(values) and values[-1] == "PARENT_SCOPE"
    if "CACHE" in values:
        values = values[: values.index("CACHE")]
        force = "FORCE" in args
        if isinstance(name, str) and name in scope.vars and not force:
            return  # a cache entry already there (the caller's -D) wins
    elif parent:
        values = values[:-1]
    target = scope.parent if parent else scope
    if target is None:
        return
    if not values and not parent:
        if isinstance(name, str):
            scope.vars.pop(name, None) if where.certain else run.set(scope, name, UNKNOWN, where)
        return
    run.set(target, name, join_list(values), where)


def _unset(run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if not args or not isinstance(args[0], str):
        return
    env = re.fullmatch(r"ENV\{(.*)\}", args[0])
    if env:
        run.env[env.group(1)] = None if where.certain else UNKNOWN
        return
    target = scope.parent if "PARENT_SCOPE" in args else scope
    if target is not None:
        if where.certain:
            target.vars.pop(args[0], None)
        else:
            target.vars[args[0]] = UNKNOWN


def _option(run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if args and isinstance(args[0], str) and args[0] not in scope.vars:
        run.set(scope, args[0], args[2] if len(args) > 2 else "OFF", where)


def _include(
    run: _Run, command: Command, file: str, scope: _Scope, where: _Where, depth: int
) -> None:
    args = run.values(command.args, scope)
    if not args or isinstance(args[0], _Unknown):
        return
    name = args[0]
    if "/" not in name and not name.endswith(".cmake"):  # a module
        if name.lower() in _MODULES:
            return
        for folder in split_list(str(run.var(scope, "CMAKE_MODULE_PATH") or "")):
            if run.file(f"{folder}/{name}.cmake", scope, where, depth + 1):
                return
        return
    base = str(scope.vars.get("CMAKE_CURRENT_SOURCE_DIR", ROOT))
    path = posixpath.normpath(posixpath.join(base, name))
    run.file(path, scope, where, depth + 1)


def _add_subdirectory(
    run: _Run, command: Command, file: str, scope: _Scope, where: _Where, depth: int
) -> None:
    args = run.values(command.args, scope)
    if not args or isinstance(args[0], _Unknown):
        return
    base = str(scope.vars.get("CMAKE_CURRENT_SOURCE_DIR", ROOT))
    folder = posixpath.normpath(posixpath.join(base, args[0]))
    child = _Scope({**scope.vars, "CMAKE_CURRENT_SOURCE_DIR": folder}, scope)
    run.file(f"{folder}/CMakeLists.txt", child, where, depth + 1)


def _message(run: _Run, command: Command, file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if args[:1] in (["FATAL_ERROR"], ["SEND_ERROR"]) and where.certain:
        text = "".join(a if isinstance(a, str) else "?" for a in args[1:])
        raise _Stop(f"{_relative(file)}:{command.line}: {text}")


def _find_package(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    args = run.values(command.args, scope)
    if not args or isinstance(args[0], _Unknown):
        return
    known = run.facts.packages.get(args[0])
    if known is None:
        run.set(scope, f"{args[0]}_FOUND", UNKNOWN, where)
        run.set(scope, f"{args[0].upper()}_FOUND", UNKNOWN, where)
        return
    for key, value in known.items():
        run.set(scope, key, value, where)


def _project(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    args = run.values(command.args, scope)
    if args and isinstance(args[0], str):
        for key in ("PROJECT_NAME", "CMAKE_PROJECT_NAME"):
            run.set(scope, key, args[0], where)
        run.set(
            scope, "PROJECT_SOURCE_DIR", scope.vars.get("CMAKE_CURRENT_SOURCE_DIR", ROOT), where
        )


def _list(run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if len(args) < 2 or not isinstance(args[1], str) or not isinstance(args[0], str):
        return
    op, name, rest = args[0], args[1], args[2:]
    current = scope.vars.get(name, "")
    out = _list_op(op, current, rest)
    if out is None:  # not followed: what it writes is Unknown
        target = rest[-1] if op in {"LENGTH", "GET", "FIND", "JOIN", "SUBLIST"} and rest else name
        run.set(scope, target, UNKNOWN, where)
        return
    target, value = out
    run.set(scope, target if target else name, value, where)


def _list_op(op: str, current: Value, rest: Sequence[Value]) -> tuple[str, Value] | None:
    """(the variable written, "" for the list itself; its value), or None if not followed."""
    if isinstance(current, _Unknown) or any(isinstance(r, _Unknown) for r in rest):
        return None
    items, args = split_list(current), [str(r) for r in rest]
    if op == "APPEND":
        return "", join_list([*items, *args])
    if op == "PREPEND":
        return "", join_list([*args, *items])
    if op == "REMOVE_ITEM":
        return "", join_list([i for i in items if i not in args])
    if op == "REMOVE_DUPLICATES":
        return "", join_list(list(dict.fromkeys(items)))
    if op == "LENGTH" and args:
        return args[-1], str(len(items))
    if op == "FIND" and len(args) == 2:
        return args[1], str(items.index(args[0])) if args[0] in items else "-1"
    if op == "INSERT" and args and re.fullmatch(r"-?\d+", args[0]):
        at = int(args[0])
        return "", join_list([*items[:at], *args[1:], *items[at:]])
    if op == "GET" and len(args) >= 2:
        try:
            picked = [items[int(i)] for i in args[:-1]]
        except (ValueError, IndexError):
            return None
        return args[-1], join_list(picked)
    if op == "JOIN" and len(args) == 2:
        return args[1], args[0].join(items)
    if op == "FILTER" and len(args) == 3 and args[1] == "REGEX":
        return _filtered(items, args[0], args[2])
    return None


def _filtered(items: Sequence[str], mode: str, pattern: str) -> tuple[str, Value] | None:
    """list(FILTER <list> INCLUDE|EXCLUDE REGEX <regex>)."""
    try:
        compiled = re.compile(_python_regex(pattern))
    except re.error:
        return None
    if mode not in {"INCLUDE", "EXCLUDE"}:
        return None
    keep = mode == "INCLUDE"
    return "", join_list([i for i in items if (compiled.search(i) is not None) == keep])


def _string(run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if len(args) < 2 or not isinstance(args[0], str):
        return
    out = _string_op(args[0], args[1:], lambda name: scope.vars.get(name, ""))
    if out is None:
        first = {"SHA256", "MD5", "SHA1", "SHA512", "TIMESTAMP", "JSON", "UUID", "APPEND",
                 "PREPEND", "CONCAT", "JOIN"}  # fmt: skip
        target = args[1] if args[0] in first else args[-1]
        if args[0] == "REGEX" and len(args) > 3:
            target = args[4] if args[1] == "REPLACE" and len(args) > 4 else args[3]
        run.set(scope, target, UNKNOWN, where)
        return
    run.set(scope, out[0], out[1], where)


def _string_op(
    op: str, args: Sequence[Value], lookup: Callable[[str], Value]
) -> tuple[str, Value] | None:
    if any(isinstance(a, _Unknown) for a in args):
        return None
    a = [str(x) for x in args]
    simple: dict[str, Callable[[], tuple[str, Value]]] = {
        "TOLOWER": lambda: (a[1], a[0].lower()),
        "TOUPPER": lambda: (a[1], a[0].upper()),
        "STRIP": lambda: (a[1], a[0].strip()),
        "LENGTH": lambda: (a[1], str(len(a[0]))),
        "CONCAT": lambda: (a[0], "".join(a[1:])),
        "JOIN": lambda: (a[1], a[0].join(a[2:])),
    }
    if op in simple and len(a) >= 2:
        return simple[op]()
    if op in {"APPEND", "PREPEND"} and a:
        current = lookup(a[0])
        if isinstance(current, _Unknown):
            return None
        added = "".join(a[1:])
        return a[0], current + added if op == "APPEND" else added + current
    if op == "REPLACE" and len(a) >= 3:
        return a[2], "".join(a[3:]).replace(a[0], a[1])
    if op == "SUBSTRING" and len(a) == 4 and all(re.fullmatch(r"-?\d+", x) for x in a[1:3]):
        begin, length = int(a[1]), int(a[2])
        return a[3], a[0][begin:] if length < 0 else a[0][begin : begin + length]
    if op == "REGEX" and len(a) >= 4 and a[0] in {"MATCH", "MATCHALL", "REPLACE"}:
        return _regex(a)
    return None


def _regex(a: Sequence[str]) -> tuple[str, Value] | None:
    try:
        pattern = re.compile(_python_regex(a[1]))
        if a[0] == "MATCH":
            found = pattern.search("".join(a[3:]))
            return a[2], found.group(0) if found else ""
        if a[0] == "MATCHALL":
            return a[2], join_list([m.group(0) for m in pattern.finditer("".join(a[3:]))])
        if len(a) >= 5:
            replacement = re.sub(r"\\(\d)", r"\\g<\1>", a[2])
            return a[3], pattern.sub(replacement, "".join(a[4:]))
    except (re.error, IndexError):
        return None
    return None


def _parse_arguments(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    """cmake_parse_arguments(prefix options one multi args...), and its PARSE_ARGV form."""
    args = run.values(command.args, scope)
    if args[:1] == ["PARSE_ARGV"] and len(args) >= 6:
        start = int(str(args[1])) if str(args[1]).isdigit() else 0
        count = scope.vars.get("ARGC", "0")
        given = [scope.vars.get(f"ARGV{i}", UNKNOWN)
                 for i in range(start, int(str(count)) if str(count).isdigit() else 0)]  # fmt: skip
        prefix, lists = args[2], args[3:6]
    elif len(args) >= 4:
        prefix, lists, given = args[0], args[1:4], list(args[4:])
    else:
        return
    if isinstance(prefix, _Unknown) or any(isinstance(x, _Unknown) for x in lists):
        return
    options, ones, multis = (split_list(str(x)) for x in lists)
    parsed = _parse(given, options, ones, multis)
    for key, value in parsed.items():
        run.set(scope, f"{prefix}_{key}", value, where)


def _parse(
    given: Sequence[Value], options: list[str], ones: list[str], multis: list[str]
) -> dict[str, Value]:
    values: dict[str, list[Value]] = {}
    current, unparsed = "", []
    for arg in given:
        if arg in options:
            values[str(arg)], current = [], ""
        elif arg in ones or arg in multis:
            current = str(arg)
            values[current] = []
        elif current and (current in multis or not values[current]):
            values[current].append(arg)
        else:
            unparsed.append(arg)
            current = ""
    found: dict[str, Value] = {key: "TRUE" if key in values else "FALSE" for key in options}
    for key in [*ones, *multis]:
        found[key] = join_list(values[key]) if key in values else ""
    found["UNPARSED_ARGUMENTS"] = join_list(unparsed)
    return found


_FETCH_KEYS = {"GIT_REPOSITORY", "URL", "GIT_TAG", "URL_HASH", "URL_MD5", "SOURCE_DIR"}


def _keyed(args: Sequence[Value]) -> dict[str, Value]:
    """The values of FetchContent's and ExternalProject's keywords."""
    found: dict[str, Value] = {}
    for i, arg in enumerate(args[:-1]):
        if arg in _FETCH_KEYS and str(arg) not in found:
            found[str(arg)] = args[i + 1]
    return found


def _declare(run: _Run, command: Command, file: str, scope: _Scope, where: _Where, _d: int) -> None:
    args = run.values(command.args, scope)
    if not args or isinstance(args[0], _Unknown):
        return
    name = args[0].lower()
    keyed = _keyed(args[1:])
    if name in run.declared and run.declared[name].where.certain:
        return  # the first declaration wins, as FetchContent keeps it
    url = keyed.get("GIT_REPOSITORY") or keyed.get("URL") or ""
    tag = keyed.get("GIT_TAG") or keyed.get("URL_HASH") or ""
    run.declared[name] = _Declared(
        str(args[0]), _shown(url), _shown(tag), _relative(file), command.line, where
    )


def _shown(value: Value) -> str:
    return "?" if isinstance(value, _Unknown) else value


def _available(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    for name in run.values(command.args, scope):
        if isinstance(name, str):
            _populate_declared(run, name, scope, where, "made available")


def _populate_declared(run: _Run, name: str, scope: _Scope, where: _Where, how: str) -> None:
    declared = run.declared.get(name.lower())
    lower = name.lower()
    run.set(scope, f"{lower}_POPULATED", "TRUE", where)
    run.set(scope, f"{lower}_SOURCE_DIR", f"/deps/{lower}-src", where)
    run.set(scope, f"{lower}_BINARY_DIR", f"/deps/{lower}-build", where)
    if declared is None or declared.populated:
        return
    override = scope.vars.get(f"FETCHCONTENT_SOURCE_DIR_{name.upper()}")
    if isinstance(override, str) and override:
        return  # given a folder: nothing fetched
    certain = where.certain and declared.where.certain
    if certain:
        declared.populated = True
    run.record(
        Fetched(
            declared.name, declared.url, declared.tag, declared.file, declared.line, how,
            Taken.TAKEN if certain else Taken.UNDECIDED,
            declared.where.conditions, where.under or declared.where.under,
        )
    )  # fmt: skip


def _populate(
    run: _Run, command: Command, file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    args = run.values(command.args, scope)
    if not args or isinstance(args[0], _Unknown):
        return
    keyed = _keyed(args[1:])
    if len(args) == 1:
        _populate_declared(run, args[0], scope, where, "populated")
        return
    lower = args[0].lower()
    run.set(scope, f"{lower}_POPULATED", "TRUE", where)
    run.set(
        scope, f"{lower}_SOURCE_DIR", _shown(keyed.get("SOURCE_DIR") or f"/deps/{lower}-src"), where
    )
    _direct(run, command, args[0], keyed, file, where, "populated")


def _direct(
    run: _Run, command: Command, name: str, keyed: dict[str, Value], file: str,
    where: _Where, how: str,
) -> None:  # fmt: skip
    url = keyed.get("GIT_REPOSITORY") or keyed.get("URL") or ""
    tag = keyed.get("GIT_TAG") or keyed.get("URL_HASH") or ""
    run.record(
        Fetched(
            name, _shown(url), _shown(tag), _relative(file), command.line, how,
            Taken.TAKEN if where.certain else Taken.UNDECIDED, where.conditions, where.under,
        )
    )  # fmt: skip


def _external(
    run: _Run, command: Command, file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    args = run.values(command.args, scope)
    if args and isinstance(args[0], str):
        _direct(run, command, args[0], _keyed(args[1:]), file, where, "external project")


def _properties(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    """FetchContent_GetProperties(name): whether it is populated yet, and where."""
    args = run.values(command.args, scope)
    if args and isinstance(args[0], str):
        lower = args[0].lower()
        done = scope.vars.get(f"{lower}_POPULATED")
        if done is None:
            run.set(scope, f"{lower}_POPULATED", "FALSE", where)


def _nothing(
    _run: _Run, _command: Command, _file: str, _scope: _Scope, _where: _Where, _d: int
) -> None:
    return None


def _get_filename(
    run: _Run, command: Command, _file: str, scope: _Scope, where: _Where, _d: int
) -> None:
    args = run.values(command.args, scope)
    if len(args) < 3:
        return
    out, path, mode = args[0], args[1], args[2]
    value: Value = UNKNOWN
    if isinstance(path, str) and mode in {"DIRECTORY", "PATH"}:
        value = posixpath.dirname(path)
    elif isinstance(path, str) and mode == "NAME":
        value = posixpath.basename(path)
    run.set(scope, out, value, where)


_HANDLERS: dict[str, Handler] = {
    "set": _set,
    "unset": _unset,
    "option": _option,
    "include": _include,
    "add_subdirectory": _add_subdirectory,
    "message": _message,
    "find_package": _find_package,
    "project": _project,
    "list": _list,
    "string": _string,
    "cmake_parse_arguments": _parse_arguments,
    "fetchcontent_declare": _declare,
    "fetchcontent_makeavailable": _available,
    "fetchcontent_populate": _populate,
    "fetchcontent_getproperties": _properties,
    "externalproject_add": _external,
    "get_filename_component": _get_filename,
    "cmake_minimum_required": _nothing,
    "cmake_policy": _nothing,
    "include_guard": _nothing,
}

_BUILTIN = {*_HANDLERS, "math", "file", "execute_process", "find_library", "find_program",
            "find_path", "find_file", "add_library", "add_executable", "add_custom_target",
            "add_custom_command", "install", "target_link_libraries", "cmake_path",
            "get_property", "set_property", "configure_file", "enable_language"}  # fmt: skip

# Where other commands write: the argument after a keyword, or at a position.
_OUT_KEYWORDS = {"OUTPUT_VARIABLE", "ERROR_VARIABLE", "RESULT_VARIABLE", "RESULTS_VARIABLE",
                 "RESULT", "OUTPUT", "COMPILE_OUTPUT_VARIABLE", "RUN_OUTPUT_VARIABLE"}  # fmt: skip
_OUT_FIRST = {"find_library", "find_program", "find_path", "find_file", "get_property",
              "get_target_property", "get_directory_property", "get_cmake_property",
              "get_source_file_property", "get_test_property", "separate_arguments",
              "processorcount", "site_name", "try_compile", "try_run", "math"}  # fmt: skip


def _outputs(name: str, args: Sequence[Value]) -> Iterator[Value]:
    """The variables a command not followed here may set, made Unknown."""
    words = list(args)
    for i, arg in enumerate(words[:-1]):
        if arg in _OUT_KEYWORDS:
            yield words[i + 1]
    if name in _OUT_FIRST and words:
        yield words[1] if name == "math" and len(words) > 1 else words[0]
    if name == "file" and len(words) > 2:
        yield words[1] if words[0] in {"GLOB", "GLOB_RECURSE", "RELATIVE_PATH"} else words[2]
    if name == "cmake_path" and len(words) > 2:
        yield words[1] if words[0] in {"SET", "APPEND", "NORMAL_PATH"} else words[-1]
    if name.startswith("check_") and words:
        yield words[-1]
