"""A source's upstream history: what bump and audit ask of it.

A bare repository per upstream under the cache (``history/<name>-<id>.git``, by the
repository's URL: SGLang and its sgl-kernel folder share one) holds the tracked
branches, the tags and the pinned commit; each question is a git
command on it. Fetching needs the network; a failure is one FetchError line
and leaves the repository as it was (nothing half-fetched stays behind).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version

from rocmgraph.common import disk
from rocmgraph.common.errors import FetchError
from rocmgraph.common.fsutil import build_dir, exclusive, owned
from rocmgraph.config.pins import GitSource, repository
from rocmgraph.fetch.sources import Origin, SourceCache, git_reason, tree_id, unreadable
from rocmgraph.outside.git import OFFLINE, git, make_partial
from rocmgraph.outside.proc import CommandFailed

_PR = re.compile(r"\(#(\d+)\)\s*$")
# git's titles for a revert, and for a revert of a revert; a squash merge adds " (#N)".
_REVERT = re.compile(r'^(Revert|Reapply) "(.*)"(?:\s*\(#\d+\))?\s*$')
_GITHUB = re.compile(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", re.IGNORECASE)
_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")


def _folder(url: str) -> str:
    """The history's folder: the repository's last name (to read), and its URL's hash."""
    same = repository(url)
    last = re.sub(r"[^A-Za-z0-9._-]", "_", same.rsplit("/", 1)[-1]) or "repository"
    return f"{last}-{hashlib.sha256(same.encode()).hexdigest()[:12]}.git"


@dataclass(frozen=True)
class Commit:
    id: str
    date: str  # YYYY-MM-DD, committer date
    subject: str


class History:
    def __init__(self, cache: SourceCache, name: str, source: GitSource, timeout: float = 600):
        self.cache, self.name, self.source, self.timeout = cache, name, source, timeout
        self.repo: Path = cache.root / "history" / _folder(source.repo)

    def fetch(self) -> None:
        """Upstream's branches and tags as they are now (a branch or tag gone upstream goes).

        The network fetch goes into a scratch repository that borrows the
        objects already here (git's alternates: only new objects travel).
        The first one is renamed into place; a later one is fetched over
        from disk. A fetch that fails or is killed half way takes its scratch
        repository with it: no ``tmp_pack_*`` of the whole history stays.
        """
        url = self.cache.url(self.source)
        # Two runs on one cache (a bump and CI's audit) take turns: git's ref locks would
        # refuse the second one's update of the same branches.
        turn = self.repo.with_name(self.repo.name + ".turn")
        turn.parent.mkdir(parents=True, exist_ok=True)
        turn.touch()
        with exclusive(turn), disk.writing(self.repo):
            self._fetch(url)
        if self.resolve(f"refs/heads/{self.source.branch}") is None:
            raise FetchError(
                f"source {self.name}: {url} has no branch {self.source.branch}; "
                f"fix [sources.{self.name}].branch"
            )

    def _fetch(self, url: str) -> None:
        scratch = self.cache.scratch
        if not self.repo.is_dir():
            build_dir(self.repo, scratch, lambda work: self._fetch_into(work, url))
            return
        prefix = owned(f"{self.name}.git")
        with tempfile.TemporaryDirectory(prefix=prefix, dir=scratch) as tmp:
            self._fetch_into(Path(tmp), url, borrow=self.repo)
            make_partial(self.repo, url)  # a copy an earlier version fetched whole, too
            try:
                git("fetch", "--quiet", "--force", "--prune", "--prune-tags", "--filter=blob:none",
                    tmp, *_REFSPECS, cwd=self.repo, timeout=self.timeout, env=OFFLINE)  # fmt: skip
            except CommandFailed as exc:
                raise FetchError(
                    f"source {self.name}: cannot update {self.repo} ({git_reason(exc)})"
                ) from None

    def _fetch_into(self, work: Path, url: str, borrow: Path | None = None) -> None:
        git("init", "--quiet", "--bare", cwd=work, timeout=60)
        make_partial(work, url)  # commits and trees: a blob is fetched when one is read
        if borrow is not None:
            (work / "objects" / "info" / "alternates").write_text(f"{borrow / 'objects'}\n")
        try:
            git("fetch", "--quiet", "--force", "--prune", "--prune-tags", "--filter=blob:none",
                url, *_REFSPECS, cwd=work, timeout=self.timeout, env=OFFLINE)  # fmt: skip
        except CommandFailed as exc:
            lost = unreadable(exc)
            if lost is not None:
                raise Origin(self.name, url, "").damaged(lost) from None
            raise FetchError(
                f"source {self.name}: cannot fetch {url} ({git_reason(exc)})"
            ) from None

    def head(self) -> str:
        return self._git("rev-parse", f"refs/heads/{self.source.branch}")

    def resolve(self, ref: str) -> str | None:
        """A full commit id for a commit (full or short) or a tag; None when upstream has none."""
        try:
            return self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except CommandFailed:
            return None

    def tree_id(self, commit: str, folder: str) -> str | None:
        """The git tree id of ``folder`` at ``commit``; None when it has no such folder."""
        return tree_id(self.repo, folder, commit, timeout=self.timeout)

    def is_tag(self, ref: str) -> bool:
        try:
            self._git("show-ref", "--verify", "--quiet", f"refs/tags/{ref}")
        except CommandFailed:
            return False
        return True

    def exists(self, commit: str) -> bool:
        """Upstream has the commit: some branch or tag reaches it (a lingering object does not)."""
        if self.resolve(commit) is None:
            return False
        branches = self._git("branch", "--contains", commit)
        return bool(branches) or bool(self.tags_containing(commit))

    def on_branch(self, commit: str) -> bool:
        try:
            self._git("merge-base", "--is-ancestor", commit, f"refs/heads/{self.source.branch}")
        except CommandFailed:
            return False
        return True

    def tags_containing(self, commit: str) -> list[str]:
        return self._git("tag", "--contains", commit).split()

    def tags_at(self, commit: str) -> list[str]:
        """The tags that name ``commit`` itself."""
        return self._git("tag", "--points-at", commit).split()

    def versions_at(self, commit: str) -> set[str]:
        """The versions the tags on ``commit`` give (``v0.5.1`` -> ``0.5.1``): what a build
        that asks git for its version (setuptools_scm) would report there."""
        versions = set()
        for tag in self.tags_at(commit):
            try:
                Version(tag.removeprefix("v"))
            except InvalidVersion:
                continue
            versions.add(tag.removeprefix("v"))
        return versions

    def described(self, commit: str) -> str | None:
        """The version setuptools_scm derives from git at ``commit`` with no tag on it: the
        nearest version tag below it and the distance (``git describe``), as its default
        scheme makes them one (v0.22.1rc0, 384 commits on: 0.22.1rc1.dev384). None where no
        version tag is below it."""
        try:
            described = self._git("describe", "--tags", "--long", "--match", "*[0-9]*", commit)
        except CommandFailed:
            return None
        tag, distance, _ = described.rsplit("-", 2)
        try:
            Version(tag.removeprefix("v"))
        except InvalidVersion:
            return None
        return next_dev(tag.removeprefix("v"), int(distance))

    def behind(self, commit: str) -> int:
        """How many commits of the tracked branch the pin lacks."""
        return int(self._git("rev-list", "--count", f"{commit}..refs/heads/{self.source.branch}"))

    def commit(self, commit: str) -> Commit:
        out = self._git("show", "--no-patch", "--format=%H%x09%cs%x09%s", commit)
        full, date, subject = out.split("\t", 2)
        return Commit(full, date, subject)

    def between(self, old: str, new: str) -> list[Commit]:
        """The commits ``new`` has and ``old`` has not, newest first (children before parents)."""
        out = self._git("log", "--topo-order", "--format=%H%x09%cs%x09%s", f"{old}..{new}")
        return [Commit(*line.split("\t", 2)) for line in out.splitlines() if line]

    def files(self, commit: str, under: str) -> list[str]:
        """The files of ``commit`` below the folder ``under``."""
        out = git("ls-tree", "-r", "-z", "--name-only", commit, "--", under,
                  cwd=self.repo, timeout=self.timeout)  # fmt: skip
        return [name for name in out.split("\0") if name]

    def last_change(self, old: str, new: str, path: str) -> Commit | None:
        """The newest commit of ``old..new`` that touched ``path`` (a file or a folder): for
        a path ``new`` lacks, the one that moved or deleted it."""
        out = self._git("log", "--topo-order", "-1", "--format=%H%x09%cs%x09%s",
                        f"{old}..{new}", "--", path)  # fmt: skip
        return Commit(*out.split("\t", 2)) if out else None

    def renames(self, old: str, new: str) -> dict[str, str]:
        """Old path -> new path for every file git's rename detection finds moved."""
        # -l: consider up to this many files for inexact renames (git's default
        # of 1000 gives up silently on two months of a large repository).
        # The one question that reads blobs: git fetches those it compares, in one batch.
        try:
            out = git("diff", "--find-renames", "-l20000", "--diff-filter=R", "--name-status",
                      "-z", old, new, cwd=self.repo, timeout=self.timeout)  # fmt: skip
        except CommandFailed as exc:
            url = self.cache.url(self.source)
            lost = unreadable(exc)
            if lost is not None:
                raise Origin(self.name, url, "").damaged(lost) from None
            raise Origin(self.name, url, "").failed(exc) from None
        fields = out.split("\0")
        return {fields[i + 1]: fields[i + 2] for i in range(0, len(fields) - 2, 3)}

    def age_days(self, commit: str, today: datetime | None = None) -> int:
        date = datetime.fromisoformat(self.commit(commit).date).replace(tzinfo=UTC)
        return ((today or datetime.now(UTC)) - date).days

    def _git(self, *args: str) -> str:
        return git(*args, cwd=self.repo, timeout=self.timeout).strip()


def next_dev(tag: str, distance: int) -> str:
    """setuptools_scm's guess-next-dev: the last number of the tag's version one up, and the
    distance as its dev release (0.22.1rc0, 384 -> 0.22.1rc1.dev384; 1.2.3, 0 -> 1.2.3)."""
    if distance == 0:
        return tag
    release = tag.split("+", 1)[0]
    if ".dev" in release:  # a dev tag is the version it leads to
        return f"{release.split('.dev', 1)[0]}.dev{distance}"
    head, number = re.fullmatch(r"(.*?)(\d+)", release).groups()  # type: ignore[union-attr]
    return f"{head}{int(number) + 1}.dev{distance}"


def cited(commit: Commit) -> str:
    """A commit as a change log cites it: ``c32c4ef79c (#32648)``, or its subject when it
    names no pull request."""
    pr = re.search(r"\((#\d+)\)$", commit.subject)
    return f"{commit.id[:10]} ({pr.group(1) if pr else commit.subject})"


def merged_pr(commits: list[Commit], pr: int) -> Commit | None:
    """The squash-merge of pull request ``pr`` among ``commits`` (newest first) that stands.

    A title ending in ``(#pr)`` merges it; ``Revert "<that title>"`` after it
    (squash-merged as ``Revert "..." (#M)`` or not) takes it out again, and a
    revert of the revert (``Reapply "..."``) puts it back. The newest word wins.
    """
    standing: Commit | None = None
    for commit in reversed(commits):  # oldest first
        effect = _effect(commit.subject, pr)
        if effect is not None:
            standing = commit if effect else None
    return standing


def _effect(subject: str, pr: int) -> bool | None:
    """True if ``subject`` merges ``pr``, False if it reverts it, None if it is about another."""
    merges = True
    while match := _REVERT.match(subject):
        if match.group(1) == "Revert":
            merges = not merges
        subject = match.group(2)
    found = _PR.search(subject)
    return merges if found and int(found.group(1)) == pr else None


def github_repo(url: str) -> str | None:
    """``owner/name`` of a GitHub repository URL, lower-cased (GitHub ignores case), or None."""
    match = _GITHUB.fullmatch(url)
    return f"{match.group(1)}/{match.group(2)}".lower() if match else None


def moved_to(path: str, renames: dict[str, str], files_before: list[str]) -> str | None:
    """Where rename detection says ``path`` went: a file's new path, or a folder's new prefix.

    A folder moved when most of its files (``files_before``, under it at the old
    commit) moved under one new prefix, keeping their place inside it.
    """
    if path in renames:
        return renames[path]
    folder = path.rstrip("/") + "/"
    prefixes: Counter[str] = Counter()
    for old in files_before:
        new = renames.get(old, "")
        inner = old.removeprefix(folder)
        if new.endswith(f"/{inner}"):
            prefixes[new[: -len(inner)]] += 1
    if prefixes:
        prefix, count = prefixes.most_common(1)[0]
        if 2 * count > len(files_before):
            return prefix
    return None


def compare_url(repo: str, old: str, new: str) -> str:
    match = _GITHUB.fullmatch(repo)
    if not match:
        return ""
    return f"https://github.com/{match.group(1)}/{match.group(2)}/compare/{old[:12]}...{new[:12]}"
