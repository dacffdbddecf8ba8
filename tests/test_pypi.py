"""Which file of a PyPI release a patch check reads: pure wheel, fitting wheel, sdist."""

from __future__ import annotations

import pytest

from wheels.pypi import Release, choose

NAME = "megatron_core-0.18.0"


def files(*tails: str) -> list[Release]:
    return [Release(f"{NAME}{tail}", f"https://files/{NAME}{tail}", "0" * 64) for tail in tails]


@pytest.mark.parametrize(
    ("python", "tails", "chosen"),
    [
        # a pure wheel serves every Python, first
        ("3.12", ["-cp312-cp312-manylinux_2_17_x86_64.whl", "-py3-none-any.whl", ".tar.gz"],
         "-py3-none-any.whl"),
        # the CPython of [python].version, on linux x86_64, any glibc
        ("3.12", ["-cp311-cp311-manylinux_2_17_x86_64.whl",
                  "-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "-cp313-cp313-manylinux_2_17_x86_64.whl", ".tar.gz"],
         "-cp312-cp312-manylinux_2_28_x86_64.whl"),
        ("3.13", ["-cp311-cp311-manylinux_2_17_x86_64.whl",
                  "-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"],
         "-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
        ("3.12", ["-cp312-cp312-manylinux1_x86_64.whl"], "-cp312-cp312-manylinux1_x86_64.whl"),
        ("3.12", ["-cp312-cp312-linux_x86_64.whl"], "-cp312-cp312-linux_x86_64.whl"),
        # the best tag wins: the exact ABI before abi3, abi3 before a generic py3 build
        ("3.12", ["-py3-none-manylinux_2_17_x86_64.whl", "-cp39-abi3-manylinux_2_17_x86_64.whl",
                  "-cp312-cp312-manylinux_2_17_x86_64.whl"],
         "-cp312-cp312-manylinux_2_17_x86_64.whl"),
        ("3.12", ["-py3-none-manylinux_2_17_x86_64.whl", "-cp39-abi3-manylinux_2_17_x86_64.whl"],
         "-cp39-abi3-manylinux_2_17_x86_64.whl"),
        # what the image cannot install is never read: then the sdist
        ("3.12", ["-cp312-cp312-manylinux_2_17_aarch64.whl",
                  "-cp312-cp312-musllinux_1_2_x86_64.whl", "-cp312-cp312-macosx_11_0_arm64.whl",
                  "-cp312-cp312-win_amd64.whl",
                  "-cp313-abi3-manylinux_2_17_x86_64.whl", "-not-a-wheel-name.whl", ".tar.gz"],
         ".tar.gz"),
        ("3.12", ["-cp311-cp311-manylinux_2_17_x86_64.whl", ".zip"], ".zip"),
        ("3.12", ["-cp311-cp311-manylinux_2_17_x86_64.whl", ".exe"], None),
        ("3.12", [], None),
    ],
)  # fmt: skip
def test_the_file_a_check_reads(python: str, tails: list[str], chosen: str | None) -> None:
    found = choose(files(*tails), python)
    assert (found.filename if found else None) == (f"{NAME}{chosen}" if chosen else None)
