"""Which file of a PyPI release a patch check reads: pure wheel, fitting wheel, sdist."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmgraph.errors import FetchError
from wheels.pypi import Release, Unpacked, choose, unpack

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


@pytest.mark.parametrize("name", [f"{NAME}-py3-none-any.whl", f"{NAME}.tar.gz", f"{NAME}.zip"])
def test_an_archive_that_cannot_be_read_is_one_line(tmp_path: Path, name: str) -> None:
    broken = tmp_path / name
    broken.write_bytes(b"this is no archive")
    with pytest.raises(FetchError) as caught:
        unpack(Unpacked(broken, name.endswith(".whl")), ("megatron/core/x.py",), tmp_path / "out")
    kind = "a wheel (zip)" if name.endswith(".whl") else "an sdist (tar or zip)"
    assert str(caught.value) == f"{name}: cannot be read as {kind}"
