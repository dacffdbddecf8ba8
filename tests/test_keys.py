"""Content keys: pure, stable across processes and checkouts, and exact about what changed."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PINS, ROOT, delete_toml, edit_toml

import stages
from rocmgraph.common import sbomlib
from rocmgraph.config import kinds, pins
from rocmgraph.config.pins import Leaf, format_path, is_under
from rocmgraph.graph import keys, recipe
from rocmgraph.graph.dag import make_graph

GRAPH = stages.graph()
REAL = pins.load(PINS)

KEYS_SCRIPT = """
import json, sys
import rocmgraph, stages
from rocmgraph.graph import keys
from rocmgraph.config import pins
assert rocmgraph.__file__.startswith(sys.argv[1]), rocmgraph.__file__
computed = keys.compute(stages.graph(), pins.load("pins.toml"), ("gfx942",))
print(json.dumps({name: k.key for name, k in computed.items()}))
"""


def all_keys(pins_: pins.Pins, archs: tuple[str, ...] | None = None) -> dict[str, str]:
    computed = keys.compute(GRAPH, pins_, archs or pins_.build.archs)
    return {name: k.key for name, k in computed.items()}


def test_keys_are_64_hex_and_all_different() -> None:
    computed = all_keys(REAL)
    assert all(len(k) == 64 and int(k, 16) >= 0 for k in computed.values())
    assert len(set(computed.values())) == len(computed)


def test_canonical_encoding_ignores_insertion_order() -> None:
    def inputs(pins: dict[str, keys.Json]) -> keys.Inputs:
        return keys.Inputs(1, "s", "d", {"f": "0"}, pins, None, {})

    one = inputs({"[a].b": 1, "[a].a": [2, 3]})
    assert keys.canonical(one) == keys.canonical(inputs({"[a].a": [2, 3], "[a].b": 1}))
    assert keys.canonical(one) == (
        b'{"arch":null,"dockerfile":"d","files":{"f":"0"},"parents":{},'
        b'"pins":{"[a].a":[2,3],"[a].b":1},"schema":1,"stage":"s"}'
    )


def test_inputs_survive_a_record_and_an_older_one_reads_empty() -> None:
    now = keys.compute(GRAPH, REAL, ("gfx942",))["vllm"].inputs
    assert keys.Inputs.from_json(now.as_json()) == now
    old = keys.Inputs.from_json({"schema": 0, "pins": {"[x].y": "z"}})
    assert (old.schema, old.files, old.pins, old.arch) == (0, {}, {"[x].y": "z"}, None)


def test_same_inputs_same_keys_in_another_process_and_another_checkout(tmp_path: Path) -> None:
    here = {name: k.key for name, k in keys.compute(GRAPH, REAL, ("gfx942",)).items()}
    copy = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(".git", ".build", "__pycache__", ".*_cache", "*.egg-info"),
    )
    for path in copy.rglob("*"):  # touch every file: keys must not read times
        os.utime(path, (1_000_000_000, 1_000_000_000))
    for root in (ROOT, copy):
        result = subprocess.run(
            [sys.executable, "-c", KEYS_SCRIPT, str(root)],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout) == here


# ------------------------------------------------------ exactly what changed


def wheel_file(path: tuple[str, ...]) -> str:
    """Another build of the wheel ``[wheels.<name>].file`` names, fit for its pins."""
    name = path[1]
    version = REAL.wheels[name].version or "9.9.9"
    python = REAL.python.version.replace(".", "")
    return f"{name}-{version}+rocm9.9.9.gitdeadbeef-cp{python}-cp{python}-linux_x86_64.whl"


def mutated(leaf: Leaf) -> Any:
    """Another valid value for a pin, of the same kind."""
    value, kind = leaf.value, leaf.kind
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, tuple):
        if kind is kinds.STAGE_NAME:
            return list(value[1:])
        extras = {
            kinds.ARCH: "gfx90a",
            kinds.REPO_FILE: "rocmgraph/inimage/verify_dists.py",
            kinds.ENV_NAME: "EXTRA_ARCHS",
            kinds.PRUNE_DIR: "/opt/extra",
            kinds.PATH_GLOB: "/opt/extra/*.whl",
            kinds.ABS_PATH: "/opt/extra",
        }
        extra = extras[kind] if kind is not None and kind in extras else "extra"
        subtree = REAL.sources[leaf.path[1]].subtree if leaf.path[0] == "sources" else ""
        if subtree and kind is kinds.SRC_PATH:
            extra = f"{subtree}/{extra}"  # what a folder's build names lies inside it
        return [*value, extra]
    if kind is kinds.WHEEL_FILE:
        return wheel_file(leaf.path)
    samples = {
        kinds.COMMIT: "f" * 40,
        kinds.TREE: "c" * 40,
        kinds.SHA256: "e" * 64,
        kinds.DIGEST: "sha256:" + "d" * 64,
        kinds.VERSION: "9.9.9",
        kinds.WHEEL_VERSION: "9.9.9",
        kinds.SOURCE_VERSION: "9.9.9",
        kinds.APT_VERSION: "9.9-1",
        kinds.IMAGE: "docker.io/library/ubuntu:22.04",
        kinds.PYTHON_VERSION: "3.13",
        kinds.SIZE: "51G",
        kinds.DATE: "2027-01-01",
        kinds.URL: str(value).rstrip("/") + "/x",
        kinds.MIRROR: "https://mirror.example.org/x",
        kinds.SEPARATOR: "space" if value != "space" else "comma",
        kinds.ABS_PATH: "/opt/elsewhere",
        kinds.LINK_PATH: "site:elsewhere/amdsmi",
        kinds.COMPILE_CACHE: "redis://ccache.example.org:6379",
    }
    new = f"{value}x"
    if kind is not None:  # the sample of its kind, optional or not
        new = samples.get(kind, samples.get(dataclasses.replace(kind, optional=False), new))
    assert new != value
    return new


def readers(path: tuple[str, ...]) -> set[str]:
    if path == ("build", "archs"):  # the default arch set: an input of arch-dependent stages
        return {s.name for s in GRAPH if keys.depends_on_arch(s, REAL)}
    if path == ("build", "source_archs"):  # what those that compile take it for
        return {s.name for s in GRAPH if keys.depends_on_arch(s, REAL) and s.compiles}
    return {s.name for s in GRAPH if is_under(path, s.reads)}


def keyed_readers(path: tuple[str, ...], after: pins.Pins) -> set[str]:
    """The stages whose key a change at ``path`` must move: those it is a pin of (not only
    text of their Dockerfile, not checked only in a base image), and those whose rendered
    Dockerfile it changes."""
    archs = REAL.build.archs
    if path == ("build", "archs"):
        return readers(path)
    if path == ("build", "source_archs"):  # where the archs they compile for move
        return {
            name
            for name in readers(path)
            if recipe.stage_archs(GRAPH[name], REAL, archs)
            != recipe.stage_archs(GRAPH[name], after, archs)
        }
    return {
        s.name
        for s in GRAPH
        if is_under(path, keys.reads_of(s, REAL))
        or (
            is_under(path, s.reads)
            and recipe.render(s, REAL, archs) != recipe.render(s, after, archs)
        )
    }


def downstream(names: set[str]) -> set[str]:
    return names.union(*(GRAPH.descendants(name) for name in names))


LEAVES = list(REAL.leaves())


def test_every_pin_is_read_by_some_stage() -> None:
    unread = [
        format_path(leaf.path) for leaf in LEAVES if not leaf.location and not readers(leaf.path)
    ]
    assert unread == []


@pytest.mark.parametrize("leaf", LEAVES, ids=[format_path(leaf.path) for leaf in LEAVES])
def test_changing_one_pin_changes_exactly_its_readers_and_their_descendants(
    leaf: Leaf, pins_text: str
) -> None:
    before = all_keys(REAL)
    text = edit_toml(pins_text, leaf.path, mutated(leaf))
    if leaf.path == ("sources", "sgl_kernel", "subtree"):  # what its build names moves with it
        text = text.replace('"sgl-kernel/', '"sgl-kernelx/').replace(
            '["sgl-kernel"]', '["sgl-kernelx"]'
        )
    knob = leaf.path[-1]
    if leaf.path[:2] in (("sources", "sglang"), ("sources", "sgl_kernel")) and knob in (
        "commit",
        "repo",
    ):  # one checkout in one workspace: pinned, and moved, together
        for name in ("sglang", "sgl_kernel"):
            text = edit_toml(text, ("sources", name, knob), mutated(leaf))
    changed_pins = pins.loads(text)
    expected = set() if leaf.location else downstream(keyed_readers(leaf.path, changed_pins))
    if leaf.path[:2] == ("sources", "sgl_kernel") and knob == "commit":
        # SGLang's stage moves with it; the folder is keyed by its tree
        expected = downstream(keyed_readers(("sources", "sglang", "commit"), changed_pins))
    after = all_keys(changed_pins)
    changed = {name for name in before if before[name] != after[name]}
    # A location (mirror, index URL) says where content comes from, not what it is.
    assert changed == expected


LISTS = [leaf for leaf in LEAVES if isinstance(leaf.value, tuple) and len(leaf.value) > 1]


def test_patch_lists_and_the_command_are_the_ordered_ones() -> None:
    for leaf in LEAVES:
        patches = leaf.path[-1] == "patches" or leaf.path[:2] == ("python", "patches")
        ordered = patches or leaf.path == ("image", "cmd")
        assert leaf.ordered == (ordered and isinstance(leaf.value, tuple)), leaf.path
    ordered_lists = {format_path(leaf.path) for leaf in LISTS if leaf.ordered}
    assert ordered_lists == {
        "[sources.sgl_kernel].patches",
        "[sources.sglang].patches",
        "[sources.vllm].patches",
    }


@pytest.mark.parametrize("leaf", LISTS, ids=[format_path(leaf.path) for leaf in LISTS])
def test_the_order_of_a_list_changes_keys_exactly_when_the_list_is_ordered(
    leaf: Leaf, pins_text: str
) -> None:
    assert isinstance(leaf.value, tuple)
    reordered = [*leaf.value[1:], leaf.value[0]]
    loaded = pins.loads(edit_toml(pins_text, leaf.path, reordered))
    before, after = all_keys(REAL), all_keys(loaded)
    changed = {name for name in before if before[name] != after[name]}
    if leaf.ordered:  # patches: a later one sees the earlier ones applied
        assert loaded.flat()[leaf.path] == tuple(reordered)
        assert changed == downstream(readers(leaf.path))
    else:  # a set: the order written never feeds a key
        assert loaded.flat()[leaf.path] == leaf.value
        assert changed == set()


def test_adding_an_entry_to_a_table_changes_exactly_its_readers(pins_text: str) -> None:
    before = all_keys(REAL)
    after = all_keys(pins.loads(edit_toml(pins_text, ["env", "NEW_VARIABLE"], "1")))
    assert {n for n in before if before[n] != after[n]} == {"manifest"}  # the last stage sets it


def test_changing_the_arch_changes_only_arch_dependent_stages_and_descendants(
    pins_text: str,
) -> None:
    own = pins.loads(delete_toml(pins_text, ["build", "source_archs"]))  # each its own archs
    mi300 = all_keys(own, ("gfx942",))
    mi350 = all_keys(own, ("gfx950",))
    changed = {name for name in mi300 if mi300[name] != mi350[name]}
    assert changed == downstream({s.name for s in GRAPH if keys.depends_on_arch(s, own)})
    # A source stage the base provides only verifies: no arch set of its own.
    assert {"base", "rocm", "wheels", "verl", "slim", "flash_attention"}.isdisjoint(changed)


def test_images_of_the_source_archs_share_every_source_build() -> None:
    assert REAL.build.source_archs == ("gfx942", "gfx950")
    both, mi300, mi350 = (all_keys(REAL, archs) for archs in SETS)
    assert {name for name in mi300 if mi300[name] != mi350[name]} == {
        "prune", "assemble", "manifest",
    }  # fmt: skip
    compiled = {s.name for s in GRAPH if s.compiles and keys.depends_on_arch(s, REAL)}
    assert compiled == {"vllm", "sglang", "sgl_kernel", "causal_conv1d"}
    assert {name: mi300[name] for name in compiled} == {name: both[name] for name in compiled}
    # What the image targets stays its own: the pruned trees and PYTORCH_ROCM_ARCH.
    assert 'ENV PYTORCH_ROCM_ARCH="gfx942"' in recipe.render(GRAPH["manifest"], REAL, SETS[1])
    vllm = recipe.render(GRAPH["vllm"], REAL, SETS[1])
    assert 'PYTORCH_ROCM_ARCH="gfx942;gfx950"' in vllm
    # An arch outside them: its image compiles for its own.
    mi200 = all_keys(REAL, ("gfx90a",))
    assert {name for name in compiled if mi200[name] == mi300[name]} == set()
    assert 'PYTORCH_ROCM_ARCH="gfx90a"' in recipe.render(GRAPH["vllm"], REAL, ("gfx90a",))


SETS = (("gfx942", "gfx950"), ("gfx942",), ("gfx950",))


def test_a_changed_recipe_file_changes_its_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = all_keys(REAL)
    for name in {name for stage in GRAPH for name in keys.recipe_files(stage, REAL)}:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    helper = tmp_path / "rocmgraph" / "inimage" / "verify_dists.py"
    helper.write_text(helper.read_text() + "# one more line\n")
    monkeypatch.setattr(keys, "ROOT", tmp_path)
    after = all_keys(REAL)
    assert {n for n in before if before[n] != after[n]} == downstream({"wheels"})


def test_computing_every_key_reads_only_small_recipe_files_and_writes_nothing() -> None:
    """Keys (and so plans) need no writable directory: a fresh process's first keys open
    the recipe files for reading, and nothing else."""
    opened: list[tuple[str, str]] = []
    written: list[str] = []
    recording = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not recording[0]:
            return
        if event == "open" and isinstance(args[0], (str, Path)):
            opened.append((os.fspath(args[0]), str(args[1] or "r")))
        elif event in ("os.mkdir", "os.rename", "os.remove", "shutil.copyfile"):
            written.append(f"{event} {args[0]}")

    recipe._TEMPLATES.environment()  # Jinja's own modules loaded: code, not what keys read
    recipe._TEMPLATES.fresh()  # compile the templates afresh, as a new process does
    sys.addaudithook(hook)  # audit hooks cannot be removed: this one switches itself off
    try:
        keys.compute(GRAPH, REAL, ("gfx942", "gfx950"))
    finally:
        recording[0] = False
    recipes = {ROOT / name for stage in GRAPH for name in keys.recipe_files(stage, REAL)}
    assert opened, "the hook saw no file: it cannot vouch for anything"
    assert written == []
    for name, mode in opened:
        path = Path(name).resolve()
        assert path in recipes, name
        assert not set(mode) & set("wax+"), (name, mode)
        assert path.stat().st_size < 64 * 1024, name


def test_what_reaches_an_image_besides_its_dockerfile_is_in_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """slim's configuration leaves out the variables it drops, and build.json names the
    tool: both shape an image without being in its Dockerfile. Only those stages read them."""
    before = all_keys(REAL)
    slim = dataclasses.replace(GRAPH["slim"], drop_env=GRAPH["slim"].drop_env[:-1])
    graph = make_graph([slim if stage.name == "slim" else stage for stage in GRAPH])
    dropped = keys.compute(graph, REAL, REAL.build.archs)
    moved = {name for name, key in dropped.items() if key.key != before[name]}
    assert moved == {"slim"} | GRAPH.descendants("slim")
    monkeypatch.setattr("rocmgraph.__version__", "9.9.9")
    assert {n for n, k in all_keys(REAL).items() if k != before[n]} == {"manifest"}
    inputs = keys.compute(GRAPH, REAL, REAL.build.archs)
    assert inputs["manifest"].inputs.extras == {"tool": "9.9.9", "sbom_library": sbomlib.PINNED}
    assert inputs["vllm"].inputs.extras is None


def test_two_long_pin_names_cut_alike_in_a_message_are_two_inputs(pins_text: str) -> None:
    long = "A" * 250
    one = pins.loads(edit_toml(pins_text, ["env", long + "B"], "1"))
    two = pins.loads(edit_toml(pins_text, ["env", long + "C"], "1"))
    assert format_path(("env", long + "B")) == format_path(("env", long + "C"))  # as said
    # (a value rendered into the Dockerfile moves the key anyway; one that is not would not)
    for loaded, last in ((one, "B"), (two, "C")):
        read = keys.compute(GRAPH, loaded, ("gfx942",))["manifest"].inputs.pins
        assert read[f"[env].{long}{last}"] == "1"


@pytest.mark.parametrize(
    ("path", "value", "moved"),
    [
        (["sources", "vllm", "uninstall"], ["tilelang", "other"], {"assemble", "manifest"}),
        (["sources", "vllm", "install_deps"], False, {"assemble", "manifest"}),
        (["sources", "causal_conv1d", "keep_env"], False, {"manifest"}),  # the runtime env
        (["sources", "vllm", "branch"], "release", set()),
        (["sources", "vllm", "tag"], "v9.9.9", set()),
        (["sources", "vllm", "repo"], "https://github.com/fork/vllm", set()),
    ],
)
def test_how_a_wheel_is_installed_or_fetched_rebuilds_no_wheel(
    pins_text: str, path: list[str], value: object, moved: set[str]
) -> None:
    """Hours of vLLM are not spent again for a knob of assemble's, or for where its
    commit is fetched from and what upstream calls it."""
    before = all_keys(pins.loads(pins_text))
    after = all_keys(pins.loads(edit_toml(pins_text, path, value)))
    assert {name for name in before if before[name] != after[name]} == moved


def test_assemble_uninstalls_what_any_source_names(pins_text: str) -> None:
    edited = pins.loads(edit_toml(pins_text, ["sources", "sglang", "uninstall"], ["demo-x"]))
    text = recipe.render(GRAPH["assemble"], edited, ("gfx942",))
    assert "pip uninstall -y demo-x tilelang" in text  # sglang's, then vLLM's


def test_what_doit_lock_records_for_a_stage_the_base_provides_rebuilds_nothing() -> None:
    """rocm/primus carries ROCm and the torch stack: those stages only check its versions,
    so the apt key's and the wheels' sha256 that `doit lock` fills are no input of them (nor
    of the vLLM and sgl-kernel builds above them); the manifest records them."""
    text = edit_toml(PINS.read_text(), ["rocm", "key_sha256"], "b" * 64)
    text = edit_toml(text, ["wheels", "torch", "sha256"], "c" * 64)
    after = all_keys(pins.loads(text))
    assert {name for name, key in all_keys(REAL).items() if after[name] != key} == {"manifest"}
    provided_no_more = edit_toml(text, ["base", "provides"], ["wheels"])
    assert all_keys(pins.loads(provided_no_more))["rocm"] != all_keys(REAL)["rocm"]


def test_a_version_only_checked_moves_the_checks_and_rebuilds_no_wheel() -> None:
    """causal-conv1d is given no version to build with: correcting its pinned version moves
    the manifest, which checks the image for it, and not the hour-long wheel builds."""
    assert not REAL.sources["causal_conv1d"].version_env
    text = edit_toml(PINS.read_text(), ["sources", "causal_conv1d", "version"], "9.9.9")
    after = all_keys(pins.loads(text))
    changed = {name for name, key in all_keys(REAL).items() if after[name] != key}
    assert changed == {"manifest"}
