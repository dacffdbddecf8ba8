"""The one subprocess runner: every external tool (git, docker) goes through it."""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from rocmgraph.common.errors import GraphToolError


class CommandFailed(GraphToolError):
    """A command exited non-zero; the message ends with its last line of error output."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        self.argv, self.returncode, self.stderr = list(argv), returncode, stderr
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
        super().__init__(f"`{shlex.join(argv)}` failed with exit code {returncode}: {last}")


class CommandMissing(GraphToolError):
    pass


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; raise CommandFailed on a non-zero exit, with stderr kept.

    The command runs in its own process group, and a timeout or an interrupt
    ends the whole group: ``git fetch`` hands the transfer to children
    (``git-remote-https``, ``index-pack``) that would otherwise go on writing
    into a directory the caller is about to clean up.
    """
    process = _spawn(argv, cwd=cwd, env=env, text=True, stdin=input_text is not None)
    stdout, stderr = _communicate(process, argv, input_text, timeout)
    if process.returncode != 0:
        raise CommandFailed(argv, process.returncode, stderr)
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def _end_group(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Kill ``process`` and every process it started, and wait for it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


class Interrupted(GraphToolError):
    """A streamed command was not started: the run is being interrupted."""


# The streamed commands running now (builds): what an interrupt stops (``interrupt_all``).
# Once interrupted, no streamed command starts: a build thread between its check and its
# ``docker build`` would otherwise start a build that outlives the run.
_STREAMING: set[subprocess.Popen[str]] = set()
_STREAMING_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()


# Linux's parent-death signal, set by util-linux's setpriv (Python's preexec_fn is unsafe
# with threads). It fires when the thread that started the child ends: the thread that
# streams a command waits for it, so only this process's death can fire it.
_SETPRIV = shutil.which("setpriv")
_DIES_WITH_US = [_SETPRIV, "--pdeathsig", "INT", "--"] if _SETPRIV else []


def _interruptible() -> list[str]:
    """What gives a command SIGINT's default action back when this process was started with
    it ignored (a job a non-interactive shell put in the background): the command would
    inherit that, and an interrupt would wait out its grace and kill the build instead of
    cancelling it. coreutils' env resets it before it runs the command (8.31 and later: an
    older env, or none, leaves it as it is). doit's runs never need it: dodo.py handles
    SIGINT, and a handled signal is the default again in what the run starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and _env_resets_signals():
        return ["env", "--default-signal=INT", "--"]
    return []


@functools.cache
def _env_resets_signals() -> bool:
    try:
        probe = subprocess.run(
            ["env", "--default-signal=INT", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def interrupted() -> bool:
    """Whether the run is interrupted (``interrupt_all``): a command that failed now was
    stopped, and has nothing of its own to say."""
    return _INTERRUPTED.is_set()


def interrupt_all(grace: float = 20.0) -> None:
    """Send SIGINT to every streamed command still running (the docker CLI cancels its build
    on it, nothing is tagged) and wait for each to end, killing one still running after
    ``grace`` seconds; start no streamed command from now on."""
    with _STREAMING_LOCK:
        _INTERRUPTED.set()
        running = list(_STREAMING)
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stream(
    argv: Sequence[str],
    on_line: Callable[[str], None],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``argv`` with stdout and stderr merged, handing each line over as it comes.

    It gets SIGINT should this process die first (a kill -9): a docker client then cancels
    its build instead of finishing it for nobody, and tagging it behind the next run."""
    if shutil.which(argv[0], path=(env or os.environ).get("PATH")) is None:
        raise CommandMissing(f"`{argv[0]}` is not installed; install it and retry")
    with _STREAMING_LOCK:  # started and registered at once: an interrupt sees it or prevents it
        if _INTERRUPTED.is_set():
            raise Interrupted(f"`{shlex.join(argv)}` was not started: the run is interrupted")
        process = subprocess.Popen(
            [*_DIES_WITH_US, *_interruptible(), *argv],
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        _STREAMING.add(process)
    assert process.stdout is not None
    try:
        with process:
            for line in process.stdout:
                on_line(line.rstrip("\n"))
    finally:
        with _STREAMING_LOCK:
            _STREAMING.discard(process)
    return process.returncode


def pipe(producer: Sequence[str], consumer: Sequence[str], *, timeout: float | None = None) -> str:
    """``producer | consumer``; the consumer's stdout. Either failing fails the pipe."""
    try:
        first = subprocess.Popen(list(producer), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise CommandMissing(f"`{producer[0]}` is not installed; install it and retry") from None
    with first:
        second = subprocess.run(
            list(consumer), stdin=first.stdout, capture_output=True, timeout=timeout, check=False
        )
        assert first.stdout is not None
        first.stdout.close()
        first_err = first.stderr.read().decode(errors="replace") if first.stderr else ""
        first.wait()
    if first.returncode != 0:
        raise CommandFailed(producer, first.returncode, first_err)
    if second.returncode != 0:
        raise CommandFailed(consumer, second.returncode, second.stderr.decode(errors="replace"))
    return second.stdout.decode(errors="replace")


def exchange(
    argv: Sequence[str], data: bytes, *, env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> bytes:  # fmt: skip
    """``argv``'s stdout, as bytes, given ``data`` on its stdin; raise CommandFailed on a
    non-zero exit (a timeout ends it as ``run`` does)."""
    process = _spawn(argv, env=env, text=False, stdin=True)
    stdout, stderr = _communicate(process, argv, data, timeout)
    if process.returncode != 0:
        raise CommandFailed(argv, process.returncode, stderr.decode(errors="replace"))
    return bytes(stdout)


def _spawn(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
    text: bool, stdin: bool,
) -> subprocess.Popen[Any]:  # fmt: skip
    """``argv`` started in a process group of its own, its output piped."""
    try:
        return subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None,
                                stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=text,
                                start_new_session=True)  # fmt: skip
    except FileNotFoundError:
        raise CommandMissing(f"`{argv[0]}` is not installed; install it and retry") from None


def _communicate(
    process: subprocess.Popen[Any], argv: Sequence[str], data: str | bytes | None,
    timeout: float | None,
) -> tuple[Any, Any]:  # fmt: skip
    """Its stdout and stderr; a timeout or an interrupt ends its whole group."""
    with process:
        try:
            return process.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(process)
            raise CommandFailed(argv, -1, f"timed out after {timeout} s") from None
        except BaseException:
            _end_group(process)
            raise


T = TypeVar("T")


def read(argv: Sequence[str], consume: Callable[[IO[bytes]], T], *,
         env: Mapping[str, str] | None = None) -> T:  # fmt: skip
    """What ``consume`` makes of ``argv``'s output, read as it comes (an image's whole file
    system, say, never held at once); the command failing fails it."""
    try:
        process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=dict(env) if env is not None else None)  # fmt: skip
    except FileNotFoundError:
        raise CommandMissing(f"`{argv[0]}` is not installed; install it and retry") from None
    with process:
        assert process.stdout is not None
        assert process.stderr is not None
        made = consume(process.stdout)
        process.stdout.read()  # whatever consume left, so the command can end
        err = process.stderr.read().decode(errors="replace")
    if process.returncode != 0:
        raise CommandFailed(argv, process.returncode, err)
    return made


def spawn(argv: Sequence[str], *, log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in the background (a server), its output into ``log``; the caller
    stops it (``terminate`` and ``wait``)."""
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        try:
            return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise CommandMissing(f"`{argv[0]}` is not installed; install it and retry") from None
