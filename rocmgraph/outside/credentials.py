"""Credentials for the URLs the pins name: from the user's netrc, never from the pins file.

A package index that needs a login is pinned by its plain URL; the login
lives where pip, curl and git look for one, ``~/.netrc`` (or ``$NETRC``), under
the index's host. It reaches a build only inside the pip configuration secret.
"""

from __future__ import annotations

import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from rocmgraph.common.errors import FetchError


def netrc_path(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ["NETRC"]) if environ.get("NETRC") else Path.home() / ".netrc"


def with_login(url: str, path: Path) -> str:
    """``url`` with the login the netrc at ``path`` keeps for its host; as is without one."""
    if not path.is_file():
        return url
    try:
        entry = netrc.netrc(str(path)).authenticators(urlsplit(url).hostname or "")
    except (netrc.NetrcParseError, OSError) as exc:
        raise FetchError(f"{path}: cannot be read as a netrc file ({exc})") from None
    if entry is None:
        return url
    login, _, password = entry
    parts = urlsplit(url)
    userinfo = quote(login or "", safe="") + (f":{quote(password, safe='')}" if password else "")
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))
