"""The demo's servers: a run of another checkout that serves on a port waits for the one
that holds it, saying for whom; a port something else holds names its holder and the fix;
a registry a killed run left behind is stopped by the next start, and one that a live run
holds is named, never touched."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, STARTED_AT, need

from rocmgraph.building import turns
from rocmgraph.common.errors import EngineError, GraphToolError
from rocmgraph.demo.serve import Files, Registry
from rocmgraph.outside import ports


@pytest.fixture
def held() -> Iterator[int]:
    """A port this process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def me() -> str:
    return f"pid {os.getpid()} ({ports.command_line(os.getpid())})"


def test_the_listener_of_a_port_is_named(held: int) -> None:
    assert ports.listener(held) == me()
    assert ports.listener(free_port()) is None


# Another checkout's run, serving on a port while it holds the port's lock (as Demo.start
# does), then letting both go.
SERVES = """
import sys, time
from pathlib import Path
from rocmgraph.building import turns
from rocmgraph.demo.serve import Files
folder, port, www = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
holder = turns.Holder.me("gfx942", "serves the demo from /checkouts/a/.build/demo")
with turns.on_port(port, holder, folder=folder):
    files = Files(www, port)
    print("serving", flush=True)
    time.sleep(1)
    files.stop()
"""


def test_a_run_of_another_checkout_waits_for_the_port_and_says_for_whom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, www = free_port(), tmp_path / "www"
    www.mkdir()
    other = subprocess.Popen([sys.executable, "-c", SERVES, str(tmp_path), str(port), str(www)],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert other.stdout is not None
    assert other.stdout.readline() == "serving\n"
    mine = turns.Holder.me("gfx950", "serves the demo from /checkouts/b/.build/demo")
    with turns.on_port(port, mine, folder=tmp_path) as waited:
        Files(www, port).stop()  # the port is free once its lock is let go
    assert waited
    other.communicate()  # and its pipe closed
    assert other.returncode == 0
    err = capsys.readouterr().err
    assert re.fullmatch(
        f"waiting for the build started at {STARTED_AT} by pid {other.pid} \\(arch gfx942\\): "
        "it serves the demo from /checkouts/a/.build/demo\n",
        err,
    ), err
    assert list(tmp_path.iterdir()) == [www]  # the lock file goes with its last holder


def test_a_port_lock_file_is_any_user_s_and_never_a_link(tmp_path: Path) -> None:
    port = free_port()
    holder = turns.Holder.me("gfx942", "serves")
    with turns.on_port(port, holder, folder=tmp_path):
        lock = tmp_path / f"rocmgraph-port-{port}.turn"
        assert lock.stat().st_mode & 0o777 == 0o666  # whatever the umask: any user's run
    lock.symlink_to(tmp_path / "mine")
    with pytest.raises(GraphToolError) as caught, turns.on_port(port, holder, folder=tmp_path):
        pass
    assert (
        str(caught.value) == f"{lock} is a symbolic link, not a lock file of this tool; remove it"
    )
    assert not (tmp_path / "mine").exists()


def test_a_port_no_demo_build_holds_names_its_holder_and_the_fix(tmp_path: Path, held: int) -> None:
    with pytest.raises(EngineError) as caught:
        Files(tmp_path, held)  # this run holds the port's lock; this process, the port
    assert str(caught.value) == (
        f"demo: cannot serve on 127.0.0.1:{held} (Address already in use); {me()} holds it and "
        "is no demo build: stop it (the demo's pins name this port, so the demo cannot move)"
    )


def test_a_registry_left_by_a_dead_run_is_stopped_by_the_next_start(tmp_path: Path) -> None:
    need("docker-registry")
    port = free_port()
    first = Registry(tmp_path, port)
    orphan = first.process.pid
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (tmp_path / "registry.pid").write_text(f"{orphan} {dead}\n")  # as a killed run leaves it
    second = Registry(tmp_path, port)
    try:
        assert first.process.wait(timeout=10) is not None  # stopped by the sweep
        assert (tmp_path / "registry.pid").read_text() == f"{second.process.pid} {os.getpid()}\n"
    finally:
        second.stop()
    assert not (tmp_path / "registry.pid").exists()


def test_a_registry_a_live_run_holds_is_named_and_left_alone(tmp_path: Path) -> None:
    need("docker-registry")
    port = free_port()
    script = "print('up', flush=True); import time; time.sleep(60)"
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        # Popen returns while the kernel may still be setting up the new program, whose
        # command line reads empty until then: wait until it runs.
        assert owner.stdout is not None
        assert owner.stdout.readline() == b"up\n"
        (tmp_path / "registry.pid").write_text(f"{owner.pid + 100000} {owner.pid}\n")
        with pytest.raises(EngineError) as caught:
            Registry(tmp_path, port)
        assert str(caught.value) == (
            f"demo: the registry on 127.0.0.1:{port} belongs to a demo build that is still "
            f"running (pid {owner.pid}: {sys.executable} -c {script}); "
            "wait for it to end"
        )
        assert (tmp_path / "registry.pid").exists()
    finally:
        owner.kill()
        owner.communicate()  # and its pipe closed
