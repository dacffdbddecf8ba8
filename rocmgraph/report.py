"""A doit reporter that prints a user error as one line, without a traceback.

Actions turn a GraphToolError into a ``UserFailure``; this reporter prints
it as ``error: <message>`` on stderr and skips doit's captured-output dump.
Any other failure is a bug and is reported by doit as usual, traceback and all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from doit.exceptions import TaskError, TaskFailed
from doit.reporter import ConsoleReporter

from rocmgraph.errors import GraphToolError, Unchecked


class UserFailure(TaskFailed):  # type: ignore[misc]
    """A failure whose message says everything: no traceback, no output dump (exit 1)."""


class UserUnchecked(TaskError):  # type: ignore[misc]
    """Something could not be checked: one line too, and doit exits with 2."""


def guarded(function: Callable[..., object], *args: object) -> Callable[[], object]:
    """Wrap an action so that a GraphToolError becomes a one-line failure."""

    def action() -> object:
        try:
            result = function(*args)
        except Unchecked as exc:
            return UserUnchecked(str(exc))
        except GraphToolError as exc:
            return UserFailure(str(exc))
        return None if result is None else result

    action.__name__ = getattr(function, "__name__", "action")
    return action


class Reporter(ConsoleReporter):  # type: ignore[misc]
    """doit's console reporter, quiet for report tasks and terse for user errors."""

    def execute_task(self, task: Any) -> None:
        # Tasks that print a report (plan, render) keep stdout for it alone.
        if not (task.meta or {}).get("quiet"):
            super().execute_task(task)

    def add_failure(self, task: Any, fail: Any) -> None:
        if isinstance(fail, (UserFailure, UserUnchecked)):
            sys.stderr.write(f"error: {fail.message}\n")
            return
        super().add_failure(task, fail)
