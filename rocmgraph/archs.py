"""GPU architectures: the known gfx names and the ``arch=`` variable."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from rocmgraph.errors import VariableError, cut, shown
from rocmgraph.inimage.prune import KNOWN_ARCHS

__all__ = ["KNOWN_ARCHS", "closest", "parse_archs", "suggest", "unknown_arch_hint"]

# Names are short: a word far longer than any is a paste, not a typo (and difflib
# would take seconds over a 5 MB one).
_TYPO_LENGTH = 100


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` is most likely a typo of, or None."""
    if len(word) > _TYPO_LENGTH:
        return None
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(word: str, choices: Sequence[str]) -> str:
    """``did you mean 'x'?`` for the closest choice, or an empty string."""
    close = closest(word, choices)
    return f"did you mean {close!r}? " if close else ""


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
        raise VariableError(f"arch={shown(text)}: names no architecture; write e.g. arch=gfx942")
    for name in names:
        if name not in KNOWN_ARCHS:
            raise VariableError(
                f"arch={cut(text)}: unknown GPU architecture {shown(name)}; "
                f"{unknown_arch_hint(name)}"
            )
    return tuple(sorted(set(names)))
