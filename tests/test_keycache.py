"""Keys kept between runs: the same keys as computed, never kept keys of other inputs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from conftest import PINS, ROOT

import stages
from rocmgraph.config import pins
from rocmgraph.graph import keycache, keys
from rocmgraph.graph.dag import Graph, make_graph
from rocmgraph.graph.invocation import Options, Run

GRAPH = stages.graph()
REAL = pins.load(PINS)
ARCHS = ("gfx942",)


@pytest.fixture(autouse=True)
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file of the checkout settled before this process loaded its code (an edit
    made just before the tests ran would otherwise keep the cache out of them)."""
    monkeypatch.setattr(keycache, "SETTLED", 0.0)
    monkeypatch.setattr(keycache, "LOADED", time.time_ns())


def kept_keys(
    graph: Graph,
    pins_: pins.Pins,
    archs: tuple[str, ...],
    variables: Mapping[str, str] | None = None,
    closures: Mapping[str, str] | None = None,
    *,
    folder: Path,
) -> dict[str, keys.StageKey]:
    """What a Run given ``folder`` computes (each call a new Run's: its files' statuses anew)."""
    return keycache.KeyCache(folder, graph, pins_).compute(archs, variables, closures)


def fingerprint(
    graph: Graph,
    pins: pins.Pins,
    archs: tuple[str, ...],
    variables: Mapping[str, str] | None,
    closures: Mapping[str, str] | None,
) -> tuple[str, bool]:
    return keycache.KeyCache(Path("unused"), graph, pins)._fingerprint(archs, variables, closures)


def kept(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def not_computed(*args: object, **kwargs: object) -> None:
    raise AssertionError("computed, though kept")


def test_a_run_takes_the_keys_an_earlier_run_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    computed = keys.compute(GRAPH, REAL, ARCHS)
    assert kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path) == computed
    assert len(kept(tmp_path)) == 1
    monkeypatch.setattr(keys, "compute", not_computed)
    assert kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path) == computed  # inputs too


def test_a_run_with_the_key_cache_has_the_keys_of_one_without(tmp_path: Path) -> None:
    cached = Run(Options(pins=str(PINS), arch="gfx950"), GRAPH, key_cache=tmp_path)
    plain = Run(Options(pins=str(PINS), arch="gfx950"), GRAPH)
    assert cached.keys == plain.keys
    assert Run(Options(pins=str(PINS), arch="gfx950"), GRAPH, key_cache=tmp_path).keys == plain.keys


def changed_stage() -> object:
    vllm = dataclasses.replace(GRAPH["vllm"], files=("docker/apt.j2",))
    return make_graph([vllm if stage.name == "vllm" else stage for stage in GRAPH])


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("a pin", {"pins": dataclasses.replace(REAL, build=dataclasses.replace(REAL.build, max_jobs=8))}),  # noqa: E501
        ("the arch set", {"archs": ("gfx950",)}),
        ("a variable", {"variables": {"commit_tag": "v1"}}),
        ("a closure", {"closures": {"vllm": "0" * 64}}),
        ("a stage", {"graph": changed_stage()}),
    ],
)  # fmt: skip
def test_every_input_given_by_value_moves_the_fingerprint(
    what: str, change: dict[str, object]
) -> None:
    given: dict[str, object] = {"graph": GRAPH, "pins": REAL, "archs": ARCHS}
    before = fingerprint(GRAPH, REAL, ARCHS, None, None)[0]
    after = fingerprint(**{**given, "variables": None, "closures": None, **change})[0]  # type: ignore[arg-type]
    assert after != before, what


def test_a_file_written_again_moves_the_fingerprint_though_its_size_and_mtime_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ctime moves: no tool sets that back (the sed that rewrites a template, an editor
    that keeps the mtime)."""
    monkeypatch.setattr(keycache, "ROOT", tmp_path)
    template = tmp_path / "docker" / "vllm.Dockerfile.j2"
    template.parent.mkdir()
    template.write_text("FROM a\n")
    status = template.stat()
    before = fingerprint(GRAPH, REAL, ARCHS, None, None)[0]
    time.sleep(0.05)  # past the clock's tick: kernels before 6.13 stamp ctime by it
    template.write_text("FROM b\n")
    os.utime(template, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert template.stat().st_mtime_ns == status.st_mtime_ns
    assert fingerprint(GRAPH, REAL, ARCHS, None, None)[0] != before
    template.unlink()  # and a file gone
    assert fingerprint(GRAPH, REAL, ARCHS, None, None)[0] != before


def test_a_file_that_came_and_went_moves_the_fingerprint_by_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keycache, "ROOT", tmp_path)
    (tmp_path / "docker").mkdir()
    before = fingerprint(GRAPH, REAL, ARCHS, None, None)[0]
    time.sleep(0.05)
    (tmp_path / "docker" / "extra.j2").write_text("")
    (tmp_path / "docker" / "extra.j2").unlink()
    assert fingerprint(GRAPH, REAL, ARCHS, None, None)[0] != before


def test_the_files_are_the_trees_the_keys_read_and_the_files_the_pins_name() -> None:
    files = {
        str(path.relative_to(ROOT)) for path in keycache._files(GRAPH, REAL) if ROOT in path.parents
    }
    assert {"rocmgraph/graph/keys.py", "rocmgraph/graph/recipe.py", "stages/vllm.py",
            "wheelfiles/names.py", "docker/source-wheel.Dockerfile.j2",
            "rocmgraph/inimage/prune.py"} <= files  # fmt: skip
    patches = {name for source in REAL.sources.values() for name in source.patches}
    assert patches
    assert patches <= files
    assert not [name for name in files if "__pycache__" in name]
    assert any(path.name == "__init__.py" and path.parent.name == "jinja2"
               for path in keycache._files(GRAPH, REAL))  # fmt: skip


def test_a_process_whose_files_changed_since_it_loaded_them_neither_reads_nor_keeps_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its code and templates in memory are not those on disk (a lock that ran through a
    git pull): the keys of the files there are not its keys, nor its keys theirs."""
    kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path)
    (path,) = kept(tmp_path)
    monkeypatch.setattr(keycache, "LOADED", 0)  # every file changed since
    here: dict[str, keys.StageKey] = {}  # what this process computes: told apart by identity
    monkeypatch.setattr(keys, "compute", lambda *args: here)
    assert kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path) is here
    assert kept(tmp_path) == [path]
    monkeypatch.setattr(keycache, "LOADED", time.time_ns())
    monkeypatch.setattr(keycache, "SETTLED", 10.0**9)  # or just before it loaded them
    assert kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path) is here


def test_keys_computed_while_a_file_they_name_is_missing_are_not_kept(tmp_path: Path) -> None:
    """It may appear while they are computed, and go again after."""
    vllm = dataclasses.replace(GRAPH["vllm"], files=("no/such/file.sh",))
    graph = make_graph([vllm if stage.name == "vllm" else stage for stage in GRAPH])
    assert fingerprint(graph, REAL, ARCHS, None, None)[1] is False
    assert fingerprint(GRAPH, REAL, ARCHS, None, None)[1] is True


@pytest.mark.parametrize("damage", ["key", "inputs", "parents", "stage missing", "not json"])
def test_kept_keys_that_do_not_hash_from_their_inputs_are_not_used(
    tmp_path: Path, damage: str
) -> None:
    computed = keys.compute(GRAPH, REAL, ARCHS)
    kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path)
    (path,) = kept(tmp_path)
    whole = path.read_text()
    document = json.loads(whole)
    if damage == "key":
        document["vllm"]["key"] = "0" * 64
    elif damage == "inputs":
        document["vllm"]["inputs"]["dockerfile"] = "0" * 64
    elif damage == "parents":  # each hashes from its inputs, but not from its parents' keys
        wheels = document["wheels"]
        wheels["inputs"]["pins"] = {}
        inputs = keys.Inputs.from_json(wheels["inputs"])
        wheels["key"] = keys.digest(keys.canonical(inputs))
    elif damage == "stage missing":
        del document["manifest"]
    path.write_text("{" if damage == "not json" else json.dumps(document))
    assert kept_keys(GRAPH, REAL, ARCHS, folder=tmp_path) == computed
    assert path.read_text() == whole  # kept again, whole


def test_a_folder_that_cannot_be_written_only_costs_the_computation(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    folder = tmp_path / "file" / "keys"
    assert kept_keys(GRAPH, REAL, ARCHS, folder=folder) == keys.compute(GRAPH, REAL, ARCHS)


def test_the_newest_fingerprints_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keycache, "KEPT", 2)
    for archs in [("gfx942",), ("gfx950",), ("gfx942", "gfx950")]:
        kept_keys(GRAPH, REAL, archs, folder=tmp_path)
    assert len(kept(tmp_path)) == 2
    newest = fingerprint(GRAPH, REAL, ("gfx942", "gfx950"), None, None)[0]
    assert tmp_path / f"{newest}.json" in kept(tmp_path)


FINGERPRINT = """
from pathlib import Path
import stages
from rocmgraph.graph import keycache
from rocmgraph.config import pins
kept = keycache.KeyCache(Path("."), stages.graph(), pins.load("pins.toml"))
print(kept._fingerprint(("gfx942",), None, None)[0])
"""


def test_the_fingerprint_is_the_same_in_every_process() -> None:
    found = {
        subprocess.run(
            [sys.executable, "-c", FINGERPRINT],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(found) == 1, found


KEYS = """
import sys
from pathlib import Path
import stages
from rocmgraph.graph.invocation import Options, Run
run = Run(Options(pins="pins.toml", arch="gfx942"), stages.graph(), key_cache=Path(sys.argv[1]))
print(run.keys["manifest"].key, "jinja2" in sys.modules)
"""


def test_a_run_whose_keys_are_kept_renders_nothing(tmp_path: Path) -> None:
    """Nor imports the template engine: most of what a no-op saved."""

    def run() -> list[str]:
        argv = [sys.executable, "-c", KEYS, str(tmp_path)]
        return subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()

    first, second = run(), run()
    assert first[1] == "True"
    assert second == [first[0], "False"]


def test_a_run_walks_its_files_once_for_its_keys_with_and_without_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closures locked, a run computes both: the no-op path takes the statuses once."""
    walked: list[Graph] = []
    files = keycache._files

    def walk(graph: Graph, pins_: pins.Pins) -> list[Path]:
        walked.append(graph)
        return files(graph, pins_)

    monkeypatch.setattr(keycache, "_files", walk)
    kept_ = keycache.KeyCache(tmp_path, GRAPH, REAL)
    open_ = kept_.compute(ARCHS)
    sealed = kept_.compute(ARCHS, closures={"vllm": "0" * 64})
    assert walked == [GRAPH]
    assert open_ == keys.compute(GRAPH, REAL, ARCHS)
    assert sealed == keys.compute(GRAPH, REAL, ARCHS, closures={"vllm": "0" * 64})
    assert open_["vllm"].key != sealed["vllm"].key
