"""`doit audit`: does every pin say what it claims? One row per pin.

For each: kind and value, whether it is full-length, exists upstream, is
reachable from the tracked branch or a tag, how far behind it is and how old,
whether its hash or digest is present (and verified where that is cheap), its
patches' status, and installs that pin nothing. Exit 0 when clean, 1 on a
policy violation, 2 when something could not be checked (each remote check
has a timeout: an upstream out of reach marks its pin unknown).

`doit audit dockerfile=<path>` audits a plain Dockerfile instead
(rocmgraph.dockerfile.audit), so a recipe can be audited before it moves to
the graph.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from rocmgraph.common.errors import FetchError, HashMismatch, LockError, Unchecked
from rocmgraph.config.pins import VERSION_FROM_GIT, GitSource, Pins, format_path
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.fetch.store import Store
from rocmgraph.fetch.upstream import History
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.dag import Graph
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.keys import digest
from rocmgraph.outside import registry
from rocmgraph.outside.http import Http
from rocmgraph.trees import patches, preflight
from rocmgraph.trees.patches import Outcome

FULL = re.compile(r"[0-9a-f]{40}")


class Pinned(StrEnum):
    """What a row audits."""

    COMMIT = "commit"  # a git source's commit
    VERSION = "version"  # a version a build reads from git
    DIGEST = "digest"  # the base image's
    WHEEL = "wheel"  # a prebuilt wheel's file and sha256
    KEY = "key"  # an apt key's sha256
    APT = "apt"  # an apt package's version
    PYTHON = "python"  # a Python package's version
    FACT = "fact"  # what a tree's build does (preflight)


class Hash(StrEnum):
    NONE = "-"  # nothing to hash
    VERIFIED = "verified"  # hashed here, and it matches
    PRESENT = "present"  # pinned, not hashed here (too big to fetch for an audit)
    MISSING = "missing"  # no hash pinned
    MISMATCH = "mismatch"  # hashed here, and it does not match


@dataclass
class Row:
    kind: Pinned
    pin: str  # where: [sources.vllm].commit
    value: str
    full_length: bool | None = None
    exists: bool | None = None
    reachable: bool | None = None
    behind: int | None = None
    age_days: int | None = None
    hash: Hash = Hash.NONE
    patches: str = "-"
    problems: list[str] = field(default_factory=list)  # policy violations
    unknown: list[str] = field(default_factory=list)  # checks that could not run


# ---------------------------------------------------------------- pins


def audit_pins(run: Run, outside: Outside) -> list[Row]:
    """One row per pin of ``run``, checked against what ``outside`` says now."""
    pins, graph = run.pins, run.graph  # a source no stage builds is refused before any fetch
    sources = outside.sources(pins)
    rows = [_source(sources, name, pins.sources[name]) for name in pins.sources]
    rows += [_git_version(n, source) for n, source in pins.sources.items() if source.version_env]
    rows.append(_base(pins, outside.http))
    store = outside.store
    rows += [_wheel(store, name, wheel.file, wheel.sha256) for name, wheel in pins.wheels.items()]
    rows.append(_key(store, ("rocm", "key_sha256"), pins.rocm.key_url, pins.rocm.key_sha256,
                     "rocm.gpg.key"))  # fmt: skip
    for name, repo in pins.base.repos.items():
        path = ("base", "repos", name, "key_sha256")
        rows.append(_key(store, path, repo.key_url, repo.key_sha256, f"{name}.asc"))
    for name, version in pins.rocm.packages.items():
        rows.append(_version_row(Pinned.APT, ("rocm", "packages", name), version))
    for pin, version in pins.python.packages():
        rows.append(_version_row(Pinned.PYTHON, pin, version))
    rows = [_provided(row) if _only_provided(graph, pins, row) else row for row in rows]
    names = preflight.built_here(run)
    return rows + [_fact(row) for row in preflight.check(pins, sources.snapshot, names)
                   if row.verdict is not preflight.Verdict.OK]  # fmt: skip


def _only_provided(graph: Graph, pins: Pins, row: Row) -> bool:
    """Whether ``row`` pins what only a stage the base image provides would fetch."""
    path = next((leaf.path for leaf in pins.leaves() if format_path(leaf.path) == row.pin), None)
    return path is not None and graph.only_provided(pins, path)


def _provided(row: Row) -> Row:
    """A pin no build here fetches (the base image provides its stage): nothing to audit."""
    return Row(row.kind, row.pin, f"{row.value} (the base image provides its stage)")


def _fact(row: preflight.Row) -> Row:
    """A fact of a tree's build the pins do not account for (`doit preflight`'s row)."""
    said = f"{row.pins}" + (f" ({row.where})" if row.where else "")
    audited = Row(Pinned.FACT, f"[sources.{row.source}] {row.fact}", row.upstream)
    (audited.unknown if row.verdict is preflight.Verdict.UNREAD else audited.problems).append(said)
    return audited


def _subtree(history: History, name: str, source: GitSource, commit: str) -> list[str]:
    """What is wrong with a source's folder pin: the folder's tree id is all its stage's
    key covers of the source, so it must be the folder's at the commit."""
    tree = history.tree_id(commit, source.subtree)
    if tree is None:
        return [
            f"has no folder {source.subtree}/: fix [sources.{name}].subtree, or pin a commit "
            "that has it"
        ]
    if not source.tree:
        return [f"[sources.{name}].tree is empty: `doit lock` records {tree}"]
    if tree != source.tree:
        return [
            f"[sources.{name}].tree {source.tree} is not {source.subtree}/ at this commit, "
            f'which is {tree}: set tree = "{tree}"'
        ]
    return []


def _tag(history: History, name: str, source: GitSource, commit: str) -> list[str]:
    """The tag a source is pinned by names its commit: the docs name the image's source by
    it (Flash Attention v2.8.3)."""
    if not source.tag or (tagged := history.resolve(source.tag)) == commit:
        return []
    where = f"is {tagged[:12]}" if tagged else "is gone upstream"
    return [
        f"[sources.{name}].tag {source.tag} {where}, not the pinned commit: "
        f'`doit bump:{name} to={source.tag}`, or set tag = ""'
    ]


def _source(sources: SourceCache, name: str, source: GitSource) -> Row:
    row = Row(Pinned.COMMIT, format_path(("sources", name, "commit")), source.commit)
    row.full_length = bool(FULL.fullmatch(source.commit))
    if not source.commit:
        row.problems.append("unpinned: no commit (the build would take whatever upstream has)")
    elif not row.full_length:
        row.problems.append("short commit id: names no fixed commit (`doit lock`)")
    history = History(sources, name, source, timeout=120)
    try:
        history.fetch()
    except FetchError as exc:
        row.unknown.append(str(exc))
        return row
    commit = history.resolve(source.commit) if source.commit else None
    row.exists = commit is not None and history.exists(commit)
    if not row.exists:
        if source.commit:
            row.problems.append(
                f"does not exist upstream (force-pushed away?) in {sources.url(source)}"
            )
        return row
    assert commit is not None
    tags = history.tags_containing(commit)
    on_branch = history.on_branch(commit)
    row.reachable = on_branch or bool(tags)
    if not row.reachable:
        row.problems.append(f"reachable from neither {source.branch} nor a tag")
    if on_branch:
        row.behind = history.behind(commit)
    row.age_days = history.age_days(commit)
    row.problems += _tag(history, name, source, commit)
    if source.subtree:
        row.problems += _subtree(history, name, source, commit)
    if source.patches:
        pinned = dataclasses.replace(source, commit=commit)
        try:
            statuses = patches.check_source(sources, name, pinned)
        except FetchError as exc:  # the history came, the tree did not (a submodule, say)
            row.patches = "unknown"
            row.unknown.append(str(exc))
            return row
        row.patches = _summary(statuses)
        for status in statuses:
            if status.status is not Outcome.APPLIES:
                row.problems.append(f"patch {status.patch} {status.status}: {status.detail}")
    return row


def _git_version(name: str, source: GitSource) -> Row:
    """The version a build is given because it would read it from git (version_env)."""
    row = Row(Pinned.VERSION, format_path(("sources", name, "version")), source.version or "?")
    row.full_length = bool(source.version)
    if not source.version:
        row.problems.append(f"empty: {VERSION_FROM_GIT}")
    return row


def _summary(statuses: list[patches.Status]) -> str:
    counts = {s: sum(x.status is s for x in statuses) for s in Outcome}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def _base(pins: Pins, http: Http) -> Row:
    base = pins.base
    row = Row(Pinned.DIGEST, format_path(("base", "digest")), f"{base.image}@{base.digest or '?'}")
    row.full_length = bool(base.digest)
    if not base.digest:
        row.hash = Hash.MISSING
        row.problems.append("no digest: the base is taken by its tag, which moves")
        return row
    try:
        now = registry.digest(base.image, http)
    except FetchError as exc:
        row.unknown.append(str(exc))
        return row
    row.exists = True
    row.hash = Hash.VERIFIED if now == base.digest else Hash.PRESENT
    row.reachable = now == base.digest  # the tag still points at it
    return row


def _wheel(store: Store, name: str, file: str, sha256: str) -> Row:
    row = Row(Pinned.WHEEL, format_path(("wheels", name, "file")), file or "?")
    row.full_length = bool(file and sha256)
    if not file or not sha256:
        row.hash = Hash.MISSING
        row.problems.append("no exact file and sha256 (`doit lock`)")
        return row
    stored = store.path(sha256, file)
    row.hash = Hash.PRESENT
    if stored.is_file():  # a stored copy is hashed again: cheap next to downloading GBs
        row.hash = Hash.VERIFIED if digest(stored.read_bytes()) == sha256 else Hash.MISMATCH
        if row.hash is Hash.MISMATCH:
            row.problems.append(f"the stored copy {stored} does not hash to the pin")
    return row


def _key(store: Store, path: tuple[str, ...], url: str, sha256: str, name: str) -> Row:
    """An apt key, pinned by sha256: present, and what it hashes to now."""
    row = Row(Pinned.KEY, format_path(path), url)
    if not sha256:
        row.hash = Hash.MISSING
        row.problems.append("the apt key has no sha256 (`doit lock`)")
        return row
    try:
        fetched = store.fetch(url, name, sha256, f"apt key {name}")
    except HashMismatch as exc:
        row.hash = Hash.MISMATCH
        row.problems.append(str(exc))
        return row
    except FetchError as exc:
        row.unknown.append(str(exc))
        return row
    row.hash = Hash.VERIFIED if fetched.sha256 == sha256 else Hash.MISMATCH
    return row


def _version_row(kind: Pinned, path: tuple[str, ...], version: str) -> Row:
    row = Row(kind, format_path(path), version or "?")
    row.full_length = bool(version)
    if not version:
        row.problems.append("unpinned: installs whatever version is newest")
    return row


# ---------------------------------------------------------------- report


def verdict(rows: list[Row]) -> None:
    """Raise for the exit code: 1 on a violation, 2 when something could not be checked."""
    violations = sum(bool(row.problems) for row in rows)
    unknown = sum(bool(row.unknown) for row in rows)
    if violations:
        raise LockError(f"audit: {violations} of {len(rows)} pins break a policy")
    if unknown:
        raise Unchecked(f"audit: {unknown} of {len(rows)} pins could not be checked")


def as_json(rows: list[Row]) -> str:
    return json.dumps(
        {
            "rows": [asdict(row) for row in rows],
            "violations": sum(bool(row.problems) for row in rows),
            "unchecked": sum(bool(row.unknown) for row in rows),
        },
        indent=2,
    )


def as_text(rows: list[Row]) -> str:
    def flag(value: object) -> str:
        return (
            "-"
            if value is None
            else "yes"
            if value is True
            else "no"
            if value is False
            else str(value)
        )

    header = ("kind", "pin", "value", "full", "exists", "reach", "behind", "age", "hash", "patches")
    table = [header]
    for row in rows:
        value = row.value if len(row.value) <= 44 else row.value[:41] + "..."
        table.append((row.kind, row.pin, value, flag(row.full_length), flag(row.exists),
                      flag(row.reachable), flag(row.behind), flag(row.age_days), row.hash,
                      row.patches))  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
             for line in table]  # fmt: skip
    for row in rows:
        lines += [f"{row.pin}: {problem}" for problem in row.problems]
        lines += [f"{row.pin}: unknown: {why}" for why in row.unknown]
    return "\n".join(lines)
