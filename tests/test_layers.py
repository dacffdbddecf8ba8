"""The layers of the code, held by its imports.

- ``rocmgraph/`` is folders only, and each folder is a floor: FOLDERS says which
  floors each one may import, and a folder it does not name is refused.
- Nothing reaches beyond this process below ``outside/``: the pure floors import no
  process runner, socket or HTTP client, and write only through the modules WRITERS
  names.
- ``wheels`` knows wheels and nothing of this project; ``stages`` declares stages
  with ``rocmgraph.graph.dag`` alone; nothing in ``rocmgraph`` imports ``stages``
  (dodo.py puts the two together).
- ``rocmgraph/inimage/`` runs inside the image, on its own Python: the standard
  library only.
- No module imports itself back through another. An import inside a function says
  why in a comment (most are about startup time).

Every import counts, the ones inside functions too.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

# Which floors each folder of rocmgraph/ may import (besides itself, and the package's
# __init__ for its version). Read down the table: a floor imports only floors above it.
FOLDERS: dict[str, set[str]] = {
    "inimage": set(),  # runs in the image: the standard library only
    "common": set(),
    "config": {"common", "inimage"},
    "dockerfile": {"common"},
    "graph": {"common", "config"},
    "outside": {"common", "config", "inimage"},
    "fetch": {"common", "config", "outside"},
    "trees": {"common", "config", "dockerfile", "graph", "outside", "fetch"},
    "building": {"common", "config", "graph", "outside", "fetch", "trees"},
    "commands": {"common", "config", "dockerfile", "graph", "outside", "fetch", "trees", "building",
                 "inimage"},  # verify makes the SBOM the image should hold, as the image does
    "demo": {"common", "config", "graph", "outside", "fetch", "trees", "building", "commands"},
    "cli": {"common", "config", "dockerfile", "graph", "outside", "fetch", "trees", "building",
            "commands", "demo"},
}  # fmt: skip
# The floors that reach nothing beyond this process.
PURE = {"common", "config", "dockerfile", "graph"}
# What a pure floor may not use, even from the standard library: it reaches beyond.
REACHING = {"subprocess", "requests", "socket", "urllib.request", "http.client", "docker",
            "ftplib", "smtplib", "multiprocessing"}  # fmt: skip
REACHING_CALLS = {"os.system", "os.popen", "os.execv", "os.execvp", "os.spawnv", "os.fork",
                  "importlib.import_module", "__import__"}  # fmt: skip
# Calls that write: methods by their name, and functions by their dotted name.
WRITING_METHODS = {"write_text", "write_bytes", "mkdir", "unlink", "touch", "rename", "rmdir",
                   "atomic_write_text", "atomic_write_bytes"}  # fmt: skip
WRITING_CALLS = {"open:w", "os.replace", "os.remove", "os.rename", "os.unlink", "os.makedirs",
                 "shutil.rmtree", "shutil.move", "shutil.copyfile", "shutil.copytree"}  # fmt: skip
# The modules of the pure floors that write, and what they write.
WRITERS = {
    "rocmgraph.common.fsutil": "whole files and folders, for every writer",
    "rocmgraph.config.pinsedit": "the pins file, when lock or bump edits it",
    "rocmgraph.graph.closure": "the closure lock file beside the pins",
    "rocmgraph.graph.keycache": "the key cache under .build/",
    "rocmgraph.graph.recipe": "the compiled templates' cache under .build/",
}
PROJECT = ("rocmgraph", "wheelfiles", "stages")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


MODULES = modules()


def imports(name: str, source: str | None = None) -> set[str]:
    """Every module ``name`` imports: ``from a import b`` is ``a.b`` when that is a module
    of this project, else ``a``."""
    path = MODULES.get(name)
    is_package = path is not None and path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source if source is not None else _read(name))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else base)
                if base.split(".")[0] not in PROJECT:
                    found.add(full)  # from urllib import request: urllib.request
    return found


def _read(name: str) -> str:
    return MODULES[name].read_text(encoding="utf-8")


def project(found: set[str]) -> set[str]:
    return {name for name in found if name.split(".")[0] in PROJECT}


def folder(name: str) -> str | None:
    """The floor of module ``name``: rocmgraph.<folder>.<module>; None for the package."""
    parts = name.split(".")
    return parts[1] if parts[0] == "rocmgraph" and len(parts) > 1 else None


def calls(source: str) -> set[str]:
    """Every dotted name called in ``source``: ``os.system(...)`` is os.system; an
    ``open`` for writing is open:w."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            found.add(ast.unparse(node.func))
            mode = node.args[1] if len(node.args) > 1 else None
            mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
            writing = isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")
            if ast.unparse(node.func) == "open" and writing:
                found.add("open:w")
    return found


def violations(name: str, source: str) -> list[str]:
    """What module ``name`` (with this ``source``) does against the rules of its floor."""
    where = folder(name)
    if name.startswith("rocmgraph.") and name.count(".") == 1 and where not in FOLDERS:
        return [f"{name}: rocmgraph/ holds folders only; put it in one of {sorted(FOLDERS)}"]
    if where not in FOLDERS:
        return [f"{name}: the folder {where} is not in FOLDERS"] if where else []
    found, said = imports(name, source), []
    for used in sorted(project(found)):
        other = folder(used)
        if used.startswith(("wheelfiles", "stages")) or other in {where, None}:
            if used.startswith("stages"):
                said.append(
                    f"{name} imports {used}: only dodo.py puts stages and rocmgraph together"
                )
            continue
        if other not in FOLDERS[where]:
            said.append(f"{name} imports {used}: {where}/ may not import {other}/")
    if where in PURE:
        reaching = {n for n in found if n in REACHING or n.split(".")[0] in REACHING}
        reaching |= calls(source) & REACHING_CALLS
        said += [f"{name} reaches beyond its process: {n}" for n in sorted(reaching)]
        if name not in WRITERS:
            done = calls(source)
            writes = {c for c in done if c.rpartition(".")[2] in WRITING_METHODS}
            writes |= done & WRITING_CALLS
            said += [f"{name} writes ({w}) but is not in WRITERS" for w in sorted(writes)]
    return said + unsaid_imports(name, source)


def unsaid_imports(name: str, source: str) -> list[str]:
    """Imports inside a function with no comment on the line or right above the block."""
    lines, said = source.splitlines(), []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in function.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            own = lines[node.lineno - 1 : node.end_lineno]
            above = node.lineno - 2
            while above >= 0 and re.match(r"\s*(import|from)\s", lines[above]):
                above -= 1
            if not any("#" in line for line in own) and not lines[above].strip().startswith("#"):
                said.append(f"{name}:{node.lineno} imports inside a function without saying why")
    return said


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other round: Tarjan's strongly connected
    components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in sorted(edges[name]):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component: list[str] = []
            while not component or component[-1] != name:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return found


def test_the_walk_sees_every_kind_of_import() -> None:
    """The rule tests below are only as good as this walk: it must see imports in
    functions, from-imports of modules and of names, and aliases."""
    tasks = imports("rocmgraph.cli.tasks")
    assert {"rocmgraph.commands.audit", "rocmgraph.demo.profile"} <= tasks
    assert "rocmgraph.fetch.world" in tasks
    assert "requests" in imports("rocmgraph.outside.http")  # imported inside a function
    assert "rocmgraph.inimage.prune" in imports("rocmgraph.config.archs")
    assert set(WRITERS) <= set(MODULES), sorted(set(WRITERS) - set(MODULES))


def test_rocmgraph_is_folders_and_every_folder_is_a_floor() -> None:
    top = sorted(p.name for p in (ROOT / "rocmgraph").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py"]
    folders = {p.name for p in (ROOT / "rocmgraph").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(FOLDERS)
    for floor, below in FOLDERS.items():
        assert floor not in below, floor
        assert below <= set(FOLDERS), floor


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("rocmgraph.")))
def test_each_module_keeps_to_its_floor(name: str) -> None:
    assert violations(name, _read(name)) == []


# What a module of graph/ must not do, and what the check says of it.
PLANTED = [
    ("from rocmgraph.outside import proc",
     "imports rocmgraph.outside.proc: graph/ may not import outside/"),
    ("from rocmgraph.building import execute",
     "imports rocmgraph.building.execute: graph/ may not import building/"),
    ("from ..building import execute",
     "imports rocmgraph.building.execute: graph/ may not import building/"),
    ("import stages", "imports stages: only dodo.py puts stages and rocmgraph together"),
    ("import subprocess", "reaches beyond its process: subprocess"),
    ("from urllib import request", "reaches beyond its process: urllib.request"),
    ("from http import client", "reaches beyond its process: http.client"),
    ("import os\nos.system('true')", "reaches beyond its process: os.system"),
    ("import importlib\nimportlib.import_module('x')",
     "reaches beyond its process: importlib.import_module"),
    ("__import__('socket')", "reaches beyond its process: __import__"),
    ("from pathlib import Path\nPath('x').write_text('')",
     "writes (Path('x').write_text) but is not in WRITERS"),
    ("open('x', 'a')", "writes (open:w) but is not in WRITERS"),
    ("import shutil\nshutil.rmtree('x')", "writes (shutil.rmtree) but is not in WRITERS"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "said"), PLANTED, ids=[said for _, said in PLANTED])
def test_a_planted_violation_is_named(source: str, said: str) -> None:
    assert violations("rocmgraph.graph.keys", source) == [f"rocmgraph.graph.keys {said}"]


def test_a_module_outside_the_floors_is_named() -> None:
    assert violations("rocmgraph.stray", "") == [
        f"rocmgraph.stray: rocmgraph/ holds folders only; put it in one of {sorted(FOLDERS)}"
    ]
    assert violations("rocmgraph.attic.old", "") == [
        "rocmgraph.attic.old: the folder attic is not in FOLDERS"
    ]


def test_an_import_inside_a_function_says_why() -> None:
    bare = "def f():\n    from rocmgraph.graph import dag\n"
    assert violations("rocmgraph.graph.keys", bare) == [
        "rocmgraph.graph.keys:2 imports inside a function without saying why"
    ]


def test_a_function_level_import_with_a_reason_passes() -> None:
    said = "def f():\n    # startup: only when asked\n    from rocmgraph.graph import dag\n"
    inline = "def f():\n    from rocmgraph.graph import dag  # startup: only when asked\n"
    assert violations("rocmgraph.graph.keys", said) == []
    assert violations("rocmgraph.graph.keys", inline) == []


def test_no_module_imports_itself_back() -> None:
    assert cycles({name: project(imports(name)) & set(MODULES) for name in MODULES}) == []


def test_a_planted_cycle_is_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]


def test_wheels_knows_nothing_of_this_project() -> None:
    for name in (n for n in MODULES if n.startswith("wheelfiles")):
        assert project(imports(name)) <= {n for n in MODULES if n.startswith("wheelfiles")}, name


def test_stages_declare_with_the_graph_alone_and_nothing_imports_stages() -> None:
    for name in MODULES:
        used = project(imports(name))
        if name.startswith("stages"):
            assert used <= {"rocmgraph.graph.dag"} | {n for n in MODULES if n.startswith("stages")}
        else:
            assert not {n for n in used if n.startswith("stages")}, name


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("rocmgraph.inimage")))
def test_scripts_that_run_in_the_image_use_the_standard_library_only(name: str) -> None:
    # but sbom.py, whose step has the SBOM library mounted (rocmgraph.building.sbomfacts)
    mounted = {"cyclonedx", "packageurl"} if name == "rocmgraph.inimage.sbom" else set()
    for used in imports(name):
        top = used.split(".")[0]
        assert top in sys.stdlib_module_names | mounted or top == "__future__", (name, used)


def public_annotations(name: str) -> Iterator[tuple[str, str]]:
    """(where, annotation) of every public signature and field of module ``name``: its
    functions, and the methods and fields of its classes, whose names do not start with _."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))

    def of_function(node: ast.FunctionDef, where: str) -> Iterator[tuple[str, str]]:
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        for argument in arguments:
            if argument.annotation is not None:
                yield f"{where}({argument.arg})", ast.unparse(argument.annotation)
        if node.returns is not None:
            yield f"{where} ->", ast.unparse(node.returns)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield from of_function(node, f"{name}.{node.name}")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                where = f"{name}.{node.name}"
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    yield from of_function(item, f"{where}.{item.name}")
                elif (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and not item.target.id.startswith("_")
                ):
                    yield f"{where}.{item.target.id}", ast.unparse(item.annotation)


def test_the_cores_public_signatures_say_what_they_take() -> None:
    """No ``Any`` where the core meets its callers (mypy strict checks the rest)."""
    loose = [
        f"{where}: {annotation}"
        for name in sorted(n for n in MODULES if folder(n) in PURE)
        for where, annotation in public_annotations(name)
        if re.search(r"\bAny\b", annotation)
    ]
    assert loose == []
    assert ("rocmgraph.graph.keys.Inputs.pins", "Mapping[str, Json]") in set(
        public_annotations("rocmgraph.graph.keys")
    )  # the walk sees fields
