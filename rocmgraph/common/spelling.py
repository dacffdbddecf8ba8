"""Did you mean ...? The closest known name to a misspelt one, for error messages."""

from __future__ import annotations

from collections.abc import Sequence

# Names are short: a word far longer than any is a paste, not a typo (and difflib
# would take seconds over a 5 MB one).
_TYPO_LENGTH = 100


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` is most likely a typo of, or None."""
    if len(word) > _TYPO_LENGTH:
        return None
    import difflib  # here: only a misspelt name needs it, and every run imports this module

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(word: str, choices: Sequence[str]) -> str:
    """``did you mean 'x'?`` for the closest choice, or an empty string."""
    close = closest(word, choices)
    return f"did you mean {close!r}? " if close else ""
