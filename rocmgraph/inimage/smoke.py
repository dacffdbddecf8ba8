"""The smoke check of a finished image: what the pins say is what the image holds.

Every distribution the pins name is installed, at the pinned version where
one is pinned (its metadata and its module's ``__version__`` both: verl picks
code paths by SGLang's version); every module named is importable; every
pinned variable of the runtime environment has its value. A failing check
fails the build with its line. Runs inside the image with its own Python, so it
uses the standard library only.

    python smoke.py --dist vllm==0.22.1rc1 --dist verl --import amdsmi \\
        --env NCCL_DEBUG=ERROR --env 'PYTORCH_ROCM_ARCH=gfx942;gfx950'
"""

import argparse
import importlib
import os
import sys
from importlib import metadata


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


def check_dist(requirement: str) -> list[str]:
    name, _, pinned = requirement.partition("==")
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        return [f"{name}: not installed, the pins say {pinned or 'it is there'}"]
    problems = []
    if pinned and public(found) != public(pinned):
        problems.append(f"{name}: {found} is installed, the pins say {pinned}")
    for module in modules_of(name):
        problems += check_import(module, pinned)
    return problems


def check_import(module: str, pinned: str = "") -> list[str]:
    try:
        imported = importlib.import_module(module)
    except Exception as exc:  # any failure to import is the finding
        return [f"import {module}: {type(exc).__name__}: {exc}".splitlines()[0]]
    said = getattr(imported, "__version__", None)
    if pinned and isinstance(said, str) and public(said) != public(pinned):
        return [f"{module}.__version__ is {said}, the pins say {pinned}"]
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
    args = parser.parse_args(argv)
    problems: list[str] = []
    for requirement in args.dist:
        problems += check_dist(requirement)
    for module in args.modules:
        problems += check_import(module)
    for assignment in args.env:
        problems += check_env(assignment)
    for problem in problems:
        print(f"smoke: {problem}", file=sys.stderr)
    checked = len(args.dist) + len(args.modules) + len(args.env)
    print(f"smoke: {checked} checks, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
