"""Named moments at which a test stops a run, to kill it there (tests/test_faults.py).

With ``VERL_GRAPH_FAILPOINT=<name>`` a run that reaches the moment ``name`` says
so on stderr (``failpoint <name>``) and waits there, for the test to kill it in
whichever way it tests, or to break something else meanwhile (a registry) and let
it go on by creating the file ``VERL_GRAPH_FAILPOINT_RESUME`` names. Unset (always,
but in the tests), a moment costs one lookup. The moments are where a kill leaves
something behind: a fetch half renamed, a context half used, a tag without its
record, a demo half locked.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ENV = "VERL_GRAPH_FAILPOINT"
RESUME_ENV = "VERL_GRAPH_FAILPOINT_RESUME"
MOMENTS = ("fetch", "context", "tagged", "demo-lock")


def reached(name: str) -> None:
    assert name in MOMENTS, name  # a moment the suite does not know is a typo
    if os.environ.get(ENV) == name:
        print(f"failpoint {name}", file=sys.stderr, flush=True)
        resume = Path(os.environ.get(RESUME_ENV) or "/nonexistent/never")
        deadline = time.monotonic() + 3600
        while not resume.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
