"""The version of an unpinned apt package, read from its repositories' package indexes."""

from __future__ import annotations

import gzip

import pytest
from servers import LoopbackServer, Route

from rocmgraph.common.errors import FetchError
from rocmgraph.config.pins import AptRepo
from rocmgraph.fetch import apt
from rocmgraph.outside.http import Http

INDEX = """\
Package: rocm
Architecture: amd64
Version: 7.0.2.70002-56~22.04
Description: the ROCm meta package
 Version: 1.0 (a description line, not a field)

Package: rocm-core
Version: 7.0.2.70002-56~22.04
"""


def test_a_package_index_lists_each_version_of_a_package_once() -> None:
    assert apt.listed("rocm", INDEX) == {"7.0.2.70002-56~22.04"}
    assert apt.listed("rocm", INDEX + "\nPackage: rocm\nVersion: 7.0.2.70002-57~22.04\n") == {
        "7.0.2.70002-56~22.04",
        "7.0.2.70002-57~22.04",
    }
    assert apt.listed("rocm-dev", INDEX) == set()


@pytest.mark.parametrize(
    ("indexes", "found"),
    [
        ({"rocm": INDEX, "amdgpu": "Package: amdgpu-dkms\nVersion: 1:6.14\n"},
         "7.0.2.70002-56~22.04"),
        ({"rocm": INDEX, "amdgpu": INDEX.replace("-56~", "-57~")},
         "[rocm.packages].rocm: 2 versions of rocm are listed in {url}/amdgpu, {url}/rocm: "
         "7.0.2.70002-56~22.04, 7.0.2.70002-57~22.04; pin the one you mean"),
        ({"rocm": "", "amdgpu": ""},
         "[rocm.packages].rocm: no package rocm is listed in {url}/amdgpu, {url}/rocm"),
        ({"rocm": INDEX}, "GET {url}/amdgpu/dists/jammy/main/binary-amd64/Packages.gz: HTTP 404"),
    ],
)  # fmt: skip
def test_one_version_is_recorded_and_several_are_never_guessed_between(
    indexes: dict[str, str], found: str
) -> None:
    with LoopbackServer() as server:
        repos = {name: AptRepo(url=f"{server.url}/{name}", suite="jammy", components=("main",))
                 for name in ("amdgpu", "rocm")}  # fmt: skip
        for name, text in indexes.items():
            url = apt.index_url(repos[name], "main").removeprefix(server.url)
            server.routes[url] = Route(gzip.compress(text.encode()))
        try:
            answer = apt.version("rocm", repos, Http())
        except FetchError as exc:
            answer = str(exc)
    assert answer == found.format(url=server.url)


def test_an_index_that_is_not_gzip_is_one_line() -> None:
    with LoopbackServer() as server:
        repo = AptRepo(url=server.url, suite="jammy", components=("main",))
        path = apt.index_url(repo, "main").removeprefix(server.url)
        server.routes[path] = Route(b"Package: rocm\n")
        with pytest.raises(FetchError) as caught:
            apt.version("rocm", {"rocm": repo}, Http())
    assert str(caught.value) == (f"GET {server.url}{path}: not a gzip-compressed package index")
