"""The environment a doit run gets in a user's shell, for every benchmark that times one.

This sandbox's shell sets PYTHONDONTWRITEBYTECODE=1, so every run would compile the
project's modules again (about 0.1 s more per run); a user's shell caches the bytecode."""

from __future__ import annotations

import os


def environ(**extra: str) -> dict[str, str]:
    found = {**os.environ, **extra}
    found.pop("PYTHONDONTWRITEBYTECODE", None)
    return found
