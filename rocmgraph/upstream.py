"""A source's upstream history: what bump and audit ask of it.

A bare repository per source under the cache (``history/<name>.git``) holds
the tracked branch, the tags and the pinned commit; each question is a git
command on it. Fetching needs the network; a failure is one FetchError line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rocmgraph.errors import FetchError
from rocmgraph.git import git
from rocmgraph.pins import GitSource
from rocmgraph.proc import CommandFailed
from rocmgraph.sources import SourceCache, git_reason

_PR = re.compile(r"\(#(\d+)\)\s*$")


@dataclass(frozen=True)
class Commit:
    id: str
    date: str  # YYYY-MM-DD, committer date
    subject: str


class History:
    def __init__(self, cache: SourceCache, name: str, source: GitSource, timeout: float = 600):
        self.cache, self.name, self.source, self.timeout = cache, name, source, timeout
        self.repo: Path = cache.root / "history" / f"{name}.git"

    def fetch(self) -> None:
        """Upstream's branches and tags as they are now (a branch or tag gone upstream goes)."""
        url = self.cache.url(self.source)
        if not self.repo.is_dir():
            git("init", "--quiet", "--bare", str(self.repo), timeout=60)
        refspecs = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
        config = self.cache.mirrors.git_config()
        try:
            git("fetch", "--quiet", "--force", "--prune", "--prune-tags", url, *refspecs,
                cwd=self.repo, config=config, timeout=self.timeout)  # fmt: skip
        except CommandFailed as exc:
            raise FetchError(
                f"source {self.name}: cannot fetch {url} ({git_reason(exc)})"
            ) from None
        if self.resolve(f"refs/heads/{self.source.branch}") is None:
            raise FetchError(
                f"source {self.name}: {url} has no branch {self.source.branch}; "
                f"fix [sources.{self.name}].branch"
            )

    def head(self) -> str:
        return self._git("rev-parse", f"refs/heads/{self.source.branch}")

    def resolve(self, ref: str) -> str | None:
        """A full commit id for a commit (full or short) or a tag; None when upstream has none."""
        try:
            return self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except CommandFailed:
            return None

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

    def behind(self, commit: str) -> int:
        """How many commits of the tracked branch the pin lacks."""
        return int(self._git("rev-list", "--count", f"{commit}..refs/heads/{self.source.branch}"))

    def commit(self, commit: str) -> Commit:
        out = self._git("show", "--no-patch", "--format=%H%x09%cs%x09%s", commit)
        full, date, subject = out.split("\t", 2)
        return Commit(full, date, subject)

    def between(self, old: str, new: str) -> list[Commit]:
        """The commits ``new`` has and ``old`` has not, newest first."""
        out = self._git("log", "--format=%H%x09%cs%x09%s", f"{old}..{new}")
        return [Commit(*line.split("\t", 2)) for line in out.splitlines() if line]

    def age_days(self, commit: str, today: datetime | None = None) -> int:
        date = datetime.fromisoformat(self.commit(commit).date).replace(tzinfo=UTC)
        return ((today or datetime.now(UTC)) - date).days

    def _git(self, *args: str) -> str:
        return git(*args, cwd=self.repo, timeout=self.timeout).strip()


def merged_pr(commits: list[Commit], pr: int) -> Commit | None:
    """The squash-merge of pull request ``pr`` (a title ending in ``(#pr)``) among ``commits``."""
    for commit in commits:
        match = _PR.search(commit.subject)
        if match and int(match.group(1)) == pr:
            return commit
    return None


def compare_url(repo: str, old: str, new: str) -> str:
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(\.git)?/?", repo)
    return f"https://github.com/{match.group(1)}/compare/{old[:12]}...{new[:12]}" if match else ""
