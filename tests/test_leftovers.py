"""Scratch entries in shared folders: a dead run's are swept, a live run's never."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from conftest import dead_pid
from servers import LoopbackServer, Route

from rocmgraph.fetch.store import Store
from rocmgraph.outside import leftovers


def test_what_dead_runs_left_is_swept_once_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "tmp"
    dead = dead_pid()
    (folder / f"{dead}-vllm-abc").mkdir(parents=True)  # a fetch killed half way
    (folder / f"{dead}-vllm-abc" / "setup.py").write_text("")
    (folder / f"{dead}-torch.whl.x1y2").write_text("half a wheel")
    (folder / f"{os.getppid()}-sglang-def").mkdir()  # pytest's parent: a live run
    (folder / "notes").write_text("not a run's")
    sweeper = leftovers.Sweeper()
    assert sweeper.scratch(folder) == folder
    assert sorted(p.name for p in folder.iterdir()) == [f"{os.getppid()}-sglang-def", "notes"]
    (folder / f"{dead}-later").mkdir()
    sweeper.scratch(folder)  # swept once per owner: what a run makes meanwhile is its own
    assert (folder / f"{dead}-later").is_dir()


def test_threads_that_ask_for_a_fresh_folder_at_once_each_get_it_made(tmp_path: Path) -> None:
    """The builds of two archs in one process reach .build/secrets/ together: none may go
    on before the first has made the folder (it did, one round in ten, before the fix)."""
    for round_ in range(100):
        folder = tmp_path / str(round_) / "secrets"
        start, made, sweeper = threading.Barrier(4), list[bool](), leftovers.Sweeper()

        def ask(
            folder: Path = folder, start: threading.Barrier = start, made: list[bool] = made,
            sweeper: leftovers.Sweeper = sweeper,
        ) -> None:  # fmt: skip
            start.wait()
            made.append(sweeper.scratch(folder).is_dir())

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert made == [True] * 4, round_


def test_a_store_download_works_in_a_scratch_file_named_after_the_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with LoopbackServer() as server:
        server.routes["/key"] = Route(body=b"key", delay=1.0)
        fetching = threading.Thread(
            target=store.fetch, args=(f"{server.url}/key", "rocm.gpg.key", "", "ROCm key")
        )
        fetching.start()
        scratch = tmp_path / "tmp"
        deadline = time.monotonic() + 10
        while not (names := [p.name for p in scratch.glob("*")]) and time.monotonic() < deadline:
            time.sleep(0.05)
        fetching.join()
    assert len(names) == 1
    assert names[0].startswith(f"{os.getpid()}-rocm.gpg.key-")
    assert list(scratch.iterdir()) == []  # done: the file is in the store now
