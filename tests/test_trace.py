"""A build's timeline in the Chrome trace-event format, from a ledger and the lines its
stages' logs were told (the trace of real builds: test_e2e)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocmgraph.building import trace
from rocmgraph.building.ledger import Entry, Ledger, Status
from rocmgraph.building.trace import Timeline, Transfer


def spans(document: dict[str, Any], cat: str) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e["ph"] == "X" and e["cat"] == cat]


def tracks(document: dict[str, Any]) -> dict[int, str]:
    return {
        e["tid"]: e["args"]["name"]
        for e in document["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def inside(inner: dict[str, Any], outer: dict[str, Any]) -> bool:
    return bool(
        inner["tid"] == outer["tid"]
        and outer["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )


def a_solve(ledger: Ledger, timeline: Timeline) -> None:
    """vllm and sglang side by side on this engine, assemble waiting for both, then its
    step and its export; wheels pulled before, assemble pushed after."""
    ledger.know({"wheels": (), "vllm": ("wheels",), "sglang": ("wheels",),
                 "assemble": ("vllm", "sglang")})  # fmt: skip
    timeline.transfer(Transfer.PULL, "wheels", 0.5, 0.9)  # monotonic times, as execute gives
    ledger.record("wheels", Entry(Status.PULLED, key="6e238cc0e8d3"))
    for stage in ("vllm", "sglang", "assemble"):
        ledger.start(stage, f"{stage[:3]}111111111", expected=None)
    ledger.saw("vllm", "#5 [vllm_build 2/3] RUN pip wheel ./.")
    ledger.saw("sglang", "#3 [sglang 2/2] RUN pip install .")
    ledger.saw("sglang", "#3 DONE 0.0s")
    ledger.saw("sglang", "#4 exporting to image")
    ledger.saw("sglang", "#4 DONE 0.0s")
    ledger.record("sglang", Entry(Status.BUILT, 2.0))
    ledger.saw("vllm", "#5 12.1 building 'vllm._C'")  # a step's output: not a step
    ledger.saw("vllm", "#5 DONE 9.0s")
    ledger.record("vllm", Entry(Status.BUILT, 9.0))
    ledger.saw("assemble", "#2 [assemble 2/2] COPY --from=vllm /dist /dist")
    ledger.saw("assemble", "#2 DONE 0.1s")
    ledger.record("assemble", Entry(Status.BUILT, 1.0))


def test_a_trace_has_a_track_per_builder_and_a_span_per_stage_with_its_steps() -> None:
    ledger, timeline = Ledger(), Timeline()
    ledger.watch(timeline)
    a_solve(ledger, timeline)
    document = trace.document(ledger, timeline, "doit build:image", now=1e9)
    named = tracks(document)
    assert sorted(named.values()) == [
        "critical path", "pulls and pushes", "this engine", "this engine · 2", "this engine · 3",
    ]  # fmt: skip
    stages = {e["name"]: e for e in spans(document, "stage")}
    assert set(stages) == {"vllm", "sglang", "assemble"}  # wheels was pulled, not built
    assert len({e["tid"] for e in stages.values()}) == 3  # three at once: a lane each
    assert stages["vllm"]["args"] == {"key": "vll111111111", "status": "built", "seconds": 9.0,
                                      "critical_path": True}  # fmt: skip
    assert "critical_path" not in stages["sglang"]["args"]
    steps = spans(document, "step")
    assert [s["name"] for s in steps] == [  # in the order the stages were asked for
        "[2/3] RUN pip wheel ./.", "[2/2] RUN pip install .", "exporting to image",
        "[2/2] COPY --from=vllm /dist /dist",
    ]  # fmt: skip
    owner = dict(zip([s["name"] for s in steps], ["vllm", "sglang", "sglang", "assemble"],
                     strict=True))  # fmt: skip
    for step in steps:
        assert inside(step, stages[owner[step["name"]]]), step
    waits = {named[e["tid"]]: e for e in spans(document, "wait")}
    waited = waits[named[stages["assemble"]["tid"]]]
    assert waited["name"] == "waiting for vllm, sglang"
    assert inside(waited, stages["assemble"])
    # vllm and sglang waited for no parent: BuildKit readied the solve before their steps
    assert {e["name"] for e in waits.values() if e is not waited} == {"starting"}
    (pulled,) = spans(document, "pull")
    assert (pulled["name"], named[pulled["tid"]]) == ("pull wheels", "pulls and pushes")
    assert document["otherData"]["critical_path"] == ["vllm", "assemble"]
    assert document["otherData"]["critical_seconds"] == 10.0
    critical = [e["name"] for e in spans(document, "critical")]
    assert critical == ["vllm", "assemble"]


def test_a_builder_has_its_own_track_and_a_failed_stage_ends_where_it_failed() -> None:
    ledger, timeline = Ledger(), Timeline()
    ledger.watch(timeline)
    ledger.know({"vllm": (), "sglang": ()})
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None, builder="ssh://build-2")
    ledger.start("sglang", "a49104987a5d", expected=None)
    ledger.saw("sglang", "#3 [sglang 2/2] RUN pip install .")
    ledger.record("sglang", Entry(Status.FAILED, 0.5))  # its step never said DONE
    document = trace.document(ledger, timeline, "doit build:image", now=1e9)
    stages = {e["name"]: e for e in spans(document, "stage")}
    named = tracks(document)
    assert named[stages["vllm"]["tid"]] == "ssh://build-2"
    assert named[stages["sglang"]["tid"]] == "this engine"
    assert stages["sglang"]["args"]["status"] == "failed"
    (step,) = spans(document, "step")
    assert inside(step, stages["sglang"])  # open, it ends with its stage
    assert document["otherData"]["critical_path"] == []  # nothing was built


def test_a_stage_the_cache_held_whole_has_its_export_as_its_own_step() -> None:
    """BuildKit's cache held every step of causal_conv1d: its own build printed only its
    export, and another build of the solve printed its steps' headers after it ended (as a
    real solve of the demo did: test_verify_hermetic)."""
    ledger, timeline = Ledger(), Timeline()
    ledger.watch(timeline)
    ledger.know({"causal_conv1d": (), "sglang": ()})
    ledger.start("causal_conv1d", "e93ef38f8b41", expected=None)
    ledger.start("sglang", "c0ee3a0411b8", expected=None)
    ledger.saw("causal_conv1d", "#1 exporting to image")
    ledger.saw("causal_conv1d", "#1 DONE 0.0s")
    ledger.record("causal_conv1d", Entry(Status.BUILT, 0.0))
    ledger.saw("causal_conv1d", "#2 [causal_conv1d_build 3/4] WORKDIR /src/causal_conv1d")
    ledger.saw("sglang", "#1 [sglang_build 2/8] COPY src/sglang /src/sglang")
    ledger.record("sglang", Entry(Status.BUILT, 1.0))
    document = trace.document(ledger, timeline, "t", now=1e9)
    stages = {e["name"]: e for e in spans(document, "stage")}
    mine = [s for s in spans(document, "step") if inside(s, stages["causal_conv1d"])]
    assert [s["name"] for s in mine] == ["exporting to image"]  # not a step after it ended
    assert ledger.entries()["causal_conv1d"].began > 0.0  # it did not wait all along


def test_the_trace_is_json_that_names_what_it_is_of(tmp_path: Path) -> None:
    ledger, timeline = Ledger(), Timeline()
    ledger.watch(timeline)
    a_solve(ledger, timeline)
    trace.write(tmp_path / "trace.json", ledger, timeline, "doit build:image arch=gfx942")
    document = json.loads((tmp_path / "trace.json").read_text())
    assert document["otherData"]["title"] == "doit build:image arch=gfx942"
    assert document["displayTimeUnit"] == "ms"
    timed = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in timed)


def test_spans_nested_in_time_stay_nested_in_microseconds() -> None:
    ledger, timeline = Ledger(), Timeline()
    ledger.watch(timeline)
    ledger.know({"vllm": ()})
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    ledger.saw("vllm", "#5 [vllm_build 2/3] RUN pip wheel ./.")
    ledger.record("vllm", Entry(Status.BUILT, 1.0))  # its step never said DONE: open
    entry = ledger.entries()["vllm"]
    document = trace.document(ledger, timeline, "t", now=entry.ended)
    (stage,) = spans(document, "stage")
    (step,) = spans(document, "step")
    assert step["ts"] + step["dur"] == stage["ts"] + stage["dur"]  # ends with it, exactly
