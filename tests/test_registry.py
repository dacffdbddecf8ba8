"""Image digests from a real registry (Debian's docker-registry on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import need
from servers import Registry

from rocmgraph.errors import FetchError
from rocmgraph.outside import registry
from rocmgraph.outside.http import Http


def test_the_digest_a_tag_points_to_now(tmp_path: Path) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as reg:
        first = reg.push("rocm/primus", "v26.4", b'{"architecture":"amd64","os":"linux"}')
        assert registry.digest(f"{reg.host}/rocm/primus:v26.4", Http()) == first
        moved = reg.push("rocm/primus", "v26.4", b'{"architecture":"amd64","os":"linux","x":1}')
        assert moved != first
        assert registry.digest(f"{reg.host}/rocm/primus:v26.4", Http()) == moved
        with pytest.raises(FetchError) as caught:
            registry.digest(f"{reg.host}/rocm/primus:v99", Http())
        assert str(caught.value) == f"image {reg.host}/rocm/primus:v99: no such tag in {reg.host}"


def test_references_name_their_registry() -> None:
    assert registry.Reference.parse("docker.io/rocm/primus:v26.4") == registry.Reference(
        "registry-1.docker.io", "rocm/primus", "v26.4"
    )
    assert registry.Reference.parse("ubuntu:22.04") == registry.Reference(
        "registry-1.docker.io", "library/ubuntu", "22.04"
    )
    local = registry.Reference.parse("127.0.0.1:5000/demo/base:1")
    assert local == registry.Reference("127.0.0.1:5000", "demo/base", "1")
    assert local.base_url == "http://127.0.0.1:5000/v2/demo/base"
