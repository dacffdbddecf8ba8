"""The demo's servers: a port clash names its holder; a registry a killed run left behind is
stopped by the next start, and one that a live run holds is named, never touched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import need

from rocmgraph.common.errors import EngineError
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


def test_a_busy_port_names_its_holder(tmp_path: Path, held: int) -> None:
    with pytest.raises(EngineError) as caught:
        Files(tmp_path, held)
    assert str(caught.value) == (
        f"demo: cannot serve on 127.0.0.1:{held} (Address already in use); {me()} holds it"
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
