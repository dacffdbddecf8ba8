"""A flat HTML index (repo.radeon.com's manylinux folders): which file a pin names.

The index is used as find-links, not as PEP 503: one page of links, ``+``
often written ``%2B``, several builds of one version side by side. A pin
names its exact file; resolving a version to a file happens once (``doit
lock``) and refuses to guess between several builds.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import quote, unquote, urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from rocmgraph.errors import FetchError
from rocmgraph.pins import Wheel


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


def resolve(name: str, wheel: Wheel, files: dict[str, str], python: str) -> str:
    """The one file of ``files`` that the pin ``[wheels.<name>]`` means, for Python ``3.12``."""
    where = f"[wheels.{name}]"
    if wheel.file:
        if wheel.file not in files:
            raise FetchError(f"{where}.file {wheel.file} is not listed in {wheel.index}")
        return wheel.file
    if not wheel.version:
        raise FetchError(f"{where}: neither file nor version is pinned; pin the version first")
    interpreter = "cp" + python.replace(".", "")
    matches = sorted(f for f in files if _matches(f, name, wheel.version, interpreter))
    if not matches:
        raise FetchError(
            f"{where}: no wheel of {name} {wheel.version} for {interpreter} x86_64 "
            f"is listed in {wheel.index}"
        )
    if len(matches) > 1:
        raise FetchError(
            f"{where}: {len(matches)} builds of {name} {wheel.version} are listed in "
            f"{wheel.index}: {', '.join(matches)}; pin the one you mean in {where}.file"
        )
    return matches[0]


def _matches(file: str, name: str, version: str, interpreter: str) -> bool:
    try:
        dist, found, _build, tags = parse_wheel_filename(file)
    except InvalidWheelFilename:
        return False
    if dist != canonicalize_name(name) or found.public != Version(version).public:
        return False
    return any(
        tag.interpreter in (interpreter, "py3")
        and (tag.platform == "any" or tag.platform.endswith("x86_64"))
        for tag in tags
    )
