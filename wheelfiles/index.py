"""A flat HTML index (repo.radeon.com's manylinux folders): which file a pin names.

The index is used as find-links, not as PEP 503: one page of links, ``+``
often written ``%2B``, several builds of one version side by side. A pin
names its exact file; resolving a version to a file happens once (``doit
lock``) and refuses to guess between several builds.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Protocol
from urllib.parse import quote, unquote, urljoin, urlsplit

from packaging.utils import canonicalize_name
from packaging.version import Version

from wheelfiles.names import WheelName, interpreter, version_fits


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for name, value in attrs if name == "href" and value]


def listing(html: str, index_url: str) -> dict[str, str]:
    """Wheel file name (``%2B`` decoded) -> absolute URL, for every wheel the page links."""
    parser = _Links()
    parser.feed(html)
    files = {}
    for href in parser.hrefs:
        url = urljoin(index_url, href).split("#", 1)[0]
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        if name.endswith(".whl"):
            files[name] = url
    return files


def file_url(index_url: str, file: str) -> str:
    """Where a pinned file lives: the index URL and the file name, ``+`` quoted."""
    return urljoin(index_url if index_url.endswith("/") else index_url + "/", quote(file))


class Pin(Protocol):
    """What a wheel pin says (rocmgraph.config.pins.Wheel is one)."""

    @property
    def index(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def file(self) -> str: ...


class Unresolved(Exception):
    """No one file of the listing is the wheel the pin means: the message says why and what
    to pin."""


def resolve(name: str, wheel: Pin, files: dict[str, str], python: str) -> str:
    """The one file of ``files`` that the pin ``[wheels.<name>]`` means, for Python ``3.12``.

    A version without a local part (``2.12.0``) resolves to the one build of it; a full
    local version (``2.8.0+rocm7.0.2.lw.git245bf6ed``) to exactly that build.
    """
    where = f"[wheels.{name}]"
    builds = [
        parsed
        for parsed in map(WheelName.parse, files)
        if parsed and parsed.project == canonicalize_name(name) and parsed.runs_on(python)
    ]
    if wheel.file:
        if wheel.file not in files:
            raise Unresolved(
                f"{where}.file {wheel.file} is not listed in {wheel.index}"
                + _nearest_files(name, wheel, builds, python)
            )
        return wheel.file
    if not wheel.version:
        raise Unresolved(f"{where}: neither file nor version is pinned; pin the version first")
    pinned = Version(wheel.version)
    matches = sorted(build.file for build in builds if version_fits(build.version, pinned))
    if not matches:
        published = nearest(pinned, {build.version for build in builds})
        found = (
            f"; nearest published: {', '.join(map(str, published))}; pin one in {where}.version"
            if published
            else f"; it lists no {name} wheel for {interpreter(python)} x86_64"
        )
        raise Unresolved(
            f"{where}: no wheel of {name} {wheel.version} for {interpreter(python)} x86_64 "
            f"is listed in {wheel.index}{found}"
        )
    if len(matches) > 1:
        raise Unresolved(
            f"{where}: {len(matches)} builds of {name} {wheel.version} are listed in "
            f"{wheel.index}: {', '.join(matches)}; pin the one you mean in {where}.file"
        )
    return matches[0]


def _nearest_files(name: str, wheel: Pin, builds: list[WheelName], python: str) -> str:
    """What a "not listed" adds: the listed files of the versions nearest the pinned file's
    (``nearest``), or that there is none for ``python``."""
    parsed = WheelName.parse(wheel.file)
    pinned = parsed.version if parsed else Version(wheel.version or "0")
    by_file = sorted(builds, key=lambda build: build.file)
    listed = [
        build.file
        for version in nearest(pinned, {build.version for build in builds})
        for build in by_file
        if build.version == version
    ][:NEAREST]
    if not listed:
        return f"; it lists no {name} wheel for {interpreter(python)} x86_64"
    return f"; nearest published: {', '.join(listed)}; pin one in [wheels.{name}].file"


NEAREST = 5  # versions (files) a "not found" ("not listed") names


def nearest(pinned: Version, published: set[Version]) -> list[Version]:
    """The published versions closest to ``pinned``, closest first.

    Closest is the longest run of leading release numbers in common (so builds of
    its own release, pre-releases, dev and local builds, come first, then the same
    minor series, then the same major), then the fewest releases apart in version
    order: for 3.1, 3.0.0 then 2.9.1, 2.9.0, 2.8.0; for 2.8.2, 2.8.0 then 2.9.0, 2.7.1.
    """
    width = max((len(v.release) for v in (pinned, *published)), default=0)
    ours = _padded(pinned.release, width)
    order = sorted({_padded(v.release, width) for v in published} | {ours})

    def closeness(version: Version) -> tuple[int, int, Version]:
        theirs = _padded(version.release, width)
        common = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b), width
        )
        return -common, abs(order.index(theirs) - order.index(ours)), version

    return sorted(published, key=closeness)[:NEAREST]


def _padded(release: tuple[int, ...], width: int) -> tuple[int, ...]:
    return release + (0,) * (width - len(release))
