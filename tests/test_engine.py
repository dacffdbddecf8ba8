"""Image references as the engine lists them: one name for each image, whichever way a pin,
a recipe or a tag spells it."""

from __future__ import annotations

import pytest

from rocmgraph.common.engine import familiar


@pytest.mark.parametrize(
    ("ref", "listed"),
    [
        ("docker.io/library/ubuntu:22.04", "ubuntu:22.04"),
        ("index.docker.io/library/ubuntu:22.04", "ubuntu:22.04"),
        ("library/ubuntu:22.04", "ubuntu:22.04"),
        ("docker.io/rocm/primus:v26.4", "rocm/primus:v26.4"),
        ("docker.io/library/a/b:1", "library/a/b:1"),  # a namespace of its own, not Hub's
        ("127.0.0.1:5000/library/x:1", "127.0.0.1:5000/library/x:1"),  # another registry's
        ("verl-demo/vllm:" + "a" * 64, "verl-demo/vllm:" + "a" * 64),
    ],
)
def test_a_reference_is_named_as_docker_image_ls_names_it(ref: str, listed: str) -> None:
    assert familiar(ref) == listed
