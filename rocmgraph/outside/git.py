"""The one module that runs git."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common import disk
from rocmgraph.outside import proc

# Never prompt for credentials, speak C so messages can be matched, and give up
# on a transfer that stalls rather than hang a build.
_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_LFS_SKIP_SMUDGE": "1",  # a file in LFS stays its pointer, with git-lfs or without
}
_CONFIG = {
    "http.lowSpeedLimit": "1000",
    "http.lowSpeedTime": "60",
    "advice.detachedHead": "false",
    # A tree is its commit, whatever the user's own git configuration says: no line endings
    # converted, no attributes or hooks of theirs, patches applied as they are written.
    # (Their other settings stay: credentials, proxies, URL rewrites only change where from.)
    "core.autocrlf": "false",
    "core.eol": "lf",
    "core.attributesFile": "/dev/null",
    "core.hooksPath": "/dev/null",
    "apply.whitespace": "nowarn",
}


def git(
    *args: str,
    cwd: Path | None = None,
    config: Mapping[str, str] | None = None,
    timeout: float | None = 3600,
    ceiling: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> str:
    """Run ``git args`` in ``cwd`` and return its stdout.

    ``config`` adds ``-c key=value`` settings (mirror rewrites among them).
    ``ceiling`` stops git from finding a repository above that directory, so
    ``git apply`` in a plain tree never touches an enclosing checkout. A write its disk
    refused is a DiskError for ``cwd`` (git writes there), whatever git did next: a
    fetch that ran out of space is no network failure, nor a checkout a missing commit.
    """
    argv = _argv(config)
    environ = {**os.environ, **_ENV, **(env or {})}
    if ceiling is not None:
        environ["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    try:
        return proc.run(
            [*argv, *args], cwd=cwd, env=environ, timeout=timeout, input_text=input_text
        ).stdout
    except proc.CommandFailed as exc:
        code = disk.in_words(exc.stderr)  # git's exit code says only 128
        if code is None:
            raise
        raise disk.refused(code, cwd or Path.cwd()) from None


def _argv(config: Mapping[str, str] | None = None) -> list[str]:
    settings = {**_CONFIG, **(config or {})}
    return ["git", *(arg for key, value in settings.items() for arg in ("-c", f"{key}={value}"))]


# ---------------------------------------------------------------- objects, read as stored

# A partial clone would fetch a missing object from its promisor remote: reading objects
# here never goes to the network, an object a copy lacks is reported missing. A fetch into
# one is given it too: a transfer cut half way would otherwise send git after each object
# it lacks, one fetch at a time, until the timeout.
OFFLINE = {"GIT_NO_LAZY_FETCH": "1"}


def make_partial(git_dir: Path, url: str) -> None:
    """Make ``git_dir`` a partial copy whose missing blobs come from ``url``: what a
    ``--filter=blob:none`` fetch into it needs, harmless to a copy that has them all."""
    for key, value in (("core.repositoryformatversion", "1"),
                       ("extensions.partialClone", "origin"), ("remote.origin.url", url),
                       ("remote.origin.promisor", "true"),
                       ("remote.origin.partialclonefilter", "blob:none")):  # fmt: skip
        git("config", key, value, cwd=git_dir, timeout=60)


@dataclass(frozen=True)
class Entry:
    """One entry of a git tree."""

    mode: str
    kind: str  # "blob", "tree", or "commit" (a submodule's commit, never in this repository)
    sha: str
    name: str


def missing(git_dir: Path, objects: Iterable[str]) -> set[str]:
    """Those of ``objects`` (full ids) that ``git_dir`` lacks: a shallow or partial copy,
    or one whose history was cut, holds commits whose trees or blobs it does not have."""
    wanted = "".join(f"{sha}\n" for sha in objects)
    if not wanted:
        return set()
    out = git("--git-dir", str(git_dir), "cat-file", "--batch-check", input_text=wanted,
              env=OFFLINE)  # fmt: skip
    return {line.split()[0] for line in out.splitlines() if line.endswith(" missing")}


def tree(git_dir: Path, treeish: str) -> list[Entry]:
    """The entries of one tree (a tree's id, or a commit's for its root), not recursing."""
    out = git("--git-dir", str(git_dir), "ls-tree", "-z", "--full-tree", treeish, env=OFFLINE)
    return _entries(out)


def listing(git_dir: Path, commit: str) -> list[Entry]:
    """Every entry below ``commit``'s root, folders too, each ``name`` its path: trees only,
    so a partial copy (``--filter=blob:none``) answers without a blob."""
    out = git("--git-dir", str(git_dir), "ls-tree", "-r", "-t", "-z", "--full-tree", commit,
              env=OFFLINE, timeout=600)  # fmt: skip
    return _entries(out)


def _entries(out: str) -> list[Entry]:
    entries = []
    for record in out.split("\0"):
        if record:
            meta, name = record.split("\t", 1)
            mode, kind, sha = meta.split()
            entries.append(Entry(mode, kind, sha, name))
    return entries


def blob(git_dir: Path, sha: str) -> bytes:
    """Blob ``sha``'s bytes as stored: no filter, no line ending converted, so their git
    hash is ``sha`` again."""
    argv = [*_argv(), "--git-dir", str(git_dir), "cat-file", "blob", sha]
    return proc.read(argv, lambda out: out.read(), env={**os.environ, **_ENV, **OFFLINE})


def present(git_dir: Path) -> set[str]:
    """The ids of every object ``git_dir`` holds itself (a partial copy lacks those its
    filter left out, and never fetches them here)."""
    out = git("--git-dir", str(git_dir), "cat-file", "--batch-all-objects",
              "--batch-check=%(objectname)", env=OFFLINE, timeout=600)  # fmt: skip
    return set(out.split())


def blobs(git_dir: Path, shas: Iterable[str]) -> dict[str, bytes]:
    """The bytes of each of the blobs ``shas``, as stored, read by one ``cat-file --batch``;
    one that ``git_dir`` lacks is a CommandFailed (git does not fetch it)."""
    wanted = "".join(f"{sha}\n" for sha in dict.fromkeys(shas))
    if not wanted:
        return {}
    argv = [*_argv(), "--git-dir", str(git_dir), "cat-file", "--batch"]
    out = proc.exchange(argv, wanted.encode(), env={**os.environ, **_ENV, **OFFLINE}, timeout=600)
    found: dict[str, bytes] = {}
    at = 0
    while at < len(out):  # "<id> <type> <size>\n<bytes>\n" per object
        end = out.index(b"\n", at)
        sha, _, size = out[at:end].decode().split()
        found[sha] = out[end + 1 : end + 1 + int(size)]
        at = end + 2 + int(size)
    return found
