"""The smoke check of a finished image: what the pins say is what the image holds.

Every distribution the pins name is installed at its pinned version; each of its
top-level modules is on the path; where a module states its ``__version__`` in its
source (a string in ``__init__.py``, in the ``_version.py`` setuptools_scm writes,
or in ``version.py``), that is the pinned version too: verl picks code paths by
SGLang's. Each ``--import`` name (a pinned site-packages link) is a module, not a
dangling link; each pinned variable of the runtime environment has its value. A
failing check fails the build with its line.

It runs at build time, on a host with no GPU, so it runs no code of the image's
packages (aiter may probe the GPU or compile at import; cupy loads the ROCm it was
built for): it reads metadata and source, and finds each module without importing
it. ``--imports`` also imports every module and compares the ``__version__`` it
then has: for a host with the GPU. It runs inside the image with its own Python,
so it uses the standard library only.

    python smoke.py --dist vllm==0.22.1rc1 --dist verl --import amdsmi \\
        --env NCCL_DEBUG=ERROR --env 'PYTORCH_ROCM_ARCH=gfx942;gfx950' [--imports]
"""

import argparse
import ast
import importlib
import importlib.util
import os
import sys
from importlib import metadata
from importlib.machinery import ModuleSpec
from pathlib import Path

VERSION = "__version__"
# Where a package states its version: what setuptools_scm writes, what others keep by hand.
VERSION_FILES = ("__init__.py", "_version.py", "version.py")


# verify_dists.py's: each script runs alone in an image, mounted by itself.
def public(version: str) -> str:
    """The version as pins compare it: 2.12.0+rocm7.14.git1234 -> 2.12.0 (pins name the
    public version), and a release's trailing zeros left out, as PEP 440 compares
    releases: pip installs 1.14.0 for a pin of 1.14."""
    release = version.split("+", 1)[0]
    parts = release.split(".")
    if not all(part.isdigit() for part in parts):  # a pre-release, a post-release: as written
        return release
    while len(parts) > 1 and int(parts[-1]) == 0:
        parts.pop()
    return ".".join(str(int(part)) for part in parts)


def modules_of(dist: str) -> list[str]:
    """The top-level modules a distribution installs (``amd-aiter``: ``aiter``)."""
    name = canonical(metadata.distribution(dist).metadata["Name"])
    return sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if name in {canonical(d) for d in dists}
        and module.isidentifier()
        and not module.startswith("_")
    )


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def check_dist(requirement: str, imports: bool = False) -> list[str]:
    name, _, pinned = requirement.partition("==")
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        return [f"{name}: not installed, the pins say {pinned or 'it is there'}"]
    problems = []
    if pinned and public(found) != public(pinned):
        problems.append(f"{name}: {found} is installed, the pins say {pinned}")
    for module in modules_of(name):
        problems += check_module(module, pinned, imports, owner=name)
    return problems


def check_module(
    module: str, pinned: str = "", imports: bool = False, owner: str = ""
) -> list[str]:
    """``module`` found on the path (a top-level find runs none of its code), then imported
    with ``imports``, else its version read from its source."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return [missing(module, owner)]
    if imports:
        return check_import(module, pinned)
    stated = stated_version(spec)
    if pinned and stated and public(stated[0]) != public(pinned):
        return [f"{module}.{VERSION} is {stated[0]} in {stated[1]}, the pins say {pinned}"]
    return []


def missing(module: str, owner: str) -> str:
    """Why ``module`` is not found: a dangling link (a pinned link whose target moved) where
    there is one."""
    for entry in sys.path:
        link = Path(entry or ".") / module
        if link.is_symlink() and not link.exists():
            return f"{module}: {link} links to {link.readlink()}, which does not exist"
    if owner:
        return f"{owner}: its module {module} is not on the path"
    return f"{module}: not on the path"


def stated_version(spec: ModuleSpec) -> tuple[str, str] | None:
    """The version a module's source states, and the file that states it
    (``sglang/_version.py``); none where the module has no ``__version__``."""
    if not spec.origin or not spec.origin.endswith(".py"):  # an extension, a namespace
        return None
    origin = Path(spec.origin)
    tree = parse(origin)
    if tree is None or not bindings(tree):
        return None
    files = [(origin, origin.name)]  # a module of one file
    if spec.submodule_search_locations is not None:  # a package: where it imports it from
        files = [(origin.parent / name, f"{spec.name}/{name}") for name in VERSION_FILES]
    for path, shown in files:
        version = stated_in(parse(path))
        if version:
            return version, shown
    return None


def parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):  # no such file; an import would tell the rest
        return None


def stated_in(tree: ast.Module | None) -> str | None:
    """The string a module assigns to ``__version__`` at its top level, where nothing else
    binds the name (a placeholder that an import may replace states nothing)."""
    if tree is None:
        return None
    literals = [value for value in map(literal, tree.body) if value is not None]
    return literals[-1] if literals and len(literals) == bindings(tree) else None


def literal(node: ast.stmt) -> str | None:
    """``__version__ = "1.0"``, ``__version__ = version = "1.0"``, ``__version__: str = "1.0"``."""
    targets = node.targets if isinstance(node, ast.Assign) else []
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    value = getattr(node, "value", None)
    named = any(isinstance(target, ast.Name) and target.id == VERSION for target in targets)
    if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return None


def bindings(tree: ast.Module) -> int:
    """How many places bind ``__version__``: assignments anywhere, imports (a ``*`` may)."""
    nodes = list(ast.walk(tree))
    # ``__version__: str`` (setuptools_scm writes it) declares the name, binds nothing.
    declared = {id(n.target) for n in nodes if isinstance(n, ast.AnnAssign) and n.value is None}
    return sum(binds(node) and id(node) not in declared for node in nodes)


def binds(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == VERSION and isinstance(node.ctx, ast.Store)
    return isinstance(node, ast.alias) and (node.asname or node.name) in {VERSION, "*"}


def check_import(module: str, pinned: str = "") -> list[str]:
    try:
        imported = importlib.import_module(module)
    except Exception as exc:  # any failure to import is the finding
        return [f"import {module}: {type(exc).__name__}: {exc}".splitlines()[0]]
    said = getattr(imported, VERSION, None)
    if pinned and isinstance(said, str) and public(said) != public(pinned):
        return [f"{module}.{VERSION} is {said}, the pins say {pinned}"]
    return []


def check_env(assignment: str) -> list[str]:
    name, _, value = assignment.partition("=")
    found = os.environ.get(name)
    if found != value:
        return [f"${name} is {found!r}, the pins say {value!r}"]
    return []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist", action="append", default=[])
    parser.add_argument("--import", dest="modules", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--imports", action="store_true", help="import every module too")
    args = parser.parse_args(argv)
    problems: list[str] = []
    for requirement in args.dist:
        problems += check_dist(requirement, args.imports)
    for module in args.modules:
        problems += check_module(module, imports=args.imports)
    for assignment in args.env:
        problems += check_env(assignment)
    for problem in problems:
        print(f"smoke: {problem}", file=sys.stderr)
    checked = len(args.dist) + len(args.modules) + len(args.env)
    print(f"smoke: {checked} checks, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
