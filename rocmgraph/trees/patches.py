"""Patches: unified diffs with a DEP-3 header, checked and applied with ``git apply``.

Each patch file is one upstream fix. Its header, in the Debian DEP-3 format a
program can read, names what it does (``Description``) and where it stands
upstream (``Forwarded``: the pull request URL, or ``not-needed`` for a local
adaptation). ``git apply`` has no fuzz: a context line that changed is a
conflict, never a guess.

At a given tree every patch has one status, checked in order (a patch sees
the ones before it applied):
- applies: it applies cleanly;
- obsolete: its reverse applies, so upstream has the change already; it is
  never applied twice;
- conflicts: neither, and the file and hunk (or the missing file) are named.
A report adds a fourth, unknown, for a patch whose tree could not be fetched.
"""

from __future__ import annotations

import email.parser
import re
import shutil
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from rocmgraph.common.errors import PatchError
from rocmgraph.common.layout import ROOT
from rocmgraph.config.pins import GitSource
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.outside.git import git
from rocmgraph.outside.proc import CommandFailed

_PR = re.compile(r"https://github\.com/([^/\s]+/[^/\s]+)/pull/(\d+)")
_FILE = re.compile(r"^\+\+\+ b/(\S+)|^--- a/(\S+)", re.MULTILINE)
_OLD_FILE = re.compile(r"^--- a/(\S+)", re.MULTILINE)
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$", re.MULTILINE)
_FAILED = re.compile(r"error: patch failed: (.+):(\d+)")


class Outcome(StrEnum):
    APPLIES = "applies"
    OBSOLETE = "obsolete"  # upstream has the change: never applied twice
    CONFLICTS = "conflicts"
    UNKNOWN = "unknown"  # its tree could not be fetched (reports only)


@dataclass(frozen=True)
class Patch:
    path: str  # relative to the repository root
    description: str
    forwarded: str  # the upstream PR URL, or "not-needed"
    text: str

    @property
    def upstream(self) -> tuple[str, int] | None:
        """``("vllm-project/vllm", 44972)`` when the fix has an upstream pull request."""
        match = _PR.fullmatch(self.forwarded)
        return (match.group(1), int(match.group(2))) if match else None

    @property
    def files(self) -> tuple[str, ...]:
        names = {a or b for b, a in _FILE.findall(self.text)}
        return tuple(sorted(names))

    @property
    def needs(self) -> tuple[str, ...]:
        """The files the patch expects to find (a file it creates is not among them)."""
        return tuple(sorted(set(_OLD_FILE.findall(self.text))))

    def hunk(self, file: str, line: int) -> str:
        """``hunk 2 (@@ -120,7 +120,9 @@)``: the hunk of ``file`` that starts at ``line``."""
        section = self._section(file)
        for number, match in enumerate(_HUNK.finditer(section), start=1):
            if int(match.group(1)) == line:
                return f"hunk {number} ({match.group(0).split(' @@')[0]} @@)"
        return f"the hunk at line {line}"

    def _section(self, file: str) -> str:
        for part in re.split(r"^(?=diff --git )", self.text, flags=re.MULTILINE):
            if part.split("\n", 1)[0].endswith(f" b/{file}"):
                return part
        return self.text


def read_patch(relative: str) -> Patch:
    try:
        text = (ROOT / relative).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchError(
            f"{relative}: no such file; name a patch of this repository in the pins "
            "(paths are relative to its root)"
        ) from None
    header_text = text.split("\n---\n", 1)[0] if "\n---\n" in text else ""
    header = email.parser.HeaderParser().parsestr(header_text)
    description = " ".join((header.get("Description") or "").split())
    forwarded = (header.get("Forwarded") or "").strip()
    if not description or not forwarded:
        raise PatchError(
            f"{relative}: the header needs `Description:` and `Forwarded:` "
            "(a pull request URL, or not-needed), then a line `---` before the diff"
        )
    return Patch(relative, description, forwarded, text)


@dataclass(frozen=True)
class Status:
    patch: str
    status: Outcome
    detail: str = ""
    missing: tuple[str, ...] = ()  # files it needs that the tree lacks (moved or deleted)
    file: str = ""  # of a conflict: the file whose hunk does not apply, when git names it


def check_source(cache: SourceCache, name: str, source: GitSource) -> list[Status]:
    """The status of each patch of ``source`` at its commit; only what they touch is fetched."""
    touched = {file for patch in source.patches for file in read_patch(patch).files}
    with tempfile.TemporaryDirectory(prefix="patch-files-") as scratch:
        cache.files(name, source, touched, Path(scratch))
        return check(Path(scratch), source.patches)


def check(tree: Path, patches: tuple[str, ...]) -> list[Status]:
    """The status of each patch against ``tree``, which is left untouched."""
    parsed = [read_patch(name) for name in patches]
    with tempfile.TemporaryDirectory(prefix="patch-check-") as scratch:
        work = Path(scratch) / "tree"
        work.mkdir()
        for name in {file for patch in parsed for file in patch.files}:
            if (tree / name).is_file():  # only what the patches touch: fast on big trees
                (work / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / name, work / name)
        return [_check_one(work, patch, apply=True) for patch in parsed]


def apply(tree: Path, patches: tuple[str, ...], source: str) -> list[Status]:
    """Apply every patch that applies to ``tree`` in place; none when one conflicts."""
    statuses = check(tree, patches)
    conflicts = [s for s in statuses if s.status is Outcome.CONFLICTS]
    if conflicts:
        first = conflicts[0]
        raise PatchError(f"source {source}: {first.patch} conflicts: {first.detail}")
    for status in statuses:
        if status.status is Outcome.APPLIES:
            _git_apply(tree, ROOT / status.patch)
    return statuses


def _check_one(work: Path, patch: Patch, *, apply: bool) -> Status:
    path = ROOT / patch.path
    try:
        _git_apply(work, path, "--check")
    except CommandFailed as forward:
        try:
            _git_apply(work, path, "--check", "--reverse")
        except CommandFailed:
            missing = tuple(name for name in patch.needs if not (work / name).is_file())
            if missing:
                detail = f"{missing[0]}: no such file (moved or deleted upstream?)"
                return Status(patch.path, Outcome.CONFLICTS, detail, missing)
            file, detail = _conflict(patch, forward.stderr)
            return Status(patch.path, Outcome.CONFLICTS, detail, file=file)
        return Status(patch.path, Outcome.OBSOLETE, "upstream has this change already")
    if apply:
        _git_apply(work, path)
    return Status(patch.path, Outcome.APPLIES)


def _git_apply(tree: Path, patch: Path, *flags: str) -> None:
    git("apply", *flags, str(patch), cwd=tree, ceiling=tree.parent, timeout=120)


def _conflict(patch: Patch, stderr: str) -> tuple[str, str]:
    """The file whose hunk does not apply ("" when git names none), and what to say."""
    failed = _FAILED.search(stderr)
    if failed:
        file, line = failed.group(1), int(failed.group(2))
        return file, f"{file}: {patch.hunk(file, line)} does not apply"
    lines = [line for line in stderr.splitlines() if line.strip()]
    return "", lines[-1].removeprefix("error: ") if lines else "git apply refused it"
