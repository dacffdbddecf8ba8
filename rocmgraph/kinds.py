"""Value kinds of pins.toml: what a string may hold, and what to write instead.

A kind checks one string and returns the problem (or None), and says how to
fix it. Kinds that allow ``missing`` accept "" for a value that cannot be known
offline; the plan lists those and ``doit lock`` fills them.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from rocmgraph.archs import KNOWN_ARCHS, unknown_arch_hint

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

    def fix_for(self, value: str) -> str:
        return self.fix(value) if callable(self.fix) else self.fix

    def problem(self, value: str) -> str | None:
        if value == "":
            return None if self.missing or self.optional else "must not be empty"
        return self.check(value)


def unsafe_problem(value: str) -> str | None:
    """Characters that could reach a shell unquoted, checked before any kind."""
    bad = sorted({c for c in value if not _SAFE.fullmatch(c)})
    if not bad:
        return None
    shown = " ".join(repr(c) for c in bad)
    return f"{value!r} has characters that could reach a shell unquoted: {shown}"


def _regex(pattern: str, what: str) -> Check:
    compiled = re.compile(pattern)

    def check(value: str) -> str | None:
        return None if compiled.fullmatch(value) else f"{value!r} is not {what}"

    return check


def _commit(value: str) -> str | None:
    if not re.fullmatch(r"[0-9a-fA-F]+", value):
        return f"{value!r} is not a git commit id (hex digits only)"
    if value != value.lower():
        return f"{value!r} is not a git commit id (lowercase hex only)"
    if not 7 <= len(value) <= 40:
        return f"{value!r} is not a git commit id (7 to 40 hex digits)"
    return None


def _url(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return None
    return f"{value!r} is not an https URL (plain http is allowed for loopback mirrors only)"


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
        return f"{value!r} is not a PEP 440 version"
    return None


def _wheel_file(value: str) -> str | None:
    try:
        parse_wheel_filename(value)
    except InvalidWheelFilename as exc:
        return f"{value!r} is not a wheel file name ({exc})"
    return None


def _arch(value: str) -> str | None:
    return None if value in KNOWN_ARCHS else f"{value!r} is not a known GPU architecture"


def _rel_path(value: str) -> str | None:
    if value.startswith("/") or ".." in value.split("/"):
        return f"{value!r} is not a relative path inside the repository"
    return None


TEXT = Kind("text", lambda _: None, "write a value")
NAME = Kind(
    "name",
    _regex(r"[A-Za-z0-9][A-Za-z0-9._-]*", "a name (letters, digits, . _ -)"),
    "use letters, digits, '.', '_' and '-'",
)
STAGE_NAME = Kind("stage name", _regex(r"[a-z][a-z0-9_]*", "a stage name"), "use a stage name")
ENV_NAME = Kind(
    "environment variable",
    _regex(r"[A-Z_][A-Z0-9_]*", "an environment variable name"),
    "use upper-case letters, digits and '_'",
)
URL = Kind("url", _url, "use https://, or http://127.0.0.1 for a loopback mirror")


def _mirror(value: str) -> str | None:
    """A mirror may also be a local path (file:///srv/mirrors/vllm.git)."""
    return None if value.startswith("file:///") else _url(value)


MIRROR = Kind("url", _mirror, "use https://, http://127.0.0.1 or file:///", optional=True)
COMMIT = Kind(
    "commit",
    _commit,
    "write the full 40-hex commit id",
    missing="no commit is pinned; `doit lock` records upstream's",
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
APT_VERSION = Kind(
    "apt version",
    _regex(r"[0-9][A-Za-z0-9.+~:-]*", "a Debian package version"),
    "write the exact version apt-cache policy shows",
    missing="apt version unknown; `doit lock` resolves it from the repository",
)
WHEEL_FILE = Kind(
    "wheel file",
    _wheel_file,
    "write the exact file name the index lists",
    missing="exact wheel file unknown; `doit lock` resolves it from the index",
)
ARCH = Kind("arch", _arch, unknown_arch_hint)
REPO_FILE = Kind("path", _rel_path, "write a path relative to the repository root")
SRC_PATH = Kind("path", _rel_path, "write a path relative to the source tree's root")
ABS_PATH = Kind("path", _regex(r"/[A-Za-z0-9._/-]*", "an absolute path"), "write an absolute path")
IMAGE = Kind(
    "image",
    _regex(
        r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?",
        "an image reference (registry/name:tag; the digest goes in `digest`)",
    ),
    "write registry/name:tag and put the digest in its own key",
)
PYTHON_VERSION = Kind(
    "python version", _regex(r"3\.[0-9]+", "a Python version such as 3.12"), 'write e.g. "3.12"'
)
DATE = Kind(
    "date", _regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "a date (YYYY-MM-DD)"), 'write e.g. "2026-07-20"'
)
SIZE = Kind("size", _regex(r"[0-9]+[KMGT]?", "a size such as 50G"), 'write e.g. "50G"')


def optional(kind: Kind) -> Kind:
    """``kind``, or "" for a value that is not set (a tag a source has none of)."""
    return dataclasses.replace(kind, optional=True)
