"""pins.toml, parsed once into frozen dataclasses.

The schema is the dataclasses below: each field's annotation gives the TOML
type and its ``kind`` metadata the value check. One generic loader walks them,
so every table gets the same treatment: unknown keys are refused with a
suggestion, missing keys and wrong types are named with their ``[table].key``,
and every string is checked so that it cannot reach a shell unquoted. A list
is a set (sorted, so its order never feeds a key) unless its field says
``ordered`` (patches: a later one sees the earlier ones applied); an integer
has the bounds its field declares.

After loading, nothing downstream sees TOML: stages read typed pins, and keys
read the flat ``path -> value`` view that ``leaves`` yields.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import graphlib
import json
import posixpath
import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli  # not 3.11's tomllib: its errors give no line and column (3.14 adds them)
from packaging.utils import canonicalize_name

from rocmgraph.common.errors import PinsError, cut, shown
from rocmgraph.common.spelling import suggest
from rocmgraph.config import kinds
from rocmgraph.config.kinds import Kind
from wheelfiles.names import PLATFORMS, Misfit, WheelName, interpreter

PinPath = tuple[str, ...]
Scalar = str | int | bool
Value = Scalar | tuple[str, ...]


def _kind(
    kind: Kind,
    key_kind: Kind | None = None,
    default: Any = dataclasses.MISSING,
    *,
    location: bool = False,
    ordered: bool = False,
    example: str = "",
) -> Any:
    """A dataclass field whose strings (values, items, mapping values) are of ``kind``.

    A ``location`` says where to fetch something, or what upstream calls it, whose
    content another pin fixes (a mirror, an index URL beside a sha256; a source's
    repository, branch and tag beside its commit): it never feeds a key. An
    ``ordered`` list keeps the order written (and so feeds it to keys); other
    lists are sets. A list with an ``example`` must not be empty.
    """
    meta = {
        "kind": kind,
        "key_kind": key_kind or kinds.NAME,
        "location": location,
        "ordered": ordered,
        "example": example,
    }
    if isinstance(default, (tuple, Mapping)):
        frozen = default if isinstance(default, tuple) else types.MappingProxyType(dict(default))
        return field(default_factory=lambda: frozen, metadata=meta)
    return field(default=default, metadata=meta)


def _bounded(low: int, high: int, why: str, default: Any = dataclasses.MISSING) -> Any:
    """An integer field from ``low`` to ``high``; ``why`` explains the bounds to the user."""
    return field(default=default, metadata={"bounds": (low, high), "why": why})


@dataclass(frozen=True, kw_only=True)
class ImageSpec:
    """The final image: its friendly name and what its manifest and labels say."""

    name: str = _kind(kinds.IMAGE_NAME)  # tags <name>/<stage>:<key> and <name>:<archs>
    version: str = _kind(kinds.TEXT)  # this project's label; the manifest says commit_tag=
    source: str = _kind(kinds.URL)
    released: str = _kind(kinds.optional(kinds.DATE), default="")  # docs/versions.md's release
    cmd: tuple[str, ...] = _kind(kinds.TEXT, default=("/bin/bash",), ordered=True)
    workdir: str = _kind(kinds.optional(kinds.ABS_PATH), default="")  # "": [base].workdir


@dataclass(frozen=True, kw_only=True)
class Build:
    """Build knobs."""

    archs: tuple[str, ...] = _kind(kinds.ARCH, example='"gfx942"')
    # The archs the source stages compile for whenever an image's archs are among them: the
    # images of any of their subsets then share each source build (hours of vLLM and
    # sgl-kernel) and differ from the prune stage up, at the price of code for the other
    # archs in their wheels. An image asking for an arch outside them compiles for its own
    # archs; empty: every image compiles for its own.
    source_archs: tuple[str, ...] = _kind(kinds.ARCH, default=(), example='"gfx942"')
    max_jobs: int = _bounded(1, 1024, "vLLM needs about 4 GiB per job")
    ccache_maxsize: str = _kind(kinds.SIZE, default="50G")
    # ccache's remote storage, shared by the machines that build (redis://host:6379): a
    # location, so a build that uses it makes the same image as one that does not.
    compile_cache: str = _kind(kinds.COMPILE_CACHE, default="", location=True)

    def compiled_for(self, archs: tuple[str, ...]) -> tuple[str, ...]:
        """The archs a source stage compiles for in an image of ``archs``."""
        if self.source_archs and set(archs) <= set(self.source_archs):
            return tuple(sorted(set(self.source_archs)))
        return archs


@dataclass(frozen=True, kw_only=True)
class Cache:
    """Where stage images are shared between machines: a location, never part of a key."""

    # Stage images are <registry>/<image name>/<stage>:<key> there; "": no shared cache.
    registry: str = _kind(kinds.optional(kinds.IMAGE_NAME), default="", location=True)


@dataclass(frozen=True, kw_only=True)
class KeyedRepo:
    """An apt repository the base image adds (deadsnakes, for Python 3.12 on Ubuntu 22.04),
    trusted by its own key, which is pinned by sha256 like the ROCm key."""

    url: str = _kind(kinds.URL)
    suite: str = _kind(kinds.NAME)
    components: tuple[str, ...] = _kind(kinds.NAME, example='"main"')
    key_url: str = _kind(kinds.FETCH_URL, location=True)  # the key is fixed by its sha256
    key_sha256: str = _kind(kinds.SHA256)


@dataclass(frozen=True, kw_only=True)
class Base:
    """The image everything starts from, pinned by digest."""

    image: str = _kind(kinds.IMAGE)
    digest: str = _kind(kinds.DIGEST)
    # Stages whose content the base image already carries (rocm/primus ships
    # ROCm and the torch stack): those stages only verify the pinned versions.
    provides: tuple[str, ...] = _kind(kinds.STAGE_NAME, default=())
    workdir: str = _kind(kinds.ABS_PATH, default="/workspace")
    repos: Mapping[str, KeyedRepo] = _kind(kinds.TEXT, default={})  # added before `apt`
    apt: tuple[str, ...] = _kind(kinds.APT_PACKAGE, default=())
    # Variables the base image sets itself that the graph's builds set too: the final image
    # keeps them, as any image built FROM the base does (rocm/primus sets DEBIAN_FRONTEND).
    keeps_env: tuple[str, ...] = _kind(kinds.ENV_NAME, default=())
    # apt installs the packages each one recommends too, as a plain `apt-get install` does.
    apt_recommends: bool = False


@dataclass(frozen=True, kw_only=True)
class AptRepo:
    """One apt source line: ``deb [signed-by=...] <url> <suite> <components>``."""

    url: str = _kind(kinds.URL)
    suite: str = _kind(kinds.NAME)
    components: tuple[str, ...] = _kind(kinds.NAME, example='"main"')


@dataclass(frozen=True, kw_only=True)
class Rocm:
    """ROCm from its apt repository."""

    version: str = _kind(kinds.TEXT)
    key_url: str = _kind(kinds.URL, location=True)  # the key is fixed by its sha256
    key_sha256: str = _kind(kinds.SHA256)
    pin_origin: str = _kind(kinds.NAME)
    # Python packages the ROCm install ships, pip-installed from their folders (amd_smi).
    pip: tuple[str, ...] = _kind(kinds.ABS_PATH, default=())
    # apt keeps a priority in 16 bits; 0 is no priority and below it apt never installs.
    pin_priority: int = _bounded(1, 32767, "an apt pin priority", default=600)
    repos: Mapping[str, AptRepo] = _kind(kinds.TEXT)
    packages: Mapping[str, str] = _kind(kinds.APT_VERSION, kinds.APT_PACKAGE)


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """A prebuilt wheel, pinned by exact file name and sha256."""

    index: str = _kind(kinds.URL, location=True)  # the file is fixed by name and sha256
    version: str = _kind(kinds.WHEEL_VERSION)
    file: str = _kind(kinds.WHEEL_FILE)
    sha256: str = _kind(kinds.SHA256)


@dataclass(frozen=True, kw_only=True)
class GitSource:
    """A git repository built from source at a pinned commit."""

    # Where it is fetched from and what upstream calls it are no inputs: the commit is the tree.
    repo: str = _kind(kinds.URL, location=True)
    mirror: str = _kind(kinds.MIRROR, default="", location=True)  # fetched from here instead
    branch: str = _kind(kinds.GIT_REF, location=True)  # the branch `doit bump` follows
    commit: str = _kind(kinds.COMMIT)
    tag: str = _kind(kinds.optional(kinds.GIT_REF), default="", location=True)  # upstream's
    version: str = _kind(kinds.SOURCE_VERSION, default="")
    # The distribution it installs, when not named like the source (flash_attention: flash_attn):
    # the image is checked to hold it at `version`.
    dist: str = _kind(kinds.optional(kinds.NAME), default="")
    submodules: bool = True
    # A folder of the tree built alone (SGLang's sgl-kernel/): its stage's context holds that
    # folder only, so its key covers the folder's git tree id, and the commit is only where
    # the folder is fetched from (a location: Pins.leaves). A commit that leaves the folder
    # alone rebuilds nothing of it; the id is checked wherever the folder is fetched.
    subtree: str = _kind(kinds.optional(kinds.SRC_PATH), default="")
    tree: str = _kind(kinds.TREE, default="")  # `git rev-parse <commit>:<subtree>`
    patches: tuple[str, ...] = _kind(kinds.REPO_FILE, default=(), ordered=True)
    # Build knobs for the generic source -> wheel recipe.
    requirements: tuple[str, ...] = _kind(kinds.SRC_PATH, default=())
    subdirs: tuple[str, ...] = _kind(kinds.SRC_PATH, default=(".",))
    arch_env: tuple[str, ...] = _kind(kinds.ENV_NAME, default=())
    env: Mapping[str, str] = _kind(kinds.TEXT, kinds.ENV_NAME, default={})
    # Files copied over others before the build (SGLang's ROCm pyproject): target = origin.
    overlay: Mapping[str, str] = _kind(kinds.SRC_PATH, kinds.SRC_PATH, default={})
    # Variables that get the pinned `version`: the tree comes without .git, so a
    # version setuptools_scm would read from git is given (vLLM's VLLM_VERSION_OVERRIDE,
    # SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>).
    version_env: tuple[str, ...] = _kind(kinds.ENV_NAME, default=())
    arch_separator: str = _kind(kinds.SEPARATOR, default="semicolon")  # in its arch_env
    keep_env: bool = False  # its env and arch_env stay in the runtime image, as verl's recipe
    # But these, which only its build is given (verl's 7.0.2 recipe sets GPU_ARCHS on
    # TransformerEngine's build line alone: in the image, aiter's JIT would read it).
    build_only_env: tuple[str, ...] = _kind(kinds.ENV_NAME, default=())
    workspace: str = _kind(kinds.optional(kinds.NAME), default="")  # tree at <workdir>/<this>
    # Trees its build is given instead of fetching them itself: variable -> "<source>/<path>",
    # the folder of that pinned source's tree in the context (vLLM's TRITON_KERNELS_SRC_DIR).
    inputs: Mapping[str, str] = _kind(kinds.SRC_PATH, kinds.ENV_NAME, default={})
    # Fetches its build makes that this image's build does not take, each with why (a
    # CUDA-only branch): `doit preflight` accounts for every fetch; no input of any build.
    skipped_fetches: Mapping[str, str] = _kind(kinds.REASON, kinds.FETCH, default={}, location=True)
    # Its dependencies upgraded to the newest they allow as it installs (pip's -U: verl's
    # 7.0.2 recipe installs mbridge so); the newest is what a closure lock records.
    upgrade: bool = False
    # How the assembled image installs the built wheels.
    install_deps: bool = True
    uninstall: tuple[str, ...] = _kind(kinds.NAME, default=())

    def same_checkout(self, other: GitSource) -> bool:
        """Whether ``other`` is pinned to this repository at this commit (SGLang and its
        sgl-kernel folder): however the URL is spelt, a short id or its full one."""
        mine, theirs = self.commit, other.commit
        return (
            # both left for `doit lock`, which records one commit of the one repository
            bool(mine) == bool(theirs)
            and (mine.startswith(theirs) or theirs.startswith(mine))
            and repository(self.repo) == repository(other.repo)
        )

    def leaf(self, knob: str, location: bool) -> bool | None:
        """Whether the pin ``knob`` is a location (no key input), or None when it is no pin
        of this source: a whole tree has no folder and no folder id (so no key moves for
        them), and a folder's commit is where it is fetched from, its tree id what it is."""
        if knob in SUBTREE_KNOBS and not self.subtree:
            return None
        return location or (knob == "commit" and bool(self.subtree))


@dataclass(frozen=True, kw_only=True)
class Python:
    """The interpreter, and the Python packages installed from PyPI by exact version."""

    version: str = _kind(kinds.PYTHON_VERSION)
    venv: str = _kind(kinds.ABS_PATH)
    # Where builds install Python packages from (a PyPI mirror for air-gapped
    # sites). It reaches pip as a build argument: a location, not a key input.
    index: str = _kind(kinds.URL, default="https://pypi.org/simple", location=True)
    tools: Mapping[str, str] = _kind(kinds.VERSION, default={})  # build tools, in base
    stack: Mapping[str, str] = _kind(kinds.VERSION, default={})  # verl's stack
    vllm: Mapping[str, str] = _kind(kinds.VERSION, default={})  # after vLLM, without deps
    sglang: Mapping[str, str] = _kind(kinds.VERSION, default={})  # with SGLang
    patches: Mapping[str, tuple[str, ...]] = _kind(kinds.REPO_FILE, default={}, ordered=True)
    # A package installed otherwise than its group installs: "deps" or "no-deps" (verl's 7.0.2
    # recipe puts megatron-bridge in with --no-deps and xgrammar with its dependencies).
    install: Mapping[str, str] = _kind(kinds.INSTALL_MODE, default={})

    def packages(self) -> Iterator[tuple[PinPath, str]]:
        """Every package pinned by version, with the path of its pin."""
        for group in ("stack", "vllm", "sglang", "tools"):
            for name, version in getattr(self, group).items():
                yield ("python", group, name), version


@dataclass(frozen=True, kw_only=True)
class Prune:
    """Where kernel files of archs outside the target set are removed."""

    dirs: tuple[str, ...] = _kind(
        kinds.PRUNE_DIR, default=("/opt/rocm/lib", "/opt/rocm/share/miopen")
    )


@dataclass(frozen=True, kw_only=True)
class Cleanup:
    """What the final image must not keep (build leftovers of the base): removed before the
    slim stage squashes, so the bytes really go, and again at the end of assemble."""

    paths: tuple[str, ...] = _kind(kinds.PATH_GLOB, default=())


# What only a source built from one folder of its tree has (SGLang's sgl-kernel/).
SUBTREE_KNOBS = ("subtree", "tree")

# Why an empty [sources.*].tree of a subtree is missing.
TREE_UNKNOWN = "the subtree's tree id is unknown; `doit lock` records it"

# Why an empty [wheels.*].file is missing when its version is empty too.
NO_VERSION_TO_FIND = (
    "exact wheel file unknown, and no version to find it by; pin the version "
    "(`doit lock` then finds the file) or the exact file"
)

# Why an empty [sources.*].version with a version_env is missing.
VERSION_FROM_GIT = (
    "its build reads its version from git, and the tree has no .git; "
    "pin the version upstream's tag at the commit gives"
)


@dataclass(frozen=True, kw_only=True)
class Pins:
    """Everything pins.toml pins, and the file it came from."""

    image: ImageSpec
    build: Build
    base: Base
    rocm: Rocm
    python: Python
    wheels: Mapping[str, Wheel] = _kind(kinds.TEXT, default={})
    sources: Mapping[str, GitSource] = _kind(kinds.TEXT, default={})
    env: Mapping[str, str] = _kind(kinds.TEXT, kinds.ENV_NAME, default={})
    # Symbolic links the final image needs: link -> target (site:<path> in site-packages).
    links: Mapping[str, str] = _kind(kinds.LINK_PATH, kinds.LINK_PATH, default={})
    prune: Prune = field(default_factory=Prune)
    cleanup: Cleanup = field(default_factory=Cleanup)
    cache: Cache = field(default_factory=Cache)
    # URL prefix -> replacement, for every git fetch (submodules too), like
    # git's insteadOf. VERL_GRAPH_MIRRORS adds to it from the environment.
    mirrors: Mapping[str, str] = _kind(kinds.MIRROR, kinds.URL, default={}, location=True)
    file: str = field(default="pins.toml", metadata={"toml": False})

    @property
    def manifest(self) -> str:
        """Where the image keeps its manifest (docker/manifest.Dockerfile.j2 writes it)."""
        return f"{self.base.workdir}/.manifest"

    def leaves(self) -> tuple[Leaf, ...]:
        """Every pinned value with its path and kind, in file-independent sorted order."""
        return self._leaves

    @functools.cached_property
    def _leaves(self) -> tuple[Leaf, ...]:  # the pins never change: walk them once
        return tuple(_leaves(self, ()))

    def flat(self) -> dict[PinPath, Value]:
        """What the pins fix (locations left out): the view keys are made of."""
        return dict(self._flat)

    @functools.cached_property
    def _flat(self) -> dict[PinPath, Value]:
        return {leaf.path: leaf.value for leaf in self._leaves if not leaf.location}

    def read(self, reads: tuple[PinPath, ...]) -> dict[PinPath, Value]:
        """The pins ``flat`` gives that lie under any of ``reads``, in its order: what a
        stage whose ``reads`` these are reads."""
        found: set[int] = set()
        for prefix in reads:
            found.update(self._under.get(prefix, ()))
        items = self._items
        return dict(items[index] for index in sorted(found))

    @functools.cached_property
    def _items(self) -> tuple[tuple[PinPath, Value], ...]:
        return tuple(self._flat.items())

    @functools.cached_property
    def _under(self) -> dict[PinPath, list[int]]:
        """Each prefix of a pin's path (the whole path and ``()`` included) -> the positions
        in ``flat`` of the pins under it: a stage's reads are looked up, not scanned for."""
        index: dict[PinPath, list[int]] = {}
        for position, path in enumerate(self._flat):
            for depth in range(len(path) + 1):
                index.setdefault(path[:depth], []).append(position)
        return index

    def missing(self) -> list[Missing]:
        """Values that cannot be known offline: empty, or a short commit id."""
        found = []
        for leaf in self.leaves():
            if leaf.kind is None or not leaf.kind.missing:
                continue
            if leaf.value == "":
                found.append(Missing(leaf.path, self._unknown(leaf.path, leaf.kind)))
            elif leaf.kind is kinds.COMMIT and len(str(leaf.value)) < 40:
                found.append(Missing(leaf.path, "short commit id; `doit lock` records the full id"))
        for name, source in self.sources.items():
            if source.version_env and not source.version:
                found.append(Missing(("sources", name, "version"), VERSION_FROM_GIT))
            if source.subtree and not source.tree:
                found.append(Missing(("sources", name, "tree"), TREE_UNKNOWN))
        return found

    def _unknown(self, path: PinPath, kind: Kind) -> str:
        """Why the empty value at ``path`` is missing: its kind's reason, but a wheel's file
        that `doit lock` has no version to find by is the user's to pin."""
        if kind is kinds.WHEEL_FILE and not self.wheels[path[1]].version:
            return NO_VERSION_TO_FIND
        return kind.missing


@dataclass(frozen=True)
class Leaf:
    path: PinPath
    value: Value
    kind: Kind | None
    location: bool = False
    ordered: bool = False  # a list whose order is part of the value


@dataclass(frozen=True)
class Missing:
    path: PinPath
    why: str

    def __str__(self) -> str:
        return f"{format_path(self.path)} ({self.why})"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_path(path: PinPath, *, whole: bool = False) -> str:
    """``("sources", "vllm", "commit")`` -> ``[sources.vllm].commit``: for a message, each
    name cut as messages cut what they quote; ``whole``: every name whole (a key's inputs,
    where two long names cut alike must not become one)."""
    if len(path) == 1:
        return _toml_key(path[0], whole)
    table = ".".join(_toml_key(part, whole) for part in path[:-1])
    return f"[{table}].{_toml_key(path[-1], whole)}"


def format_table(path: PinPath) -> str:
    return "[" + ".".join(_toml_key(part) for part in path) + "]"


@functools.lru_cache(maxsize=4096)  # every key names its pins: the same few hundred names
def _toml_key(part: str, whole: bool = False) -> str:
    """A key as TOML writes it: bare when it can be, else a quoted, escaped basic string."""
    text = part if _BARE_KEY.fullmatch(part) else json.dumps(part)  # escaped as TOML does
    return text if whole else cut(text)


# ---------------------------------------------------------------- loading


def load(path: str | Path) -> Pins:
    """Read and validate a pins file; any problem is one PinsError line."""
    shown_path = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise PinsError(shown_path, "", "no such file", "pass pins=<path> to a pins file") from None
    except OSError as exc:
        raise PinsError(
            shown_path, "", f"cannot be read ({exc.strerror or exc})", "check the file"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PinsError(
            shown_path,
            f"line {line}",
            f"is not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})",
            "save the file as UTF-8",
        ) from None
    return loads(text, shown_path)


def loads(text: str, file: str = "pins.toml") -> Pins:
    pins: Pins = dataclasses.replace(_Loader(file).table(Pins, _parse(text, file), ()), file=file)
    _check_relations(pins)
    return pins


# Byte order mark: some Windows editors write it. tomli refuses it, and so does tomlkit,
# which `doit lock` and `doit bump` rewrite the file with: accepting it here would only
# move the failure to the first rewrite. Say what it is instead of "Invalid statement".
_BOM = "\ufeff"


def _parse(text: str, file: str) -> dict[str, Any]:
    if text.startswith(_BOM):
        raise PinsError(
            file,
            "line 1, column 1",
            "starts with a UTF-8 byte order mark (BOM), which TOML does not allow",
            "save the file as UTF-8 without a byte order mark",
        )
    try:
        return tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise PinsError(
            file,
            f"line {exc.lineno}, column {exc.colno}",
            f"invalid TOML: {cut(exc.msg)}",  # it may quote a key of thousands of characters
            "fix the syntax at that position",
        ) from None
    except RecursionError:  # tomli refuses inline arrays and tables nested 400 deep
        raise PinsError(
            file,
            f"line {_deepest_line(text)}",
            "invalid TOML: arrays or inline tables nested too deep",
            "flatten the value (pins nest at most a few levels)",
        ) from None
    except ValueError:  # int() refuses integers of more than 4300 digits; TOML's are 64-bit
        where = _long_number_line(text)
        raise PinsError(
            file,
            f"line {where}" if where else "",
            "invalid TOML: an integer of thousands of digits",
            "write an integer that fits in 64 bits",
        ) from None


def _deepest_line(text: str) -> int:
    """The line where arrays and inline tables nest deepest (tomli does not say where).

    A scan, not a parser: it skips strings and comments and counts brackets, which is
    exact for the valid TOML that comes before the place tomli gave up.
    """
    depth = deepest = 0
    line = found = 1
    at, quote = 0, ""
    while at < len(text):
        char = text[at]
        if quote:  # inside a string: look only for its end
            if text.startswith(quote, at):
                at, quote = at + len(quote), ""
                continue
            if char == "\\" and quote[0] == '"':  # an escape: skip the escaped character
                line += text[at + 1 : at + 2] == "\n"
                at += 2
                continue
        elif char == "#":
            end = text.find("\n", at)
            at = len(text) if end < 0 else end
            continue
        elif char in "\"'":
            quote = char * 3 if text.startswith(char * 3, at) else char
            at += len(quote)
            continue
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, found = depth, line
        elif char in "]}":
            depth -= 1
        line += char == "\n"
        at += 1
    return found


def _long_number_line(text: str) -> int | None:
    """The line of the first value that is a run of thousands of digits, if any."""
    match = re.search(r"[=,\[]\s*[+-]?(0[xob])?[0-9a-fA-F_]{4000,}", text)
    return text.count("\n", 0, match.start()) + 1 if match else None


class _Loader:
    """Turns TOML tables into the dataclasses above, one error per problem."""

    def __init__(self, file: str) -> None:
        self.file = file

    def error(self, where: str, problem: str, fix: str) -> PinsError:
        return PinsError(self.file, where, problem, fix)

    def table(self, cls: type[Any], data: object, path: PinPath) -> Any:
        if not isinstance(data, dict):
            where = format_path(path) if path else "top level"
            raise self.error(where, "expected a table", f"write it as {format_table(path)}")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("toml", True)}
        for key in data:
            if key not in fields:
                names = sorted(fields)
                hint = suggest(key, names)
                where = format_table(path) if path else "top level"
                raise self.error(
                    f"{where}",
                    f"unknown key {shown(key)}",
                    f"{hint}known keys: {', '.join(names)}",
                )
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for name, spec in fields.items():
            if name not in data:
                if (
                    spec.default is dataclasses.MISSING
                    and spec.default_factory is dataclasses.MISSING
                ):
                    raise self.error(
                        format_path((*path, name)),
                        "missing",
                        f"add `{name} = ...` to {format_table(path) if path else 'the file'}",
                    )
                continue
            values[name] = self.value(hints[name], spec.metadata, data[name], (*path, name))
        return cls(**values)

    def value(self, hint: Any, meta: Mapping[str, Any], data: object, path: PinPath) -> Any:
        origin = typing.get_origin(hint)
        if dataclasses.is_dataclass(hint):
            return self.table(typing.cast(type[Any], hint), data, path)
        if hint is bool:
            return self.typed(data, bool, "true or false", path)
        if hint is int:
            return self.integer(meta, data, path)
        if hint is str:
            return self.string(data, meta["kind"], path)
        if origin is tuple:
            return self.array(meta, data, path)
        if origin is Mapping:
            return self.mapping(typing.get_args(hint)[1], meta, data, path)
        raise TypeError(f"pins schema: unsupported annotation {hint!r}")  # a bug, not input

    def integer(self, meta: Mapping[str, Any], data: object, path: PinPath) -> int:
        if isinstance(data, bool):
            raise self.type_error(data, "an integer", path)
        number: int = self.typed(data, int, "an integer", path)
        low, high = meta["bounds"]  # every integer pin has bounds (TOML's alone are 64-bit)
        if not low <= number <= high:
            raise self.error(
                format_path(path),
                f"{shown(number)} is out of range",
                f"write an integer from {low} to {high} ({meta['why']})",
            )
        return number

    def array(self, meta: Mapping[str, Any], data: object, path: PinPath) -> tuple[str, ...]:
        items = self.typed(data, list, "an array", path)
        if not items and meta["example"]:
            raise self.error(
                format_path(path),
                "lists nothing",
                f"list at least one, e.g. {_toml_key(path[-1])} = [{meta['example']}]",
            )
        checked = [self.string(item, meta["kind"], path) for item in items]
        seen: set[str] = set()
        for item in checked:
            if item in seen:
                raise self.error(
                    format_path(path), f"lists {shown(item)} twice", "list each value once"
                )
            seen.add(item)
        # A set is sorted here, so its order never feeds a key; an ordered list (patches,
        # applied one after the other) keeps the order written, and its keys follow it.
        return tuple(checked) if meta["ordered"] else tuple(sorted(checked))

    def mapping(self, inner: Any, meta: Mapping[str, Any], data: object, path: PinPath) -> Any:
        if not isinstance(data, dict):
            raise self.error(
                format_path(path), "expected a table", f"write it as {format_table(path)}"
            )
        result = {}
        for key in sorted(data):
            key_kind: Kind = meta["key_kind"]
            problem = kinds.unsafe_problem(key) or key_kind.problem(key)
            if problem:
                raise self.error(format_table(path), f"key {problem}", key_kind.fix_for(key))
            result[key] = self.value(inner, meta, data[key], (*path, key))
        return types.MappingProxyType(result)

    def string(self, data: object, kind: Kind, path: PinPath) -> str:
        value: str = self.typed(data, str, "a string", path)
        unsafe = kinds.unsafe_problem(value, kind.extra)
        if unsafe:
            raise self.error(format_path(path), unsafe, f"use only {kinds.SAFE_CHARS}")
        problem = kind.problem(value)
        if problem:
            raise self.error(format_path(path), problem, kind.fix_for(value))
        return value

    def typed(self, data: object, expected: type, what: str, path: PinPath) -> Any:
        if not isinstance(data, expected):
            raise self.type_error(data, what, path)
        return data

    def type_error(self, data: object, what: str, path: PinPath) -> PinsError:
        got = _toml_type(data)
        return self.error(
            format_path(path), f"expected {what}, got {got} {shown(data)}", f"write {what}"
        )


def _toml_type(data: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
             list: "an array", dict: "a table", datetime.date: "a date",
             datetime.datetime: "a date-time", datetime.time: "a time"}  # fmt: skip
    return names.get(type(data), type(data).__name__)


def _check_relations(pins: Pins) -> None:
    """Rules beyond one field's kind."""
    # Which stages a base can provide, and which sources exist: Graph.check knows them.
    for name, source in pins.sources.items():
        if source.subtree:
            _check_subtree(pins.file, name, source)
        if source.tree and not source.subtree:
            raise PinsError(
                pins.file,
                format_path(("sources", name, "tree")),
                f"is the tree id of a subtree, but [sources.{name}].subtree names none",
                "set subtree to the folder it is the id of, or remove tree",
            )
    _check_workspaces(pins)
    _check_inputs(pins)
    _check_links(pins)
    for table, env in [(("env",), pins.env)] + [
        (("sources", name, "env"), source.env) for name, source in pins.sources.items()
    ]:
        if "PYTORCH_ROCM_ARCH" in env:  # one arch set for the whole image, named apart
            raise PinsError(
                pins.file,
                format_path((*table, "PYTORCH_ROCM_ARCH")),
                "is set from the arch set the image is built for, not pinned",
                "remove it; choose the archs with arch= or [build].archs",
            )
    _check_packages(pins)
    stack = {canonicalize_name(name): name for name in pins.python.stack}
    for package in pins.python.patches:
        spelt = stack.get(canonicalize_name(package))
        if spelt is None:
            raise PinsError(
                pins.file,
                format_table(("python", "patches")),
                f"patches {shown(package)}, which [python.stack] does not install",
                f"pin {cut(package)} in [python.stack] or remove its patches",
            )
        if spelt != package:  # one name for one package, where the tools look it up
            raise PinsError(
                pins.file,
                format_table(("python", "patches")),
                f"patches {shown(package)}, which [python.stack] pins as {shown(spelt)}",
                f"spell it {cut(spelt)}, as [python.stack] does",
            )
    for name, wheel in pins.wheels.items():
        parsed = WheelName.parse(wheel.file)  # None for "": not locked yet
        misfit = parsed.misfit(name, wheel.version, pins.python.version) if parsed else None
        if misfit:
            problem, fix = _misfit_text(misfit, name, wheel.version, pins.python.version)
            raise PinsError(
                pins.file,
                format_path(("wheels", name, "file")),
                f"{shown(wheel.file)} {problem}",
                fix,
            )


def _check_packages(pins: Pins) -> None:
    """Each Python package pinned once, however it is spelt: pip reads megatron-core and
    megatron_core as one package, and would be given two versions of it."""
    seen: dict[str, PinPath] = {}
    for path, _ in pins.python.packages():
        first = seen.setdefault(canonicalize_name(path[-1]), path)
        if first != path:
            raise PinsError(
                pins.file,
                format_path(path),
                f"pins the package {format_path(first)} pins already (pip reads "
                f"{shown(first[-1])} and {shown(path[-1])} as one)",
                "pin each package once",
            )
    for name in pins.python.install:
        if not any(name in getattr(pins.python, group) for group in ("stack", "vllm", "sglang")):
            raise PinsError(
                pins.file,
                format_path(("python", "install", name)),
                "names no package of [python.stack], [python.vllm] or [python.sglang]",
                "name a pinned package, spelt as its group spells it",
            )


def repository(url: str) -> str:
    """A repository URL as one name for it: `.../sglang`, `.../sglang.git/`, `.../SGLang`."""
    return url.rstrip("/").removesuffix(".git").lower()


def _check_workspaces(pins: Pins) -> None:
    """Sources that share a workspace folder are one checkout: their trees meet there (SGLang's,
    then its sgl-kernel/ over it), and two commits would mix files of both."""
    first: dict[str, str] = {}
    whole_first = sorted(pins.sources.items(), key=lambda item: bool(item[1].subtree))
    for name, source in whole_first:
        if not source.workspace:
            continue
        other = first.setdefault(source.workspace, name)
        if other == name or source.same_checkout(pins.sources[other]):
            continue
        if bool(source.commit) != bool(pins.sources[other].commit):
            pinned, empty = (name, other) if source.commit else (other, name)
            raise PinsError(
                pins.file,
                format_path(("sources", name, "commit")),
                f"shares workspace {shown(source.workspace)} with [sources.{other}], and "
                f"[sources.{pinned}] pins a commit where [sources.{empty}] leaves it empty",
                "pin both to one commit, or leave both empty for `doit lock`",
            )
        raise PinsError(
            pins.file,
            format_path(("sources", name, "commit")),
            f"shares workspace {shown(source.workspace)} with [sources.{other}], but not "
            "its repository and commit, so the two trees would mix there",
            f"pin [sources.{other}]'s commit here (`doit bump:{other}` moves both)",
        )


def _check_inputs(pins: Pins) -> None:
    """A tree given to a build is a folder of another pinned source's tree."""
    for name, source in pins.sources.items():
        for variable, path in source.inputs.items():
            given = path.split("/", 1)[0]
            if given == name or given not in pins.sources:
                others = ", ".join(sorted(set(pins.sources) - {name}))
                raise PinsError(
                    pins.file,
                    format_path(("sources", name, "inputs", variable)),
                    f"{shown(path)} is not in the tree of another pinned source",
                    f"write <source>/<path in its tree>, the source one of: {others}",
                )


def _check_links(pins: Pins) -> None:
    """No ring of links: a link whose target is another link, or lies under one, goes on
    through it, and a ring never ends (the image's first import through it fails, ELOOP)."""
    folders = _Folder()
    for link in pins.links:
        folders.add(link)
    through = {link: folders.links_on(target) for link, target in pins.links.items()}
    try:
        graphlib.TopologicalSorter(through).prepare()
    except graphlib.CycleError as exc:
        cycle = reversed(exc.args[1])  # graphlib lists it target -> link
        raise PinsError(
            pins.file,
            "[links]",
            f"has a cycle (link -> target): {cut(' -> '.join(cycle))}",
            "point one of them at a path that is no link and lies under none",
        ) from None


@dataclass
class _Folder:
    """Link paths as a tree of their parts: which links a path passes on its way down, in
    one step per part (not a comparison with every link)."""

    link: str = ""  # the link that ends here
    under: dict[str, _Folder] = field(default_factory=dict)

    def add(self, link: str) -> None:
        folder = self
        for part in link.split("/"):
            folder = folder.under.setdefault(part, _Folder())
        folder.link = link

    def links_on(self, path: str) -> list[str]:
        """The links that ``path`` is, or lies under."""
        found: list[str] = []
        folder = self
        for part in path.split("/"):
            if part not in folder.under:
                break
            folder = folder.under[part]
            if folder.link:
                found.append(folder.link)
        return found


def _check_subtree(file: str, name: str, source: GitSource) -> None:
    """A folder built alone is one plain folder, and what its build names lies inside it:
    its key covers that folder's tree and nothing else of the source."""
    folder = source.subtree
    if folder in (".", "") or posixpath.normpath(folder) != folder:
        raise PinsError(
            file,
            format_path(("sources", name, "subtree")),
            f"{shown(folder)} is not one folder of the tree",
            'name the folder as git does, e.g. "sgl-kernel" (no ".", no trailing "/")',
        )
    named = [("subdirs", path) for path in source.subdirs]
    named += [("requirements", path) for path in source.requirements]
    named += [("overlay", path) for pair in source.overlay.items() for path in pair]
    for knob, path in named:
        if path != folder and not path.startswith(f"{folder}/"):
            raise PinsError(
                file,
                format_path(("sources", name, knob)),
                f"{shown(path)} lies outside its subtree {shown(folder)}, which is all its "
                "build gets",
                f"name a path under {folder}/, or build that path in another source",
            )


def _misfit_text(misfit: Misfit, name: str, version: str, python: str) -> tuple[str, str]:
    """What is wrong with a pinned wheel file, and what to pin instead (every part cut, as
    it may be long)."""
    name, found, version = cut(name), cut(misfit.found), cut(version)
    if misfit.part == "project":
        return (
            f"is a wheel of {found}, not of {name}",
            f"pin a {name} wheel here, or this one in [wheels.{found}]",
        )
    if misfit.part == "version":
        return (
            f"is {name} {found}, but [wheels.{name}].version is {version}",
            f'pin a file of {version}, or set version = "{cut(misfit.fitting)}"',
        )
    if misfit.part == "python":
        return (
            f"is for {found}, but [python].version is {python}",
            f"pin the {interpreter(python)} build",
        )
    return f"is for {found}, not linux x86_64", f"pin a {PLATFORMS} build"


# ---------------------------------------------------------------- flat view


def _leaves(
    node: object,
    path: PinPath,
    kind: Kind | None = None,
    location: bool = False,
    ordered: bool = False,
) -> Iterator[Leaf]:
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for spec in dataclasses.fields(node):
            if not spec.metadata.get("toml", True):
                continue
            where = spec.metadata.get("location", False)
            pinned = node.leaf(spec.name, where) if isinstance(node, GitSource) else where
            if pinned is None:
                continue
            yield from _leaves(
                getattr(node, spec.name),
                (*path, spec.name),
                spec.metadata.get("kind"),
                pinned,
                spec.metadata.get("ordered", False),
            )
    elif isinstance(node, Mapping):
        for key in sorted(node):
            yield from _leaves(node[key], (*path, key), kind, location, ordered)
    else:
        yield Leaf(path, typing.cast(Value, node), kind, location, ordered)


def is_under(path: PinPath, reads: tuple[PinPath, ...]) -> bool:
    """Whether ``path`` lies under one of ``reads`` (whole segments, not string prefixes)."""
    return any(path[: len(read)] == read for read in reads)
