"""`doit bump:<name>`: move a pin to upstream's newest, check the new tree, say what rebuilds.

For a git source: upstream's head of the tracked branch (or ``to=<commit|tag>``),
and at that commit everything the recipe expects: each patch, the overlay's
files, ``subdirs`` and ``requirements``. A path that is gone is a conflict,
and git's rename detection says where it went. A patch that still applies
applies. One that does not is obsolete when its reverse applies (upstream has
the change), or when upstream squash-merged its pull request between the two
pins: a commit titled ``... (#N)`` in the repository its ``Forwarded:`` URL
names, not reverted since (when its content still conflicts, the verdict says
so: the title is then the only evidence); obsolete patches leave the pin's patch list. A
conflict stops the bump with nothing written for that source (``force=1``
writes anyway), once every finding is listed: the new tree's facts are read
with the patches that still apply. A version a commit bump cannot know is named for you to set.
For ``base``: the digest its tag points to now.

A source that cannot be reached is reported as unknown and never hides the
others; the run then exits 2 (1 if something conflicts).
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rocmgraph.commands import docs
from rocmgraph.common.errors import (
    Answer,
    FetchError,
    GraphToolError,
    LockError,
    Unchecked,
    VariableError,
)
from rocmgraph.common.layout import ROOT
from rocmgraph.config import kinds
from rocmgraph.config.pins import GitSource, Pins, format_path, loads
from rocmgraph.config.pinsedit import Change, apply, write
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.fetch.upstream import (
    Commit,
    History,
    cited,
    compare_url,
    github_repo,
    merged_pr,
    moved_to,
)
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import keys
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside import registry
from rocmgraph.outside.http import Http
from rocmgraph.trees import patches, preflight
from rocmgraph.trees.patches import Outcome
from rocmgraph.trees.preflight import Fact, Row


@dataclass(frozen=True)
class Verdict:
    what: str  # a patch file, or the pin that names a path of the tree
    status: Outcome
    detail: str


@dataclass
class Bump:
    name: str
    headline: str
    changes: list[Change] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)  # one per patch
    missing: list[Verdict] = field(default_factory=list)  # paths the recipe names, gone
    facts: list[Verdict] = field(default_factory=list)  # what preflight finds new
    notes: list[str] = field(default_factory=list)  # values only you can set
    unknown: str = ""  # why it could not be checked
    commit: str = ""  # the commit it moves to
    held: str = ""  # why it waits for a source it moves with, which stopped

    @property
    def stopped(self) -> str:
        """What conflicts, so that nothing may be written for it (unless forced), or ""."""
        conflicts = sum(v.status is Outcome.CONFLICTS for v in self.verdicts)
        reasons = []
        if conflicts:
            reasons.append(f"{conflicts} patch{'es' if conflicts > 1 else ''} conflict")
        if self.missing:
            many = len(self.missing) > 1
            reasons.append(
                f"{len(self.missing)} path{'s' if many else ''} the recipe names "
                f"{'are' if many else 'is'} missing"
            )
        if self.facts:
            many = len(self.facts) > 1
            reasons.append(
                f"{len(self.facts)} fact{'s' if many else ''} of the new tree "
                f"differ{'' if many else 's'} from the pins"
            )
        if self.held:
            reasons.append(self.held)
        return " and ".join(reasons)


def bump_source(run: Run, outside: Outside, name: str, to: str, history: History) -> Bump:
    """Bump source ``name`` to ``to`` (else upstream's head), from its repository's
    ``history``, fetched already (once for the sources that move together)."""
    source = run.pins.sources[name]
    sources = outside.sources(run.pins)
    new = history.resolve(to) if to else history.head()
    if new is None:
        raise VariableError(f"bump {name}: to={to} names no commit or tag of {sources.url(source)}")
    old = history.resolve(source.commit) if source.commit else None
    if old == new:
        headline = f"{name}: already at upstream's {_short(new)} ({to or source.branch})"
        return Bump(name, headline, commit=new)
    after = history.commit(new)
    between = history.between(old, new) if old else []
    headline = (
        f"{name}: {_describe(history.commit(old) if old else None, source.commit)} -> "
        f"{after.id[:12]} ({after.date}), "
        + (f"{len(between)} commits" if old else "history unknown")
        + (f", {url}" if (url := compare_url(source.repo, old or "", new)) and old else "")
    )
    bump = Bump(name, headline, commit=new)
    moved = dataclasses.replace(source, commit=new)
    try:
        statuses = patches.check_source(sources, name, moved)
        missing = _missing_paths(sources, name, moved)
        # The facts are read from the tree the patches that still apply make: with one that
        # conflicts no tree is made, and the bump would say nothing of the build's fetches.
        applying = tuple(s.patch for s in statuses if s.status is Outcome.APPLIES)
        facts = _preflight(run.pins, sources, name, dataclasses.replace(moved, patches=applying))
        gone = {path for _, path, _ in missing}  # said once, with where it went
        facts = [row for row in facts if not (row.fact is Fact.PATH and row.path in gone)]
        at_old = dataclasses.replace(source, commit=old or "")
        before = _preflight(run.pins, sources, name, at_old) if old else []
    except FetchError as exc:
        bump.unknown = str(exc)
        return bump
    lacking = bool(missing) or any(status.missing for status in statuses)
    renames = history.renames(old, new) if lacking and old else {}
    move = _Move(history, old, new, renames)
    bump.verdicts = [_verdict(status, between, name, source, move) for status in statuses]
    bump.missing = [
        Verdict(pin, Outcome.CONFLICTS, move.whereabouts(path, folder))
        for pin, path, folder in missing
    ]
    bump.changes.append(Change(("sources", name, "commit"), source.commit, new))
    tree = history.tree_id(new, source.subtree) if source.subtree else None
    new_tree = tree if tree is not None and tree != source.tree else None
    if new_tree is not None:  # the folder it builds changed: it rebuilds
        bump.changes.append(Change(("sources", name, "tree"), source.tree, new_tree))
    tag = to if to and history.is_tag(to) else ""
    if tag and kinds.GIT_REF.problem(tag):  # a tag git takes and a pin does not (v1@2)
        bump.notes.append(f"{format_path(('sources', name, 'tag'))}: {tag!r} is not recorded: "
                          f"{kinds.GIT_REF.problem(tag)}")  # fmt: skip
        tag = ""
    if tag != source.tag:
        bump.changes.append(Change(("sources", name, "tag"), source.tag, tag))
    kept = tuple(v.what for v in bump.verdicts if v.status is not Outcome.OBSOLETE)
    if kept != source.patches:
        bump.changes.append(Change(("sources", name, "patches"), source.patches, kept))
    _follow(bump, history, name=name, source=source, new=new, facts=facts, before=before,
            folder_moved=new_tree is not None)  # fmt: skip
    return bump


def together(pins: Pins, name: str) -> list[str]:
    """The other sources pinned to ``name``'s repository at its commit (SGLang and its
    sgl-kernel folder): one checkout upstream, so a bump of any moves them all."""
    source = pins.sources[name]
    return [
        other
        for other, pinned in pins.sources.items()
        if other != name and pinned.same_checkout(source)
    ]


def _bump_together(run: Run, outside: Outside, name: str, to: str) -> list[Bump]:
    """``name`` and each source that moves with it, bumped to one commit: the whole tree's
    source first (SGLang before its sgl-kernel folder), whichever was asked for."""
    group = [name, *together(run.pins, name)]
    name = next((each for each in group if not run.pins.sources[each].subtree), name)
    history = History(outside.sources(run.pins), name, run.pins.sources[name])
    try:
        history.fetch()
    except FetchError as exc:  # upstream out of reach: the same for all of them
        return [Bump(each, f"{each}: not checked", unknown=str(exc)) for each in group]
    first = bump_source(run, outside, name, to, history)
    bumps = [first]
    for other in (each for each in group if each != name):
        if first.unknown:  # its new tree could not be read: neither can this one's
            bumps.append(Bump(other, f"{other}: not checked", commit=first.commit))
            continue
        if not first.changes:  # already at upstream's: so is the source pinned with it
            bumps.append(Bump(other, f"{other}: already there with {name}", commit=first.commit))
            continue
        # `to` when given, so a tag is recorded for both; else the commit the first moved to
        follower = bump_source(run, outside, other, to or first.commit, history)
        follower.headline += f" (with {name}: one repository, one commit)"
        bumps.append(follower)
    _hold(bumps)
    return bumps


def _hold(bumps: list[Bump]) -> None:
    """Sources that move together are written together or not at all: one that could not
    be checked holds the others back, one that stopped too (unless forced)."""
    unknown = [bump.name for bump in bumps if bump.unknown]
    stopped = [bump.name for bump in bumps if bump.stopped]
    for bump in bumps:
        if unknown and bump.name not in unknown:
            bump.unknown = f"moves with {', '.join(unknown)}, which could not be checked"
            bump.changes = []
        elif stopped and bump.name not in stopped:
            bump.held = f"it moves with {', '.join(stopped)}, which stopped"


def _bumps(run: Run, outside: Outside, names: list[str], to: str) -> list[Bump]:
    """Each of ``names`` bumped, and what moves with it, once."""
    bumps: list[Bump] = []
    for name in dict.fromkeys(names):
        if name == "base":
            bumps.append(bump_base(run, outside.http))
        elif name not in {bump.name for bump in bumps}:  # else it moved with another already
            bumps += _bump_together(run, outside, name, to)
    return bumps


def _verdict(
    status: patches.Status, between: list[Commit], name: str, source: GitSource, move: _Move
) -> Verdict:
    if status.status is Outcome.APPLIES:  # whatever upstream's titles say
        return Verdict(status.patch, Outcome.APPLIES, "")
    drop = f"left out of [sources.{name}].patches: delete the file"
    forwarded = patches.read_patch(status.patch).upstream
    # A title's (#N) is evidence only in the repository the patch was forwarded to: the
    # same number in a fork (or another project) is another pull request.
    if forwarded and forwarded[0].lower() == github_repo(source.repo):
        merge = merged_pr(between, forwarded[1])
        if merge:
            detail = f"upstream merged #{forwarded[1]} in {merge.id[:12]} ({merge.subject})"
            if status.status is Outcome.CONFLICTS:
                # the title alone says so: upstream may have merged a part, or another way
                detail += (
                    f" by title, though its content conflicts with the tree ({status.detail}): "
                    "check that upstream's change covers it"
                )
            return Verdict(status.patch, Outcome.OBSOLETE, f"{detail}; {drop}")
    if status.status is Outcome.OBSOLETE:
        return Verdict(status.patch, Outcome.OBSOLETE, f"upstream has it already; {drop}")
    if status.missing:
        return Verdict(
            status.patch,
            status.status,
            ", ".join(move.whereabouts(f, False) for f in status.missing),
        )
    if status.file:  # a hunk that does not apply: the commit that changed the file under it
        return Verdict(status.patch, status.status, status.detail + move.last_changed(status.file))
    return Verdict(status.patch, status.status, status.detail)


def _missing_paths(
    sources: SourceCache, name: str, source: GitSource
) -> list[tuple[str, str, bool]]:
    """(the pin, the path, whether a folder) for each path the recipe names that the tree lacks."""
    named = [
        (format_path(("sources", name, "overlay", target)), origin, False)
        for target, origin in source.overlay.items()
    ]
    named += [(format_path(("sources", name, "subdirs")), d, True) for d in source.subdirs]
    if source.subtree:
        named.append((format_path(("sources", name, "subtree")), source.subtree, True))
    named += [
        (format_path(("sources", name, "requirements")), r, False) for r in source.requirements
    ]
    named = [(pin, path, folder) for pin, path, folder in named if path not in ("", ".")]
    with tempfile.TemporaryDirectory(prefix="bump-paths-") as scratch:
        present = sources.files(name, source, {path for _, path, _ in named}, Path(scratch))
    return [item for item in named if item[1] not in present]


@dataclass(frozen=True)
class _Move:
    """A bump from ``old`` to ``new``, and what git's rename detection found between them."""

    history: History
    old: str | None
    new: str
    renames: dict[str, str]

    def last_changed(self, path: str) -> str:
        """`` (last changed in c32c4ef79c (#32648))``: the commit of the bump that last
        changed ``path``; "" with nothing to compare with."""
        by = self.history.last_change(self.old, self.new, path) if self.old else None
        return f" (last changed in {cited(by)})" if by else ""

    def whereabouts(self, path: str, folder: bool) -> str:
        """What became of ``path``, which the tree at ``new`` lacks."""
        shown, kind = (f"{path.rstrip('/')}/", "folder") if folder else (path, "file")
        if self.old is None:  # nothing to compare with
            return f"{shown}: no such {kind} at {self.new[:12]}"
        before = self.history.files(self.old, path)
        if not before:
            return f"{shown}: no such {kind} at {self.new[:12]}, nor at {self.old[:12]}"
        target = moved_to(path, self.renames, before if folder else [])
        by = self.history.last_change(self.old, self.new, path.rstrip("/"))
        when = f" in {cited(by)}" if by else ""
        if target:
            return f"{shown} moved to {target}{when}"
        return f"{shown}: deleted upstream{when} (git finds no rename)"


def _version(bump: Bump, history: History, name: str, source: GitSource, new: str) -> None:
    """``[sources.<name>].version`` follows a version tag on the new commit, else a note.
    An empty one is left alone, unless the build needs it (``version_env``)."""
    if not source.version and not source.version_env:
        return
    versions = history.versions_at(new) or {history.described(new) or ""} - {""}
    if len(versions) == 1:
        version = versions.pop()
        if version != source.version:
            bump.changes.append(Change(("sources", name, "version"), source.version, version))
        return
    says = f"still says {source.version}" if source.version else "is empty, and its build needs it"
    bump.notes.append(
        f"{format_path(('sources', name, 'version'))} {says}: set it to the version at {new[:12]}"
    )


def _follow(
    bump: Bump,
    history: History,
    *,
    name: str,
    source: GitSource,
    new: str,
    facts: list[Row],
    before: list[Row],
    folder_moved: bool,
) -> None:
    """What the new tree's build does, against the pins: a version it states (a folder's),
    one a tag gives, and what preflight finds new since the old commit."""
    stated = _stated_version(facts)
    # What the new tree's build does that the pins do not account for, and the old one's did
    # not do (`doit preflight` reports the rest): a new fetch, a renamed distribution.
    # With no tree before to compare with, nothing is new: what differs is a note.
    known = {_unplaced(row) for row in before}
    new_facts = [
        Verdict(f"preflight {row.fact}", Outcome.CONFLICTS, _fact(row))
        for row in facts
        if row.verdict is preflight.Verdict.MISMATCH
        and _unplaced(row) not in known
        and not (stated and row.fact is Fact.VERSION)
    ]
    if before and not any(row.upstream == preflight.NOT_READ for row in before):
        bump.facts = new_facts
    else:
        bump.notes += [f"{fact.what}: {fact.detail}" for fact in new_facts]
    if source.subtree and stated and _differs(stated, source.version):
        bump.changes.append(Change(("sources", name, "version"), source.version, stated))
    elif source.subtree and not stated:
        _folder_version(bump, name, source, new, folder_moved)
    elif not source.subtree:
        _version(bump, history, name, source, new)


def _preflight(pins: Pins, sources: SourceCache, name: str, moved: GitSource) -> list[Row]:
    """What preflight finds in the tree at the new commit (its rows of ``name``)."""
    at = dataclasses.replace(pins, sources={**pins.sources, name: moved})
    return preflight.check(at, sources.snapshot, [name])


def _stated_version(facts: list[Row]) -> str:
    """The version the new tree states for its build, where it states one."""
    return next(
        (
            row.upstream
            for row in facts
            if row.fact is Fact.VERSION
            and row.verdict is not preflight.Verdict.UNREAD
            and not row.upstream.startswith("from git")
        ),
        "",
    )


def _differs(stated: str, pinned: str) -> bool:
    return not pinned or not preflight.same_version(stated, pinned)


def _unplaced(row: Row) -> Row:
    """``row`` without its line, which moves with any edit above it."""
    return dataclasses.replace(row, where=row.where.rsplit(":", 1)[0])


def _fact(row: Row) -> str:
    return f"{row.upstream}: {row.pins}" + (f" ({row.where})" if row.where else "")


def _folder_version(bump: Bump, name: str, source: GitSource, new: str, folder_moved: bool) -> None:
    """A folder built alone has a version of its own (sgl-kernel's is not SGLang's): the
    repository's tags version the whole tree, so only a note, when the folder changed."""
    if not folder_moved or not (source.version or source.version_env):
        return
    says = f"still says {source.version}" if source.version else "is empty, and its build needs it"
    bump.notes.append(
        f"{format_path(('sources', name, 'version'))} {says}: {source.subtree}/ changed, and "
        f"the repository's tags do not version it alone; set it to {source.subtree}/'s "
        f"version at {new[:12]}"
    )


def bump_base(run: Run, http: Http) -> Bump:
    base = run.pins.base
    try:
        now = registry.digest(base.image, http)
    except FetchError as exc:
        return Bump("base", "base: not checked", unknown=str(exc))
    if now == base.digest:
        return Bump("base", f"base: {base.image} is still {_short(now)}")
    bump = Bump(
        "base", f"base: {base.image} {_short(base.digest) or '(no digest)'} -> {_short(now)}"
    )
    bump.changes.append(Change(("base", "digest"), base.digest, now))
    return bump


def rebuilds(run: Run, changes: list[Change]) -> list[str]:
    """The stages whose keys the changes move, in build order: their keys with the network,
    what a closure is locked for (a stage's sealed key moves with it)."""
    after = _apply(run.pins, changes)
    moved = keys.compute(run.graph, after, run.archs, run.variables)
    return [name for name in run.graph.order if moved[name].key != run.open_keys[name].key]


def _apply(pins: Pins, changes: list[Change]) -> Pins:
    return loads(apply(Path(pins.file).read_text(encoding="utf-8"), changes), pins.file)


def run_bump(
    run: Run, outside: Outside, names: list[str], to: str, *, force: bool, dry: bool
) -> Answer:
    """Bump ``names`` (sources, or "base"): report every one; write what may be written."""
    for name in names:
        if name != "base" and name not in run.pins.sources:
            raise VariableError(
                f"bump:{name}: {run.options.pins} pins no [sources.{name}]; its sources: "
                f"{', '.join(sorted(run.pins.sources))}"
            )
    bumps = _bumps(run, outside, names, to)
    lines: list[str] = []
    changes: list[Change] = []
    for bump in bumps:
        lines.append(bump.headline)
        lines += [
            f"  {v.status:<10}{v.what}" + (f": {v.detail}" if v.detail else "")
            for v in [*bump.verdicts, *bump.missing, *bump.facts]
        ]
        if bump.unknown:
            lines.append(f"  unknown: {bump.unknown}")
        lines += [f"  note: {note}" for note in bump.notes]
        if bump.stopped and not force:
            lines.append(
                f"  stopped: {bump.stopped}; nothing written for {bump.name} (force=1 writes)"
            )
        else:
            changes += bump.changes
    if changes:
        moved = rebuilds(run, changes)
        lines.append(f"rebuilds: {', '.join(moved) or 'nothing'}")
        if moved and run.options.hermetic:
            lines.append(
                "  locks first: `doit lock closures=1` (what they fetch, for hermetic builds)"
            )
        if dry:
            lines.append("dry run: nothing written")
        else:
            write(Path(run.options.pins), changes, moved_refused=True)
            lines.append(f"wrote {run.options.pins}")
            lines += _render(run)
    return Answer(lines, _error(bumps, force))


def _render(run: Run) -> list[str]:
    """The docs made from the repository's pins.toml, rewritten when that is what moved.

    They are a pure function of that file, and `doit render check=1` fails
    until they follow it: writing them here keeps the bump one commit. Any
    other pins file (a test's, a site's) feeds no doc.
    """
    if Path(run.options.pins).resolve() != docs.PINS.resolve():
        return []
    moved = Run(Options(pins=str(docs.PINS)), run.stages)
    return [f"wrote {path.relative_to(ROOT)}" for path in docs.write(moved)]


def _error(bumps: list[Bump], force: bool) -> GraphToolError | None:
    conflicted = [b.name for b in bumps if b.stopped and not b.held and not force]
    held = [b.name for b in bumps if b.held and not force]
    unknown = [b.name for b in bumps if b.unknown]
    if conflicted:
        waits = f" ({', '.join(held)} waits with it)" if held else ""
        return LockError(
            f"bump stopped for {', '.join(conflicted)}: conflicts at the new commit{waits}; "
            "see above"
        )
    if unknown:
        return Unchecked(f"bump: could not check {', '.join(unknown)}; see above")
    return None


def _describe(commit: Commit | None, pinned: str) -> str:
    if commit is None:
        return f"{pinned[:12] or '(unpinned)'} (gone upstream)" if pinned else "(unpinned)"
    return f"{commit.id[:12]} ({commit.date})"


def _short(value: str) -> str:
    return value.removeprefix("sha256:")[:12] if value else ""
