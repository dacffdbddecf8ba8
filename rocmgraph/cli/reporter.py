"""A doit reporter that prints a user error as one line, without a traceback.

Actions turn a GraphToolError into a ``UserFailure``; this reporter prints
it as ``error: <message>`` on stderr and skips doit's captured-output dump.
Any other failure is a bug and is reported by doit as usual, traceback and all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from doit.exceptions import TaskError, TaskFailed
from doit.reporter import ConsoleReporter

from rocmgraph.building.session import Session
from rocmgraph.common import disk
from rocmgraph.common.errors import GraphToolError, Unchecked, UsageError


class UserFailure(TaskFailed):  # type: ignore[misc]
    """A failure whose message says everything: no traceback, no output dump (exit 1)."""


class UserUnchecked(TaskError):  # type: ignore[misc]
    """Something could not be checked: one line too, and doit exits with 2."""


class UserUsage(TaskError):  # type: ignore[misc]
    """The command is wrong: one line, and the run exits with 3 (doit's own usage code)."""


def guarded(function: Callable[..., object], *args: object) -> Callable[[], object]:
    """Wrap an action so that a GraphToolError, or a disk that is full or read-only, becomes
    a one-line failure."""

    def action() -> object:
        try:
            result = function(*args)
        except Unchecked as exc:
            return UserUnchecked(str(exc))
        except UsageError as exc:
            return UserUsage(str(exc))
        except GraphToolError as exc:
            return UserFailure(str(exc))
        except OSError as exc:
            if exc.errno not in disk.REFUSALS:
                raise
            # Two file names: a copy, a link, a rename; the second is the one written.
            written = exc.filename2 or exc.filename
            return UserFailure(str(disk.refused(exc.errno, Path(written) if written else None)))
        return None if result is None else result

    action.__name__ = getattr(function, "__name__", "action")
    return action


class Reporter(ConsoleReporter):  # type: ignore[misc]
    """doit's console reporter, quiet for report tasks and terse for user errors."""

    def execute_task(self, task: Any) -> None:
        # Tasks that print a report (plan, render) keep stdout for it alone; builds have
        # the console (rocmgraph.building.progress).
        if not (task.meta or {}).get("quiet"):
            super().execute_task(task)

    def skip_uptodate(self, task: Any) -> None:
        if not (task.meta or {}).get("quiet"):
            super().skip_uptodate(task)

    def __init__(self, outstream: Any, options: Any, session: Session) -> None:
        super().__init__(outstream, options)
        self.session = session  # the run's: its trace written, its view ended before errors
        self.usage = False
        self.errors: list[str] = []  # said after the build's summary, where they are seen

    def add_failure(self, task: Any, fail: Any) -> None:
        if isinstance(fail, (UserFailure, UserUnchecked, UserUsage)):
            self.usage = self.usage or isinstance(fail, UserUsage)
            self.errors.append(f"error: {fail.message}\n")
            return
        super().add_failure(task, fail)

    def complete_run(self) -> None:
        self.session.end()
        for error in self.errors:
            sys.stderr.write(error)
        sys.stderr.flush()
        super().complete_run()
        if self.usage:
            # doit's runner knows exit codes 1 and 2 only; a wrong command is 3, as doit's
            # own command-line errors are. The run is over (its database saved) by now.
            raise SystemExit(3)


def usage_exit(error: UsageError) -> NoReturn:
    """A wrong command found while tasks are being made (before any runs): exit 3."""
    sys.stderr.write(f"error: {error}\n")
    raise SystemExit(3)
