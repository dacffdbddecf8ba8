"""The error hierarchy: every failure a user can act on is one of these.

Each message is one line that says where (file, key, stage), what is wrong and
what to do. The exit code follows the class: 1 for a failure or a broken policy,
2 for something that could not be checked (``Unchecked``), 3 for a command that
is wrong (``UsageError``). The doit reporter prints them as ``error: <message>`` without a
traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass

# How much of a value a message quotes: a real pin (a wheel file, a URL) fits whole,
# a 5 MB value pasted by mistake does not come back whole.
LONGEST = 200

_QUOTE = reprlib.Repr()
_QUOTE.maxlevel, _QUOTE.maxlist, _QUOTE.maxdict = 2, 4, 4
_QUOTE.maxstring = _QUOTE.maxother = _QUOTE.maxlong = LONGEST // 4
# user:password@ in a URL: never repeated in a message, which may end up in a CI log.
_CREDENTIALS = re.compile(r"(://)[^/?#@]*@")


def cut(text: str) -> str:
    """``text`` as a message repeats it: credentials hidden, control characters escaped
    (the message stays one line), cut after LONGEST characters with the full length, as
    in ``aaaa… (5000000 characters)``."""
    text = _CREDENTIALS.sub(r"\1***@", text)
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= LONGEST else f"{text[:LONGEST]}… ({len(text)} characters)"


def shown(value: object) -> str:
    """``value`` as a one-line message quotes it: repr, credentials hidden, cut as ``cut``
    does (``'aaaa…' (5000000 characters)``); arrays and tables show a few items."""
    if isinstance(value, str):
        value = _CREDENTIALS.sub(r"\1***@", value)
        if len(value) <= LONGEST:
            return repr(value)
        head = repr(value[:LONGEST])
        return f"{head[:-1]}…{head[-1]} ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(value)
        return digits if len(digits) <= LONGEST else f"{digits[:LONGEST]}… ({len(digits)} digits)"
    return _QUOTE.repr(value)


class GraphToolError(Exception):
    """Base of every error whose message is meant for the user."""


class PinsError(GraphToolError):
    """pins.toml is unreadable or says something invalid."""

    def __init__(self, file: str, where: str, problem: str, fix: str) -> None:
        self.file, self.where, self.problem, self.fix = file, where, problem, fix
        location = f"{file}: {where}" if where else file
        super().__init__(f"{location}: {problem}; {fix}")


class UsageError(GraphToolError):
    """The command itself is wrong (a bad variable, a missing input file): exit code 3."""


class VariableError(UsageError):
    """A command-line variable (``arch=``, ``format=``, ...) is invalid."""


class GraphError(GraphToolError):
    """The stage graph itself is malformed (cycle, unknown parent, bad read)."""


class StaleError(GraphToolError):
    """Something generated from the pins is out of date (``doit render check=1``)."""


class RenderError(GraphToolError):
    """A recipe template could not be rendered from the pins it declares."""


class EngineError(GraphToolError):
    """No usable container engine, or a build on it failed."""


class BuildFailed(EngineError):
    """A build ran and failed: the stage whose step failed, the exit status, the stage's last
    lines and its log; and what to do, where the host can tell (``fix``, a line each)."""

    def __init__(
        self, stage: str, returncode: int, last: list[str], log: object, fix: tuple[str, ...] = ()
    ) -> None:
        self.stage, self.returncode, self.log, self.fix = stage, returncode, log, fix
        lines = "\n".join(f"  {line}" for line in last)
        super().__init__(
            f"stage {stage}: docker build failed (exit {returncode}); its last lines:\n"
            f"{lines}\nfull log: {log}" + "".join(f"\n{line}" for line in fix)
        )


class CacheError(GraphToolError):
    """The shared stage cache cannot be used where the run requires it."""


class DiskError(GraphToolError):
    """A write its disk refused (full, over quota, read-only): common/disk.py words it."""

    def __init__(self, path: str, problem: str, disk: str, fix: str) -> None:
        self.path, self.problem, self.disk, self.fix = path, problem, disk, fix
        super().__init__(f"{path}: {problem} ({disk}); {fix}")


class FetchError(GraphToolError):
    """An input (source, wheel, key, digest) could not be fetched or is not what its pin says."""


class HashMismatch(FetchError):
    """A download arrived whole but its sha256 is not the expected one."""

    def __init__(self, message: str, url: str, expected: str, actual: str) -> None:
        self.url, self.expected, self.actual = url, expected, actual
        super().__init__(message)


class PatchError(GraphToolError):
    """A patch does not apply to the tree it is for."""


class LockError(GraphToolError):
    """The pins are not locked where they must be, or a value cannot be resolved."""


class CompareError(GraphToolError):
    """An upstream recipe and the graph differ where docker/differences.toml says nothing
    (or says something that no longer holds), or that file cannot be read."""


class VerifyError(GraphToolError):
    """An image is not what the pins describe."""


class Unchecked(GraphToolError):
    """Something could not be checked (an upstream out of reach): exit code 2, not 1."""


@dataclass(frozen=True)
class Answer:
    """What a command answers: its lines, and the error that sets its exit code after them.

    Logic returns this rather than printing and then raising: the task shows the
    lines, then raises the error.
    """

    lines: list[str]
    error: GraphToolError | None = None
