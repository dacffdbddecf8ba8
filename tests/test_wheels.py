"""Prebuilt wheels: resolved from a flat index, fetched by sha256, nothing kept when wrong."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version
from servers import LoopbackServer, Route

from rocmgraph.common import fsutil
from rocmgraph.common.errors import FetchError
from rocmgraph.config.pins import Wheel
from rocmgraph.fetch.store import Store, Stored
from rocmgraph.outside.http import Http
from wheelfiles import index

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
    with pytest.raises(index.Unresolved) as caught:
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
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel("2.13.0"), files, "3.12")
    assert str(caught.value) == (
        "[wheels.torch]: no wheel of torch 2.13.0 for cp312 x86_64 is listed in "
        "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/; nearest published: "
        "2.12.0+rocm7.14.0.lw.git1a2b3c4d, 2.12.0+rocm7.14.0.lw.git5e6f7a8b; "
        "pin one in [wheels.torch].version"
    )
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel(file="torch-9-cp312-cp312-linux_x86_64.whl"), files, "3.12")
    assert str(caught.value) == (
        "[wheels.torch].file torch-9-cp312-cp312-linux_x86_64.whl is not listed in "
        f"https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/; nearest published: {TORCH_A}, "
        f"{TORCH_B}; pin one in [wheels.torch].file"
    )


# repo.radeon.com's 7.0.2 folder, as it lists torch: builds side by side, dev builds,
# other Pythons, and one file that is no wheel of this platform.
RADEON_702 = [
    "torch-2.8.0+rocm7.0.2.lw.git245bf6ed-cp312-cp312-linux_x86_64.whl",
    "torch-2.8.0+rocm7.0.2.lw.git9e0a1b2c-cp312-cp312-linux_x86_64.whl",
    "torch-2.8.0+rocm7.0.2.git245bf6ed-cp311-cp311-linux_x86_64.whl",
    "torch-2.8.0rc3+rocm7.0.2.lw.git00aa11bb-cp312-cp312-linux_x86_64.whl",
    "torch-2.7.1+rocm7.0.2.lw.git3c4d5e6f-cp312-cp312-linux_x86_64.whl",
    "torch-2.9.1.dev20251204+rocm7.0.2.lw.git351ff442-cp312-cp312-linux_x86_64.whl",
    "torch-2.9.0+rocm7.0.2.lw.gitdeadbeef-cp312-cp312-linux_x86_64.whl",
    "torch-3.0.0+rocm7.0.2.lw.gitfeedface-cp312-cp312-linux_x86_64.whl",
    "torch-2.8.1-cp312-cp312-macosx_11_0_arm64.whl",
    "torchvision-0.23.0+rocm7.0.2.git824e8c87-cp312-cp312-linux_x86_64.whl",
]
FILES_702 = {name: f"https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/{name}"
             for name in RADEON_702}  # fmt: skip
INDEX_702 = "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/"


@pytest.mark.parametrize("file", [f for f in RADEON_702 if "cp312-linux" in f])
def test_a_full_local_version_resolves_exactly_that_build(file: str) -> None:
    name = file.split("-", 1)[0]
    version = file.split("-")[1]
    assert index.resolve(name, wheel(version, idx=INDEX_702), FILES_702, "3.12") == file


NOT_FOUND = {
    "a release with none of its own builds": (
        "2.8.2",
        "2.8.0rc3+rocm7.0.2.lw.git00aa11bb, 2.8.0+rocm7.0.2.lw.git245bf6ed, "
        "2.8.0+rocm7.0.2.lw.git9e0a1b2c, 2.9.0+rocm7.0.2.lw.gitdeadbeef, "
        "2.7.1+rocm7.0.2.lw.git3c4d5e6f",
    ),
    "a build of a release that has others": (
        "2.8.0+rocm7.0.2.lw.git0000000a",
        "2.8.0rc3+rocm7.0.2.lw.git00aa11bb, 2.8.0+rocm7.0.2.lw.git245bf6ed, "
        "2.8.0+rocm7.0.2.lw.git9e0a1b2c, 2.7.1+rocm7.0.2.lw.git3c4d5e6f, "
        "2.9.0+rocm7.0.2.lw.gitdeadbeef",
    ),
    "a release that only has a dev build": (
        "2.9.1",
        "2.9.1.dev20251204+rocm7.0.2.lw.git351ff442, 2.9.0+rocm7.0.2.lw.gitdeadbeef, "
        "2.8.0rc3+rocm7.0.2.lw.git00aa11bb, 2.8.0+rocm7.0.2.lw.git245bf6ed, "
        "2.8.0+rocm7.0.2.lw.git9e0a1b2c",
    ),
    "a major release ahead": (
        "3.1",
        "3.0.0+rocm7.0.2.lw.gitfeedface, 2.9.1.dev20251204+rocm7.0.2.lw.git351ff442, "
        "2.9.0+rocm7.0.2.lw.gitdeadbeef, 2.8.0rc3+rocm7.0.2.lw.git00aa11bb, "
        "2.8.0+rocm7.0.2.lw.git245bf6ed",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_FOUND))
def test_not_found_lists_the_nearest_versions_published(case: str) -> None:
    asked, listed = NOT_FOUND[case]
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel(asked, idx=INDEX_702), FILES_702, "3.12")
    assert str(caught.value) == (
        f"[wheels.torch]: no wheel of torch {asked} for cp312 x86_64 is listed in {INDEX_702}; "
        f"nearest published: {listed}; pin one in [wheels.torch].version"
    )


def test_an_unlisted_file_names_the_nearest_files_listed() -> None:
    """A build of 2.8.0 the folder does not hold (replaced, or mistyped): the files of the
    nearest versions, its own release's builds first; none for another Python."""
    unlisted = "torch-2.8.0+rocm7.0.2.lw.git0000000a-cp312-cp312-linux_x86_64.whl"
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel(file=unlisted, idx=INDEX_702), FILES_702, "3.12")
    assert str(caught.value) == (
        f"[wheels.torch].file {unlisted} is not listed in {INDEX_702}; nearest published: "
        "torch-2.8.0rc3+rocm7.0.2.lw.git00aa11bb-cp312-cp312-linux_x86_64.whl, "
        "torch-2.8.0+rocm7.0.2.lw.git245bf6ed-cp312-cp312-linux_x86_64.whl, "
        "torch-2.8.0+rocm7.0.2.lw.git9e0a1b2c-cp312-cp312-linux_x86_64.whl, "
        "torch-2.7.1+rocm7.0.2.lw.git3c4d5e6f-cp312-cp312-linux_x86_64.whl, "
        "torch-2.9.0+rocm7.0.2.lw.gitdeadbeef-cp312-cp312-linux_x86_64.whl; "
        "pin one in [wheels.torch].file"
    )
    cp313 = unlisted.replace("cp312", "cp313")
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel(file=cp313, idx=INDEX_702), FILES_702, "3.13")
    assert str(caught.value) == (
        f"[wheels.torch].file {cp313} is not listed in {INDEX_702}; "
        "it lists no torch wheel for cp313 x86_64"
    )


def test_not_found_where_nothing_of_it_runs_says_so() -> None:
    with pytest.raises(index.Unresolved) as caught:
        index.resolve("torch", wheel("2.8.0", idx=INDEX_702), FILES_702, "3.13")
    assert str(caught.value) == (
        f"[wheels.torch]: no wheel of torch 2.8.0 for cp313 x86_64 is listed in {INDEX_702}; "
        "it lists no torch wheel for cp313 x86_64"
    )


RELEASES = st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 2))
BUILDS = st.sampled_from(["", "rc1", ".dev1", "+rocm7.0.2.lw.gitab", "+rocm7.0.2.lw.gitcd"])


def common_prefix(version: Version, pinned: Version) -> int:
    pairs = zip(version.release, pinned.release, strict=True)
    return next((i for i, (a, b) in enumerate(pairs) if a != b), len(pinned.release))


@given(st.sets(st.tuples(RELEASES, BUILDS), max_size=20), RELEASES)
def test_the_nearest_are_its_own_release_first_then_the_closest_series(
    published: set[tuple[tuple[int, int, int], str]], asked: tuple[int, int, int]
) -> None:
    versions = {Version(".".join(map(str, release)) + build) for release, build in published}
    pinned = Version(".".join(map(str, asked)))
    found = index.nearest(pinned, versions)
    assert len(found) == min(index.NEAREST, len(versions))
    assert len(set(found)) == len(found)
    assert set(found) <= versions
    own = sorted(v for v in versions if v.release == pinned.release)
    assert found[: len(own)] == own[: len(found)]  # its own release's builds first, in order
    prefixes = [common_prefix(v, pinned) for v in found]
    assert prefixes == sorted(prefixes, reverse=True)  # then the same minor, then the major
    left_out = [common_prefix(v, pinned) for v in versions - set(found)]
    assert all(prefix <= prefixes[-1] for prefix in left_out)  # none left out is closer


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


def test_a_stored_file_that_changed_is_fetched_again_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackServer() as server:
        route = server.routes["/t/w.whl"] = Route(BODY)
        url = f"{server.url}/t/w.whl"
        stored = Store(tmp_path, quick()).fetch(url, "w.whl", SHA, "wheel torch")
        # Touched but the same bytes (a copy, a restore): hashed again, trusted, not fetched.
        os.utime(stored.path, ns=(1, 1))
        assert Store(tmp_path, quick()).fetch(url, "w.whl", SHA, "wheel torch") == stored
        assert route.hits == 1
        assert capsys.readouterr().err == ""
        # Changed in place (a hand, a disk): hashed, found wrong, fetched again.
        with stored.path.open("r+b") as data:
            data.write(b"X")
        changed = hashlib.sha256(b"X" + BODY[1:]).hexdigest()
        assert Store(tmp_path, quick()).fetch(url, "w.whl", SHA, "wheel torch") == stored
        assert route.hits == 2
        assert stored.path.read_bytes() == BODY
    assert capsys.readouterr().err == (
        f"warning: {stored.path} has sha256 {changed}, not the {SHA} it was stored under; "
        "fetching it again\n"
    )


def flip_in_place(path: Path) -> str:
    """One byte of ``path`` changed with its size, mtime and inode kept (a bad disk, or a hand
    through a context's hard link): what the store's stamp cannot see. Its sha256 now."""
    status = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with path.open("r+b") as changed:
        changed.write(data)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert path.stat().st_ino == status.st_ino
    return hashlib.sha256(data).hexdigest()


def test_what_a_build_is_given_is_hashed_as_it_is_linked_and_dated_by_its_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reproduction: a stored wheel's bytes flipped, its size, mtime and inode kept. The
    stamp trusts it; a build's context does not: it is fetched again, with one warning."""
    context = tmp_path / "context"
    context.mkdir()
    with LoopbackServer() as server:
        route = server.routes["/t/w.whl"] = Route(BODY)
        url, store = f"{server.url}/t/w.whl", Store(tmp_path / "store", quick())
        stored = store.provide(url, "w.whl", SHA, "wheel torch", context / "first.whl")
        assert stored.path == store.path(SHA, "w.whl")
        given = context / "first.whl"
        assert given.stat().st_ino == stored.path.stat().st_ino  # a link: no GBs copied
        assert given.stat().st_mtime_ns == fsutil.content_mtime(SHA)
        changed = flip_in_place(stored.path)
        assert store.fetch(url, "w.whl", SHA, "wheel torch") == stored  # the stamp cannot tell
        assert route.hits == 1
        store.provide(url, "w.whl", SHA, "wheel torch", context / "second.whl")
        assert route.hits == 2
    again = context / "second.whl"
    assert again.read_bytes() == stored.path.read_bytes() == BODY
    assert again.stat().st_mtime_ns == fsutil.content_mtime(SHA)
    assert capsys.readouterr().err == (
        f"warning: {stored.path} has sha256 {changed}, not the {SHA} it was stored under; "
        "fetching it again\n"
    )
    other = hashlib.sha256(b"other bytes").hexdigest()  # other bytes: another mtime
    assert fsutil.content_mtime(other) != fsutil.content_mtime(SHA)
    assert fsutil.content_mtime(SHA) >= (315532800 + 86400) * 10**9  # a zip can date it


def test_a_build_on_another_file_system_is_given_a_copy_hashed_as_it_is_copied(
    tmp_path: Path,
) -> None:
    """$VERL_GRAPH_CACHE on another disk than the build's state: no hard link can be made."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system here")
    with LoopbackServer() as server, tempfile.TemporaryDirectory(dir=shm) as other:
        server.routes["/w.whl"] = Route(BODY)
        store = Store(tmp_path / "store", quick())
        stored = store.provide(f"{server.url}/w.whl", "w.whl", SHA, "wheel", Path(other) / "w")
        given = Path(other) / "w"
        assert given.stat().st_ino != stored.path.stat().st_ino
        assert given.read_bytes() == BODY
        assert given.stat().st_mtime_ns == fsutil.content_mtime(SHA)
        flip_in_place(stored.path)
        given.unlink()
        store.provide(f"{server.url}/w.whl", "w.whl", SHA, "wheel", given)  # fetched again
        assert given.read_bytes() == BODY


def test_a_stored_file_a_build_found_wrong_is_checked_again(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/w.whl"] = Route(BODY)
        store = Store(tmp_path, quick())
        stored = store.fetch(f"{server.url}/w.whl", "w.whl", SHA, "wheel")
    assert store.recheck(SHA) == stored  # it has its hash: the build was given other bytes
    changed = flip_in_place(stored.path)
    assert store.recheck(SHA) == Stored(stored.path, changed)
    assert not stored.path.exists()  # removed: the next run fetches it again
    assert store.recheck(SHA) is None  # the store holds none
