"""doit plan: every stage in build order, key, arch, status, and why it would build."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from conftest import PINS, edit_toml, run_doit

import rocmgraph
import stages
from rocmgraph.building import records
from rocmgraph.commands.plan import Status, as_text, make_plan
from rocmgraph.common.engine import BuildJob
from rocmgraph.config import pins
from rocmgraph.graph import keys
from rocmgraph.graph.estimate import Estimate, Source, load_references
from rocmgraph.graph.explain import changes
from rocmgraph.graph.invocation import Options, Run

PROVIDED_SOURCES = ("flash_attention", "transformer_engine", "aiter")  # pins.toml: primus has them
VLLM_COMMIT = "18d87a87dc39c1a50f452b218fdcc3aeec48d18e"
NEW_COMMIT = "0123456789abcdef0123456789abcdef01234567"


class SetEngine:
    """The engine seam, in memory: images exist when listed. (Docker is tested for real.)"""

    def __init__(self, refs: set[str]) -> None:
        self.refs = refs

    def image_exists(self, ref: str) -> bool:
        return ref in self.refs

    def image_id(self, ref: str) -> str | None:
        return ref if ref in self.refs else None

    def image_ids(self, refs: Sequence[str]) -> dict[str, str | None]:
        return {ref: self.image_id(ref) for ref in refs}

    def build(self, job: BuildJob) -> str:
        self.refs.add(job.ref)
        return ""  # an image in memory has no digest

    def config(self, ref: str) -> dict[str, object]:
        return {}  # an image in memory has no configuration to carry over a squash

    def layers(self, ref: str) -> list[str]:
        return []  # no layers in memory: every stage shares its parent's (none)

    def tag(self, ref: str, alias: str) -> None:
        self.refs.add(alias)

    def refresh(self) -> None:
        pass  # nothing is remembered

    def pull(self, ref: str) -> None:
        raise NotImplementedError  # a registry is tested for real (test_cache.py)

    def push(self, ref: str) -> str:
        raise NotImplementedError

    def labels(self, ref: str) -> dict[str, str]:
        raise NotImplementedError

    def untag(self, ref: str) -> None:
        self.refs.discard(ref)


def build_all(run: Run, engine: SetEngine, seconds: float = 0.0) -> None:
    """Every stage of ``run`` built on ``engine`` and recorded, as the builder does."""
    for stage in run.graph:
        engine.refs.add(run.ref(stage.name))
        key = run.keys[stage.name]
        records.save(run.records_dir, stage.name, key.key, key.inputs, seconds=seconds)


@pytest.mark.docker  # the plan asks the engine what is built: exit 0 needs one
def test_plan_json_lists_every_stage_in_build_order() -> None:
    result = run_doit("plan", "arch=gfx942", "format=json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["arch"] == ["gfx942"]
    assert document["source_arch"] == ["gfx942", "gfx950"]  # [build].source_archs
    assert document["pins"] == "pins.toml"
    names = [s["name"] for s in document["stages"]]
    assert names == list(stages.graph().order)
    for stage in document["stages"]:
        assert len(stage["key"]) == 64
        assert stage["image"] == f"verl-rocm/{stage['name']}:{stage['key']}"
        assert stage["parents"] == list(stages.graph()[stage["name"]].parents)
        provided = stage["name"] in ("rocm", "wheels", *PROVIDED_SOURCES)
        assert stage["arch_dependent"] is (
            stages.graph()[stage["name"]].arch_dependent and not provided
        )
        assert stage["status"] == "not built"
        assert stage["reasons"] == ["never built"]
    base = document["stages"][0]
    assert base["missing"] == [
        {"pin": "[base].digest", "why": "image digest unknown; `doit lock` resolves it"}
    ]


def test_the_plan_of_the_real_pins_lists_only_what_a_build_needs() -> None:
    """The stages the base provides only check versions: none asks for a wheel's file, a
    full commit of aiter or ROCm's key, and neither does the manifest that reads them."""
    document = json.loads(run_doit("plan", "arch=gfx942", "format=json").stdout)
    missing = {
        stage["name"]: [f"{item['pin']} ({item['why']})" for item in stage["missing"]]
        for stage in document["stages"]
        if stage["missing"]
    }
    ipython = ["[python.sglang].ipython (no exact version; `doit lock` resolves one)"]
    assert missing == {
        "base": ["[base].digest (image digest unknown; `doit lock` resolves it)"],
        "sgl_kernel": [
            "[sources.sgl_kernel].tree (the subtree's tree id is unknown; `doit lock` records it)"
        ],
        "sglang": [
            "[sources.torch_memory_saver].commit "
            "(no commit is pinned; `doit lock` records upstream's)"
        ],
        "vllm": [
            "[sources.triton_kernels].commit (no commit is pinned; `doit lock` records upstream's)",
            "[sources.triton_kernels].tree "
            "(the subtree's tree id is unknown; `doit lock` records it)",
        ],
        "assemble": ipython,
        "manifest": ipython,
    }


def test_plan_takes_several_archs_in_any_order_and_separator() -> None:
    one = json.loads(run_doit("plan", "arch=gfx950;gfx942", "format=json").stdout)
    two = json.loads(run_doit("plan", "arch=gfx942,gfx950", "format=json").stdout)
    default = json.loads(run_doit("plan", "format=json").stdout)
    assert one == two == default
    assert default["arch"] == ["gfx942", "gfx950"]


def test_plan_reads_another_pins_file(write_pins: Callable[..., Path], pins_text: str) -> None:
    other = write_pins(edit_toml(pins_text, ["build", "archs"], ["gfx90a"]), "other.toml")
    document = json.loads(run_doit("plan", f"pins={other}", "format=json").stdout)
    assert document["pins"] == str(other)
    assert document["arch"] == ["gfx90a"]
    assert document["source_arch"] == ["gfx90a"]  # outside [build].source_archs: its own


def test_plan_says_which_input_changed_since_the_last_build(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    before = write_pins(pins_text)
    engine = SetEngine(set())
    run = Run(Options(pins=str(before), arch="gfx942"), stages.graph())
    build_all(run, engine)
    assert {p.status for p in make_plan(run, engine).stages} == {Status.BUILT}

    before.write_text(edit_toml(pins_text, ["sources", "vllm", "commit"], NEW_COMMIT))
    bumped = Run(Options(pins=str(before), arch="gfx942"), stages.graph())
    plans = {p.name: p for p in make_plan(bumped, engine).stages}
    assert {name for name, p in plans.items() if p.status is Status.NOT_BUILT} == {
        "vllm", "assemble", "manifest",
    }  # fmt: skip
    assert plans["vllm"].reasons == (
        "pin [sources.vllm].commit changed: 18d87a87dc39 -> 0123456789ab",
    )
    assert plans["assemble"].reasons == ("parent vllm changed",)
    assert plans["sglang"].reasons == ()

    mi350 = Run(Options(pins=str(before), arch="gfx950"), stages.graph())
    reasons = {p.name: p.reasons for p in make_plan(mi350, engine).stages}
    assert reasons["prune"] == ("arch: gfx942 -> gfx950",)
    assert reasons["sglang"] == ()  # it compiles for both ([build].source_archs)
    mi200 = Run(Options(pins=str(before), arch="gfx90a"), stages.graph())
    reasons = {p.name: p.reasons for p in make_plan(mi200, engine).stages}
    assert reasons["sglang"] == ("arch: gfx942,gfx950 -> gfx90a",)


def test_a_build_killed_after_its_tag_still_explains_the_next_change(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    path = write_pins(pins_text)
    engine = SetEngine(set())
    run = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    build_all(run, engine, seconds=60)
    # vllm moves to a new commit; its build tags its image, and the run is killed before
    # its record is saved: only the record begun before the build is there.
    path.write_text(edit_toml(pins_text, ["sources", "vllm", "commit"], NEW_COMMIT))
    moved = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    records.begin(moved.records_dir, "vllm", moved.keys["vllm"].key, moved.keys["vllm"].inputs)
    plans = {p.name: p for p in make_plan(moved, engine).stages}
    assert plans["vllm"].reasons == (  # not tagged: the begun build is no build
        "pin [sources.vllm].commit changed: 18d87a87dc39 -> 0123456789ab",
    )
    engine.refs.add(moved.ref("vllm"))
    path.write_text(edit_toml(pins_text, ["sources", "vllm", "commit"], "f" * 40))
    again = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    plans = {p.name: p for p in make_plan(again, engine).stages}
    assert plans["vllm"].reasons == (  # from the build that was killed, not the one before
        "pin [sources.vllm].commit changed: 0123456789ab -> ffffffffffff",
    )
    assert plans["vllm"].estimate is not None
    assert plans["vllm"].estimate.source is Source.NONE  # how long it took is not known
    records.save(moved.records_dir, "vllm", moved.keys["vllm"].key, moved.keys["vllm"].inputs)
    assert not (moved.records_dir / "vllm.building.json").exists()


def test_a_pins_file_is_not_explained_by_the_builds_of_the_one_beside_it(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    # pins.toml and pins-rocm702.toml sit side by side and build different images: the last
    # build of one says nothing about why a stage of the other builds.
    first = write_pins(pins_text)
    run = Run(Options(pins=str(first), arch="gfx942"), stages.graph())
    for stage in run.graph:
        records.save(
            run.records_dir, stage.name, run.keys[stage.name].key, run.keys[stage.name].inputs
        )
    text = edit_toml(pins_text, ["sources", "vllm", "commit"], NEW_COMMIT)
    other = write_pins(edit_toml(text, ["image", "name"], "verl-other"), "other.toml")
    beside = Run(Options(pins=str(other), arch="gfx942"), stages.graph())
    engine = SetEngine(set())
    assert {p.name: p.reasons for p in make_plan(beside, engine).stages}["vllm"] == ("never built",)
    again = {p.name: p.reasons for p in make_plan(run, engine).stages}
    assert again["vllm"] == (f"image {run.ref('vllm')} is gone (it was built before)",)


def test_plan_text_is_a_table_with_the_reasons(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    path = write_pins(pins_text)
    run = Run(Options(pins=str(path), arch="gfx942"), stages.graph())
    engine = SetEngine({run.ref("base")})
    lines = as_text(run, make_plan(run, engine)).splitlines()
    assert lines[0] == f"plan for arch gfx942 from {path}"
    assert lines[1] == "source stages compile for gfx942,gfx950 ([build].source_archs)"
    assert lines[2] == "stage               key           arch  status     estimate           why"
    base_key = run.keys["base"].short
    assert lines[3] == f"base                {base_key}  -     built      -                  -"
    assert lines[4] == (
        " " * 70 + "missing: [base].digest (image digest unknown; `doit lock` resolves it)"
    )
    rocm_key = run.keys["rocm"].short
    assert lines[5] == (
        f"rocm                {rocm_key}  -     not built  check only         never built; "
        "verify only: the base image provides it"
    )
    assert lines[-3:] == [
        "15 stages: 1 built, 14 to build",
        "14 stages to build: ~0 s of work, ~0 s on 2 builders "
        "(9 without an estimate, 5 checks only)",
        "network: off; a build refuses all 15 stages: no closure locked "
        "(doit lock closures=1, or hermetic=0)",
    ]
    both = Run(Options(pins=str(path), arch="gfx942,gfx950"), stages.graph())
    assert as_text(both, make_plan(both, engine)).splitlines()[1].startswith("stage ")


def test_a_demo_plan_says_its_build_locks_the_closures_first(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    """A demo profile's inputs are all made here: its build locks what is not locked; with
    locked=1 (as CI builds) it refuses, as a real profile does."""
    path = write_pins(pins_text)
    demo = Run(Options(pins=str(path), arch="gfx942", profile="demo"), stages.graph())
    engine = SetEngine({demo.ref("base")})
    assert as_text(demo, make_plan(demo, engine)).splitlines()[-1] == (
        "network: off; a build locks the closures of all 15 stages first: none locked"
    )
    strict = Run(
        Options(pins=str(path), arch="gfx942", profile="demo", locked=True), stages.graph()
    )
    assert as_text(strict, make_plan(strict, engine)).splitlines()[-1] == (
        "network: off; a build refuses all 15 stages: no closure locked (doit lock closures=1)"
    )


def test_plan_prices_the_build_from_records_then_reference_figures(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    run = Run(Options(pins=str(write_pins(pins_text)), arch="gfx942"), stages.graph())
    built = {"base", "rocm", "wheels", *PROVIDED_SOURCES, "causal_conv1d", "verl", "slim"}
    engine = SetEngine({run.ref(name) for name in built})
    # Built here before (another key: the figure is still the best guess of a rebuild).
    records.save(
        run.records_dir, "sgl_kernel", "0" * 64, run.keys["sgl_kernel"].inputs, seconds=1500
    )
    records.save(run.records_dir, "prune", "0" * 64, run.keys["prune"].inputs, seconds=300)
    references = load_references()  # vllm: 60 min; aiter (provided: checked only) 108 min
    plan = make_plan(run, engine, references, builders=2)
    priced = {p.name: p.estimate for p in plan.stages if p.estimate}
    assert priced == {
        "vllm": Estimate(3600.0, Source.REFERENCE),
        "sgl_kernel": Estimate(1500.0, Source.RECORDED),
        "sglang": Estimate(240.0, Source.REFERENCE),  # SGLang's Python package
        "prune": Estimate(300.0, Source.RECORDED),
        "assemble": Estimate(474.0, Source.REFERENCE),
        "manifest": Estimate(0.498, Source.REFERENCE),  # pip freeze
    }
    # vLLM and sgl-kernel side by side; SGLang and prune beside vLLM once sgl-kernel is done;
    # then assemble and manifest, after vLLM.
    assert (plan.total.work, plan.total.wall) == (6114.498, 3600.0 + 474.0 + 0.498)
    text = as_text(run, plan).splitlines()
    assert text[-4:] == [
        "6 stages to build: ~1 h 42 min of work, ~1 h 08 min on 2 builders "
        "(2 recorded, 4 reference figures of the real image)",
        "critical path: vllm → assemble → manifest (~1 h 08 min)",  # what the wall time is
        "network: off; a build refuses all 15 stages: no closure locked "
        "(doit lock closures=1, or hermetic=0)",
        "(ref): the real image's build time, as cited in docker/durations.toml",
    ]
    vllm = next(line for line in text if line.startswith("vllm "))
    assert "~1 h 00 min (ref) " in vllm
    one = make_plan(run, engine, references, builders=1)
    assert one.total.wall == 6114.498


@pytest.mark.docker  # the plan asks the engine what is built: exit 0 needs one
def test_plan_json_prices_each_stage_and_the_whole() -> None:
    result = run_doit("plan", "arch=gfx942", "format=json", "jobs=3")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    vllm = next(s for s in document["stages"] if s["name"] == "vllm")
    assert vllm["estimate"] == {"seconds": 3600.0, "from": "reference"}
    aiter = next(s for s in document["stages"] if s["name"] == "aiter")
    assert aiter["estimate"] == {"seconds": 0.0, "from": "check"}  # provided: it only checks
    assert document["estimate"]["builders"] == 3
    assert document["estimate"]["stages"] == 15
    bad = run_doit("plan", "jobs=0")
    assert bad.returncode == 3
    assert bad.stderr == "error: jobs=0: not a count; write jobs=1, jobs=2, ...\n"


def test_unknown_arch_and_format_are_one_line_errors() -> None:
    bad_arch = run_doit("plan", "arch=gfx942,gfx943")
    assert bad_arch.returncode == 3  # a wrong command, as doit's own usage errors
    assert bad_arch.stderr == (
        "error: arch=gfx942,gfx943: unknown GPU architecture 'gfx943'; did you mean 'gfx942'? "
        "known archs: gfx900, gfx906, gfx908, gfx90a, gfx90c, gfx940, gfx941, gfx942, gfx950, "
        "gfx1010, gfx1013, gfx1030, gfx1033, gfx1034, gfx1035, gfx1036, gfx1100, gfx1101, "
        "gfx1102, gfx1150, gfx1151, gfx1152, gfx1153, gfx1200, gfx1201, gfx1250\n"
    )
    bad_format = run_doit("plan", "format=yaml")
    assert bad_format.returncode == 3
    assert bad_format.stderr == (
        "error: format=yaml: unknown format; use format=text or format=json, or for graph "
        "format=svg, format=mermaid or format=dot\n"
    )


def test_pins_are_the_default_and_the_record_lives_beside_them() -> None:
    run = Run(Options(), stages.graph())
    assert Path(run.options.pins).name == PINS.name
    assert run.archs == ("gfx942", "gfx950")
    assert run.friendly_tag() == "verl-rocm:gfx942-gfx950"
    assert VLLM_COMMIT in run.keys["vllm"].inputs.pins.values()


def test_one_run_asks_any_number_of_engines(
    write_pins: Callable[..., Path], pins_text: str
) -> None:
    """A Run holds no engine: the same keys, asked of two machines, give two plans."""
    run = Run(Options(pins=str(write_pins(pins_text)), arch="gfx942"), stages.graph())
    here = SetEngine({run.ref(stage.name) for stage in run.graph})
    there = SetEngine({run.ref("base")})
    assert {p.status for p in make_plan(run, here).stages} == {Status.BUILT}
    elsewhere = {p.name: p.status for p in make_plan(run, there).stages}
    assert [name for name, status in elsewhere.items() if status is Status.BUILT] == ["base"]


def test_a_changed_variable_or_tool_version_is_a_reason() -> None:
    """commit_tag moves the manifest's key without touching its Dockerfile: the plan still
    says why."""
    before = keys.compute(stages.graph(), pins.load(PINS), ("gfx942",), {"commit_tag": "DEV"})
    now = keys.compute(stages.graph(), pins.load(PINS), ("gfx942",), {"commit_tag": "v1"})
    assert changes(now["manifest"].inputs, before["manifest"].inputs) == [
        "variable commit_tag changed: 'DEV' -> 'v1'"
    ]
    extras = {**(before["manifest"].inputs.extras or {}), "tool": "0.0.9"}
    older = dataclasses.replace(before["manifest"].inputs, extras=extras)
    assert changes(before["manifest"].inputs, older) == [
        f"input tool changed: '0.0.9' -> {rocmgraph.__version__!r}"
    ]
