"""Value kinds of pins.toml: what a string may hold, and what to write instead.

A kind checks one string and returns the problem (or None), and says how to
fix it. Kinds that allow ``missing`` accept "" for a value that cannot be known
offline; the plan lists those and ``doit lock`` fills them.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, unquote, urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from rocmgraph.common.errors import shown
from rocmgraph.config.archs import KNOWN_ARCHS, unknown_arch_hint

# Characters a value may hold so that, even pasted into a RUN line unquoted,
# it stays one word and runs nothing.
_SAFE = re.compile(r"[A-Za-z0-9._:/@%+=,~^-]*")
SAFE_CHARS = "letters, digits and . _ : / @ % + = , ~ ^ -"

Check = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Kind:
    """One kind of pinned string value."""

    name: str
    check: Check
    fix: str | Callable[[str], str]  # what to write instead (may depend on the value)
    missing: str = ""  # why "" is allowed (unknown offline); empty: "" is invalid
    optional: bool = False  # "" means "not set" (a mirror nobody configured)
    # Characters it may hold beyond the safe ones: * and ? in a path pattern (the shell
    # expands it on purpose), ? and & in a URL only the host fetches (never in a recipe).
    extra: str = ""

    def fix_for(self, value: str) -> str:
        return self.fix(value) if callable(self.fix) else self.fix

    def problem(self, value: str) -> str | None:
        if value == "":
            return None if self.missing or self.optional else "must not be empty"
        return self.check(value)


_LISTED = 10  # characters an unsafe-value message names at most


def unsafe_problem(value: str, extra: str = "") -> str | None:
    """Characters that could reach a shell unquoted, checked before any kind (``extra``: the
    few more a kind allows, see Kind.extra)."""
    if _SAFE.fullmatch(value.translate({ord(c): None for c in extra})):
        return None
    bad = sorted({c for c in set(value) if not _SAFE.fullmatch(c) and c not in extra})
    listed = " ".join(repr(c) for c in bad[:_LISTED])
    more = f" and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return f"{shown(value)} has characters that could reach a shell unquoted: {listed}{more}"


def _regex(pattern: str, what: str) -> Check:
    compiled = re.compile(pattern)

    def check(value: str) -> str | None:
        return None if compiled.fullmatch(value) else f"{shown(value)} is not {what}"

    return check


def _commit(value: str) -> str | None:
    if not re.fullmatch(r"[0-9a-fA-F]+", value):
        return f"{shown(value)} is not a git commit id (hex digits only)"
    if value != value.lower():
        return f"{shown(value)} is not a git commit id (lowercase hex only)"
    if not 7 <= len(value) <= 40:
        return f"{shown(value)} is not a git commit id (7 to 40 hex digits)"
    return None


@dataclass(frozen=True)
class _Verdict:
    problem: str
    fix: str


_URL_FIX = "use https://, or http://127.0.0.1 for a loopback mirror"


def _url_verdict(value: str) -> _Verdict | None:
    try:
        parts = urlsplit(value)
    except ValueError:  # a bracketed host that is no IPv6 address
        return _Verdict(f"{shown(value)} is not a URL (its host cannot be read)", _URL_FIX)
    if parts.username is not None or parts.password is not None:
        return _Verdict(
            f"{shown(value)} has credentials in it",
            "keep them out of the pins file: use docker's config or ~/.netrc",
        )
    if not _port_ok(parts):
        return _Verdict(
            f"{shown(value)} has no valid port", "write a port from 1 to 65535, or none"
        )
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return None
    return _Verdict(
        f"{shown(value)} is not an https URL (plain http is allowed for loopback mirrors only)",
        _URL_FIX,
    )


def _port_ok(parts: SplitResult) -> bool:
    try:
        port = parts.port  # ValueError: not a number, or above 65535
    except ValueError:
        return False
    return port != 0


def _url(value: str) -> str | None:
    verdict = _url_verdict(value)
    return verdict.problem if verdict else None


def _url_fix(value: str) -> str:
    verdict = _url_verdict(value)
    return verdict.fix if verdict else _URL_FIX


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _version(value: str) -> str | None:
    try:
        Version(value)
    except InvalidVersion:
        return f"{shown(value)} is not a PEP 440 version"
    return None


def _wheel_file(value: str) -> str | None:
    try:
        parse_wheel_filename(value)
    except InvalidWheelFilename:
        return f"{shown(value)} is not a wheel file name (<name>-<version>-<tags>.whl)"
    return None


def _arch(value: str) -> str | None:
    return None if value in KNOWN_ARCHS else f"{shown(value)} is not a known GPU architecture"


NAME_MAX = 255  # bytes in one part of a path: what Linux's file systems hold
# What a file named after a pinned name adds to it, at most: a source's scratch history is
# `<pid>-<name>.git-<8 random>` (an apt key's `<pid>-<name>.asc-…`, a wheel's less).
NAME_ROOM = len("4194304-.git-abcdefgh")
NAME_LONGEST = NAME_MAX - NAME_ROOM


def _too_long(value: str, room: int = 0) -> str | None:
    """A part no file system can hold, ``room`` bytes left for what a file named after it
    adds (a name's: NAME_ROOM): the first OSError would come from deep inside."""
    most = NAME_MAX - room
    longest = max(len(part.encode()) for part in value.split("/"))
    if longest <= most:
        return None
    if room:
        named = "(files are named after it)"
        return f"{shown(value)} is {longest} bytes, over the {most} a name holds {named}"
    return f"{shown(value)} has a part of {longest} bytes, over the {NAME_MAX} a file name holds"


def _short(check: Check) -> Check:
    """``check``, and no longer than a file named after it leaves a name."""
    return lambda value: _too_long(value, NAME_ROOM) or check(value)


def _short_fix(fix: str) -> Callable[[str], str]:
    too_long = f"shorten it to {NAME_LONGEST} bytes or fewer"
    return lambda value: too_long if _too_long(value, NAME_ROOM) else fix


def _rel_path(value: str) -> str | None:
    if value.startswith("/") or ".." in value.split("/"):
        return f"{shown(value)} is not a relative path inside the repository"
    return _too_long(value)


def _rel_path_fix(value: str) -> str:
    if _too_long(value):
        return f"shorten each part of the path to {NAME_MAX} bytes or fewer"
    return "write a path relative to the repository root"


def _abs_path(value: str) -> str | None:
    if not value.startswith("/"):
        return f"{shown(value)} is not an absolute path"
    if _too_long(value):
        return _too_long(value)
    if _normal_path(value) != value:
        return f"{shown(value)} is not a normalised path (no //, /./, /../ or trailing /)"
    return None


def _normal_path(value: str) -> str:
    """``/opt//rocm/./lib/`` -> ``/opt/rocm/lib`` (posixpath keeps a leading //)."""
    return re.sub("/+", "/", posixpath.normpath(value))


def _abs_path_fix(value: str) -> str:
    if _too_long(value):
        return f"shorten each part of the path to {NAME_MAX} bytes or fewer"
    normal = _normal_path(value)
    if value.startswith("/") and normal != value and _SAFE.fullmatch(normal):
        return f"write {shown(normal)}"
    return "write an absolute path such as /opt/rocm/lib"


def _prune_dir(value: str) -> str | None:
    if value == "/" or value.startswith("/*"):
        return f"{shown(value)} would prune the whole file system"
    return _abs_path(value)


def _path_glob(value: str) -> str | None:
    """An absolute path or pattern (/*.whl), but not the whole file system."""
    first = value.strip("/").split("/")[0]
    if not first or not first.strip("*?"):  # "/", "/*", "/**", "/*/lib": every folder of /
        return f"{shown(value)} names the whole file system, or every folder of /"
    return _abs_path(value)


def _link_path(value: str) -> str | None:
    """An absolute path, or ``site:<path>``: a path in the image's site-packages."""
    if value.startswith("site:"):
        return (
            _rel_path(value.removeprefix("site:"))
            if value != "site:"
            else (f"{shown(value)} names no path in site-packages")
        )
    return _abs_path(value)


def _separator(value: str) -> str | None:
    if value in SEPARATORS:
        return None
    return f"{shown(value)} is not a separator name"


# How a build reads a list of archs: PYTORCH_ROCM_ARCH takes "gfx942;gfx950",
# causal-conv1d's one --offload-arch flag "gfx942,gfx950". Named: ";" would need quoting.
SEPARATORS = {"semicolon": ";", "comma": ",", "space": " "}


def _prune_dir_fix(value: str) -> str:
    if _normal_path(value) == "/":
        return "name the folders that hold kernel files, e.g. /opt/rocm/lib"
    return _abs_path_fix(value)


def _date(value: str) -> str | None:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return f"{shown(value)} is not a date (YYYY-MM-DD)"
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return f"{shown(value)} is not a day of the calendar"
    return None


# Docker's reference grammar (github.com/distribution/reference, regexp.go), which
# `docker build -t` and `docker pull` enforce: lower-case path components joined by
# . _ __ or dashes, an optional registry host (with a port) in front, a tag after ':'.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_HOST_PART}(?:\.{_HOST_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_REPOSITORY = re.compile(rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_NAME_MAX = 255  # docker's longest repository name
# [image].name becomes <name>/<stage>:<key>: leave room for the longest stage name.
_STAGE_ROOM = 32
_IMAGE_FIX = "write registry/name:tag and put the digest in its own key"


def _split_tag(value: str) -> tuple[str, str | None]:
    """``host:5000/a/b:v1`` -> (``host:5000/a/b``, ``v1``): a tag follows the last '/'."""
    name, colon, tag = value.rpartition(":")
    if colon and "/" not in tag:
        return name, tag
    return value, None


def _lower_path(name: str) -> str:
    """The repository with its path (not its registry host) in lower case."""
    host, slash, path = name.partition("/")
    if slash and ("." in host or ":" in host or host == "localhost"):
        return f"{host}/{path.lower()}"
    return name.lower()


def _image(value: str) -> str | None:
    name, tag = _split_tag(value)
    if (tag is not None and not _TAG.fullmatch(tag)) or len(name) > _NAME_MAX:
        return _not_an_image(value)
    return _repository(name, value, _not_an_image(value))


def _not_an_image(value: str) -> str:
    return (
        f"{shown(value)} is not an image reference (registry/name:tag; the digest goes in `digest`)"
    )


def _image_fix(value: str) -> str:
    name, tag = _split_tag(value)
    lower = _lower_path(name) + (f":{tag}" if tag is not None else "")
    if lower != value and _image(lower) is None:
        return f"write {shown(lower)}"
    return _IMAGE_FIX


def _image_name(value: str) -> str | None:
    longest = _NAME_MAX - _STAGE_ROOM
    if len(value) > longest:
        return f"{shown(value)} is longer than the {longest} characters docker leaves it"
    words = "lower-case words joined by . _ -"
    return _repository(value, value, f"{shown(value)} is not a docker image name ({words})")


def _image_name_fix(value: str) -> str:
    lower = _lower_path(value)
    if lower != value and _image_name(lower) is None:
        return f"write {shown(lower)}"
    return "write a docker repository name such as verl-rocm or registry.example.org/verl"


def _repository(name: str, value: str, otherwise: str) -> str | None:
    """None if docker takes the repository ``name`` of ``value``; upper case, the usual
    slip, is named as such, anything else is ``otherwise``."""
    if _REPOSITORY.fullmatch(name):
        return None
    if _REPOSITORY.fullmatch(_lower_path(name)):
        return f"{shown(value)} has upper case, which docker refuses in an image name"
    return otherwise


TEXT = Kind("text", lambda _: None, "write a value")
# Prose a maintainer writes for maintainers (why a fetch is not taken): never in a recipe.
REASON = Kind(
    "reason",
    _regex(r"\S.*", "a reason"),
    "say in a few words why",
    extra=" ()'\";!?#&*<>[]{}`$|",
)
# What `doit preflight` calls a fetch a build makes: its URL, file:function for a download
# whose URL is computed, or file:tool:what for a command it runs (setup.py:pip:flydsl==0.1.6).
FETCH = Kind(
    "fetch", _regex(r"[^\s]+", "a URL or file:function"), "write the fetch as preflight names it"
)
NAME = Kind(
    "name",
    _short(_regex(r"[A-Za-z0-9][A-Za-z0-9._-]*", "a name (letters, digits, . _ -)")),
    _short_fix("use letters, digits, '.', '_' and '-'"),
)

# Debian policy 5.6.7: lowercase letters, digits, + - and ., two characters at least (g++).
APT_PACKAGE = Kind(
    "apt package",
    _regex(r"[a-z0-9][a-z0-9+.-]+", "a Debian package name (a-z, 0-9, + - .)"),
    "write the package as apt names it: lowercase letters, digits, '+', '-' and '.'",
)


def _git_ref(value: str) -> str | None:
    """A branch or tag name as git allows it (`git check-ref-format`), in the safe
    characters: release/v0.5, v1.0+rocm."""
    parts = value.split("/")
    bad = (
        not all(re.fullmatch(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*", part) for part in parts)
        or ".." in value
        or value.endswith((".", ".lock"))
    )
    return f"{shown(value)} is not a git branch or tag name" if bad else None


GIT_REF = Kind(
    "git ref",
    _git_ref,
    "use letters, digits, '.', '_', '+', '-', and '/' between names (release/v0.5)",
)
STAGE_NAME = Kind("stage name", _regex(r"[a-z][a-z0-9_]*", "a stage name"), "use a stage name")
ENV_NAME = Kind(
    "environment variable",
    _regex(r"[A-Z_][A-Z0-9_]*", "an environment variable name"),
    "use upper-case letters, digits and '_'",
)
URL = Kind("url", _url, _url_fix)


def _mirror(value: str) -> str | None:
    """A mirror may also be a local path (file:///srv/mirrors/vllm.git)."""
    return None if value.startswith("file:///") else _url(value)


def _mirror_fix(value: str) -> str:
    fix = _url_fix(value)
    return "use https://, http://127.0.0.1 or file:///" if fix == _URL_FIX else fix


MIRROR = Kind("url", _mirror, _mirror_fix, optional=True)
COMMIT = Kind(
    "commit",
    _commit,
    "write the full 40-hex commit id",
    missing="no commit is pinned; `doit lock` records upstream's",
)
TREE = Kind(  # a folder's git tree id: "" until `doit lock` records it (pins.missing says when)
    "tree",
    _regex(r"[0-9a-f]{40}", "a git tree id (40 lowercase hex digits)"),
    'write the 40-hex id `git rev-parse <commit>:<subtree>` prints, or "" for `doit lock`',
    optional=True,
)
SHA256 = Kind(
    "sha256",
    _regex(r"[0-9a-f]{64}", "a sha256 (64 lowercase hex digits)"),
    'write the 64-hex sha256, or leave it "" for `doit lock` to record',
    missing="sha256 unknown; `doit lock` records it at first download",
)
DIGEST = Kind(
    "digest",
    _regex(r"sha256:[0-9a-f]{64}", "an image digest (sha256:<64 hex>)"),
    'write the digest as sha256:<64 hex>, or leave it "" for `doit lock`',
    missing="image digest unknown; `doit lock` resolves it",
)
VERSION = Kind(
    "version",
    _version,
    "write an exact PEP 440 version such as 1.2.3",
    missing="no exact version; `doit lock` resolves one",
)
# A source's version: "" is no pin (its build reports its own, or reads git: pins.py says
# which needs one), else an exact PEP 440 version.
SOURCE_VERSION = dataclasses.replace(VERSION, missing="", optional=True)
WHEEL_VERSION = dataclasses.replace(
    VERSION, missing="no version pinned, and `doit lock` picks none; pin the version to install"
)
APT_VERSION = Kind(
    "apt version",
    _regex(r"[0-9][A-Za-z0-9.+~:-]*", "a Debian package version"),
    "write the exact version apt-cache policy shows",
    missing="apt version unknown; `doit lock` resolves it from the repository",
)
WHEEL_FILE = Kind(
    "wheel file",
    _short(_wheel_file),
    _short_fix("write the exact file name the index lists"),
    missing="exact wheel file unknown; `doit lock` resolves it from the index",
)
ARCH = Kind("arch", _arch, unknown_arch_hint)
REPO_FILE = Kind("path", _rel_path, _rel_path_fix)
SRC_PATH = Kind("path", _rel_path, "write a path relative to the source tree's root")
ABS_PATH = Kind("path", _abs_path, _abs_path_fix)
PRUNE_DIR = Kind("prune dir", _prune_dir, _prune_dir_fix, extra="*?")
PATH_GLOB = Kind("path", _path_glob, _abs_path_fix, extra="*?")
FETCH_URL = dataclasses.replace(URL, extra="?&")  # a location: fetched on the host only
LINK_PATH = Kind(
    "link path",
    _link_path,
    "write an absolute path, or site:<path> for a path in site-packages",
)
SEPARATOR = Kind("separator", _separator, f"write one of {', '.join(SEPARATORS)}")
# How pip installs one package: with its dependencies, or without (--no-deps).
INSTALL_MODES = ("deps", "no-deps")
INSTALL_MODE = Kind(
    "install mode",
    lambda value: None if value in INSTALL_MODES else f"{shown(value)} is not an install mode",
    f"write one of {', '.join(INSTALL_MODES)}",
)
IMAGE = Kind("image", _image, _image_fix)
IMAGE_NAME = Kind("image name", _image_name, _image_name_fix)
PYTHON_VERSION = Kind(
    "python version", _regex(r"3\.[0-9]+", "a Python version such as 3.12"), 'write e.g. "3.12"'
)
DATE = Kind("date", _date, 'write a date of the calendar, e.g. "2026-07-20"')
SIZE = Kind("size", _regex(r"[0-9]+[KMGT]?", "a size such as 50G"), 'write e.g. "50G"')


COMPILE_CACHE_SCHEMES = ("redis", "redis+unix", "http", "https")


def _compile_cache(value: str) -> str | None:
    """A remote storage ccache can use (its remote_storage), without a password: one is
    given on the command line (compile_cache=), never in the pins."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return f"{shown(value)} is not a URL (its host cannot be read)"
    if parts.scheme not in COMPILE_CACHE_SCHEMES:
        return f"{shown(value)} is not a storage ccache knows"
    if parts.username is not None or parts.password is not None:
        return f"{shown(value)} has credentials in it"
    if not _port_ok(parts):
        return f"{shown(value)} has no valid port"
    if not (parts.hostname or (parts.scheme == "redis+unix" and parts.path)):
        return f"{shown(value)} names no host"
    return None


def with_redis_password(location: str, password: str) -> str:
    """A compile cache's ``location`` with ``password`` ($REDISCLI_AUTH, as redis-cli takes
    it) when it is a redis:// URL that names none; as is otherwise (the URL's own wins)."""
    parts = urlsplit(location)
    if not password or parts.scheme != "redis" or "@" in parts.netloc:
        return location
    return urlunsplit(parts._replace(netloc=f":{quote(password, safe='')}@{parts.netloc}"))


def for_ccache(location: str) -> str:
    """A compile cache's ``location`` as ccache's remote_storage reads it. ccache takes a
    redis password alone as ``redis://PASSWORD@host`` and reads ``redis://:PASSWORD@host``,
    redis-cli's and redis-py's form, as no password at all; it decodes the user part before
    it splits it at ':', so a password with a ':' goes as Redis 6's default user's."""
    parts = urlsplit(location)
    if parts.scheme != "redis" or parts.username != "" or not parts.password:
        return location  # no password, or ccache's own form (a user of Redis's ACL too)
    password = unquote(parts.password)
    user = "default:" if ":" in password else ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}{quote(password, safe='')}@{host}"))


COMPILE_CACHE = Kind(
    "compile cache",
    _compile_cache,
    "write redis://<host>:6379, redis+unix:///<socket> or https://<host>/<path> "
    "(a password goes in $VERL_GRAPH_COMPILE_CACHE: redis://:<password>@<host>)",
    optional=True,
)


def optional(kind: Kind) -> Kind:
    """``kind``, or "" for a value that is not set (a tag a source has none of)."""
    return dataclasses.replace(kind, optional=True)
