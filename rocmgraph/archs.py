"""GPU architectures: the known gfx names and the ``arch=`` variable."""

from __future__ import annotations

import difflib
import re

from rocmgraph.errors import VariableError
from rocmgraph.prune import KNOWN_ARCHS

__all__ = ["KNOWN_ARCHS", "parse_archs", "suggest", "unknown_arch_hint"]


def suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """``did you mean 'x'?`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def unknown_arch_hint(name: str) -> str:
    """The fix for an unknown arch name, with a suggestion when one is close."""
    return f"{suggest(name, KNOWN_ARCHS)}known archs: {', '.join(KNOWN_ARCHS)}"


def parse_archs(text: str) -> tuple[str, ...]:
    """Parse ``arch=gfx942,gfx950`` (``;`` works too) into a sorted arch set.

    The result is sorted and free of duplicates, so ``gfx950,gfx942`` and
    ``gfx942;gfx950`` name the same build.
    """
    names = [part.strip() for part in re.split(r"[;,]", text) if part.strip()]
    if not names:
        raise VariableError(f"arch={text!r}: names no architecture; write e.g. arch=gfx942")
    for name in names:
        if name not in KNOWN_ARCHS:
            raise VariableError(
                f"arch={text}: unknown GPU architecture {name!r}; {unknown_arch_hint(name)}"
            )
    return tuple(sorted(set(names)))
