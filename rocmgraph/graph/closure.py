"""What a stage fetches from the network while it builds, each file by sha256: its closure.

A stage's recipe names what it installs (a Python package at a version, an apt
package), but not what those bring with them: pip takes the dependencies from the
index and apt from its repositories, whatever they serve that day. The closure is
that whole set, file by file, as the build itself took it:

- pip writes a JSON report of every install (``--report``, asked for through pip's
  configuration in a lock build): each distribution, the URL it came from and its
  sha256 (``download_info``). pip installs the build requirements of a package it builds
  in isolation with a pip of its own, which reads the same configuration: verbose, pip
  shows that one's report too;
- every apt install of the recipes prints one receipt line per package it added
  (``apt-receipt 'URL' file size SHA256:hash``, from ``apt-get download --print-uris``).

Both reach the build's output, which BuildKit prefixes with the step (``#12 1.532 ...``);
``receipts`` reads them back. The lock file (``<pins>.lock.toml``, beside the pins) keeps
one closure per stage key: a closure holds for the inputs it was built from and no other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import tomli

from rocmgraph.common.errors import LockError
from rocmgraph.common.fsutil import atomic_write_text

KINDS = ("python", "apt")
# A line of BuildKit's plain output: the step, the seconds since it started, the text.
_STEP_LINE = re.compile(r"^#(\d+) \d+\.\d+ ?(.*)$")
_APT = re.compile(
    r"^apt-receipt '(?P<url>[^']+)' (?P<file>\S+) \d+ SHA256:(?P<sha256>[0-9a-f]{64})$"
)
_HEX64 = re.compile(r"[0-9a-f]{64}")
CLIPPED = "[output clipped, log limit"  # BuildKit stops a step's output at 2 MiB by default
# Beside a sealed stage's closure files, the hashes the lock gives them, in the form pip and
# apt check a file against as they take it: a file changed after the host checked it (the
# context hard-links the store's) fails the step, named, instead of being installed.
LINKS = "python/index.html"  # pip's find-links page: each link ends in #sha256=<locked hash>
SUMS = "apt/SHA256SUMS"  # sha256sum's format; the sealed apt step writes its Packages from it


@dataclass(frozen=True, order=True)
class Fetched:
    """One file a build took from the network."""

    kind: str  # "python" or "apt"
    name: str
    version: str
    file: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Closure:
    """Everything stage ``stage`` fetched when it was built at ``key``, sorted."""

    stage: str
    key: str
    files: tuple[Fetched, ...]

    def count(self, kind: str) -> int:
        return sum(1 for fetched in self.files if fetched.kind == kind)

    @property
    def digest(self) -> str:
        """The sha256 of its files, as a sealed stage's key takes it."""
        rows = [
            [getattr(item, name) for name in Fetched.__dataclass_fields__] for item in self.files
        ]
        return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()

    def links_page(self) -> str:
        """pip's find-links page of its Python files. pip checks a file against its link's
        hash before it installs it; ``--require-hashes`` cannot serve here, since it also
        wants hashes for the wheels other stages build (pip#10362), and a constraint's hash
        does not count (pip#12956)."""
        names = [(quote(item.file), item.sha256) for item in self.files if item.kind == "python"]
        # quoted, a name holds no character HTML would read: < > & " ' are %-escapes
        links = [f'<a href="{name}#sha256={sha256}">{name}</a>' for name, sha256 in names]
        return "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"

    def sums(self) -> str:
        """Its Debian files' hashes, as ``sha256sum`` writes them: apt checks each file it
        installs against the hash the sealed step's Packages index gives it from here."""
        return "".join(f"{item.sha256}  {item.file}\n" for item in self.files if item.kind == "apt")


def receipts(lines: Iterable[str]) -> tuple[Fetched, ...]:
    """The files a build's output says it fetched: pip's reports and apt's receipts, sorted
    and once each. A ``file://`` download (a wheel the context brought) is no fetch."""
    found: set[Fetched] = set()
    steps: dict[str, list[str]] = {}
    for line in lines:
        if CLIPPED in line:
            raise LockError(
                "a build step's output was cut at BuildKit's log limit, so its pip report is "
                "not whole; raise the limit (BUILDKIT_STEP_LOG_MAX_SIZE in dockerd's "
                "environment) and lock again"
            )
        match = _STEP_LINE.match(line.rstrip("\n"))
        if match:
            steps.setdefault(match[1], []).append(match[2])
    for texts in steps.values():
        for text in texts:
            apt = _APT.match(text)
            if apt:
                name, version = _deb_name(apt["file"])
                found.add(Fetched("apt", name, version, apt["file"], apt["url"], apt["sha256"]))
            elif text.startswith("apt-receipt "):  # a file it would leave out of the closure
                raise LockError(
                    f"cannot read apt's receipt {text.removeprefix('apt-receipt ')!r}: a "
                    "closure records each file by sha256 (apt-get download --print-uris -o "
                    "Acquire::ForceHash=SHA256)"
                )
        for report in _reports(texts):
            found.update(_python(report))
    return tuple(sorted(found))


def _deb_name(file: str) -> tuple[str, str]:
    """``gcc-12_12.2.0-14_amd64.deb`` -> (``gcc-12``, ``12.2.0-14``); an epoch is not in a
    file name (apt writes ``1%3a2.0`` where it has one)."""
    name, version, _ = file.split("_", 2)
    return name, version.replace("%3a", ":")


def _reports(texts: list[str]) -> Iterable[Mapping[str, Any]]:
    """The JSON documents a step printed: pip prints its report indented, from a line that
    is ``{`` to one that is ``}`` as far in; the report of an isolated build's requirements,
    from pip's subprocess, further in (pip is verbose in a lock build)."""
    start, indent = None, ""
    for index, text in enumerate(texts):
        if start is None and text.strip() == "{":
            start, indent = index, text[: len(text) - len(text.lstrip())]
        elif start is not None and text == f"{indent}}}":
            lines = [line.removeprefix(indent) for line in texts[start : index + 1]]
            try:
                document = json.loads("\n".join(lines))
            except json.JSONDecodeError:
                document = None
            if isinstance(document, dict) and "install" in document:
                yield document
            start = None


def _python(report: Mapping[str, Any]) -> Iterable[Fetched]:
    for item in report.get("install", []):
        info = item.get("download_info", {})
        url = str(info.get("url", ""))
        sha256 = str(info.get("archive_info", {}).get("hashes", {}).get("sha256", ""))
        if not url.startswith(("http://", "https://")) or not sha256:
            continue  # a local directory or file: it came through the context
        metadata = item.get("metadata", {})
        file = url.split("#", 1)[0].rsplit("/", 1)[-1]
        yield Fetched(
            "python",
            str(metadata.get("name", "")),
            str(metadata.get("version", "")),
            file,
            url.split("#", 1)[0],
            sha256,
        )


def lock_path(pins_file: str | Path) -> Path:
    """``pins.toml`` -> ``pins.lock.toml``, beside it."""
    path = Path(pins_file)
    return path.with_name(f"{path.stem}.lock.toml")


@dataclass(frozen=True)
class LockFile:
    """The closures a lock file holds, by (stage, key)."""

    path: Path
    closures: Mapping[tuple[str, str], Closure]

    def get(self, stage: str, key: str) -> Closure | None:
        return self.closures.get((stage, key))

    def missing(self, keys: Mapping[str, str]) -> list[str]:
        """The stages of ``keys`` (stage -> key) the file holds no closure for."""
        return [stage for stage, key in keys.items() if (stage, key) not in self.closures]


def load(path: Path) -> LockFile:
    """The lock file at ``path`` (none there: an empty one). A broken file is refused with
    the entry and the fix, never read in part."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LockFile(path, {})

    def broken(where: str, problem: str) -> LockError:
        return LockError(
            f"{path}: {where}: {problem}; it is written by `doit lock closures=1`: "
            "delete it and lock again"
        )

    try:
        document = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise broken("not TOML", str(exc)) from None
    closures: dict[tuple[str, str], Closure] = {}
    for index, entry in enumerate(document.get("closure", [])):
        where = f"closure[{index}]"
        stage, key = entry.get("stage"), entry.get("key")
        if not isinstance(stage, str) or not isinstance(key, str) or not _HEX64.fullmatch(key):
            raise broken(where, "needs a stage name and a 64-hex key")
        files = []
        for number, item in enumerate(entry.get("files", [])):
            fields = {name: item.get(name) for name in Fetched.__dataclass_fields__}
            if not all(isinstance(value, str) for value in fields.values()):
                raise broken(f"{where}.files[{number}]", f"needs {', '.join(fields)} as text")
            fetched = Fetched(**fields)
            if fetched.kind not in KINDS or not _HEX64.fullmatch(fetched.sha256):
                raise broken(f"{where}.files[{number}]", "kind python or apt, sha256 64 hex")
            files.append(fetched)
        closures[(stage, key)] = Closure(stage, key, tuple(sorted(files)))
    return LockFile(path, closures)


HEADER = """\
# What each stage fetched from the network when it was built, every file by sha256.
# Written by `doit lock closures=1` (it builds each stage with the network, every step
# anew, and reads what pip and apt report); one closure per key of a stage: a closure
# holds for the inputs it was built from. A build refuses a stage without one (hermetic=0
# builds it with the network).
"""


def save(lock: LockFile) -> None:
    """Write ``lock`` in place of its file, atomically; stages in order, then keys."""
    import tomlkit  # only a lock writes: not paid by every run that reads the keys

    document = tomlkit.document()
    for line in HEADER.splitlines():
        document.add(tomlkit.comment(line.removeprefix("# ")))
    entries = tomlkit.aot()
    for (stage, key), closure in sorted(lock.closures.items()):
        entry = tomlkit.table()
        entry["stage"], entry["key"] = stage, key
        files = tomlkit.array()
        for fetched in closure.files:
            item = tomlkit.inline_table()
            item.update({name: getattr(fetched, name) for name in Fetched.__dataclass_fields__})
            files.append(item)
        files.multiline(True)
        entry["files"] = files
        entries.append(entry)
    document["closure"] = entries
    atomic_write_text(lock.path, tomlkit.dumps(document))
