"""Which stages one BuildKit solve builds together, and whose line is whose (solve.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import PINS, ROOT
from test_plan import SetEngine

import stages
from rocmgraph.building import dockerfiles
from rocmgraph.building.execute import _SCRATCH, _Builds, solve_recipe
from rocmgraph.building.session import Session
from rocmgraph.common.errors import GraphToolError
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.dag import Stage, make_graph
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.graph.solve import Router, waves

GRAPH = stages.graph()


def test_a_change_below_the_squash_builds_its_parent_first_then_the_rest_in_one_solve() -> None:
    """slim squashes wheels and takes its configuration: wheels (and what it needs) is one
    solve, everything else the next; the source stages do not wait for it."""
    assert waves(GRAPH, GRAPH.order) == [
        ("base", "rocm", "wheels"),
        tuple(name for name in GRAPH.order if name not in {"base", "rocm", "wheels"}),
    ]


def test_stages_above_the_squash_are_one_solve() -> None:
    todo = ["manifest", "assemble", "vllm", "verl", "slim"]
    assert waves(GRAPH, todo) == [("slim", "vllm", "verl", "assemble", "manifest")]


def test_a_squash_whose_parent_needs_another_squash_waits_for_both() -> None:
    def stage(name: str, *parents: str, squash: bool = False) -> Stage:
        return Stage(name=name, doc=name, parents=parents, recipe="x.j2", squash=squash)

    graph = make_graph(
        [stage("a"), stage("b", "a", squash=True), stage("c", "b"), stage("d", "c", squash=True),
         stage("e", "a")]
    )  # fmt: skip
    assert waves(graph, graph.order) == [("a",), ("b", "c"), ("e", "d")]  # e: in the last
    assert waves(graph, ["c", "d"]) == [("c",), ("d",)]
    assert waves(graph, []) == []


def test_a_sealed_stage_and_an_open_one_it_needs_are_solved_apart() -> None:
    """A build's network is one for all its steps: vLLM (open: its bump has no closure yet)
    comes before the sealed stages that need it."""
    todo = ["vllm", "sglang", "verl", "assemble", "manifest"]
    sealed = {"sglang", "verl", "assemble", "manifest"}
    assert waves(GRAPH, todo, sealed) == [("vllm",), ("sglang", "verl", "assemble", "manifest")]
    assert waves(GRAPH, ["vllm", "sglang"], {"sglang"}) == [("sglang",), ("vllm",)]  # apart
    assert waves(GRAPH, todo, set(todo)) == [tuple(n for n in GRAPH.order if n in todo)]


def route(lines: list[tuple[str, str]]) -> dict[str, list[str]]:
    told: dict[str, list[str]] = {}
    router = Router({"vllm_build": "vllm", "vllm": "vllm", "assemble": "assemble"},
                    lambda stage, line: told.setdefault(stage, []).append(line))  # fmt: skip
    for build, line in lines:
        router.feed(build, line)
    return told


def test_a_step_goes_to_its_stage_whichever_build_ran_it() -> None:
    """assemble's build ran vllm's compile (BuildKit merged vllm's own build into it): the
    step's output is vllm's, once, renumbered in vllm's log; vllm's own build said it
    CACHED, which is not news; each build's own lines stay with it."""
    told = route([
        ("vllm", "$ docker build --target vllm ."),
        ("vllm", "#1 [internal] load build definition from Dockerfile"),
        ("assemble", "#1 [internal] load build definition from Dockerfile"),
        ("assemble", "#7 [vllm_build 5/5] RUN pip wheel ."),
        ("assemble", "#7 sha256:abc"),
        ("vllm", "#6 [vllm_build 5/5] RUN pip wheel ."),
        ("vllm", "#6 sha256:abc"),
        ("assemble", "#7 0.52 Building wheel for vllm"),
        ("assemble", "#7 DONE 2.6s"),
        ("vllm", "#6 CACHED"),
        ("vllm", ""),
        ("vllm", "#9 exporting to image"),
        ("assemble", "#8 [assemble 2/3] RUN pip install /dist/*.whl"),
        ("assemble", "#8 ERROR: executor failed running [pip install]: exit code: 1"),
        ("assemble", "executor failed running [pip install]: exit code: 1"),
    ])  # fmt: skip
    assert told == {
        "vllm": [
            "$ docker build --target vllm .",
            "#1 [internal] load build definition from Dockerfile",
            "#2 [vllm_build 5/5] RUN pip wheel .",
            "#2 sha256:abc",
            "#2 0.52 Building wheel for vllm",
            "#2 DONE 2.6s",
            "#3 exporting to image",
        ],
        "assemble": [
            "#1 [internal] load build definition from Dockerfile",
            "#2 [assemble 2/3] RUN pip install /dist/*.whl",
            "#2 ERROR: executor failed running [pip install]: exit code: 1",
            "executor failed running [pip install]: exit code: 1",
        ],
    }


def test_a_step_s_output_that_every_build_of_the_solve_prints_is_told_once() -> None:
    """buildx gives each build that shares a step all of the step's output: vllm's compile
    in the builds of vllm, assemble and manifest. Its log holds one copy, a line the step
    printed twice (ccache's Hits, direct and in all) included, so its figures count once."""
    output = [
        "#6 8.606   Hits:   0 / 18",
        "#6 8.606   Misses: 18 / 18",
        "#6 8.606   Hits:   0 / 18",
    ]
    fed = [("vllm", "#6 [vllm_build 7/8] RUN pip wheel ."), *(("vllm", line) for line in output)]
    for build in ("assemble", "manifest"):
        fed += [(build, "#11 [vllm_build 7/8] RUN pip wheel ."),
                *((build, line.replace("#6", "#11")) for line in output)]  # fmt: skip
    fed += [("vllm", "#6 DONE 8.7s"), ("assemble", "#11 DONE 8.7s"), ("manifest", "#11 DONE 8.7s")]
    assert route(fed)["vllm"] == [
        "#1 [vllm_build 7/8] RUN pip wheel .",
        "#1 8.606   Hits:   0 / 18",
        "#1 8.606   Misses: 18 / 18",
        "#1 8.606   Hits:   0 / 18",
        "#1 DONE 8.7s",
    ]


# The build of prune in a solve of base, rocm, wheels and prune, as docker 20.10 prints it
# (--progress=plain): it fails at wheels' pip install, which found a wheel with other bytes.
PRUNE_FAILS_AT_WHEELS = ROOT / "tests" / "fixtures" / "buildkit" / "prune-fails-at-wheels.log"
OWNERS = {"base": "base", "rocm": "rocm", "wheels": "wheels", "pruning": "prune", "prune": "prune"}


def failed_at(lines: list[str], build: str = "prune") -> str:
    router = Router(OWNERS, lambda stage, line: None)
    for line in lines:
        router.feed(build, line)
    return router.failed(build)


def test_a_build_that_fails_at_another_stage_s_step_names_that_stage() -> None:
    lines = PRUNE_FAILS_AT_WHEELS.read_text().splitlines()
    assert failed_at(lines) == "wheels"
    before = lines[: lines.index("------")]
    assert failed_at(before) == "prune"  # no summary yet: its own, as far as it can tell
    # buildx's summary (BuildKit 0.11 on): the step's lines without their "#14 ", then where
    # in the Dockerfile, between longer dashes
    newer = [
        "#14 ERROR: process \"/bin/sh -c pip install --no-index ...\" did not complete "
        "successfully: exit code: 1",
        "------",
        " > [wheels 2/2] RUN --mount=type=bind,source=wheels,target=/tmp/wheels     pip "
        "install --no-index ...:",
        "0.871 ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. ...",
        "------",
        "Dockerfile:93",
        "--------------------",
        "  92 |     # closure's page of links, named here as in pip's configuration).",
        "  93 | >>> RUN --mount=type=bind,source=wheels,target=/tmp/wheels \\",
        "--------------------",
        "ERROR: failed to solve: process \"/bin/sh -c pip install ...\" did not complete "
        "successfully: exit code: 1",
    ]  # fmt: skip
    assert failed_at(newer) == "wheels"


def test_a_step_of_no_stage_that_fails_is_the_build_s_own() -> None:
    lines = [
        "#5 [internal] load build context",
        "#5 ERROR: failed to walk /home/me/.build/contexts/prune/wheels: permission denied",
        "------",
        " > [internal] load build context:",
        "------",
        "failed to walk /home/me/.build/contexts/prune/wheels: permission denied",
    ]
    assert failed_at(lines) == "prune"
    # a file of one stage: "[ 8/13]", no stage named
    assert failed_at(["------", " > [ 8/13] RUN make:", "------"], "vllm") == "vllm"


def test_a_file_of_one_stage_names_no_stage_in_its_steps() -> None:
    told = route([("vllm", "#4 [1/4] FROM docker.io/x"), ("vllm", "#4 CACHED")])
    assert told == {"vllm": ["#1 [1/4] FROM docker.io/x", "#1 CACHED"]}


class Configured(SetEngine):
    """In memory, with the configuration a squashed stage takes from its parent's image."""

    def config(self, ref: str) -> dict[str, object]:
        return {"Env": ["PATH=/opt/venv/bin:/usr/bin", "DEBIAN_FRONTEND=noninteractive"]}


def test_a_solve_file_holds_its_stages_and_takes_the_rest_as_images() -> None:
    run = Run(Options(pins=str(PINS), arch="gfx942"), GRAPH)
    wave = ("slim", "verl", "assemble", "manifest")
    images = {name: run.ref(name) for name in GRAPH.order if name not in wave}
    text, owners = solve_recipe(run, Configured(set()), wave, images)
    froms = re.findall(r"^FROM .*$", text, re.MULTILINE)
    wheels = run.ref("wheels")
    assert froms[:2] == [f"FROM {wheels} AS slim_trimmed", "FROM scratch AS slim"]
    assert "FROM slim AS verl" in froms
    assert f"FROM {run.ref('prune')} AS prune" in froms  # assemble's alias of an image
    assert froms[-2:] == ["FROM verl AS assemble", "FROM assemble AS manifest"]
    assert "ARG SLIM_IMAGE" not in text
    assert "${WHEELS_IMAGE}" not in text
    # slim ends with the configuration of wheels' image, less the build-only variables but
    # those the base image sets itself: rocm/primus sets DEBIAN_FRONTEND ([base].keeps_env)
    slim = text.split("FROM scratch AS slim", 1)[1].split("\nFROM ", 1)[0]
    assert 'ENV PATH="/opt/venv/bin:/usr/bin"' in slim
    assert 'DEBIAN_FRONTEND="noninteractive"' in slim
    plain = Run(Options(pins=str(ROOT / "pins-rocm702.toml"), arch="gfx942"), GRAPH)
    text, _ = solve_recipe(plain, Configured(set()), ("slim",), {"wheels": plain.ref("wheels")})
    assert "DEBIAN_FRONTEND" not in text.split("FROM scratch AS slim", 1)[1]
    assert owners["slim_trimmed"] == owners["slim"] == "slim"
    assert owners["prune"] == "assemble"
    assert owners["manifest"] == "manifest"


def test_the_whole_file_squashed_ends_the_squash_with_the_configuration_given() -> None:
    """The benchmark's squashed monolith: one file, slim squashed as the graph squashes it;
    without configurations, the plain monolith squashes nothing."""
    run = Run(Options(pins=str(PINS), arch="gfx942"), GRAPH)
    lines = ['ENV PATH="/opt/venv/bin:/usr/bin"', "WORKDIR /workspace"]
    text = dockerfiles.dockerfile(run, {"slim": lines})
    froms = re.findall(r"^FROM .*$", text, re.MULTILINE)
    assert "FROM wheels AS slim_trimmed" in froms
    assert "FROM scratch AS slim" in froms
    slim = text.split("FROM scratch AS slim", 1)[1].split("\nFROM ", 1)[0]
    squashed = "COPY --from=slim_trimmed / /\n\n# The configuration of the image it squashes:\n"
    assert slim.startswith("\n" + squashed + "\n".join(lines) + "\n\n")
    assert "FROM scratch" not in dockerfiles.dockerfile(run)
    with pytest.raises(ValueError, match=r"^no configuration given for the squashed stage slim$"):
        dockerfiles.dockerfile(run, {})
    owners = dockerfiles.owners(dockerfiles.stage_texts(run, squash=True))
    assert owners["slim_trimmed"] == owners["slim"] == "slim"
    assert owners["pruning"] == owners["prune"] == "prune"


class Layered(SetEngine):
    """In memory, every stage on its parent's layers but vLLM (its /dist alone)."""

    def layers(self, ref: str) -> list[str]:
        if ref not in self.refs:
            raise AssertionError(f"asked the layers of {ref}, which is not there")
        return ["dist"] if "/vllm:" in ref else ["base-layer"]


def builds_of(run: Run, engine: SetEngine, tmp_path: Path) -> _Builds:
    outside = Outside(logs=tmp_path)
    return _Builds(run, engine, outside, Session(), where="", tell=lambda name, error: None)


def test_a_stage_from_scratch_is_on_no_parent_s_layers(tmp_path: Path) -> None:
    """vLLM's image is its /dist alone (FROM scratch): solved with wheels (`doit build:vllm`
    on an empty engine), it is not built again for not sharing wheels' layers."""
    run = Run(Options(pins=str(PINS), arch="gfx942"), GRAPH)
    wave = ("wheels", "vllm")
    builds = builds_of(run, Layered({run.ref(name) for name in wave}), tmp_path)
    builds.built = set(wave)
    text, _ = solve_recipe(run, SetEngine(set()), wave, {"rocm": run.ref("rocm")})
    builds.scratch.update(name for name in _SCRATCH.findall(text) if name in wave)
    assert builds.scratch == {"vllm"}
    assert builds._misbuilt(wave) == []
    builds.scratch = set()  # were it built FROM wheels, it would have shipped a copy of it
    assert builds._misbuilt(wave) == ["vllm"]


def test_a_stage_whose_parent_failed_in_its_solve_is_not_compared_with_it(
    tmp_path: Path,
) -> None:
    """wheels' export failed (a full disk) where verl's tagged: no image of wheels to ask
    about; wheels' own error is the run's."""
    run = Run(Options(pins=str(PINS), arch="gfx942"), GRAPH)
    wave = ("wheels", "slim")
    builds = builds_of(run, Layered({run.ref("slim")}), tmp_path)
    builds.built = {"slim"}
    builds.failed = {"wheels": GraphToolError("wheels: no space left on device")}
    assert builds._misbuilt(wave) == []
