"""Which file of a PyPI release a patch check reads: pure wheel, fitting wheel, sdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servers import LoopbackServer, Route
from world import release_history

from rocmgraph.common.errors import FetchError
from rocmgraph.fetch.pypi import PYPI_ENV, Unpacked, newest, unpack
from rocmgraph.outside.http import Http
from wheelfiles.pypi import Release, choose

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


# ---------------------------------------------------------------- newest: what lock records


def test_newest_is_the_final_release_pip_installs_on_the_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history = release_history("Qwen_VL_Utils", 3)  # lock asks by the pin's name, as written
    history["releases"]["3.5.0"] = [  # newer, but only for another platform
        {"filename": "qwen_vl_utils-3.5.0-cp312-cp312-macosx_11_0_arm64.whl",
         "url": "/files/x.whl", "digests": {"sha256": "0" * 64}}
    ]  # fmt: skip
    history["releases"]["not a version"] = history["releases"]["3.0.0"]
    with LoopbackServer() as server:
        server.routes["/pypi/qwen-vl-utils/json"] = Route(json.dumps(history).encode())
        monkeypatch.setenv(PYPI_ENV, f"{server.url}/pypi")
        assert newest("Qwen_VL_Utils", "3.12", Http()) == "3.1.0"
        assert newest("Qwen_VL_Utils", "3.13", Http()) == "3.4.0"  # it needs 3.13


def test_newest_names_a_project_with_nothing_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    history = release_history("mathruler", 1)
    for version in ("1.0.0", "1.1.0"):
        del history["releases"][version]
    with LoopbackServer() as server:
        server.routes["/pypi/mathruler/json"] = Route(json.dumps(history).encode())
        monkeypatch.setenv(PYPI_ENV, f"{server.url}/pypi")
        with pytest.raises(FetchError) as caught:
            newest("mathruler", "3.12", Http())
        with pytest.raises(FetchError) as missing:
            newest("nothing-here", "3.12", Http())
    assert str(caught.value) == (
        f"mathruler: {server.url}/pypi lists no final release of mathruler that installs on "
        "CPython 3.12 on linux x86_64; pin a version by hand"
    )
    assert str(missing.value) == f"nothing-here: {server.url}/pypi answered HTTP 404"
