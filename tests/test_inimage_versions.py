"""The in-image checks compare versions as pip installs them (PEP 440 releases)."""

from __future__ import annotations

from importlib import metadata

import pytest

from rocmgraph.inimage import smoke, verify_dists


@pytest.mark.parametrize("public", [smoke.public, verify_dists.public])
def test_a_release_is_the_same_with_or_without_trailing_zeros(public: object) -> None:
    assert callable(public)
    assert public("1.14.0") == public("1.14") == public("1.14.0+rocm7.14")
    assert public("2.12.0+rocm7.14.git1234") == "2.12"
    assert public("0.22.1rc1") == "0.22.1rc1"  # not a plain release: as written
    assert public("1.14.1") != public("1.14")
    assert public("0.0") == "0"


def test_a_pin_with_trailing_zeros_is_the_installed_version() -> None:
    installed = metadata.version("pytest")
    assert smoke.check_dist(f"pytest=={installed}.0") == []
    assert verify_dists.main([f"pytest=={installed}.0"]) == 0
    assert verify_dists.main(["pytest==0.1"]) == 1
