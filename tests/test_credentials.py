"""Logins for pinned URLs come from the user's netrc, never from the pins file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmgraph.common.errors import FetchError
from rocmgraph.outside.credentials import netrc_path, with_login


def test_the_login_of_the_urls_host_is_added(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(
        "machine pypi.example.com login ci password p@ss:word\nmachine other login x password y\n"
    )
    assert with_login("https://pypi.example.com/simple", netrc) == (
        "https://ci:p%40ss%3Aword@pypi.example.com/simple"
    )
    assert with_login("https://elsewhere.example.com/simple", netrc) == (
        "https://elsewhere.example.com/simple"
    )
    assert with_login("https://pypi.example.com/simple", tmp_path / "none") == (
        "https://pypi.example.com/simple"
    )


def test_a_broken_netrc_is_one_line(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine\n")
    with pytest.raises(FetchError, match=rf"^{netrc}: cannot be read as a netrc file \("):
        with_login("https://pypi.example.com/simple", netrc)


def test_netrc_follows_the_environment(tmp_path: Path) -> None:
    assert netrc_path({"NETRC": str(tmp_path / "n")}) == tmp_path / "n"
    assert netrc_path({}) == Path.home() / ".netrc"
