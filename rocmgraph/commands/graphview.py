"""doit graph: the plan drawn. Each stage is a box with its name, status, short key, what
building it costs and, when it would build, the first reason why; the stages to build stand
out, so that a pull request that edits the pins shows what it costs at a glance.

Pure text: DOT for Graphviz (``rocmgraph.outside.graphviz`` draws it as SVG) and a Mermaid
flowchart, which GitHub draws where it is pasted.
"""

from __future__ import annotations

import html
import itertools
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rocmgraph.commands.plan import Plan, StagePlan, Status, critical
from rocmgraph.graph.invocation import Run

WIDTH = 38  # characters of a reason per line: the boxes stay narrow side by side
REASON_LINES = 3  # a longer reason is cut: `doit plan` says it whole


@dataclass(frozen=True)
class Look:
    """How a status is drawn: its class (CSS in the SVG, classDef in Mermaid), its words in
    the box, and its colours."""

    css: str
    words: str
    fill: str
    stroke: str
    stands_out: bool = False  # drawn with a heavier border: it costs a build


LOOKS = {
    Status.NOT_BUILT: Look("to_build", "to build", "#ffd8a8", "#d9480f", stands_out=True),
    Status.BUILT: Look("built", "built", "#ebfbee", "#2b8a3e"),  # pale: the eye goes elsewhere
    Status.CACHED: Look("cached", "cached", "#d0ebff", "#1864ab"),
    Status.UNKNOWN: Look("unknown", "unknown", "#f1f3f5", "#868e96"),
}
ARCH = "arch"  # the class every arch-dependent stage carries besides its status's


@dataclass(frozen=True)
class Box:
    """One stage as drawn: its name, its look, and the lines under its name."""

    name: str
    look: Look
    lines: tuple[str, ...]
    arch_dependent: bool


def box(stage: StagePlan) -> Box:
    look = LOOKS[stage.status]
    lines = [f"{look.words} · {stage.key[:12]}"]
    cost = [stage.estimate.text()] if stage.estimate else []
    arch = ["per arch"] if stage.arch_dependent else []
    if cost or arch:
        lines.append(" · ".join([*cost, *arch]))
    if stage.status is Status.NOT_BUILT and stage.reasons:
        lines += _why(stage.reasons)
    return Box(stage.name, look, tuple(lines), stage.arch_dependent)


def _why(reasons: Sequence[str]) -> list[str]:
    """The first reason, wrapped, and how many more `doit plan` gives."""
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    # "->" in "changed: 18d87a87dc39 -> 0123456789ab" must not be split at its hyphen
    return textwrap.wrap(
        reasons[0] + more,
        WIDTH,
        break_on_hyphens=False,
        max_lines=REASON_LINES,
        placeholder=" …",
    )


def caption(run: Run, plan: Plan) -> tuple[str, ...]:
    """What the drawing is of, and what building it costs (as `doit plan` says it)."""
    lines = [f"{run.options.pins}, arch {','.join(run.archs)}"]
    if plan.engine:  # the run's error says why, whole
        lines.append(
            f"{len(plan.stages)} stages: built status unknown (the engine is not reachable)"
        )
    else:
        lines.append(plan.total.text())
        lines += critical(plan)
    if plan.total.reference:
        lines.append("(ref): the real image's build time, as cited in docker/durations.toml")
    return tuple(lines)


# ------------------------------------------------------------------ DOT


def as_dot(plan: Plan, title: Sequence[str] = ()) -> str:
    """The plan as a Graphviz digraph, parents to children, left to right."""
    lines = [
        "digraph stages {",
        '  graph [rankdir=LR, nodesep=0.2, ranksep=0.5, fontname="Helvetica", fontsize=12,'
        f" labelloc=t, labeljust=l, label=<{_dot_title(title)}>];",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11,'
        ' margin="0.14,0.06"];',
        '  edge [color="#868e96", arrowsize=0.7];',
    ]
    lines += [_dot_node(box(stage)) for stage in plan.stages]
    on_path = _critical_edges(plan)
    lines += [
        f"  {_dot_id(parent)} -> {_dot_id(stage.name)}"
        + (CRITICAL_EDGE if (parent, stage.name) in on_path else "")
        + ";"
        for stage in plan.stages
        for parent in stage.parents
    ]
    return "\n".join([*lines, "}", ""])


CRITICAL = "#c92a2a"  # the critical path's edges: what more builders cannot shorten
CRITICAL_EDGE = f' [class="critical", color="{CRITICAL}", penwidth=2.5]'


def _critical_edges(plan: Plan) -> set[tuple[str, str]]:
    """The edges of the critical path the plan's caption names (none when it names none)."""
    chain = plan.total.critical if critical(plan) else ()
    return set(itertools.pairwise(chain))


def _dot_node(drawn: Box) -> str:
    look = drawn.look
    # Graphviz 2.41 and later put class= into the SVG's <g class="node ...">: CSS can style
    # a status, and a test can find it.
    classes = " ".join(["stage", look.css, *([ARCH] if drawn.arch_dependent else [])])
    # a row per line: with <br/> Graphviz sets the lines so close that an underscore in the
    # name strikes through the key under it
    rows = [f"<b>{html.escape(drawn.name)}</b>", *map(html.escape, drawn.lines)]
    label = _dot_table("".join(f"<tr><td>{row}</td></tr>" for row in rows), cellpadding=1)
    width = ", penwidth=2" if look.stands_out else ""
    return (
        f'  {_dot_id(drawn.name)} [class="{classes}", fillcolor="{look.fill}", '
        f'color="{look.stroke}"{width}, label=<{label}>];'
    )


def _dot_title(title: Sequence[str]) -> str:
    """The caption's lines over a legend: one cell per status, in its colours."""
    rows = [f'<tr><td align="left">{html.escape(line)}</td></tr>' for line in title]
    cells = "".join(
        f'<td bgcolor="{look.fill}" border="1" color="{look.stroke}">{look.words}</td>'
        for look in LOOKS.values()
    )
    # a table of its own: in the caption's table its cells would stretch to the longest line
    legend = f'<tr><td align="left">{_dot_table(f"<tr>{cells}</tr>", cellspacing=4)}</td></tr>'
    return _dot_table("".join(rows) + legend, cellspacing=2)


def _dot_table(rows: str, cellspacing: int = 0, cellpadding: int = 2) -> str:
    return (
        f'<table border="0" cellborder="0" cellspacing="{cellspacing}" '
        f'cellpadding="{cellpadding}">{rows}</table>'
    )


def _dot_id(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# ------------------------------------------------------------------ Mermaid


def as_mermaid(plan: Plan, title: Sequence[str] = ()) -> str:
    """The plan as a Mermaid flowchart, parents to children, left to right: GitHub draws it
    in a comment or a Markdown file (```mermaid)."""
    lines = [*_mermaid_title(title), "flowchart LR"]
    boxes = [box(stage) for stage in plan.stages]
    ids = {b.name: _mermaid_id(b.name, index) for index, b in enumerate(boxes)}
    lines += [f'    {ids[b.name]}["{_mermaid_label(b)}"]' for b in boxes]
    edges = [(parent, stage.name) for stage in plan.stages for parent in stage.parents]
    lines += [f"    {ids[parent]} --> {ids[child]}" for parent, child in edges]
    on_path = _critical_edges(plan)
    if on_path:  # linkStyle numbers the edges in the order they were written
        numbers = ",".join(str(i) for i, edge in enumerate(edges) if edge in on_path)
        lines.append(f"    linkStyle {numbers} stroke:{CRITICAL},stroke-width:3px")
    for look in LOOKS.values():
        width = ",stroke-width:3px" if look.stands_out else ""
        # black text: GitHub's dark theme writes light text, unreadable on these fills
        colours = f"fill:{look.fill},stroke:{look.stroke},color:#000{width}"
        lines.append(f"    classDef {look.css} {colours}")
    for look in LOOKS.values():
        named = [ids[b.name] for b in boxes if b.look == look]
        if named:
            lines.append(f"    class {','.join(named)} {look.css}")
    return "\n".join([*lines, ""])


def _mermaid_id(name: str, index: int) -> str:
    """A stage's name as its node's id, where Mermaid reads it as one (``end`` ends a
    subgraph, a hyphen starts an arrow): else its place in the plan."""
    usable = name.isascii() and name.isidentifier() and name.lower() != "end"
    return name if usable else f"stage{index}"


def _mermaid_title(title: Sequence[str]) -> list[str]:
    """Mermaid's front matter: a title of one line, quoted for YAML."""
    if not title:
        return []
    text = " · ".join(title).replace("\\", "\\\\").replace('"', '\\"')
    return ["---", f'title: "{text}"', "---"]


def _mermaid_label(drawn: Box) -> str:
    return "<br/>".join([f"<b>{_mermaid_text(drawn.name)}</b>", *map(_mermaid_text, drawn.lines)])


def _mermaid_text(text: str) -> str:
    """``text`` as Mermaid shows it literally inside a quoted label: its entity codes."""
    text = text.replace("#", "#35;")  # first: every other code starts with '#'
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;")):
        text = text.replace(char, code)
    return text
