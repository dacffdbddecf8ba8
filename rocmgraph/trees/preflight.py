"""`doit preflight`: the recipe's assumptions checked against the trees it builds.

Each pinned source built here is read at its commit, patched and overlaid as its stage
builds it, and each fact of its build (treefacts) is set beside what the pins say: the
distribution and its version (what the checks in the image look for), every fetch the
build makes by itself (given as a pinned tree, or marked as not taken, with why), the arch
variables it reads and how it splits them, the build requirements the pinned tools must
meet (pip's --no-build-isolation checks none), and the paths the pins name in it. One row per
fact, with file and line. ``rows`` is pure over the trees' readers; ``run_preflight``
reads them from git's objects, fetching only the files read.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmgraph.common.errors import Answer, FetchError, GraphToolError, PatchError, Unchecked
from rocmgraph.config.kinds import SEPARATORS
from rocmgraph.config.pins import GitSource, Pins, format_path, repository
from rocmgraph.fetch.objects import Files, copy
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Run
from rocmgraph.trees import cmake, patches, treefacts
from rocmgraph.trees.treefacts import Read, Split, VersionFrom

NOT_READ = "tree not read"
NOT_THERE = "not in the tree"  # said of a path the pins name that the tree lacks
# The arch variable every source build is given, as a CMake list (source-wheel template).
TEMPLATE_ARCH = "PYTORCH_ROCM_ARCH"


class Fact(StrEnum):
    DIST = "dist"
    VERSION = "version"
    FETCH = "fetch"
    ARCH = "arch"
    PATH = "path"
    REQUIRES = "requires"


class Verdict(StrEnum):
    OK = "ok"
    MISMATCH = "mismatch"
    UNREAD = "unread"


@dataclass(frozen=True)
class Row:
    source: str
    fact: Fact
    upstream: str  # what the tree says
    pins: str  # what the pins say, or the fix
    verdict: Verdict
    where: str = ""  # file:line in the tree
    path: str = ""  # of a path fact: the path it names, in the tree or not


class PreflightError(GraphToolError):
    """A tree's build does what the pins do not account for."""


# ---------------------------------------------------------------- the rows, pure


def rows(pins: Pins, reads: Mapping[str, Read]) -> list[Row]:
    """Every fact of every source in ``reads`` (name -> its patched, overlaid tree)."""
    found: list[Row] = []
    for name, read in reads.items():
        source = pins.sources[name]
        mine: list[Row] = []
        for folder in source.subdirs:
            mine += _dist_rows(name, source, read, folder)
            facts = rocm_build(pins, source)
            mine += fetch_rows(name, source, pins, build_fetches(read, folder, facts))
            mine += undecided_rows(name, read, folder, facts)
            mine += _arch_rows(name, source, read, folder)
            mine += requires_rows(name, pins, treefacts.build_requirements(read, folder))
        mine += _path_rows(name, source, read, reads)
        found += [_origin(row, source.overlay) for row in mine]
    return found


def _origin(row: Row, overlay: Mapping[str, str]) -> Row:
    """``row`` at the file the line is in: an overlay's origin, not the file it replaces."""
    file, _, line = row.where.rpartition(":")
    return dataclasses.replace(row, where=f"{overlay[file]}:{line}") if file in overlay else row


def _dist_rows(name: str, source: GitSource, read: Read, folder: str) -> list[Row]:
    dist = treefacts.dist(read, folder)
    if dist is None:
        return [Row(name, Fact.DIST, f"{folder}: no [project] or setup() names it", "",
                    Verdict.UNREAD)]  # fmt: skip
    expected = source.dist or name
    key = format_path(("sources", name, "dist"))
    named = Row(name, Fact.DIST, dist.name, expected, Verdict.OK, str(dist.where))
    if canonicalize_name(dist.name) != canonicalize_name(expected):
        fix = f'{expected}; the checks look for it: set {key} = "{dist.name}"'
        named = Row(name, Fact.DIST, dist.name, fix, Verdict.MISMATCH, str(dist.where))
    return [named, _version_row(name, source, dist, read, folder)]


def _version_row(
    name: str, source: GitSource, dist: treefacts.Dist, read: Read, folder: str
) -> Row:
    key = format_path(("sources", name, "version"))
    if dist.version_from is VersionFrom.UNKNOWN:
        dist = treefacts.package_version(read, folder, dist) or dist
    where = str(dist.where)
    if dist.version_from is VersionFrom.GIT:
        said = f"from git (setuptools_scm), {dist.version or 'no'} fallback"
        given = [v for v in source.version_env if v in dist.version_env]
        if source.version and given:
            return Row(name, Fact.VERSION, said, f"{source.version} in {', '.join(given)}",
                       Verdict.OK, where)  # fmt: skip
        fix = (
            f"the tree has no .git: pin {key} and name one of "
            f"{', '.join(dist.version_env)} in {format_path(('sources', name, 'version_env'))}"
        )
        return Row(name, Fact.VERSION, said, fix, Verdict.MISMATCH, where)
    if dist.version_from is VersionFrom.UNKNOWN:
        return Row(name, Fact.VERSION, "computed by code preflight does not follow",
                   source.version or "not pinned", Verdict.UNREAD, where)  # fmt: skip
    if not source.version:
        return Row(name, Fact.VERSION, dist.version, "not pinned: any", Verdict.OK, where)
    if same_version(dist.version, source.version):
        return Row(name, Fact.VERSION, dist.version, source.version, Verdict.OK, where)
    fix = f'{source.version}; set {key} = "{dist.version}"'
    return Row(name, Fact.VERSION, dist.version, fix, Verdict.MISMATCH, where)


def same_version(found: str, pinned: str) -> bool:
    try:
        return Version(found) == Version(pinned)
    except InvalidVersion:
        return found == pinned


def rocm_build(pins: Pins, source: GitSource) -> cmake.Facts:
    """The ROCm build a source stage runs, for its CMake: the archs the pins compile for,
    and the variables the pins give as inputs known unset, so that the fetch each replaces
    is read with the condition that names it (``Fetch.unless``) and checked against the
    tree given in its place."""
    return cmake.rocm(pins.build.compiled_for(pins.build.archs), tuple(source.inputs))


def build_fetches(read: Read, folder: str, facts: cmake.Facts) -> list[treefacts.Fetch]:
    """What building ``folder`` fetches by itself: its CMake's and its setup.py's."""
    fetches = treefacts.cmake_fetches(read, folder, facts)
    fetches += treefacts.rust_fetches(read, folder)
    script = treefacts.join(folder, "setup.py")
    return (
        fetches + treefacts.python_fetches(read, script) + treefacts.command_fetches(read, script)
    )


def fetch_rows(
    name: str, source: GitSource, pins: Pins, fetches: list[treefacts.Fetch]
) -> list[Row]:
    """A row per fetch, and per mark of a fetch the build no longer makes."""
    found = [_fetch_row(name, source, pins, fetch) for fetch in fetches]
    seen = {fetch.what for fetch in fetches}
    for what in sorted(set(source.skipped_fetches) - seen):
        key = format_path(("sources", name, "skipped_fetches", what))
        found.append(Row(name, Fact.FETCH, "no such fetch", f"{key}: remove it",
                         Verdict.MISMATCH))  # fmt: skip
    return found


def _fetch_row(name: str, source: GitSource, pins: Pins, fetch: treefacts.Fetch) -> Row:
    said, where = f"{fetch.what} {fetch.ref}".strip(), str(fetch.where)
    if fetch.unless and fetch.unless in source.inputs:
        wrong = _not_the_tree(source.inputs[fetch.unless], pins, fetch)
        if wrong:
            return Row(name, Fact.FETCH, said, wrong, Verdict.MISMATCH, where)
        return Row(name, Fact.FETCH, said, f"given: {fetch.unless}", Verdict.OK, where)
    if fetch.what in source.skipped_fetches:
        reason = source.skipped_fetches[fetch.what]
        return Row(name, Fact.FETCH, said, f"not taken: {reason}", Verdict.OK, where)
    return Row(name, Fact.FETCH, said, unpinned_fix(name, fetch), Verdict.MISMATCH, where)


def _not_the_tree(path: str, pins: Pins, fetch: treefacts.Fetch) -> str:
    """Why the tree given in place of ``fetch`` is not the one it names, or ""."""
    owner = path.split("/", 1)[0]
    given = pins.sources[owner]
    if "://" in fetch.what and repository(given.repo) != repository(fetch.what):
        at = f" at {fetch.ref}" if fetch.ref else ""
        key = format_path(("sources", owner, "repo"))
        return f'given {key} is {given.repo}: pin "{fetch.what}"{at}'
    if fetch.ref and given.tag and fetch.ref != given.tag:
        return f'given {format_path(("sources", owner, "tag"))} is {given.tag}: pin "{fetch.ref}"'
    return ""


def unpinned_fix(name: str, fetch: treefacts.Fetch) -> str:
    """What to do about a fetch no pin accounts for."""
    skipped = format_path(("sources", name, "skipped_fetches"))
    if fetch.unless:
        given = format_path(("sources", name, "inputs", fetch.unless))
        return f"no pin gives it: pin its tree as a source and set {given}, or mark it in {skipped}"
    return f"no pin gives it: mark it in {skipped} with why the build does not take it"


def undecided_rows(name: str, read: Read, folder: str, facts: cmake.Facts) -> list[Row]:
    """A row per condition of ``folder``'s CMake that the ROCm build's facts do not decide
    and that has fetches under it: those are neither demanded nor dropped, and said so."""
    evaluation = treefacts.cmake_evaluation(read, folder, facts)
    if evaluation is None:
        return []
    waiting = dict.fromkeys(f.under for f in evaluation.undecided if f.under is not None)
    return [
        Row(name, Fact.FETCH, f"cannot decide {u.command}({u.shown}) for the ROCm build",
            "fetches under it are not checked", Verdict.UNREAD, f"{u.file}:{u.line}")
        for u in waiting
    ]  # fmt: skip


def requires_rows(name: str, pins: Pins, needed: list[treefacts.Needed]) -> list[Row]:
    """A row per build requirement naming a tool the pins install: the pinned version must
    be one it takes. The rest comes from the base or the requirements, as in verl's build."""
    tools = {canonicalize_name(tool): tool for tool in pins.python.tools}
    found = []
    for need in needed:
        tool = tools.get(canonicalize_name(need.requirement.name))
        if tool is None:
            continue
        said = need.text + (f" ({need.why})" if need.why else "")
        key, version = format_path(("python", "tools", tool)), pins.python.tools[tool]
        if not version:
            verdict, pinned = Verdict.UNREAD, f"{key} not pinned yet: `doit lock` pins it"
        elif need.requirement.specifier.contains(version, prereleases=True):
            verdict, pinned = Verdict.OK, f"{version} in {key}"
        else:
            verdict = Verdict.MISMATCH
            pinned = f"{version} in {key}: pin one that meets {need.text}"
        found.append(Row(name, Fact.REQUIRES, said, pinned, verdict, str(need.where)))
    return found


def _arch_rows(name: str, source: GitSource, read: Read, folder: str) -> list[Row]:
    reads = treefacts.arch_reads(read, treefacts.join(folder, "setup.py"))
    reads += treefacts.cmake_arch_reads(read, folder)
    given = dict.fromkeys(source.arch_env, source.arch_separator)
    given.setdefault(TEMPLATE_ARCH, "semicolon")
    found = [_arch_row(name, arch, given) for arch in reads]
    for variable in sorted(set(source.arch_env) - {arch.variable for arch in reads}):
        key = format_path(("sources", name, "arch_env"))
        found.append(Row(name, Fact.ARCH, f"{folder}: does not read {variable}",
                         f"{key} gives it: remove it", Verdict.MISMATCH))  # fmt: skip
    return found


def _arch_row(name: str, arch: treefacts.ArchRead, given: Mapping[str, str]) -> Row:
    said = f"{arch.variable}, split on {arch.split}"
    where = str(arch.where)
    separator = given.get(arch.variable)
    if separator is None:
        key = format_path(("sources", name, "arch_env"))
        return Row(name, Fact.ARCH, said, f"not given: add it to {key}", Verdict.MISMATCH, where)
    if arch.split is Split.UNKNOWN:
        return Row(name, Fact.ARCH, said, f"given, joined by {SEPARATORS[separator]!r}",
                   Verdict.UNREAD, where)  # fmt: skip
    if arch.split in (Split.EITHER, Split(separator)):
        return Row(name, Fact.ARCH, said, f"given, joined by {SEPARATORS[separator]!r}",
                   Verdict.OK, where)  # fmt: skip
    key = format_path(("sources", name, "arch_separator"))
    fix = f'joined by {SEPARATORS[separator]!r}: set {key} = "{arch.split}"'
    return Row(name, Fact.ARCH, said, fix, Verdict.MISMATCH, where)


def _path_rows(name: str, source: GitSource, read: Read, reads: Mapping[str, Read]) -> list[Row]:
    named = [("subdirs", path, read) for path in source.subdirs]
    named += [("requirements", path, read) for path in source.requirements]
    named += [("overlay", origin, read) for origin in source.overlay.values()]
    for variable, path in source.inputs.items():
        owner, _, inside = path.partition("/")
        if owner in reads:
            named.append((f"inputs.{variable}", inside or ".", reads[owner]))
    found = []
    for knob, path, reader in named:
        key = format_path(("sources", name, knob))
        there = reader(path) is not None or _is_folder(reader, path)
        verdict = Verdict.OK if there else Verdict.MISMATCH
        said = path if there else f"{path}: {NOT_THERE}"
        found.append(Row(name, Fact.PATH, said, key, verdict, path=path))
        if knob == "requirements" and there:
            found += _included(name, path, reader)
    return found


def _included(name: str, path: str, read: Read) -> Iterator[Row]:
    """The files a requirements file includes (-r), which pip reads from the tree too."""
    for number, line in enumerate((read(path) or "").splitlines(), 1):
        words = line.split()
        if words[:1] in (["-r"], ["--requirement"]) and len(words) > 1:
            included = treefacts.join(treefacts.parent(path), words[1])
            there = read(included) is not None
            yield Row(name, Fact.PATH, included if there else f"{included}: {NOT_THERE}",
                      f"-r in {path}", Verdict.OK if there else Verdict.MISMATCH,
                      f"{path}:{number}", included)  # fmt: skip


def _is_folder(read: Read, path: str) -> bool:
    return read(f"{path}/.") is not None


# ---------------------------------------------------------------- the trees, fetched


def tree_reader(files: Files, patched: Path, overlay: Mapping[str, str]) -> Read:
    """A tree as its stage builds it: patched files from ``patched``, the rest from
    ``files``, the overlay's targets read from their origins; a folder reads as "" through
    ``<folder>/.``."""

    def read(path: str) -> str | None:
        path = overlay.get(path, path)
        if path.endswith("/."):
            folder = path.removesuffix("/.")
            return "" if (patched / folder).is_dir() or files.is_folder(folder) else None
        if (patched / path).is_file():
            return (patched / path).read_text(encoding="utf-8", errors="replace")
        data = files.read(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    return read


class _Asking:
    """``files`` as far as they are here: a path that needs a fetch reads as missing and is
    noted in ``asked``, to be fetched with the others of its round."""

    def __init__(self, files: Files, asked: set[str]) -> None:
        self.files, self.asked = files, asked

    def read(self, path: str) -> bytes | None:
        return self.files.read(path) if self._here(path) else None

    def is_folder(self, path: str) -> bool:
        return self.files.is_folder(path) if self._here(path) else False

    def ready(self, path: str) -> bool:
        return True

    def load(self, paths: Iterable[str]) -> None:
        pass

    def _here(self, path: str) -> bool:
        if self.files.ready(path):
            return True
        self.asked.add(path)
        return False


Fetcher = Callable[[str, GitSource], Files]


@dataclass(frozen=True)
class PatchedTree:
    files: Files  # at the source's commit
    patched: Path  # the files its patches touch, patched
    overlay: Mapping[str, str]


def trees(
    pins: Pins, fetch: Fetcher, scratch: Path, names: list[str]
) -> tuple[dict[str, PatchedTree], list[Row]]:
    """``names``' trees, patched in ``scratch``; a row for each that could not be read."""
    opened: dict[str, PatchedTree] = {}
    failed: list[Row] = []
    for name in names:
        source = pins.sources[name]
        try:
            files = fetch(name, source)
            patched = scratch / name
            _patched(files, patched, source, name)
        except (FetchError, PatchError) as exc:
            failed.append(_not_read(name, exc))
            continue
        opened[name] = PatchedTree(files, patched, source.overlay)
    return opened, failed


def _not_read(name: str, exc: GraphToolError) -> Row:
    return Row(name, Fact.PATH, NOT_READ, str(exc), Verdict.UNREAD)


def _patched(files: Files, dest: Path, source: GitSource, name: str) -> None:
    """The files ``source``'s patches touch, read from ``files`` and patched, in ``dest``."""
    dest.mkdir(parents=True)
    touched = {file for patch in source.patches for file in patches.read_patch(patch).files}
    copy(files, touched, dest)
    patches.apply(dest, source.patches, name)


def read_rows(pins: Pins, opened: dict[str, PatchedTree]) -> list[Row]:
    """``rows`` over the ``opened`` trees, read in rounds: a round reads what is here and
    notes what is not, which is then fetched at once, tree by tree, and the rows made again;
    a round per level of a file read because of another (an include, a ``-r``). A tree that
    cannot be fetched is a row of its own, and the rest go on without it."""
    failed: list[Row] = []
    while True:
        asked: dict[str, set[str]] = {name: set() for name in opened}
        reads = {
            name: tree_reader(_Asking(tree.files, asked[name]), tree.patched, tree.overlay)
            for name, tree in opened.items()
        }
        found = rows(pins, reads)
        if not any(asked.values()):
            return [*failed, *found]
        for name, paths in asked.items():
            try:
                opened[name].files.load(paths)
            except FetchError as exc:
                failed.append(_not_read(name, exc))
                del opened[name]


def built_here(run: Run) -> list[str]:
    """The pinned sources a stage of ``run`` builds (not those its base image provides)."""
    return sorted(
        {
            name
            for stage in run.graph
            if stage.name not in run.pins.base.provides
            for name in stage.sources
            if name in run.pins.sources
        }
    )


def check(pins: Pins, fetch: Fetcher, names: list[str]) -> list[Row]:
    """The rows of ``names``, their trees fetched with ``fetch`` and patched in a scratch."""
    with tempfile.TemporaryDirectory(prefix="preflight-") as scratch:
        opened, failed = trees(pins, fetch, Path(scratch), names)
        return [*failed, *read_rows(pins, opened)]


def run_preflight(run: Run, outside: Outside, fmt: str) -> Answer:
    """`doit preflight`: every source built here, read at its commit from git's objects
    (only the files it reads are fetched)."""
    cache = outside.sources(run.pins)
    return answer(check(run.pins, cache.snapshot, built_here(run)), fmt)


# ---------------------------------------------------------------- the report


def verdict(found: list[Row]) -> GraphToolError | None:
    """1 for a mismatch, 2 for a tree or fact that could not be read, else none."""
    mismatches = sum(row.verdict is Verdict.MISMATCH for row in found)
    unread = sum(row.verdict is Verdict.UNREAD for row in found)
    if mismatches:
        return PreflightError(f"preflight: {mismatches} facts of the trees differ from the pins")
    if unread:
        return Unchecked(f"preflight: {unread} facts could not be read; see the rows marked unread")
    return None


def as_text(found: list[Row]) -> list[str]:
    widths = [max((len(getattr(row, column)) for row in found), default=0) for column in
              ("source", "fact", "upstream")]  # fmt: skip
    lines = []
    for row in found:
        cells = [row.source, row.fact, row.upstream]
        padded = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        where = f"  ({row.where})" if row.where else ""
        lines.append(f"{padded}  {row.verdict:<8}  {row.pins}{where}")
    counts = {v: sum(row.verdict is v for row in found) for v in Verdict}
    lines.append(", ".join(f"{count} {v}" for v, count in counts.items()))
    return lines


def as_json(found: list[Row]) -> str:
    return json.dumps({"facts": [asdict(row) for row in found]}, indent=2)


def answer(found: list[Row], fmt: str) -> Answer:
    lines = [as_json(found)] if fmt == "json" else as_text(found)
    return Answer(lines, verdict(found))
