"""A write its disk refuses, on a real small disk (a tmpfs): whatever writes, and however
full the disk is, one line names the path, the disk and the fix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PINS, ROOT, filled
from servers import LoopbackServer, Route, make_repo, serve_bare
from world import World, locked_run, prepare

from rocmgraph.building import records
from rocmgraph.cli.reporter import UserFailure, guarded
from rocmgraph.common.errors import DiskError
from rocmgraph.common.layout import CACHE_ENV
from rocmgraph.config.pins import GitSource
from rocmgraph.fetch.sources import SourceCache
from rocmgraph.fetch.store import Store
from rocmgraph.graph.keys import Inputs

Disk = Callable[..., Path]
ELSEWHERE = f"free space on it, or set ${CACHE_ENV} to a folder on another disk"


@pytest.fixture
def cache(small_disk: Disk, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache, on a 64 kB disk."""
    root = small_disk("64k") / "cache"
    monkeypatch.setenv(CACHE_ENV, str(root))
    return root


def test_a_record_on_a_full_disk_names_it_its_disk_and_the_fix(small_disk: Disk) -> None:
    disk = small_disk("64k")
    filled(disk)
    inputs = Inputs(1, "vllm", "0" * 64, {}, {}, ("gfx942",), {})
    with pytest.raises(DiskError) as caught:
        records.begin(disk / "records", "vllm", "1" * 64, inputs)
    assert str(caught.value) == (
        f"{disk}/records/vllm.building.json: no space is left on its disk (tmpfs at {disk}, "
        "0 B free of 65.5 kB); free space on it"  # not the cache's: no $VERL_GRAPH_CACHE
    )


def test_a_download_that_fills_the_disk_is_no_network_error(cache: Path) -> None:
    with LoopbackServer() as server:
        server.routes["/big.whl"] = Route(body=os.urandom(200_000))
        with pytest.raises(DiskError) as caught:
            Store(cache).fetch(f"{server.url}/big.whl", "big.whl", "", "wheel big")
    disk, path = cache.parent, caught.value.path
    assert re.fullmatch(rf"{cache}/tmp/{os.getpid()}-big\.whl-\w+", path), path
    assert str(caught.value) == (
        f"{path}: no space is left on its disk (tmpfs at {disk}, 0 B free of 65.5 kB); {ELSEWHERE}"
    )
    assert list((cache / "tmp").iterdir()) == []


# A source at each size of disk fails at another step of git's: its init, its fetch (by
# file://, or by HTTP as the demo's upstreams serve), its checkout.
FILES = {
    "64k": {"a": "a\n"},
    "256k": {f"data{n}.bin": os.urandom(150_000).hex() for n in range(4)},  # 600 kB packed
    "1m": {"big.txt": "some line of a source file\n" * 100_000},  # 2.7 MB, 10 kB packed
}
TOTAL = {"64k": "65.5 kB", "256k": "262.1 kB", "1m": "1.0 MB"}


@pytest.mark.parametrize(
    ("size", "served"),
    [("64k", False), ("256k", False), ("256k", True), ("1m", False)],
    ids=["init", "fetch", "fetch-http", "checkout"],
)
def test_a_source_that_fills_the_disk_is_no_network_error(
    tmp_path: Path, small_disk: Disk, monkeypatch: pytest.MonkeyPatch, size: str, served: bool
) -> None:
    cache = small_disk(size) / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    commit = make_repo(tmp_path / "up", FILES[size])
    with LoopbackServer(tmp_path / "www") as server:
        if served:
            (tmp_path / "www").mkdir()
            url = f"{server.url}/{serve_bare(tmp_path / 'up', tmp_path / 'www', 'up.git').name}"
        else:
            url = f"file://{tmp_path / 'up'}"
        source = GitSource(repo=url, branch="main", commit=commit)
        with pytest.raises(DiskError) as caught:
            SourceCache(cache).tree("up", source)
    path = caught.value.path
    assert re.fullmatch(rf"{cache}/tmp/{os.getpid()}-{commit}-\w+", path), path
    said = re.fullmatch(  # the space git left in its scratch, which goes after: a few kB
        rf"{path}: no space is left on its disk \(tmpfs at {cache.parent}, (\d+(\.\d)? k?B) "
        rf"free of {re.escape(TOTAL[size])}\); {re.escape(ELSEWHERE)}",
        str(caught.value),
    )
    assert said, caught.value
    assert list((cache / "tmp").iterdir()) == []


def test_any_other_write_the_disk_refuses_is_one_line_with_its_fix(small_disk: Disk) -> None:
    """What no writer words itself (a bug's way to a full disk) the reporter words alike."""
    full, read_only = small_disk("64k"), small_disk("64k", read_only=True)
    filled(full)
    source = full.parent / "source"
    source.write_bytes(b"x" * 10_000)
    for disk, said in (
        (full, "no space is left on its disk (tmpfs at {}, 0 B free of 65.5 kB); free space on it"),
        (read_only, "its file system is read-only (tmpfs at {}, 65.5 kB free of 65.5 kB); "
                    "mount it read-write"),
    ):  # fmt: skip
        failure = guarded(shutil.copy2, source, disk / "copy")()
        assert isinstance(failure, UserFailure)
        assert failure.message == f"{disk}/copy: {said.format(disk)}"  # the file written

    def other() -> None:
        (full / "no" / "folder").read_text()

    with pytest.raises(FileNotFoundError):  # not the disk's fault: a bug, shown as such
        guarded(other)()


def test_a_context_that_fills_the_disk_names_it(
    world: World, monkeypatch: pytest.MonkeyPatch, small_disk: Disk
) -> None:
    run = locked_run(world, monkeypatch)
    disk = small_disk("64k")  # its Dockerfile fits, vLLM's tree does not
    with pytest.raises(DiskError) as caught:
        prepare(run, "vllm", disk / "ctx")
    assert str(caught.value) == (
        f"{disk}/ctx: no space is left on its disk (tmpfs at {disk}, 0 B free of 65.5 kB); "
        "free space on it"  # the cache is on another disk: no $VERL_GRAPH_CACHE
    )


# What a plan of the real pins shows, with no engine to ask (exit 2: statuses unknown).
REPORTS = (("plan",), ("graph", "format=dot"), ("dockerfile:vllm",))


def _reports(
    home: Path, cache: Path | None, folder: Path, engine: Path
) -> list[tuple[int, str, str]]:
    """REPORTS as a user with ``home`` and ``cache`` (None: the home's) runs them in doit's
    ``folder`` (its .doit.db there), with a docker client and no engine at socket ``engine``."""
    env = {key: value for key, value in os.environ.items() if key != "XDG_CACHE_HOME"}
    env |= {"HOME": str(home), "DOCKER_HOST": f"unix://{engine}"}
    if cache is None:
        env.pop(CACHE_ENV, None)
    else:
        env[CACHE_ENV] = str(cache)
    found = []
    for report in REPORTS:
        done = subprocess.run(
            [sys.executable, "-m", "doit", "-f", str(ROOT / "dodo.py"), "-d", str(folder),
             *report, f"pins={PINS}"],
            capture_output=True, text=True, check=False, env=env, timeout=120,
        )  # fmt: skip
        found.append((done.returncode, done.stdout, done.stderr))
    return found


@pytest.mark.parametrize("where", ["own disk", "own disk, filled before", "in the home"])
def test_a_plan_needs_no_writable_cache_home_or_checkout(
    tmp_path: Path, small_disk: Disk, where: str
) -> None:
    """A cache mounted read-only (empty, or kept by an earlier run), and a read-only home
    that holds the checkout (doit's folder): plan, graph and dockerfile:<stage> say what
    they say with all of them writable."""
    writable, engine = tmp_path / "home", tmp_path / "no-engine.sock"
    writable.mkdir()
    expected = _reports(writable, None, writable, engine)
    assert expected[0][0] == 2, expected[0]  # the plan: keys, and no engine to ask
    assert expected[0][2].startswith("error: built status unknown: "), expected[0]
    kept = writable / ".cache" / "verl-rocm-graph"  # and the client's memo, where one is found
    assert (kept / "templates").is_dir()
    assert (writable / ".doit.db").exists()

    home = small_disk("64k", read_only=True)
    cache: Path | None = None
    if where != "in the home":
        cache = small_disk("1m", read_only=where == "own disk")
        if where == "own disk, filled before":
            shutil.copytree(kept, cache, dirs_exist_ok=True)
            subprocess.run(["mount", "-o", "remount,ro", str(cache)], check=True)
    assert _reports(home, cache, home, engine) == expected
