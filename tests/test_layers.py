"""The layers of the code, held by its imports.

- ``wheels`` knows wheels and nothing of this project; ``stages`` declares stages
  with ``rocmgraph.graph.dag`` alone; nothing in ``rocmgraph`` imports ``stages``
  (dodo.py puts the two together). One direction per pair of packages.
- The pure core (pins, kinds, graph, keys, plan, explain, recipe, and the
  parsers) imports no module of the outside world, no command, and neither
  a process runner nor an HTTP client.
- ``rocmgraph/outside/`` (processes, git, HTTP, docker, registry, caches) builds
  on the core only, never on a command.
- ``rocmgraph/inimage/`` runs inside the image, on its own Python: the standard
  library only.

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

CORE = {
    f"rocmgraph.{name}"
    for name in [
        "archs", "closure", "compilecache", "dockerfile_audit", "dockerfile_syntax", "engine",
        "errors", "expand", "estimate", "explain", "failpoints", "filetree", "fsutil", "graph",
        "imageconfig", "keycache", "keys", "kinds", "layout", "ledger", "pins", "pinsedit",
        "pipargs", "plan", "pool", "provenance", "recipe", "records", "run", "shell", "solve",
        "spelling",
    ]
}  # fmt: skip
# What no core module may use, even from the standard library: it reaches beyond.
REACHING = {"subprocess", "requests", "socket", "urllib.request", "http.client", "docker"}
PROJECT = ("rocmgraph", "wheels", "stages")


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


def imports(name: str) -> set[str]:
    """Every module ``name`` imports: ``from a import b`` is ``a.b`` when that is a module
    of this project, else ``a``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    return found


def project(found: set[str]) -> set[str]:
    return {name for name in found if name.split(".")[0] in PROJECT}


def test_the_walk_sees_every_kind_of_import() -> None:
    """The rule tests below are only as good as this walk: it must see imports in
    functions, from-imports of modules and of names, and aliases."""
    tasks = imports("rocmgraph.cli.tasks")
    assert {"rocmgraph.commands.audit", "rocmgraph.demo.profile", "rocmgraph.outside"} <= tasks
    assert "requests" in imports("rocmgraph.outside.http")  # imported inside a function
    assert "rocmgraph.inimage.prune" in imports("rocmgraph.config.archs")
    assert not CORE - set(MODULES), sorted(CORE - set(MODULES))


def test_wheels_knows_nothing_of_this_project() -> None:
    for name in (n for n in MODULES if n.startswith("wheels")):
        assert project(imports(name)) <= {n for n in MODULES if n.startswith("wheels")}, name


def test_stages_declare_with_the_graph_alone_and_nothing_imports_stages() -> None:
    for name in MODULES:
        used = project(imports(name))
        if name.startswith("stages"):
            assert used <= {"rocmgraph.graph.dag"} | {n for n in MODULES if n.startswith("stages")}
        else:
            assert not {n for n in used if n.startswith("stages")}, name


def test_the_core_reaches_nothing_beyond_this_process() -> None:
    allowed = (
        CORE | {"rocmgraph"} | {n for n in MODULES if n.startswith(("wheels", "rocmgraph.inimage"))}
    )
    for name in sorted(CORE):
        found = imports(name)
        assert project(found) <= allowed, (name, sorted(project(found) - allowed))
        assert not {n for n in found if n in REACHING or n.split(".")[0] in REACHING}, name


def test_the_outside_world_builds_on_the_core_only() -> None:
    for name in (n for n in MODULES if n.startswith("rocmgraph.outside")):
        allowed = CORE | {n for n in MODULES if n.startswith(("rocmgraph.outside", "wheels",
                                                               "rocmgraph.inimage"))}  # fmt: skip
        assert project(imports(name)) <= allowed, (name, sorted(project(imports(name)) - allowed))


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("rocmgraph.inimage")))
def test_scripts_that_run_in_the_image_use_the_standard_library_only(name: str) -> None:
    for used in imports(name):
        top = used.split(".")[0]
        assert top in sys.stdlib_module_names or top == "__future__", (name, used)


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
        for name in sorted(CORE)
        for where, annotation in public_annotations(name)
        if re.search(r"\bAny\b", annotation)
    ]
    assert loose == []
    assert ("rocmgraph.graph.keys.Inputs.pins", "Mapping[str, Json]") in set(
        public_annotations("rocmgraph.graph.keys")
    )  # the walk sees fields
