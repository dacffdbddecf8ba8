"""The one module that runs Graphviz's dot."""

from __future__ import annotations

from rocmgraph.outside import proc

MISSING = "graphviz's dot is not installed: apt-get install graphviz (or format=mermaid)"


def svg(dot: str) -> str:
    """The graph ``dot`` (DOT text) drawn as SVG."""
    try:
        return proc.run(["dot", "-Tsvg"], input_text=dot, timeout=120).stdout
    except proc.CommandMissing:
        raise proc.CommandMissing(MISSING) from None
