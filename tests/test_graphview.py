"""doit graph: the plan drawn as Mermaid text and, through Graphviz's dot, as SVG."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml, need, run_doit
from test_plan import NEW_COMMIT, SetEngine, build_all

import stages
from rocmgraph.commands import graphview
from rocmgraph.commands.plan import Plan, Status, make_plan
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside import graphviz, proc

SVG = "{http://www.w3.org/2000/svg}"
NODE = re.compile(r'^    (\w+)\["(.*)"\]$')
EDGE = re.compile(r"^    (\w+) --> (\w+)$")
CLASS = re.compile(r"^    class ([\w,]+) (\w+)$")
MOVED = ("vllm", "assemble", "manifest")  # what a bump of vLLM's commit rebuilds


@pytest.fixture
def bumped(write_pins: Callable[..., Path], pins_text: str) -> tuple[Run, Plan]:
    """Every stage built (ten minutes each), then vLLM's commit moved."""
    path = write_pins(pins_text)
    engine = SetEngine(set())
    build_all(Run(Options(pins=str(path), arch="gfx942"), stages.graph()), engine, seconds=600)
    path.write_text(edit_toml(pins_text, ["sources", "vllm", "commit"], NEW_COMMIT))
    run = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    return run, make_plan(run, engine)


def links(plan: Plan) -> set[tuple[str, str]]:
    return {(parent, stage.name) for stage in plan.stages for parent in stage.parents}


def mermaid_parts(text: str) -> tuple[dict[str, str], set[tuple[str, str]], dict[str, str]]:
    """The nodes (id -> label), the edges and each node's class of a flowchart."""
    nodes, edges, classes = {}, set(), {}
    for line in text.splitlines():
        if node := NODE.match(line):
            nodes[node[1]] = node[2]
        elif edge := EDGE.match(line):
            edges.add((edge[1], edge[2]))
        elif assigned := CLASS.match(line):
            for name in assigned[1].split(","):
                assert name not in classes, f"{name} has two classes"
                classes[name] = assigned[2]
    return nodes, edges, classes


def test_the_mermaid_flowchart_has_every_stage_and_link_and_what_rebuilds(
    bumped: tuple[Run, Plan],
) -> None:
    run, plan = bumped
    text = graphview.as_mermaid(plan, graphview.caption(run, plan))
    lines = text.splitlines()
    assert lines[:4] == [
        "---",
        f'title: "{run.options.pins}, arch gfx942 · 3 stages to build: ~30 min 00 s of work, '
        "~30 min 00 s on 2 builders (3 recorded) · critical path: vllm → assemble → manifest "
        '(~30 min 00 s)"',
        "---",
        "flowchart LR",
    ]
    nodes, edges, classes = mermaid_parts(text)
    assert list(nodes) == list(stages.graph().order)
    assert edges == links(plan)
    assert classes == {name: "to_build" if name in MOVED else "built" for name in nodes}
    written = [(m[1], m[2]) for line in lines if (m := EDGE.match(line))]
    on_path = [written.index(("vllm", "assemble")), written.index(("assemble", "manifest"))]
    assert f"    linkStyle {on_path[0]},{on_path[1]} stroke:#c92a2a,stroke-width:3px" in lines
    assert "    classDef to_build fill:#ffd8a8,stroke:#d9480f,color:#000,stroke-width:3px" in lines
    key = run.keys["vllm"].key[:12]
    assert nodes["vllm"] == (  # the reason wrapped, its "->" in Mermaid's entity code
        f"<b>vllm</b><br/>to build · {key}<br/>~10 min 00 s · per arch<br/>"
        "pin [sources.vllm].commit changed:<br/>18d87a87dc39 -#gt; 0123456789ab"
    )
    assert nodes["verl"] == f"<b>verl</b><br/>built · {run.keys['verl'].key[:12]}"


def test_a_reason_s_quotes_brackets_and_ampersands_are_shown_as_they_are(
    bumped: tuple[Run, Plan],
) -> None:
    _, plan = bumped
    odd = 'pin "x" <y> & #1'
    stages_ = tuple(
        dataclasses.replace(stage, reasons=(odd, "another")) if stage.name == "vllm" else stage
        for stage in plan.stages
    )
    plan = dataclasses.replace(plan, stages=stages_)
    nodes, _, _ = mermaid_parts(graphview.as_mermaid(plan))
    assert nodes["vllm"].endswith("<br/>pin #quot;x#quot; #lt;y#gt; #amp; #35;1 (+1 more)")
    need_dot()
    svg = ET.fromstring(graphviz.svg(graphview.as_dot(plan)))
    assert node_texts(svg)["vllm"][-1] == f"{odd} (+1 more)"  # dot read it back whole


def need_dot() -> None:
    need("dot", package="graphviz")


def node_texts(svg: ET.Element) -> dict[str, list[str]]:
    """Each node's lines of text, by its title (the stage's name)."""
    return {
        g.findtext(f"{SVG}title", ""): [t.text or "" for t in g.iter(f"{SVG}text")]
        for g in svg.iter(f"{SVG}g")
        if g.get("class", "").split()[0] == "node"
    }


def test_the_svg_has_a_node_per_stage_with_its_status_class_and_an_edge_per_link(
    bumped: tuple[Run, Plan],
) -> None:
    need_dot()
    run, plan = bumped
    caption = graphview.caption(run, plan)
    svg = ET.fromstring(graphviz.svg(graphview.as_dot(plan, caption)))
    groups = list(svg.iter(f"{SVG}g"))
    drawn = [g for g in groups if g.get("class", "").startswith("node")]
    nodes = {g.findtext(f"{SVG}title", ""): g.get("class", "").split() for g in drawn}
    assert len(drawn) == len(nodes)  # one each: dot writes them in an order of its own
    assert sorted(nodes) == sorted(stages.graph().order)
    for stage in plan.stages:
        status = "to_build" if stage.name in MOVED else "built"
        arch = ["arch"] if stage.arch_dependent else []
        assert nodes[stage.name] == ["node", "stage", status, *arch], stage.name
    edges = {g.findtext(f"{SVG}title", ""): g.get("class") for g in groups
             if g.get("class", "").startswith("edge")}  # fmt: skip
    assert sorted(edges) == sorted(f"{parent}->{child}" for parent, child in links(plan))
    critical = sorted(title for title, css in edges.items() if css == "edge critical")
    assert critical == ["assemble->manifest", "vllm->assemble"]  # the caption's critical path
    texts = node_texts(svg)
    assert texts["vllm"] == [
        "vllm",
        f"to build · {run.keys['vllm'].key[:12]}",
        "~10 min 00 s · per arch",
        "pin [sources.vllm].commit changed:",
        "18d87a87dc39 -> 0123456789ab",
    ]
    assert texts["base"] == ["base", f"built · {run.keys['base'].key[:12]}"]
    everything = [t.text for t in svg.iter(f"{SVG}text")]
    assert [line for line in caption if line not in everything] == []  # the caption is drawn
    assert everything[len(caption) :][:4] == ["to build", "built", "cached", "unknown"]  # legend


def test_without_dot_the_error_names_the_package_and_the_other_format(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(proc.CommandMissing) as caught:
        graphviz.svg("digraph {}")
    assert str(caught.value) == (
        "graphviz's dot is not installed: apt-get install graphviz (or format=mermaid)"
    )


def test_doit_graph_writes_the_svg_and_says_where(tmp_path: Path) -> None:
    need_dot()
    nowhere = {"VERL_GRAPH_DOCKER": str(tmp_path / "docker")}  # the same on any machine
    drawn = ROOT / ".build" / "graph.svg"
    drawn.unlink(missing_ok=True)
    result = run_doit("graph", "arch=gfx942", env=nowhere)
    assert result.returncode == 2, result.stderr  # drawn, but what is built is not known
    assert result.stdout == "wrote .build/graph.svg\n"
    assert result.stderr.startswith("error: built status unknown: no docker client can build")
    classes = [g.get("class") for g in ET.parse(drawn).getroot().iter(f"{SVG}g")]
    assert classes.count("node stage unknown") + classes.count("node stage unknown arch") == 15


def test_doit_graph_format_mermaid_prints_or_writes_the_flowchart(tmp_path: Path) -> None:
    nowhere = {"VERL_GRAPH_DOCKER": str(tmp_path / "docker")}
    printed = run_doit("graph", "format=mermaid", "arch=gfx942", env=nowhere)
    assert printed.returncode == 2, printed.stderr
    nodes, edges, classes = mermaid_parts(printed.stdout)
    assert list(nodes) == list(stages.graph().order)
    assert len(edges) == sum(len(stage.parents) for stage in stages.graph())
    assert set(classes.values()) == {"unknown"}
    assert nodes["base"].startswith("<b>base</b><br/>unknown · ")
    assert printed.stdout.splitlines()[1] == (  # why, in short: stderr says it whole
        'title: "pins.toml, arch gfx942 · 15 stages: built status unknown (the engine is not '
        'reachable)"'
    )
    out = tmp_path / "graph.mmd"
    written = run_doit("graph", "format=mermaid", "arch=gfx942", f"out={out}", env=nowhere)
    assert written.stdout == f"wrote {out}\n"
    assert out.read_text() == printed.stdout
    wrong = run_doit("graph", "format=json")
    assert (wrong.returncode, wrong.stdout) == (3, "")
    assert wrong.stderr == (
        "error: format=json: unknown format; use format=svg, format=mermaid or format=dot\n"
    )


def test_every_status_has_its_look_and_class() -> None:
    assert set(graphview.LOOKS) == set(Status)
    classes = [look.css for look in graphview.LOOKS.values()]
    assert len(set(classes)) == len(classes)
    assert graphview.ARCH not in classes
    assert [look.words for look in graphview.LOOKS.values() if look.stands_out] == ["to build"]
