"""Git sources, fetched on the host at their pinned commit into a content-addressed cache.

A tree lands in the cache under its commit id only once it is complete and
checked: it is fetched into a temporary directory, its HEAD compared with the
pin, its submodules checked out, and then renamed into place. A cached commit
is trusted by its id, so a no-op build never touches the network.

Mirrors, for air-gapped sites: a source's own ``mirror``, or URL prefix
rewrites (``[mirrors]`` in the pins, ``VERL_GRAPH_MIRRORS`` in the
environment) that git also applies to submodules, like its ``insteadOf``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.errors import FetchError
from rocmgraph.git import git
from rocmgraph.pins import GitSource, Pins
from rocmgraph.proc import CommandFailed

MIRRORS_ENV = "VERL_GRAPH_MIRRORS"
FULL_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Mirrors:
    """URL prefix rewrites; the longest matching prefix wins."""

    rewrites: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_pins(cls, pins: Pins, environ: Mapping[str, str] = os.environ) -> Mirrors:
        rewrites = dict(pins.mirrors)
        for item in environ.get(MIRRORS_ENV, "").split():
            prefix, sep, replacement = item.partition("=")
            if not sep or not prefix or not replacement:
                raise FetchError(
                    f"{MIRRORS_ENV}: {item!r} is not prefix=replacement; "
                    f"write e.g. {MIRRORS_ENV}='https://github.com/=http://127.0.0.1:8080/'"
                )
            rewrites[prefix] = replacement
        return cls(tuple(sorted(rewrites.items(), key=lambda kv: -len(kv[0]))))

    def apply(self, url: str) -> str:
        for prefix, replacement in self.rewrites:
            if url.startswith(prefix):
                return replacement + url[len(prefix) :]
        return url

    def git_config(self) -> dict[str, str]:
        return {f"url.{replacement}.insteadOf": prefix for prefix, replacement in self.rewrites}


class SourceCache:
    """Checked-out trees by full commit id: ``<root>/git/<commit>``."""

    def __init__(self, root: Path, mirrors: Mirrors = Mirrors(), timeout: float = 3600) -> None:
        self.root = root
        self.mirrors = mirrors
        self.timeout = timeout

    def url(self, source: GitSource) -> str:
        return source.mirror or self.mirrors.apply(source.repo)

    def cached(self, commit: str) -> Path | None:
        path = self.root / "git" / commit
        return path if FULL_COMMIT.fullmatch(commit) and path.is_dir() else None

    def tree(self, name: str, source: GitSource) -> Path:
        """The tree of ``source`` at its pinned commit, with submodules; fetched once."""
        commit = source.commit
        where = f"source {name}: [sources.{name}].commit"
        if not commit:
            raise FetchError(f"{where} is empty (nothing pinned); run `doit lock` to pin one")
        if not FULL_COMMIT.fullmatch(commit):
            raise FetchError(
                f"{where} {commit} is a short id, which names no fixed commit; "
                "run `doit lock` to record the full 40-hex id"
            )
        cached = self.cached(commit)
        if cached:
            return cached
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root / "tmp"))
        try:
            self._fetch(name, source, work)
            final = self.root / "git" / commit
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                work.rename(final)
            except OSError:
                if not final.is_dir():  # another fetch landed it first: keep that one
                    raise
            return final
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _fetch(self, name: str, source: GitSource, work: Path) -> None:
        url, commit = self.url(source), source.commit
        config = self.mirrors.git_config()
        git("init", "--quiet", str(work), timeout=60)
        try:  # the pinned commit alone, when the server allows it (GitHub does)
            git("fetch", "--quiet", "--depth=1", url, commit, cwd=work, config=config,
                timeout=self.timeout)  # fmt: skip
        except CommandFailed:
            self._fetch_all(name, url, commit, work, config)
        try:
            git("checkout", "--quiet", "--detach", commit, cwd=work, timeout=600)
        except CommandFailed:
            raise FetchError(
                f"source {name}: commit {commit} does not exist in {url}; check "
                f"[sources.{name}].commit, or run `doit bump:{name}` to move to upstream's newest"
            ) from None
        head = git("rev-parse", "HEAD", cwd=work).strip()
        if head != commit:  # cannot happen with a full id, unless the tree lies
            raise FetchError(f"source {name}: checked out {head}, not the pinned {commit}")
        if source.submodules and (work / ".gitmodules").is_file():
            try:
                # The superproject's tree pins every submodule commit; file
                # URLs are allowed for local mirrors.
                git("submodule", "update", "--init", "--recursive", "--quiet", cwd=work,
                    config={**config, "protocol.file.allow": "always"},
                    timeout=self.timeout)  # fmt: skip
            except CommandFailed as exc:
                raise FetchError(
                    f"source {name}: submodules of {commit} could not be fetched "
                    f"({git_reason(exc)}); check the network or set a mirror"
                ) from None

    def _fetch_all(
        self, name: str, url: str, commit: str, work: Path, config: dict[str, str]
    ) -> None:
        """Branches and tags: for servers that refuse a fetch by id, or to name the failure."""
        try:
            git("fetch", "--quiet", url, "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*", cwd=work, config=config,
                timeout=self.timeout)  # fmt: skip
        except CommandFailed as exc:
            raise _unreachable(name, "fetch", url, exc) from None

    def ls_remote(self, name: str, source: GitSource) -> dict[str, str]:
        """Upstream's refs (``refs/heads/main`` -> commit); a tag maps to the commit it tags."""
        url = self.url(source)
        try:
            out = git("ls-remote", url, config=self.mirrors.git_config(), timeout=300)
        except CommandFailed as exc:
            raise _unreachable(name, "list", url, exc) from None
        refs: dict[str, str] = {}
        for line in out.splitlines():
            commit, _, ref = line.partition("\t")
            if ref.endswith("^{}"):  # an annotated tag, peeled: the commit wins
                refs[ref.removesuffix("^{}")] = commit
            else:
                refs.setdefault(ref, commit)
        return refs

    def full_id(self, name: str, source: GitSource) -> str:
        """The full commit a pin means: its short id expanded, its tag, or its branch head."""
        refs = self.ls_remote(name, source)
        where = f"[sources.{name}]"
        if source.commit:
            tips = {c for c in refs.values() if c.startswith(source.commit)}
            if len(tips) == 1:
                return tips.pop()
            return self._expand(name, source)
        if source.tag:
            commit = refs.get(f"refs/tags/{source.tag}")
            if not commit:
                raise FetchError(f"{where}.tag {source.tag} does not exist in {self.url(source)}")
            return commit
        commit = refs.get(f"refs/heads/{source.branch}")
        if not commit:
            raise FetchError(f"{where}.branch {source.branch} does not exist in {self.url(source)}")
        return commit

    def _expand(self, name: str, source: GitSource) -> str:
        """A short id that is no branch or tag tip: fetch the history and ask git."""
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=self.root / "tmp") as tmp:
            work = Path(tmp)
            git("init", "--quiet", "--bare", str(work), timeout=60)
            self._fetch_all(name, self.url(source), source.commit, work, self.mirrors.git_config())
            spec = f"{source.commit}^{{commit}}"
            try:
                out = git("rev-parse", "--verify", "--quiet", spec, cwd=work)
            except CommandFailed:
                raise FetchError(
                    f"source {name}: no commit {source.commit} in {self.url(source)} "
                    "(or it is ambiguous); write the full id in "
                    f"[sources.{name}].commit"
                ) from None
            return out.strip()


_REASONS = (  # git's words (which carry timings and ports) -> a stable reason
    (("Failed to connect", "Couldn't connect", "Connection refused"), "connection refused"),
    (("Could not resolve host",), "host not found"),
    (("timed out", "Timeout"), "timed out"),
    (("error: 404", "not found", "does not appear to be a git repository", "does not exist"),
     "no repository there"),
)  # fmt: skip


def _unreachable(name: str, verb: str, url: str, exc: CommandFailed) -> FetchError:
    return FetchError(
        f"source {name}: cannot {verb} {url} ({git_reason(exc)}); check the network, "
        f"or set a mirror ([sources.{name}].mirror, [mirrors], or ${MIRRORS_ENV})"
    )


def git_reason(exc: CommandFailed) -> str:
    """A stable reason for a failed git command (git's own words carry timings and ports)."""
    for needles, reason in _REASONS:
        if any(needle in exc.stderr for needle in needles):
            return reason
    lines = [line.strip() for line in exc.stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else f"exit code {exc.returncode}"


def copy_tree(tree: Path, dest: Path) -> None:
    """Copy a checked-out tree without git metadata (submodules' .git files too)."""
    shutil.copytree(tree, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
