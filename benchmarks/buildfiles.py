"""The build files the ROCm check reads, at every commit benchmarks/history.toml picked, kept
as test fixtures; and what the real CMake makes of vLLM's, beside rocmgraph's own reader.

``extract`` reads the files from git objects (a mirror's bare repository, never a checkout)
into tests/fixtures/history/<fork>/: each blob once, under its git id in ``blobs/``, and
``index.toml``, each commit's paths and their blob ids. An object the mirror lacks is
recorded as missing with its path, and the rest goes on.

``cmake`` runs Debian's cmake (3.25) in script mode on each vLLM commit's files, with a
driver that sets what the ROCm build sets and records every fetch the files ask for, and
writes the comparison with ``treefacts.cmake_fetches`` to benchmarks/buildfiles-cmake.md.

    python3 benchmarks/buildfiles.py extract [--vllm-git DIR] [--sglang-git DIR]
    python3 benchmarks/buildfiles.py cmake [--cmake PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import history
import tomli

from rocmgraph.outside import git, proc
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
        ),
    ),
    Selection(
        "sglang",
        (
            *(f"sgl-kernel/{pattern}" for pattern in _KERNEL),
            *(f"python/sglang/kernels/aot/{pattern}" for pattern in _KERNEL),
            "python/pyproject*.toml",
            "python/setup.py",  # from 2026-07: builds the Rust extensions (cargo fetches)
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    extracting = commands.add_parser("extract", help="write tests/fixtures/history/<fork>/")
    for selection in SELECTIONS:
        extracting.add_argument(f"--{selection.fork}-git", type=Path,
                                help="a bare repository (default: its mirror)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "extract":
        _extract_all(args)


if __name__ == "__main__":
    main()
