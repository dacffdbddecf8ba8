"""Git sources, fetched on the host at their pinned commit into a content-addressed cache.

A tree lands in the cache under its commit id only once it is complete and
checked: it is fetched into a temporary directory, its HEAD compared with the
pin, its submodules checked out, and then renamed into place. A cached commit
is trusted by its id, so a no-op build never touches the network.

Two kinds of copy, both by commit id:
- ``git/<commit>``: the complete tree, checked out, submodules included (as the
  pin asks): what a build copies into its context;
- ``objects/<commit>``: the commit's trees alone, a partial repository
  (``--filter=blob:none``) that fetches a blob when it is first read: what a
  check reads (``snapshot``, ``files``). A blob no check reads is never fetched,
  so a mirror that lacks one (or a huge tree) stops no check; a submodule is
  fetched the same way when a path inside it is read.

Mirrors, for air-gapped sites: a source's own ``mirror``, or URL prefix
rewrites (``[mirrors]`` in the pins, ``VERL_GRAPH_MIRRORS`` in the
environment), applied here to every URL, submodules' too.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common import failpoints
from rocmgraph.common.errors import FetchError
from rocmgraph.common.fsutil import build_dir, owned
from rocmgraph.config.pins import GitSource, Pins
from rocmgraph.fetch.objects import Checkout, Files, Snapshot, Submodule, copy, paths_and_urls
from rocmgraph.outside import git as objects
from rocmgraph.outside import leftovers
from rocmgraph.outside.git import git
from rocmgraph.outside.proc import CommandFailed

MIRRORS_ENV = "VERL_GRAPH_MIRRORS"
FULL_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Mirrors:
    """URL prefix rewrites; the longest prefix that matches on a path boundary wins.

    A prefix names a repository or a folder, not a string:
    ``https://github.com/org/repo`` rewrites ``.../org/repo`` and ``.../org/repo/x``,
    never ``.../org/repo-recipe``. git's own ``url.<x>.insteadOf`` matches plain
    string prefixes, so it is never used: submodule URLs are rewritten here, one
    ``.gitmodules`` entry at a time.
    """

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
            if _covers(prefix, url):
                return replacement + url[len(prefix) :]
        return url


def _covers(prefix: str, url: str) -> bool:
    """``prefix`` is ``url``, or a folder of it: the match ends on a path boundary."""
    if not url.startswith(prefix):
        return False
    rest = url[len(prefix) :]
    return not rest or rest.startswith("/") or prefix.endswith(("/", ":"))


@dataclass(frozen=True)
class Origin:
    """Where one commit is fetched from, and how a failure to fetch it is told."""

    source: str  # the source's name
    url: str  # mirrors applied
    commit: str
    submodule: str = ""  # the submodule's path in the source's tree, for a submodule

    def failed(self, exc: CommandFailed, verb: str = "fetch") -> FetchError:
        """Why git could not fetch: a damaged repository there, else the network (a full
        disk is the git seam's DiskError)."""
        lost = unreadable(exc)
        if lost is not None:
            return self.damaged(lost)
        return self.unreachable(git_reason(exc), verb)

    def damaged(self, lost: str) -> FetchError:
        """The repository at ``url`` lacks objects (``lost``, as ``unreadable`` words them):
        no network fault, so fetching again from the same copy gives the same error."""
        inside = f"submodule {self.submodule}: " if self.submodule else ""
        where = (
            f"a mirror ([mirrors] or ${MIRRORS_ENV})"
            if self.submodule
            else f"[sources.{self.source}].mirror"
        )
        return FetchError(
            f"source {self.source}: {inside}the repository {self.url} is damaged: git cannot "
            f"read {lost}; fetch that copy again, or point {where} at a whole copy"
        )

    def unreachable(self, reason: str, verb: str = "fetch") -> FetchError:
        if self.submodule:
            return FetchError(
                f"source {self.source}: cannot {verb} submodule {self.submodule} from {self.url} "
                f"({reason}); check the network, or set a mirror ([mirrors] or ${MIRRORS_ENV})"
            )
        return FetchError(
            f"source {self.source}: cannot {verb} {self.url} ({reason}); check the network, or set "
            f"a mirror ([sources.{self.source}].mirror, [mirrors], or ${MIRRORS_ENV})"
        )

    def missing(self) -> FetchError:
        if self.submodule:
            return FetchError(
                f"source {self.source}: submodule {self.submodule}: commit {self.commit} does not "
                f"exist in {self.url}; the superproject pins a commit its submodule URL lacks"
            )
        return FetchError(
            f"source {self.source}: commit {self.commit} does not exist in {self.url}; check "
            f"[sources.{self.source}].commit, or run `doit bump:{self.source}` to move to "
            "upstream's newest"
        )

    def submodule_origin(self, sub: Submodule, mirrors: Mirrors) -> Origin:
        # A relative URL is relative to where the superproject was fetched from, as
        # git reads it; an absolute one goes through the mirrors like any other.
        url = (
            _join(self.url, sub.url)
            if sub.url.startswith(("./", "../"))
            else mirrors.apply(sub.url)
        )
        path = f"{self.submodule}/{sub.path}" if self.submodule else sub.path
        return Origin(self.source, url, sub.commit, path)


class SourceCache:
    """Trees by full commit id, checked out or as git objects (see the module's docstring)."""

    def __init__(self, root: Path, mirrors: Mirrors = Mirrors(), timeout: float = 3600) -> None:
        self.root = root
        self.mirrors = mirrors
        self.timeout = timeout
        self._sweeper = leftovers.Sweeper()

    @property
    def scratch(self) -> Path:
        """Where fetches work before their result is renamed into place."""
        return self._sweeper.scratch(self.root / "tmp")

    def url(self, source: GitSource) -> str:
        return source.mirror or self.mirrors.apply(source.repo)

    def cached(self, commit: str) -> Path | None:
        path = self.root / "git" / commit
        return path if FULL_COMMIT.fullmatch(commit) and path.is_dir() else None

    def tree(self, name: str, source: GitSource) -> Path:
        """The tree of ``source`` at its pinned commit, with submodules; fetched once."""
        commit = _pinned(name, source)
        cached = self.cached(commit)
        if cached and _intact(name, cached, commit):
            return cached
        origin = Origin(name, self.url(source), commit)

        def fill(work: Path) -> None:
            self._checkout(origin, work)
            if source.submodules:
                self._submodules(origin, work)
            failpoints.reached("fetch")

        return build_dir(self.root / "git" / commit, self.scratch, fill)

    def subtree(self, name: str, source: GitSource) -> Path:
        """The folder ``source.subtree`` of the source's tree at its commit, checked to be
        the tree its pin names: a stage that builds the folder alone is keyed by that id.
        Not covered: a .gitattributes above the folder whose eol or filter settings change
        how git writes the folder's files (a later commit could change those, not the id)."""
        tree = self.tree(name, source)
        found = _folder_id(tree, name, source)
        if source.submodules:  # else none is fetched: every one is empty, declared or not
            _declared(tree, name, source.subtree)
        if found != source.tree:
            raise FetchError(
                f"source {name}: {source.subtree}/ at {source.commit[:12]} is tree {found}, "
                f"not the pinned {source.tree or '(none)'}; if the commit is right, set "
                f'[sources.{name}].tree = "{found}"'
            )
        return tree / source.subtree

    def subtree_id(self, name: str, source: GitSource) -> str:
        """The git tree id of the folder ``source.subtree`` at the source's commit (what
        `doit lock` records in ``tree``)."""
        return _folder_id(self.tree(name, source), name, source)

    def files(
        self, name: str, source: GitSource, paths: Iterable[str], dest: Path
    ) -> frozenset[str]:
        """Copy the files among ``paths`` of ``source`` at its commit into ``dest``; the
        paths that exist there, files or folders (a folder is only looked at, not copied)."""
        return copy(self.snapshot(name, source), paths, dest)

    def snapshot(self, name: str, source: GitSource) -> Files:
        """The files of ``source`` at its commit, to read: the complete tree when it is
        cached, else git's objects (``objects/<commit>``), each blob fetched when first read,
        and a submodule's (as the pin asks for them) when a path inside it is."""
        commit = _pinned(name, source)
        complete = self.cached(commit)
        if complete:
            return Checkout(complete)
        return self._snapshot(Origin(name, self.url(source), commit), source.submodules)

    def _snapshot(self, origin: Origin, submodules: bool) -> Snapshot:
        final = self.root / "objects" / origin.commit
        if not final.is_dir():
            build_dir(final, self.scratch, lambda work: self._partial(origin, work))

        def fetch(shas: list[str]) -> None:
            self._blobs(origin, final, shas)

        def open_(sub: Submodule) -> Files:
            return self._snapshot(origin.submodule_origin(sub, self.mirrors), True)

        return Snapshot(final, origin.commit, fetch, open_ if submodules else None)

    def _partial(self, origin: Origin, work: Path) -> None:
        """``origin``'s commit and its trees in ``work``, a new partial repository whose
        promisor is where they came from: no blob, unless the server ignores the filter
        (git warns, and sends them all)."""
        git("init", "--quiet", "--bare", cwd=work, timeout=60)
        objects.make_partial(work, origin.url)
        try:  # the commit alone, when the server allows it (GitHub does)
            git("fetch", "--quiet", "--depth=1", "--filter=blob:none", origin.url, origin.commit,
                cwd=work, timeout=self.timeout, env=objects.OFFLINE)  # fmt: skip
        except CommandFailed:
            self._fetch_all(origin, work, "--filter=blob:none", env=objects.OFFLINE)
        if origin.commit not in objects.present(work):
            raise origin.missing()

    def _blobs(self, origin: Origin, git_dir: Path, shas: list[str]) -> None:
        """The blobs ``shas`` fetched at once into ``git_dir``, from where its commit came."""
        try:
            git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                "--recurse-submodules=no", "--filter=blob:none", "--stdin", origin.url,
                cwd=git_dir, config={"fetch.negotiationAlgorithm": "noop"}, env=objects.OFFLINE,
                input_text="".join(f"{sha}\n" for sha in shas), timeout=self.timeout)  # fmt: skip
        except CommandFailed as exc:
            withheld = _NOT_OURS.search(exc.stderr)
            if withheld:  # a blob of a tree it sent: it lacks it (protocol v2 gives any it has)
                raise origin.damaged(f"object {withheld[1]}") from None
            raise origin.failed(exc) from None

    def _checkout(self, origin: Origin, work: Path) -> None:
        """``origin``'s commit checked out in ``work`` (an empty directory), no submodules."""
        work.mkdir(parents=True, exist_ok=True)  # a submodule's, as its superproject has it
        git("init", "--quiet", cwd=work, timeout=60)
        try:  # the commit alone, when the server allows it (GitHub does)
            git("fetch", "--quiet", "--depth=1", origin.url, origin.commit, cwd=work,
                timeout=self.timeout)  # fmt: skip
        except CommandFailed:
            self._fetch_all(origin, work)
        try:
            git("checkout", "--quiet", "--detach", origin.commit, cwd=work, timeout=600)
        except CommandFailed:
            raise origin.missing() from None
        head = git("rev-parse", "HEAD", cwd=work).strip()
        if head != origin.commit:  # cannot happen with a full id, unless the tree lies
            raise FetchError(f"source {origin.source}: checked out {head}, not {origin.commit}")

    def _submodules(self, origin: Origin, tree: Path) -> None:
        """Every submodule of ``tree``, at the commit the tree pins, recursively."""
        for sub in _submodules_of(tree):
            inner = origin.submodule_origin(sub, self.mirrors)
            self._checkout(inner, tree / sub.path)
            self._submodules(inner, tree / sub.path)

    def _fetch_all(
        self, origin: Origin, work: Path, *options: str, env: Mapping[str, str] | None = None
    ) -> None:
        """Branches and tags: for servers that refuse a fetch by id, or to name the failure."""
        try:
            git("fetch", "--quiet", *options, origin.url, "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*", cwd=work, timeout=self.timeout, env=env)  # fmt: skip
        except CommandFailed as exc:
            raise origin.failed(exc) from None

    def ls_remote(self, name: str, source: GitSource) -> dict[str, str]:
        """Upstream's refs (``refs/heads/main`` -> commit); a tag maps to the commit it tags."""
        url = self.url(source)
        try:
            out = git("ls-remote", url, timeout=300)
        except CommandFailed as exc:
            raise Origin(name, url, "").failed(exc, "list") from None
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
                raise FetchError(
                    f"{where}.tag {source.tag} does not exist in {self.url(source)}; fix "
                    f"{where}.tag, or pin a full id in {where}.commit"
                )
            return commit
        commit = refs.get(f"refs/heads/{source.branch}")
        if not commit:
            raise FetchError(
                f"{where}.branch {source.branch} does not exist in {self.url(source)}; fix "
                f"{where}.branch, or pin a full id in {where}.commit"
            )
        return commit

    def _expand(self, name: str, source: GitSource) -> str:
        """A short id that is no branch or tag tip: fetch the history and ask git."""
        with tempfile.TemporaryDirectory(prefix=owned(name), dir=self.scratch) as tmp:
            work = Path(tmp)
            git("init", "--quiet", "--bare", cwd=work, timeout=60)
            self._fetch_all(Origin(name, self.url(source), source.commit), work)
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


def _pinned(name: str, source: GitSource) -> str:
    """The pinned full commit id, or why there is none."""
    commit = source.commit
    where = f"source {name}: [sources.{name}].commit"
    if not commit:
        raise FetchError(f"{where} is empty (nothing pinned); run `doit lock` to pin one")
    if not FULL_COMMIT.fullmatch(commit):
        raise FetchError(
            f"{where} {commit} is a short id, which names no fixed commit; "
            "run `doit lock` to record the full 40-hex id"
        )
    return commit


def tree_id(
    repo: Path,
    folder: str,
    commit: str = "HEAD",
    *,
    ceiling: Path | None = None,
    timeout: float = 60,
) -> str | None:
    """The git tree id of ``folder`` at ``commit`` of the repository ``repo``; for a submodule
    there, the commit it pins, which fixes its files as a tree id does; None if it has no
    such folder."""
    try:
        out = git("ls-tree", "-d", "-z", commit, "--", folder, cwd=repo, ceiling=ceiling,
                  timeout=timeout)  # fmt: skip
    except CommandFailed:
        return None
    for entry in out.split("\0"):  # "<mode> <type> <id>\t<path>": the folder's own entry
        mode_type_id, _, path = entry.partition("\t")
        fields = mode_type_id.split()
        if path == folder and fields[1:2] in (["tree"], ["commit"]):
            return fields[2]
    return None


def _folder_id(tree: Path, name: str, source: GitSource) -> str:
    found = tree_id(tree, source.subtree, ceiling=tree.parent)
    if found is None:
        raise FetchError(
            f"source {name}: {source.commit[:12]} has no folder {source.subtree}/; fix "
            f"[sources.{name}].subtree"
        )
    return found


def _declared(tree: Path, name: str, folder: str) -> None:
    """Refuse a submodule in ``folder`` that the root's .gitmodules does not declare: it is
    checked out empty, and a later .gitmodules (outside the folder, so no part of its tree
    id) would fill it under the same key."""
    out = git("ls-tree", "-r", "-z", "HEAD", "--", folder, cwd=tree, ceiling=tree.parent,
              timeout=60)  # fmt: skip
    links = {
        path for mode_type_id, _, path in (e.partition("\t") for e in out.split("\0") if e)
        if mode_type_id.split()[1:2] == ["commit"]
    }  # fmt: skip
    missing = sorted(links - {sub.path for sub in _submodules_of(tree)})
    if missing:
        raise FetchError(
            f"source {name}: {missing[0]} in {folder}/ is a submodule .gitmodules does not "
            f"declare, so it would be checked out empty; pin a commit whose .gitmodules "
            f"declares it, or remove [sources.{name}].subtree to build the whole tree"
        )


def _submodules_of(tree: Path) -> list[Submodule]:
    """The submodules ``.gitmodules`` declares and the tree pins (a stale entry is skipped)."""
    if not (tree / ".gitmodules").is_file():
        return []
    try:
        out = git("config", "--file", ".gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$",
                  cwd=tree, timeout=60)  # fmt: skip
    except CommandFailed:  # exit 1: no entries
        return []
    found = []
    for path, url in paths_and_urls(out).items():
        listed = git("ls-tree", "HEAD", "--", path, cwd=tree, timeout=60).split()
        if listed[:2] == ["160000", "commit"]:  # mode, type, id, path: a gitlink
            found.append(Submodule(path, url, listed[2]))
    return sorted(found, key=lambda sub: sub.path)


def _join(base: str, relative: str) -> str:
    """A relative submodule URL read against its superproject's URL, as git reads it."""
    base = base.rstrip("/")
    while True:
        if relative.startswith("./"):
            relative = relative[2:]
        elif relative.startswith("../"):
            relative = relative[3:]
            base = base.rsplit("/", 1)[0]
        else:
            return f"{base}/{relative}"


_REASONS = (  # git's words (which carry timings and ports) -> a stable reason
    (("Failed to connect", "Couldn't connect", "Connection refused"), "connection refused"),
    (("Could not resolve host",), "host not found"),
    (("timed out", "Timeout"), "timed out"),
    (("early EOF", "transfer closed", "RPC failed", "unexpected disconnect"),
     "the connection was dropped during the transfer"),
    (("error: 404", "not found", "does not appear to be a git repository", "does not exist"),
     "no repository there"),
)  # fmt: skip


# git's words for an object the repository it reads should hold and does not (git 2.39):
# upload-pack's "unable to read <id>" and "bad tree object <id>" (a local, file:// or smart
# HTTP copy), a checkout's "unable to read sha1 file of <path> (<id>)", fsck's "missing
# blob <id>", rev-list's "Could not read <id>".
_OBJECT_ID = r"\(?([0-9a-f]{40}(?:[0-9a-f]{24})?)\b"
_UNREADABLE = re.compile(
    r"(?:unable to read(?: sha1 file of .*?)?|bad (?:\w+ )?object|missing \w+|Could not read) "
    + _OBJECT_ID
)
# ... and the ones that name no object.
_DAMAGED = ("possible repository corruption", "did not send all necessary objects")
# upload-pack's words for an object asked for by id that it does not give.
_NOT_OURS = re.compile(r"not our ref " + _OBJECT_ID)
# Dumb HTTP says "Unable to find <id> under <url>" for an object missing there, and for
# one in a pack whose transfer was cut: damage only when the transfer itself went well.
_NOT_UNDER = re.compile(r"Unable to find " + _OBJECT_ID)


def unreadable(exc: CommandFailed) -> str | None:
    """What a failed git command could not read from a damaged repository ("object <id>",
    or "some of its objects" where git names none); None for any other failure. Checked
    before ``git_reason``: a server that dies on a missing object also drops the transfer."""
    found = _UNREADABLE.search(exc.stderr)
    if found is None and _network(exc.stderr) is None:
        found = _NOT_UNDER.search(exc.stderr)
    if found:
        return f"object {found[1]}"
    if any(needle in exc.stderr for needle in _DAMAGED):
        return "some of its objects"
    return None


def git_reason(exc: CommandFailed) -> str:
    """A stable reason for a failed git command (git's own words carry timings and ports)."""
    reason = _network(exc.stderr)
    if reason is not None:
        return reason
    lines = [line.strip() for line in exc.stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else f"exit code {exc.returncode}"


def _network(stderr: str) -> str | None:
    for needles, reason in _REASONS:
        if any(needle in stderr for needle in needles):
            return reason
    return None


def _intact(name: str, tree: Path, commit: str) -> bool:
    """Whether a cached tree is still its commit: HEAD is the commit and git sees nothing
    changed, added or removed, in submodules too. The cache trusts no path name: a tree
    that differs (a hand, a disk) is removed, with one warning, and the caller fetches it
    again. About 0.1 s for vLLM's tree; only builds ask, never a no-op."""
    try:
        head = git("rev-parse", "HEAD", cwd=tree, ceiling=tree.parent).strip()
        # --no-optional-locks: two builds may check one tree at once (so git never stores
        # what it reads); trustctime off: a context's hard link moves a file's ctime, and
        # git would read every linked file again at each look
        status = ("-c", "core.trustctime=false", "--no-optional-locks", "status",
                  "--porcelain", "--untracked-files=all", "--ignore-submodules=none")  # fmt: skip
        changed = git(*status, cwd=tree, ceiling=tree.parent).splitlines()
    except CommandFailed:
        head, changed = "", ["(git cannot read it)"]
    if head == commit and not changed:
        return True
    shown = ", ".join(line[3:] if line[2:3] == " " else line for line in changed[:3])
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    print(
        f"warning: the cached tree of source {name} at {commit[:12]} ({tree}) differs from "
        f"its commit ({shown or f'HEAD is {head[:12]}'}{more}); fetching it again",
        file=sys.stderr,
    )
    shutil.rmtree(tree)
    return False
