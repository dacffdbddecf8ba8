"""The version of an apt package that its repositories list, for `doit lock`.

verl's recipes install ``rocm`` unversioned: the build would take whatever the
repository has that day. The lock reads the package index of each ROCm
repository (``dists/<suite>/<component>/binary-amd64/Packages.gz``) and
records the one version listed; when several are, it refuses to guess, as it
does for wheels. The index is read only to learn a version: the build installs
with apt, which checks the repository's signature with the pinned key.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Mapping

from rocmgraph.common.errors import FetchError
from rocmgraph.config.pins import AptRepo
from rocmgraph.outside.http import Http


def index_url(repo: AptRepo, component: str) -> str:
    return f"{repo.url.rstrip('/')}/dists/{repo.suite}/{component}/binary-amd64/Packages.gz"


def version(name: str, repos: Mapping[str, AptRepo], http: Http) -> str:
    """The one version of ``name`` that ``repos`` list."""
    found: set[str] = set()
    for repo in repos.values():
        for component in repo.components:
            found |= listed(name, _index(index_url(repo, component), http))
    where = f"[rocm.packages].{name}"
    urls = ", ".join(repo.url for repo in repos.values())
    if not found:
        raise FetchError(f"{where}: no package {name} is listed in {urls}")
    if len(found) > 1:
        raise FetchError(
            f"{where}: {len(found)} versions of {name} are listed in {urls}: "
            f"{', '.join(sorted(found))}; pin the one you mean"
        )
    return found.pop()


def _index(url: str, http: Http) -> str:
    response = http.get(url)
    if response.status_code != 200:
        raise FetchError(f"GET {url}: HTTP {response.status_code}")
    try:
        return gzip.decompress(response.content).decode("utf-8", "replace")
    except (OSError, EOFError, zlib.error):
        raise FetchError(f"GET {url}: not a gzip-compressed package index") from None


def listed(name: str, index: str) -> set[str]:
    """The versions of package ``name`` in a ``Packages`` index (stanzas of ``Field: value``
    lines, a blank line between; a line that starts with a space continues a field)."""
    versions = set()
    for stanza in index.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line[:1].isspace():
                fields[key] = value.strip()
        if fields.get("Package") == name and fields.get("Version"):
            versions.add(fields["Version"])
    return versions
