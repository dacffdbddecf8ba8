"""Shared helpers: the real pins file, edits of it, and doit run as users run it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from rocmgraph.config import pinsedit

ROOT = Path(__file__).resolve().parents[1]
# When a lock's holder started, as a waiter names it: with the date when that was another
# day, which a run that crosses midnight meets.
STARTED_AT = r"(\d\d\d\d-\d\d-\d\d )?\d\d:\d\d"
PINS = ROOT / "pins.toml"

# Property tests run the same examples every time, here and in CI: a failure is
# reproducible from the test alone, and no example database is written.
settings.register_profile("repeatable", derandomize=True, database=None, deadline=None)
settings.load_profile("repeatable")


def edit_toml(text: str, path: Sequence[str], value: Any) -> str:
    """``text`` with the value at ``path`` set (comments and layout kept)."""
    return pinsedit.apply(text, [pinsedit.Change(tuple(path), "", value)])


def delete_toml(text: str, path: Sequence[str]) -> str:
    return pinsedit.delete(text, tuple(path))


def run_doit(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """doit as a user runs it, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "doit", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture
def pins_text() -> str:
    return PINS.read_text(encoding="utf-8")


@pytest.fixture
def write_pins(tmp_path: Path) -> Any:
    """Write a pins file into a fresh directory; return its path."""

    def write(text: str, name: str = "pins.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mount a tmpfs of a size (``64k``) under tmp_path, read-only if asked: a real disk
    that fills, unmounted after the test. Mounting needs root, which CI has (it starts
    dockerd): there it fails without, elsewhere it skips."""
    mounted: list[Path] = []

    def mount(size: str, read_only: bool = False) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            why = f"cannot mount a tmpfs: {done.stderr.strip()}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=True)


def filled(disk: Path) -> None:
    """Write into ``disk`` until it takes nothing more: 0 B free."""
    with (disk / "filler").open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\1" * 4096)


def need(tool: str, package: str = "") -> None:
    """A test that needs ``tool`` (of the Debian ``package``, by default its name) fails in
    CI when it is missing (CI installs it) and skips elsewhere; the skip says what to install."""
    import os
    import shutil

    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is missing; .ci/run installs it")
        pytest.skip(f"{tool} is not installed (apt-get install {package or tool})")


pytest_plugins = ["world", "demo_e2e"]


def need_docker() -> None:
    """The end-to-end tests need a running engine: in CI its absence fails them, never skips."""
    import os
    import subprocess

    for tool in ("mmdebstrap", "docker-registry"):
        need(tool)
    try:
        subprocess.run(
            ["/usr/bin/docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        if os.environ.get("CI"):
            pytest.fail("no Docker engine answers; .ci/run starts dockerd")
        pytest.skip("no Docker engine answers (start dockerd)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked docker needs an engine: it fails in CI without one, skips elsewhere."""
    if item.get_closest_marker("docker") is not None:
        need_docker()


def dead_pid() -> int:
    """The pid of a process that has ended (until the system reuses it)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)
