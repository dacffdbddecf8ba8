"""doit's own database (cli/doitdb): shared by the commands of one checkout, set aside only
when broken and held by no live command."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PINS, ROOT

from rocmgraph.cli import doitdb

ROUNDS = 50
# An audit with nothing to say: exit 0, so that doit records it.
PINNED = f"FROM debian:12@sha256:{'a' * 64}\nRUN true\n"


def doit(folder: Path, *args: str) -> subprocess.Popen[str]:
    """doit started in ``folder`` (its .doit.db there), as a user starts it."""
    return subprocess.Popen(
        [sys.executable, "-m", "doit", "-f", str(ROOT / "dodo.py"), "-d", str(folder), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def recorded(database: Path) -> set[str]:
    """The tasks the database at ``database`` holds, once sqlite finds it whole."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        assert db.execute("pragma integrity_check").fetchall() == [("ok",)]
        return {task for (task,) in db.execute("select task_id from doit")}


@pytest.mark.docker  # the plan asks the engine what is built: exit 0 (and a record) needs one
def test_a_plan_beside_another_command_sets_nothing_aside(tmp_path: Path) -> None:
    """A plan and an audit started together in one checkout, ROUNDS times, every other time
    where no database is yet: neither warns, nothing is set aside, both are recorded."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(PINNED)
    for round_ in range(ROUNDS):
        if round_ % 2 == 0:
            for path in folder.glob(".doit.db*"):
                path.unlink()
        started = [
            doit(folder, "plan", f"pins={PINS}", "arch=gfx942"),
            doit(folder, "audit", f"dockerfile={dockerfile}"),
        ]
        said = [command.communicate(timeout=60)[1] for command in started]
        assert [(command.returncode, err) for command, err in zip(started, said, strict=True)] == [
            (0, ""), (0, ""),
        ], round_  # fmt: skip
        assert sorted(path.name for path in folder.iterdir()) == [".doit.db", ".doit.db.holders"]
        assert recorded(folder / ".doit.db") == {"plan", "audit"}, round_


def test_a_garbage_doit_db_is_set_aside_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / ".doit.db").write_bytes(bytes(range(256)) * 4)  # no sqlite database
    (tmp_path / ".doit.db-journal").write_bytes(b"")  # its journal: it goes with it
    result = doit(tmp_path, "list")
    out, err = result.communicate()
    assert result.returncode == 0, err
    assert "build" in out.split()
    stamp = re.search(r"broken-(\d{8}-\d{6})", err)
    assert stamp is not None, err
    assert err == (
        f"warning: .doit.db cannot be read; set aside as .doit.db.broken-{stamp[1]}, "
        f".doit.db-journal.broken-{stamp[1]}; which tasks ran is forgotten, what is built is "
        "not (the image tags say)\n"
    )
    assert sorted(p.name for p in tmp_path.glob(".doit.db*.broken-*")) == [
        f".doit.db-journal.broken-{stamp[1]}", f".doit.db.broken-{stamp[1]}",
    ]  # fmt: skip
    again = doit(tmp_path, "list")
    assert (again.wait(60), again.communicate()[1]) == (0, "")


def test_a_broken_database_another_command_holds_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / ".doit.db"
    live = doitdb.hold(database)  # a command that runs meanwhile (a build)
    assert (live.dep_file, capsys.readouterr().err) == (str(database), "")
    database.write_bytes(b"no database")  # broken while it runs (by hand)

    second = doitdb.hold(database)
    assert second.dep_file == doitdb.IN_MEMORY  # it runs, keeping no record
    assert capsys.readouterr().err == (
        f"warning: {database} cannot be read, and another command may hold it: left as it is "
        "(remove it when none runs); this command keeps no record of which tasks ran\n"
    )
    assert database.read_bytes() == b"no database"

    for held in (live, second):  # both end; the next command is alone
        assert held.share is not None
        os.close(held.share)
    assert doitdb.hold(database).dep_file == str(database)
    assert re.fullmatch(r"warning: .* set aside as \.doit\.db\.broken-[-\d]+; .*\n",
                        capsys.readouterr().err)  # fmt: skip
    assert not database.exists()  # doit makes a new one
