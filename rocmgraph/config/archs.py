"""GPU architectures: the known gfx names and the ``arch=`` variable."""

from __future__ import annotations

import re

from rocmgraph.common.errors import VariableError, cut, shown
from rocmgraph.common.spelling import suggest
from rocmgraph.inimage.prune import KNOWN_ARCHS

__all__ = ["KNOWN_ARCHS", "parse_archs", "unknown_arch_hint"]


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
