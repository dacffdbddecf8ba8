"""A build's secrets (pip's index, a login perhaps; a compile cache's location) live in
private files the tool removes, and a run killed before it could remove its own has them
removed by the next one."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import dead_pid

from rocmgraph.building.execute import private_files

INDEX = "https://user:s3cret@pypi.example.invalid/simple"


def test_the_file_is_private_and_gone_after_the_build(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    texts = {"pip.conf": f"[global]\nindex-url = {INDEX}\n", "ccache.conf": "reshare = true\n"}
    with private_files(texts, folder) as files:
        assert sorted(files) == ["ccache.conf", "pip.conf"]
        for name, path in files.items():
            assert path.read_text() == texts[name]
            assert path.stat().st_mode & 0o777 == 0o600
            assert path.parent.name.startswith(f"{os.getpid()}-")
            assert path.is_relative_to(folder)
    assert list(folder.iterdir()) == []


def test_a_dead_runs_file_is_swept_and_a_live_runs_kept(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    dead = folder / f"{dead_pid()}-abc"
    live = folder / f"{os.getppid()}-def"  # pytest's parent: alive while this runs
    for leftover in (dead, live):
        leftover.mkdir(parents=True)
        (leftover / "pip.conf").write_text(f"[global]\nindex-url = {INDEX}\n")
    with private_files({"pip.conf": INDEX}, folder):
        assert not dead.exists()
        assert (live / "pip.conf").is_file()
    assert sorted(p.name for p in folder.iterdir()) == [live.name]
