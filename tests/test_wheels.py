"""Prebuilt wheels: resolved from a flat index, fetched by sha256, nothing kept when wrong."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from servers import LoopbackServer, Route

from rocmgraph.errors import FetchError
from rocmgraph.http import Http
from rocmgraph.pins import Wheel
from wheels import index
from wheels.store import Store

TORCH_A = "torch-2.12.0+rocm7.14.0.lw.git1a2b3c4d-cp312-cp312-linux_x86_64.whl"
TORCH_B = "torch-2.12.0+rocm7.14.0.lw.git5e6f7a8b-cp312-cp312-linux_x86_64.whl"
TRITON = "triton-3.7.0+rocm7.14.0.git0badcafe-cp312-cp312-linux_x86_64.whl"
OTHER_PY = "triton-3.7.0+rocm7.14.0.git0badcafe-cp311-cp311-linux_x86_64.whl"
BODY = b"PK\x03\x04 pretend this is a wheel" * 1000
SHA = hashlib.sha256(BODY).hexdigest()

PAGE = f"""<html><body><h1>Index of /rocm/manylinux/rocm-rel-7.14/</h1>
<a href="../">../</a>
<a href="{TORCH_A.replace("+", "%2B")}">{TORCH_A}</a>
<a href="{TORCH_B.replace("+", "%2B")}">{TORCH_B}</a>
<a href="{TRITON.replace("+", "%2B")}#sha256=ignored">{TRITON}</a>
<a href="{OTHER_PY}">{OTHER_PY}</a>
<a href="README.txt">README.txt</a>
</body></html>"""


def quick() -> Http:
    """Short timeouts and no real sleeping between attempts."""
    return Http(timeout=0.5, attempts=3, backoff=0.01, sleep=lambda _s: None)


def wheel(version: str = "2.12.0", file: str = "", sha256: str = "", idx: str = "") -> Wheel:
    return Wheel(index=idx or "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/",
                 version=version, file=file, sha256=sha256)  # fmt: skip


def test_the_listing_decodes_plus_signs_and_keeps_only_wheels() -> None:
    files = index.listing(PAGE, "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/")
    assert sorted(files) == sorted([TORCH_A, TORCH_B, TRITON, OTHER_PY])
    assert files[TORCH_A] == (
        "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/"
        "torch-2.12.0%2Brocm7.14.0.lw.git1a2b3c4d-cp312-cp312-linux_x86_64.whl"
    )


def test_a_pinned_file_resolves_to_itself_beside_other_builds() -> None:
    files = index.listing(PAGE, "https://x.example/")
    assert index.resolve("torch", wheel(file=TORCH_B), files, "3.12") == TORCH_B


def test_two_builds_of_one_version_are_never_guessed_between() -> None:
    files = index.listing(PAGE, "https://x.example/")
    with pytest.raises(FetchError) as caught:
        index.resolve("torch", wheel(), files, "3.12")
    assert str(caught.value) == (
        "[wheels.torch]: 2 builds of torch 2.12.0 are listed in "
        f"https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/: {TORCH_A}, {TORCH_B}; "
        "pin the one you mean in [wheels.torch].file"
    )


def test_one_build_for_this_python_resolves() -> None:
    files = index.listing(PAGE, "https://x.example/")
    assert index.resolve("triton", wheel("3.7.0"), files, "3.12") == TRITON
    assert index.resolve("triton", wheel("3.7.0"), files, "3.11") == OTHER_PY


def test_no_match_and_unlisted_file_are_one_line() -> None:
    files = index.listing(PAGE, "https://x.example/")
    with pytest.raises(FetchError) as caught:
        index.resolve("torch", wheel("2.13.0"), files, "3.12")
    assert str(caught.value) == (
        "[wheels.torch]: no wheel of torch 2.13.0 for cp312 x86_64 is listed in "
        "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/"
    )
    with pytest.raises(FetchError) as caught:
        index.resolve("torch", wheel(file="torch-9-cp312-cp312-linux_x86_64.whl"), files, "3.12")
    assert str(caught.value) == (
        "[wheels.torch].file torch-9-cp312-cp312-linux_x86_64.whl is not listed in "
        "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/"
    )


def test_a_good_wheel_is_verified_and_stored_by_its_hash(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/t/" + TORCH_A.replace("+", "%2B")] = Route(BODY)
        url = index.file_url(f"{server.url}/t", TORCH_A)
        stored = Store(tmp_path, quick()).fetch(url, TORCH_A, SHA, "wheel torch")
        assert stored.path == tmp_path / "files" / SHA / TORCH_A
        assert stored.path.read_bytes() == BODY
        # stored: trusted by its hash, not fetched again
        assert Store(tmp_path, quick()).fetch(url, TORCH_A, SHA, "wheel torch") == stored
        assert server.routes["/t/" + TORCH_A.replace("+", "%2B")].hits == 1


def test_a_tampered_wheel_names_url_and_both_hashes_and_keeps_nothing(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY + b"evil")
        actual = hashlib.sha256(BODY + b"evil").hexdigest()
        with pytest.raises(FetchError) as caught:
            Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel torch")
    assert str(caught.value) == (
        f"wheel torch: {server.url}/w.whl has sha256 {actual}, the pins say {SHA}; nothing "
        "was kept. If upstream replaced the file on purpose, pin the new hash"
    )
    assert not (tmp_path / "files").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_missing_wheel_is_not_retried(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(b"no", status=404)
        with pytest.raises(FetchError) as caught:
            Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel torch")
        assert server.routes["/w.whl"].hits == 1
    assert str(caught.value) == f"GET {server.url}/w.whl: HTTP 404"


def test_a_connection_dropped_half_way_is_retried_then_reported(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY, drop_after=1000)
        with pytest.raises(FetchError) as caught:
            Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel torch")
        assert server.routes["/w.whl"].hits == 3
    assert str(caught.value) == (
        f"GET {server.url}/w.whl: the connection was dropped during the transfer (3 attempts)"
    )
    assert not (tmp_path / "files").exists()


def test_a_transfer_that_fails_once_succeeds_on_retry(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY, failures=1)
        stored = Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel")
        assert server.routes["/w.whl"].hits == 2
    assert stored.sha256 == SHA


def test_a_server_slower_than_the_timeout_is_reported(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY, delay=1.0)
        with pytest.raises(FetchError) as caught:
            Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel torch")
    assert str(caught.value) == f"GET {server.url}/w.whl: no answer within 0.5 s (3 attempts)"


def test_an_unlocked_download_is_kept_under_the_hash_it_has(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY)
        stored = Store(tmp_path, quick()).fetch(f"{server.url}/w.whl", "w.whl", "", "wheel")
    assert stored == Store(tmp_path).fetch("unused", "w.whl", SHA, "wheel")
