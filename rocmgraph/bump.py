"""`doit bump:<name>`: move a pin to upstream's newest, check every patch, say what rebuilds.

For a git source: upstream's head of the tracked branch (or ``to=<commit|tag>``),
its tree fetched, each patch checked against it. A patch whose pull request
upstream squash-merged between the two pins (a commit titled ``... (#N)``) is
obsolete even where upstream's text differs from ours; obsolete patches leave
the pin's patch list. A conflicting patch stops the bump with nothing written
(``force=1`` writes anyway). For ``base``: the digest its tag points to now.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rocmgraph import keys, patches, registry
from rocmgraph.errors import FetchError, LockError
from rocmgraph.lock import Change, apply, write
from rocmgraph.pins import Pins, loads
from rocmgraph.run import Run
from rocmgraph.upstream import Commit, History, compare_url, merged_pr


@dataclass(frozen=True)
class Verdict:
    patch: str
    status: str  # applies, obsolete, conflicts
    detail: str


@dataclass
class Bump:
    name: str
    headline: str
    changes: list[Change] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    blocked: str = ""  # why nothing may be written for it

    @property
    def moves(self) -> bool:
        return bool(self.changes)


def bump_source(run: Run, name: str, to: str = "") -> Bump:
    source = run.pins.sources[name]
    history = History(run.sources, name, source)
    history.fetch()
    new = history.resolve(to) if to else history.head()
    if new is None:
        raise FetchError(
            f"bump {name}: to={to} names no commit or tag of {run.sources.url(source)}"
        )
    old = history.resolve(source.commit) if source.commit else None
    if old == new:
        return Bump(name, f"{name}: already at upstream's {_short(new)} ({to or source.branch})")
    after = history.commit(new)
    between = history.between(old, new) if old else []
    headline = (
        f"{name}: {_describe(history.commit(old) if old else None, source.commit)} -> "
        f"{after.id[:12]} ({after.date}), "
        + (f"{len(between)} commits" if old else "history unknown")
        + (f", {url}" if (url := compare_url(source.repo, old or "", new)) and old else "")
    )
    tree = run.sources.tree(name, dataclasses.replace(source, commit=new))
    verdicts = [_verdict(status, between, name) for status in patches.check(tree, source.patches)]
    bump = Bump(name, headline, verdicts=verdicts)
    bump.changes.append(Change(("sources", name, "commit"), source.commit, new))
    tag = to if to and history.is_tag(to) else ""
    if tag != source.tag:
        bump.changes.append(Change(("sources", name, "tag"), source.tag, tag))
    kept = tuple(v.patch for v in verdicts if v.status != "obsolete")
    if kept != source.patches:
        bump.changes.append(Change(("sources", name, "patches"), source.patches, kept))
    conflicts = [v for v in verdicts if v.status == "conflicts"]
    if conflicts:
        bump.blocked = f"{len(conflicts)} patch{'es' if len(conflicts) > 1 else ''} conflict"
    return bump


def _verdict(status: patches.Status, between: list[Commit], name: str) -> Verdict:
    pr = patches.read_patch(status.patch).upstream
    if pr and pr[0].rsplit("/", 1)[-1].lower() in (name, name.replace("_", "-")):
        merge = merged_pr(between, pr[1])
        if merge:
            return Verdict(
                status.patch,
                "obsolete",
                f"upstream merged #{pr[1]} in {merge.id[:12]} ({merge.subject}); "
                f"left out of [sources.{name}].patches: delete the file",
            )
    if status.status == "obsolete":
        detail = f"upstream has it already; left out of [sources.{name}].patches: delete the file"
        return Verdict(status.patch, "obsolete", detail)
    return Verdict(status.patch, status.status, status.detail)


def bump_base(run: Run) -> Bump:
    base = run.pins.base
    now = registry.digest(base.image, run.http)
    if now == base.digest:
        return Bump("base", f"base: {base.image} is still {_short(now)}")
    bump = Bump(
        "base", f"base: {base.image} {_short(base.digest) or '(no digest)'} -> {_short(now)}"
    )
    bump.changes.append(Change(("base", "digest"), base.digest, now))
    return bump


def rebuilds(run: Run, changes: list[Change]) -> list[str]:
    """The stages whose keys the changes move, in build order."""
    after = _apply(run.pins, changes)
    moved = keys.compute(run.graph, after, run.archs)
    return [name for name in run.graph.order if moved[name].key != run.keys[name].key]


def _apply(pins: Pins, changes: list[Change]) -> Pins:
    return loads(apply(Path(pins.file).read_text(encoding="utf-8"), changes), pins.file)


def run_bump(run: Run, names: list[str], to: str, *, force: bool, dry: bool) -> list[str]:
    """Bump ``names`` (sources, or "base"): report every one; write what may be written."""
    bumps = [bump_base(run) if name == "base" else bump_source(run, name, to) for name in names]
    lines: list[str] = []
    changes: list[Change] = []
    for bump in bumps:
        lines.append(bump.headline)
        lines += [
            f"  {v.status:<10}{v.patch}" + (f": {v.detail}" if v.detail else "")
            for v in bump.verdicts
        ]
        if bump.blocked and not force:
            lines.append(
                f"  stopped: {bump.blocked}; nothing written for {bump.name} (force=1 writes)"
            )
        else:
            changes += bump.changes
    if changes:
        lines.append(f"rebuilds: {', '.join(rebuilds(run, changes)) or 'nothing'}")
        if dry:
            lines.append("dry run: nothing written")
        else:
            write(Path(run.options.pins), changes)
            lines.append(f"wrote {run.options.pins}")
    blocked = [b.name for b in bumps if b.blocked and not force]
    if blocked:
        print("\n".join(lines))
        raise LockError(f"bump stopped for {', '.join(blocked)}: patches conflict; see above")
    return lines


def _describe(commit: Commit | None, pinned: str) -> str:
    if commit is None:
        return f"{pinned[:12] or '(unpinned)'} (gone upstream)" if pinned else "(unpinned)"
    return f"{commit.id[:12]} ({commit.date})"


def _short(value: str) -> str:
    return value.removeprefix("sha256:")[:12] if value else ""
