"""What a source tree's build does by itself, read from its files without running them.

Four kinds of fact, each with the file and line it was read from: the distribution the
build produces (its name, and where its version comes from), every fetch the build makes
by itself (CMake's FetchContent and ExternalProject, downloads in setup.py), and the
arch variables it reads with the separator it splits them on. Every function here is
pure: a tree is a ``Read`` (a path relative to the tree's root -> its text, or None), so
the same readers serve a fetched tree and the upstream excerpts the tests commit.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import tomli
from packaging.requirements import InvalidRequirement, Requirement

from rocmgraph.dockerfile import pipargs, shell
from rocmgraph.trees import cmake

Read = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Where:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class VersionFrom(StrEnum):
    STATIC = "static"  # written in the tree: the pins' version must be it
    GIT = "git"  # setuptools_scm: a tree without .git has none (or a fallback)
    UNKNOWN = "unknown"  # computed by code this reader does not follow


@dataclass(frozen=True)
class Dist:
    name: str
    version: str  # the static version, or setuptools_scm's fallback ("" for none)
    version_from: VersionFrom
    where: Where
    # Variables that give a git-versioned build its version: setuptools_scm's, and those
    # the version function reads (vLLM's VLLM_VERSION_OVERRIDE).
    version_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fetch:
    """A download the build makes by itself."""

    what: str  # the URL; for a download in Python whose URL is computed, file:function
    ref: str  # the tag or commit it asks for ("" when none is named)
    where: Where
    conditions: tuple[str, ...] = ()  # the CMake conditions it runs under, outermost first
    how: str = ""  # for CMake's: "made available", "populated", "external project"

    @property
    def unless(self) -> str:
        """The variable whose being set skips it (``TRITON_KERNELS_SRC_DIR``), or ""."""
        for condition in self.conditions:
            found = re.fullmatch(r"NOT \(DEFINED ENV\{(\w+)\}\)", condition)
            if found:
                return found.group(1)
        return ""


class Split(StrEnum):
    SEMICOLON = "semicolon"
    COMMA = "comma"
    EITHER = "either"  # the build takes both (sgl-kernel's patched setup_rocm.py)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ArchRead:
    variable: str
    split: Split
    where: Where


# ---------------------------------------------------------------- the distribution


def dist(read: Read, folder: str = ".") -> Dist | None:
    """The distribution ``folder`` builds: pyproject's [project] first, as setuptools
    takes it, then setup.py's ``setup(name=..., version=...)``; None if neither names it."""
    pyproject, setup = join(folder, "pyproject.toml"), join(folder, "setup.py")
    table = _toml(read(pyproject))
    project = _table(table, "project")
    called = _setup_call(read(setup), setup)
    name = str(project.get("name") or (called.name if called else ""))
    if not name:
        return None
    where = called.where if called else Where(setup, 0)
    if project.get("name"):
        where = Where(pyproject, _line_of(read(pyproject), "name"))
    from_file = _table(table, "tool", "setuptools", "dynamic", "version")
    if "version" in project:
        return Dist(name, str(project["version"]), VersionFrom.STATIC, where)
    if "file" in from_file:
        text = read(join(folder, str(from_file["file"]))) or ""
        return Dist(name, text.strip(), VersionFrom.STATIC, where)
    if called and called.version:
        return Dist(name, called.version, VersionFrom.STATIC, where)
    if "setuptools_scm" in _table(table, "tool"):
        named = [f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{_scm_suffix(name)}"]
        honored = (
            "SETUPTOOLS_SCM_PRETEND_VERSION",
            *(named if called is None or called.scm_named else []),
            *(called.version_env if called else ()),
        )
        fallback = str(_table(table, "tool", "setuptools_scm").get("fallback_version", ""))
        return Dist(name, fallback, VersionFrom.GIT, where, tuple(dict.fromkeys(honored)))
    return Dist(name, "", VersionFrom.UNKNOWN, where)


def _table(table: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The table at ``keys``, or {} where a key is missing or not a table."""
    for key in keys:
        found = table.get(key)
        table = found if isinstance(found, dict) else {}
    return table


def _scm_suffix(name: str) -> str:
    """setuptools_scm's name in SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>."""
    return re.sub(r"[-_.]+", "_", name).upper()


@dataclass(frozen=True)
class _Setup:
    name: str
    version: str  # a literal version, or "" when computed
    where: Where
    version_env: tuple[str, ...]  # variables the computing function reads
    # False where that function asks setuptools_scm.get_version() with no dist_name, which
    # then reads SETUPTOOLS_SCM_PRETEND_VERSION only, not its _FOR_<NAME> (vLLM's setup.py).
    scm_named: bool = True


def _scm_unnamed(function: ast.FunctionDef) -> bool:
    return any(
        isinstance(node, ast.Call)
        and _called(node) == "get_version"
        and not any(keyword.arg == "dist_name" for keyword in node.keywords)
        for node in ast.walk(function)
    )


def _setup_call(text: str | None, file: str) -> _Setup | None:
    tree = _python(text)
    if tree is None:
        return None
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    constants = {  # PACKAGE_NAME = "causal_conv1d" at the top, named in setup()
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "setup":
            args = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            name, version = (_resolved(args.get(key), constants) for key in ("name", "version"))
            computed = version if isinstance(version, ast.Call) else None
            env: tuple[str, ...] = ()
            named = True
            if computed is not None and _called(computed) in functions:
                function = functions[_called(computed)]
                env = tuple(read.variable for read in _env_reads(function))
                named = not _scm_unnamed(function)
            return _Setup(_literal(name), _literal(version), Where(file, node.lineno), env, named)
    return None


def package_version(read: Read, folder: str, found: Dist) -> Dist | None:
    """A version setup.py computes, read where such code reads it: ``__version__ = "..."``
    in the package named like the distribution (causal-conv1d's get_package_version)."""
    package = re.sub(r"[-.]+", "_", found.name)
    file = join(folder, f"{package}/__init__.py")
    text = read(file)
    stated = re.search(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", text or "", re.MULTILINE)
    if not stated:
        return None
    line = (text or "").count("\n", 0, stated.start()) + 1
    return Dist(found.name, stated.group(1), VersionFrom.STATIC, Where(file, line))


# ---------------------------------------------------------------- build requirements

# setuptools reads a [project] license written as a string (an SPDX expression, PEP 639)
# from 77.0.0 on, and refuses it before; mbridge's pyproject asks only for setuptools>=61.0.
PEP_639_SETUPTOOLS = "setuptools>=77.0.0"


@dataclass(frozen=True)
class Needed:
    """A package the build imports from the image it builds in (pip's --no-build-isolation
    neither installs nor checks these)."""

    text: str  # as the tree writes it
    where: Where
    why: str = ""  # for one the tree implies rather than names

    @property
    def requirement(self) -> Requirement:
        return Requirement(self.text)


def build_requirements(read: Read, folder: str = ".") -> list[Needed]:
    """pyproject's [build-system] requires, and setuptools>=77 for a PEP 639 license."""
    file = join(folder, "pyproject.toml")
    text = read(file)
    table = _toml(text)
    system = _table(table, "build-system")
    requires = system.get("requires", [])
    found = []
    for written in requires if isinstance(requires, list) else []:
        try:
            Requirement(str(written))
        except InvalidRequirement:
            continue  # pip refuses it in any build, with its own message
        found.append(Needed(str(written), Where(file, _line_with(text, f'"{written}"'))))
    backend = str(system.get("build-backend", "setuptools.build_meta"))
    license_ = _table(table, "project").get("license")
    if backend.startswith("setuptools") and isinstance(license_, str):
        where = Where(file, _line_of(text, "license"))
        found.append(Needed(PEP_639_SETUPTOOLS, where, "a PEP 639 license"))
    return found


# ---------------------------------------------------------------- fetches


CMAKE_BACKENDS = {"scikit_build_core", "py_build_cmake", "cmake_build_extension"}


def runs_cmake(read: Read, folder: str = ".") -> bool:
    """Whether building ``folder`` runs its CMakeLists.txt: a CMake build backend, or a
    setup.py that runs cmake (vLLM's); sgl-kernel's ROCm build (setuptools, setup_rocm.py)
    never reads the CMake file beside it."""
    backend = str(
        _table(_toml(read(join(folder, "pyproject.toml"))), "build-system").get("build-backend", "")
    )
    if backend.split(".", maxsplit=1)[0] in CMAKE_BACKENDS:
        return True
    tree = _python(read(join(folder, "setup.py")))
    return tree is not None and any(
        text == "cmake" or text.endswith("CMakeLists.txt") for text in _strings(tree)
    )


def cmake_fetches(read: Read, folder: str, facts: cmake.Facts) -> list[Fetch]:
    """What ``folder``/CMakeLists.txt fetches in the build ``facts`` describe: each
    FetchContent declaration made available or populated, FetchContent_Populate with its own
    repository, ExternalProject_Add, run in branches the facts decide; none where its build
    runs no CMake. Those under a condition the facts do not decide are not among them:
    ``cmake_evaluation`` has them, and the condition."""
    evaluation = cmake_evaluation(read, folder, facts)
    return [] if evaluation is None else [_fetch(found) for found in evaluation.taken]


def rust_fetches(read: Read, folder: str = ".") -> list[Fetch]:
    """Rust extensions (setuptools-rust): cargo fetches their crates as it builds them.
    Declared in pyproject's [tool.setuptools-rust] or as setup()'s rust_extensions."""
    found = []
    pyproject = join(folder, "pyproject.toml")
    text = read(pyproject)
    for module in _table(_toml(text), "tool", "setuptools-rust").get("ext-modules", []):
        if isinstance(module, dict):
            line = _line_of(text, r"\[\[tool\.setuptools-rust\.ext-modules\]\]")
            what = f"cargo: {module.get('path', module.get('target', '?'))}"
            found.append(Fetch(what, "", Where(pyproject, line)))
    script = join(folder, "setup.py")
    tree = _python(read(script))
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and _called(node) == "setup":
            for keyword in node.keywords:
                if keyword.arg == "rust_extensions":
                    found.append(
                        Fetch(f"{script}:rust_extensions", "", Where(script, keyword.value.lineno))
                    )
    return found


def python_fetches(read: Read, script: str) -> list[Fetch]:
    """Downloads in a setup script: urllib's and requests' calls, and curl, wget or git
    clone run as commands."""
    tree = _python(read(script))
    if tree is None:
        return []
    found = []
    guards = _early_returns(tree)
    for function, node in _nodes_in_functions(tree):
        if _downloads(node):
            url = next((v for v in _strings(node) if "://" in v), "")
            skipped_by = [f"NOT (DEFINED ENV{{{guards[function]}}})"] if function in guards else []
            found.append(
                Fetch(
                    url or f"{script}:{function}",
                    "",
                    Where(script, getattr(node, "lineno", 0)),
                    tuple(skipped_by),
                )
            )
    return found


SHELLS = {"bash", "sh"}


def command_fetches(read: Read, script: str) -> list[Fetch]:
    """What the commands a setup script runs fetch: a ``pip install`` it runs itself
    (``[sys.executable, "-m", "pip", "install", ...]``), and in each shell script of its
    tree it runs (``["bash", path]``), every pip install, git clone, curl and wget. Each is
    named ``<file>:<tool>:<what>`` (``.github/scripts/install_triton.sh:pip:amd-triton``),
    as the pins mark it."""
    tree = _python(read(script))
    if tree is None:
        return []
    constants = _module_strings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        words = node.args[0]
        if not isinstance(words, (ast.List, ast.Tuple)):
            continue
        texts = [_literal(_resolved(elt, constants)) for elt in words.elts]
        if "pip" in texts and "install" in texts[texts.index("pip") :]:
            pip = _pip_install(texts[texts.index("pip") + 1 :])
            if pip:
                found.append(Fetch(f"{script}:pip:{pip}", "", Where(script, node.lineno)))
        elif texts[:1] and texts[0] in SHELLS and len(words.elts) > 1:
            path = _path_of(words.elts[1], tree, parent(script))
            if path:
                found += shell_fetches(read, path)
    return found


def shell_fetches(read: Read, script: str) -> list[Fetch]:
    """Every pip install, git clone, curl and wget in the shell script ``script``."""
    text = read(script)
    if text is None:
        return []
    try:
        items = shell.parse(text)
    except shell.TooDeep:
        return []  # nested past what is read: no facts, as from a setup.py Python cannot parse
    found = []
    for item in items:
        if not isinstance(item, shell.Command) or not item.words:
            continue
        words = [word.text.strip("\"'") for word in item.words]
        name = posixpath.basename(words[0])
        said = ""
        if name in {"pip", "pip3"} or words[1:3] == ["-m", "pip"]:
            pip = _pip_install(words[3 if words[1:3] == ["-m", "pip"] else 1 :])
            said = f"pip:{pip}" if pip else ""
        elif (name == "git" and words[1:2] == ["clone"]) or name in {"curl", "wget"}:
            said = ":".join([name, *(w for w in words if "://" in w)][:2])
        if said:
            line = text.count("\n", 0, item.words[0].offset) + 1
            found.append(Fetch(f"{script}:{said}", "", Where(script, line)))
    return found


def _pip_install(args: list[str]) -> str:
    """The requirements of pip's arguments, comma-separated, or "" when they install
    nothing (an uninstall, a list)."""
    install = pipargs.install_arguments(args)
    if install is None or not install.requirements:
        return ""
    return ",".join(args[at] for at in install.requirements)


def _module_strings(tree: ast.Module) -> dict[str, ast.expr]:
    """The module's ``NAME = "text"``: a command names its package by a constant."""
    return {
        target.id: statement.value
        for statement in tree.body
        if isinstance(statement, ast.Assign) and _literal(statement.value)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }


def _path_of(node: ast.expr, tree: ast.Module, folder: str) -> str:
    """The tree path ``node`` names: a literal, or ``os.path.join(<the script's folder>,
    "a", "b")`` assigned to a name; "" when it is computed otherwise."""
    if isinstance(node, ast.Name):
        assigned = [
            statement.value
            for statement in ast.walk(tree)
            if isinstance(statement, ast.Assign)
            and any(getattr(target, "id", "") == node.id for target in statement.targets)
        ]
        node = assigned[-1] if len(assigned) == 1 else node
    if _literal(node):
        return join(folder, _literal(node))
    if isinstance(node, ast.Call) and _called(node) == "join" and node.args:
        parts = [_literal(arg) for arg in node.args[1:]]
        if all(parts):
            return join(folder, posixpath.join(*parts))
    return ""


def _early_returns(tree: ast.Module) -> dict[str, str]:
    """function -> the variable whose being set makes it return before anything else:
    ``given = os.getenv("X")`` then ``if given: return given`` (a tree it is given)."""
    found = {}
    for function, node in _nodes_in_functions(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        names = {}
        for statement in node.body:
            if isinstance(statement, ast.Expr) and _literal(statement.value):
                continue  # its docstring
            if isinstance(statement, ast.Assign) and _env_name(statement.value):
                names[getattr(statement.targets[0], "id", "")] = _env_name(statement.value)
            elif isinstance(statement, ast.If) and isinstance(statement.body[-1], ast.Return):
                test = statement.test
                variable = names.get(getattr(test, "id", ""), "") or _env_name(test)
                if variable:
                    found[function] = variable
                break
            else:
                break
    return found


def _downloads(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and _called(node) in {"urlretrieve", "urlopen"}:
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if isinstance(owner, ast.Name) and owner.id == "requests":
            return True
    if isinstance(node, (ast.List, ast.Tuple)):
        words = [_literal(elt) for elt in node.elts[:2]]
        return words[:1] in (["curl"], ["wget"]) or words == ["git", "clone"]
    return False


# ---------------------------------------------------------------- arch variables


def arch_reads(read: Read, script: str) -> list[ArchRead]:
    """The arch variables a setup script reads from the environment, and how it splits
    them: in the script, and in the modules of its tree it imports (aiter's setup.py puts
    aiter/ on sys.path and imports jit.core, which reads GPU_ARCHS)."""
    tree = _python(read(script))
    if tree is None:
        return []
    found = [read for read in _env_reads(tree, script) if _is_arch(read.variable)]
    for module in imported_modules(read, script, tree):
        imported = _python(read(module))
        if imported is not None:
            found += [r for r in _env_reads(imported, module) if _is_arch(r.variable)]
    return found


def imported_modules(read: Read, script: str, tree: ast.Module) -> list[str]:
    """The files of the tree that ``script`` imports: a module found beside it, or in a
    folder of the tree it puts on sys.path (``sys.path.insert(0, f"{this_dir}/aiter/")``)."""
    folder = parent(script)
    roots = [folder]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "insert" and len(node.args) == 2:
            path = node.args[1]
            if isinstance(path, ast.JoinedStr):  # f"{this_dir}/aiter/": after the folder
                tail = "".join(_literal(value) for value in path.values[1:])
                roots.append(join(folder, tail.strip("/")))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            for root in roots:
                file = join(root, name.replace(".", "/") + ".py")
                if file != script and file not in found and read(file) is not None:
                    found.append(file)
    return found


def cmake_arch_reads(read: Read, folder: str = ".") -> list[ArchRead]:
    """``$ENV{...ARCH...}`` in the CMake files ``folder`` runs: a CMake list, split on ';'."""
    if not runs_cmake(read, folder):
        return []
    found: list[ArchRead] = []
    for file, text in _cmake_files(read, folder):
        for number, line in enumerate(text.splitlines(), 1):
            for variable in re.findall(r"\$ENV\{(\w+)\}", line.split("#", 1)[0]):
                if _is_arch(variable):
                    found.append(ArchRead(variable, Split.SEMICOLON, Where(file, number)))
    return found


def _is_arch(variable: str) -> bool:
    # AMDGPU_TARGET names no ARCH: upstream sgl-kernel's setup_rocm.py takes its arch there.
    named = "ARCH" in variable or variable.endswith(("GPU_TARGET", "GPU_TARGETS"))
    return named and variable not in {"ARCH", "ARCHFLAGS"}


def _env_reads(tree: ast.AST, file: str = "") -> Iterator[ArchRead]:
    """Each ``os.environ.get("X")``, ``os.getenv("X")`` and ``os.environ["X"]``, with the
    separator the code splits the value on."""
    assigned = _assignments(tree)
    for node in ast.walk(tree):
        variable = _env_name(node)
        if variable:
            split = _split_of(node, assigned.get(id(node), ""), tree)
            yield ArchRead(variable, split, Where(file, getattr(node, "lineno", 0)))


def _env_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and _called(node) in {"getenv", "get"} and node.args:
        func = node.func
        owner = func.value if isinstance(func, ast.Attribute) else None
        if _called(node) == "get" and not (
            isinstance(owner, ast.Attribute) and owner.attr == "environ"
        ):
            return ""
        return _literal(node.args[0])
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        return _literal(node.slice) if node.value.attr == "environ" else ""
    return ""


def _assignments(tree: ast.AST) -> dict[int, str]:
    """id(read) -> the name it is assigned to, where a read is assigned whole."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[id(node.value)] = node.targets[0].id
    return found


def _split_of(read: ast.AST, name: str, tree: ast.AST) -> Split:
    """How the value of ``read`` (or the variable ``name`` it went to) is split."""
    seps: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"split", "replace"}
            and _mentions(node.func.value, read, name)
        ):
            seps |= {s for s in map(_literal, node.args) if s in {";", ","}}
        if isinstance(node, ast.JoinedStr) and _flag_of(node, read, name):
            return Split.COMMA  # one --offload-arch=... flag: the compiler takes a, b
    if seps == {";", ","}:
        return Split.EITHER
    if seps:
        return Split.SEMICOLON if seps == {";"} else Split.COMMA
    return Split.UNKNOWN


def _mentions(node: ast.AST, read: ast.AST, name: str) -> bool:
    return any(
        sub is read or (isinstance(sub, ast.Name) and sub.id == name and name)
        for sub in ast.walk(node)
    )


def _flag_of(node: ast.JoinedStr, read: ast.AST, name: str) -> bool:
    for before, value in zip(node.values, node.values[1:], strict=False):
        if isinstance(value, ast.FormattedValue) and _mentions(value.value, read, name):
            text = _literal(before)
            if text.endswith("--offload-arch="):
                return True
    return False


# ---------------------------------------------------------------- CMake, run as it runs


def cmake_evaluation(read: Read, folder: str, facts: cmake.Facts) -> cmake.Evaluation | None:
    """``folder``'s CMake run from ``facts`` (rocmgraph.trees.cmake); None where its build
    runs no CMake."""
    if not runs_cmake(read, folder):
        return None
    return cmake.evaluate(read, folder, facts)


def _fetch(found: cmake.Fetched) -> Fetch:
    return Fetch(found.url, found.tag, Where(found.file, found.line), found.conditions, found.how)


def _cmake_files(read: Read, folder: str) -> Iterator[tuple[str, str]]:
    """CMakeLists.txt and every file it includes, in a ROCm build of the default archs
    (which files are read does not depend on the archs)."""
    evaluation = cmake.evaluate(read, folder, cmake.rocm(cmake.ROCM_ARCHS))
    for file in evaluation.files:
        yield file, read(file) or ""


# ---------------------------------------------------------------- small readers


def join(folder: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(folder, path))


def parent(path: str) -> str:
    return posixpath.dirname(path) or "."


def _toml(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        return tomli.loads(text)
    except tomli.TOMLDecodeError:
        return {}


def _python(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _line_of(text: str | None, key: str) -> int:
    """The line that starts with ``key`` (a pattern), assigned or not."""
    for number, line in enumerate((text or "").splitlines(), 1):
        if re.match(rf"{key}(\s*=|$)", line):
            return number
    return 0


def _line_with(text: str | None, needle: str) -> int:
    """The first line that holds ``needle``, or 0."""
    for number, line in enumerate((text or "").splitlines(), 1):
        if needle in line:
            return number
    return 0


def _resolved(node: ast.expr | None, constants: dict[str, ast.expr]) -> ast.expr | None:
    return constants.get(node.id, node) if isinstance(node, ast.Name) else node


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _literal(node: ast.AST | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _strings(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _nodes_in_functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Every node, with the qualified name of the function (or class) it is in."""

    def walk(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            named = isinstance(child, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            inner = f"{scope}.{child.name}".lstrip(".") if named else scope  # type: ignore[attr-defined]
            yield inner, child
            yield from walk(child, inner)

    return walk(tree, "")
