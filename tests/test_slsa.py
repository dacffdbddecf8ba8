"""SLSA provenance (rocmgraph/building/slsa.py): the demo image's in-toto Statement, held to a
JSON Schema written from the SLSA v1.1 and in-toto v1 texts, with every locked input of the
pins by its exact digest, and a schema that refuses what those texts refuse."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, edit_toml

# jsonschema ships no type information (no py.typed), and no stubs are installed
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

import rocmgraph
import stages
from rocmgraph.building import slsa
from rocmgraph.building.slsa import StageRun
from rocmgraph.graph import closure
from rocmgraph.graph.closure import Closure, Fetched, LockFile
from rocmgraph.graph.invocation import Options, Run
from wheelfiles import index

DEMO = ROOT / "demo" / "pins.toml"
SCHEMA = json.loads(
    (ROOT / "tests" / "fixtures" / "slsa-provenance-v1.schema.json").read_text(encoding="utf-8")
)
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
IMAGE_ID = "sha256:" + "5e" * 32
PINS_SHA256 = "ab" * 32
BASE_DIGEST = "ba" * 32
ROCM_KEY = "6b" * 32
START = datetime(2026, 12, 5, 9, 0, 0, tzinfo=UTC)
# The demo's base provides these: they are checked in it by version, never fetched.
PROVIDED = {"aiter", "flash_attention", "transformer_engine"}
XGRAMMAR = Fetched(
    "python",
    "demo-xgrammar",
    "0.1.32",
    "demo_xgrammar-0.1.32-py3-none-any.whl",
    "http://127.0.0.1:28470/files/demo_xgrammar-0.1.32-py3-none-any.whl",
    "7a" * 32,
)
GCC = Fetched(
    "apt",
    "gcc-12",
    "12.2.0-14",
    "gcc-12_12.2.0-14_amd64.deb",
    "http://deb.debian.org/debian/pool/main/g/gcc-12/gcc-12_12.2.0-14_amd64.deb",
    "9c" * 32,
)

WritePins = Callable[..., Path]


def demo_run(
    write_pins: WritePins,
    *,
    locked: bool = False,
    closures: Mapping[str, tuple[Fetched, ...]] | None = None,
    hermetic: bool = True,
) -> Run:
    """A Run of the demo's pins in a fresh folder, for gfx942: ``locked`` fills in the
    base's digest and the apt key's sha256 as `doit lock` records them on a machine, and
    ``closures`` locks what those stages fetched, at their keys (as `doit lock closures=1`)."""
    text = DEMO.read_text(encoding="utf-8")
    if locked:
        text = edit_toml(text, ["base", "digest"], f"sha256:{BASE_DIGEST}")
        text = edit_toml(text, ["rocm", "key_sha256"], ROCM_KEY)
    path = write_pins(text)
    options = Options(pins=str(path), arch="gfx942", hermetic=hermetic)
    if closures:
        keys = Run(options, stages.graph()).closure_keys
        found = {
            (stage, keys[stage].key): Closure(stage, keys[stage].key, tuple(sorted(files)))
            for stage, files in closures.items()
        }
        closure.save(LockFile(closure.lock_path(path), found))
    return Run(options, stages.graph())


def built(run: Run, *names: str) -> list[StageRun]:
    """Stages built one after another from START, ten minutes apart, nine minutes each."""
    return [
        StageRun(
            name,
            run.keys[name].key,
            "ssh://gpu1" if name == "vllm" else "",
            START + timedelta(minutes=10 * number),
            START + timedelta(minutes=10 * number + 9),
            "built",
        )
        for number, name in enumerate(names)
    ]


def provenance(run: Run, stage_runs: list[StageRun] | None = None) -> Any:
    """The statement, through JSON and back: it must be plain JSON."""
    document = slsa.statement(
        run,
        "verl-demo:gfx942",
        IMAGE_ID,
        built(run, "vllm", "verl") if stage_runs is None else stage_runs,
        pins_sha256=PINS_SHA256,
        invocation="run-20261205T090000Z",
    )
    return json.loads(json.dumps(document))


def errors(document: Any) -> list[tuple[str | int, ...]]:
    """Where the schema finds the document wrong, each place once."""
    return sorted({tuple(error.absolute_path) for error in VALIDATOR.iter_errors(document)})


def dependencies(document: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = document["predicate"]["buildDefinition"]["resolvedDependencies"]
    return found


def by_pin(document: Any, pin: str) -> dict[str, Any]:
    """The one dependency whose digest the pin ``pin`` gives."""
    (found,) = [
        d for d in dependencies(document) if pin in d.get("annotations", {}).get("pins", ())
    ]
    return found


def test_the_schema_is_a_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$comment"].startswith("Written for this repository")


def test_the_demo_statement_is_slsa_provenance_of_its_image(write_pins: WritePins) -> None:
    run = demo_run(write_pins)
    document = provenance(run)
    assert errors(document) == []
    assert document["_type"] == "https://in-toto.io/Statement/v1"
    assert document["predicateType"] == "https://slsa.dev/provenance/v1"
    assert document["subject"] == [{"name": "verl-demo:gfx942", "digest": {"sha256": "5e" * 32}}]
    definition = document["predicate"]["buildDefinition"]
    assert definition["buildType"] == "https://github.com/verl-project/verl-rocm-graph/build/v1"
    assert definition["externalParameters"] == {
        "pins": {"path": run.options.pins, "sha256": PINS_SHA256},
        "arch": ["gfx942"],
        "commit_tag": "DEV",
        "hermetic": True,
    }
    assert definition["internalParameters"] == {
        "stages": {name: key.key for name, key in run.keys.items()},
        "tool": {"name": "verl-rocm-graph", "version": rocmgraph.__version__},
    }
    assert list(definition["internalParameters"]["stages"]) == list(run.graph.order)
    demo = Run(dataclasses.replace(run.options, profile="demo"), stages.graph())
    assert slsa.external_parameters(demo, PINS_SHA256)["profile"] == "demo"
    assert document["predicate"]["runDetails"]["builder"] == {
        "id": f"https://github.com/verl-project/verl-rocm-graph@{rocmgraph.__version__}",
        "version": {"verl-rocm-graph": rocmgraph.__version__},
    }


def test_every_source_is_a_dependency_by_its_full_commit(write_pins: WritePins) -> None:
    run = demo_run(write_pins)
    document = provenance(run)
    assert len(run.pins.sources) == 11
    for name, source in run.pins.sources.items():
        found = by_pin(document, f"[sources.{name}].commit")
        assert found["uri"] == f"git+{source.repo}@{source.commit}"
        assert found["digest"] == {"gitCommit": source.commit}
        assert found["annotations"].get("providedByBase", False) == (name in PROVIDED)
    assert by_pin(document, "[sources.vllm].commit") == {
        "name": "vllm",
        "uri": "git+http://127.0.0.1:28470/git/vllm.git@5b40a6d15899ee70b745176a27d1a1bbaff15f21",
        "digest": {"gitCommit": "5b40a6d15899ee70b745176a27d1a1bbaff15f21"},
        "annotations": {"pins": ["[sources.vllm].commit"]},
    }
    # SGLang and its sgl-kernel folder are one checkout: one dependency names both pins.
    assert by_pin(document, "[sources.sglang].commit")["annotations"]["pins"] == [
        "[sources.sgl_kernel].commit",
        "[sources.sglang].commit",
    ]
    # A folder built alone is keyed by its tree: that is a dependency too.
    assert by_pin(document, "[sources.sgl_kernel].tree") == {
        "name": "sgl_kernel/sgl-kernel",
        "uri": "git+http://127.0.0.1:28470/git/sglang.git@b0a0e8c43d66d8298411e7e9f9bf25d304ba1725"
        "#sgl-kernel",
        "digest": {"gitTree": "ea70ca52f02888fa0e166d1b01d63b5c821c8299"},
        "annotations": {"pins": ["[sources.sgl_kernel].tree"]},
    }


def test_every_wheel_and_patch_is_a_dependency_by_its_sha256(write_pins: WritePins) -> None:
    run = demo_run(write_pins)
    document = provenance(run)
    assert len(run.pins.wheels) == 5
    for name, wheel in run.pins.wheels.items():
        assert by_pin(document, f"[wheels.{name}].sha256") == {
            "name": wheel.file,
            "uri": index.file_url(wheel.index, wheel.file),
            "digest": {"sha256": wheel.sha256},
            "annotations": {
                "pins": [f"[wheels.{name}].sha256"],
                "version": wheel.version,
                "providedByBase": True,  # the demo's base carries the torch stack
            },
        }
    torch = by_pin(document, "[wheels.torch].sha256")
    assert torch["uri"] == (
        "http://127.0.0.1:28470/rocm-rel-7.14/"
        "torch-2.12.0%2Brocm7.14.0.lw.git1a2b3c4d-cp311-cp311-linux_x86_64.whl"
    )
    assert torch["digest"] == {
        "sha256": "6116a7887e0fe023c372566fca1c0177d8d7084978bc665324382bea1a323c56"
    }
    patches = {d["name"]: d for d in dependencies(document) if d["name"].endswith(".patch")}
    named = [p for s in run.pins.sources.values() for p in s.patches]
    named += [p for ps in run.pins.python.patches.values() for p in ps]
    assert sorted(patches) == sorted(named)
    assert len(patches) == 9
    for patch, found in patches.items():
        assert found["digest"] == {
            "sha256": hashlib.sha256((ROOT / patch).read_bytes()).hexdigest()
        }
        assert "uri" not in found  # a file of this repository, by name and digest
    megatron = "docker/patches/megatron-core/0001-attention-backend-env-warns.patch"
    assert patches[megatron]["annotations"] == {"pins": ["[python.patches].megatron-core"]}


def test_a_wheel_not_yet_locked_is_its_project_at_its_version(
    write_pins: WritePins, pins_text: str
) -> None:
    """pins.toml leaves the files of the wheels its base provides unpinned: each is still a
    dependency of its own, a Package URL on its index, never one for the index."""
    run = Run(Options(pins=str(write_pins(pins_text))), stages.graph())
    document = provenance(run, [])
    assert errors(document) == []
    for name, wheel in run.pins.wheels.items():
        pin = f"[wheels.{name}].sha256"
        assert (wheel.file, wheel.sha256) == ("", "")
        assert by_pin(document, pin)["annotations"]["pins"] == [pin]
    assert by_pin(document, "[wheels.torch].sha256") == {
        "name": "torch",
        "uri": "pkg:pypi/torch@2.12.0"
        "?repository_url=https://repo.radeon.com/rocm/manylinux/rocm-rel-7.14/",
        "annotations": {
            "pins": ["[wheels.torch].sha256"],
            "version": "2.12.0",
            "providedByBase": True,
        },
    }


def test_the_base_image_and_apt_key_are_by_digest_once_locked(write_pins: WritePins) -> None:
    image = "127.0.0.1:28471/verl-demo/primus:v26.4"
    unlocked = provenance(demo_run(write_pins))
    # The demo leaves them to `doit lock` on each machine: only where they come from.
    assert by_pin(unlocked, "[base].digest") == {
        "name": image,
        "uri": f"docker://{image}",
        "annotations": {"pins": ["[base].digest"]},
    }
    assert "digest" not in by_pin(unlocked, "[rocm].key_sha256")
    locked = provenance(demo_run(write_pins, locked=True))
    assert errors(locked) == []
    assert by_pin(locked, "[base].digest") == {
        "name": image,
        "uri": f"docker://{image}",
        "digest": {"sha256": BASE_DIGEST},
        "annotations": {"pins": ["[base].digest"]},
    }
    assert by_pin(locked, "[rocm].key_sha256") == {
        "name": "rocm.gpg.key",
        "uri": "http://127.0.0.1:28470/rocm.gpg.key",
        "digest": {"sha256": ROCM_KEY},
        "annotations": {"pins": ["[rocm].key_sha256"], "providedByBase": True},
    }


def test_every_file_of_a_locked_closure_is_a_dependency_once(write_pins: WritePins) -> None:
    open_keys = demo_run(write_pins).keys
    run = demo_run(write_pins, closures={"base": (GCC, XGRAMMAR), "vllm": (XGRAMMAR,)})
    assert run.keys["base"] != open_keys["base"]  # sealed: its key takes its closure
    document = provenance(run)
    assert errors(document) == []
    assert document["predicate"]["buildDefinition"]["internalParameters"]["stages"] == {
        name: key.key for name, key in run.keys.items()
    }
    fetched = [d for d in dependencies(document) if "stages" in d.get("annotations", {})]
    assert fetched == [  # by URI
        {
            "name": "demo_xgrammar-0.1.32-py3-none-any.whl",
            "uri": XGRAMMAR.url,
            "digest": {"sha256": "7a" * 32},
            "annotations": {
                "kind": "python",
                "package": "demo-xgrammar",
                "version": "0.1.32",
                "stages": ["base", "vllm"],  # fetched by both: one dependency
            },
        },
        {
            "name": "gcc-12_12.2.0-14_amd64.deb",
            "uri": GCC.url,
            "digest": {"sha256": "9c" * 32},
            "annotations": {
                "kind": "apt",
                "package": "gcc-12",
                "version": "12.2.0-14",
                "stages": ["base"],
            },
        },
    ]
    unsealed = provenance(demo_run(write_pins, hermetic=False))
    assert [d for d in dependencies(unsealed) if "stages" in d.get("annotations", {})] == []
    assert unsealed["predicate"]["buildDefinition"]["externalParameters"]["hermetic"] is False


def test_dependencies_are_sorted_and_one_per_uri_and_digest(write_pins: WritePins) -> None:
    run = demo_run(write_pins, locked=True, closures={"base": (GCC, XGRAMMAR)})
    identities = [
        (d.get("uri", ""), json.dumps(d.get("digest", {}), sort_keys=True))
        for d in dependencies(provenance(run))
    ]
    assert identities == sorted(set(identities))
    # 9 patches, the base, 10 commits (SGLang's twice), 2 trees, 5 wheels, the key, 2 files
    assert len(identities) == 9 + 1 + 10 + 2 + 5 + 1 + 2


def test_byproducts_are_the_stages_built_in_build_order_with_utc_times(
    write_pins: WritePins,
) -> None:
    run = demo_run(write_pins)
    paris = timezone(timedelta(hours=1))
    verl = StageRun(
        "verl",
        run.keys["verl"].key,
        "",
        datetime(2026, 12, 5, 11, 0, 5, 900, tzinfo=paris),
        datetime(2026, 12, 5, 11, 30, 0, tzinfo=paris),
        "built",
    )
    stage_runs = [verl, *built(run, "vllm")]  # given out of order, verl's times not in UTC
    document = provenance(run, stage_runs)
    assert errors(document) == []
    details = document["predicate"]["runDetails"]
    assert details["metadata"] == {
        "invocationId": "run-20261205T090000Z",
        "startedOn": "2026-12-05T09:00:00Z",
        "finishedOn": "2026-12-05T10:30:00Z",
    }
    assert details["byproducts"] == [
        {
            "name": "stage vllm",
            "digest": {"sha256": run.keys["vllm"].key},
            "annotations": {
                "builder": "ssh://gpu1",
                "startedOn": "2026-12-05T09:00:00Z",
                "finishedOn": "2026-12-05T09:09:00Z",
                "status": "built",
            },
        },
        {
            "name": "stage verl",
            "digest": {"sha256": run.keys["verl"].key},
            "annotations": {
                "builder": "",
                "startedOn": "2026-12-05T10:00:05Z",
                "finishedOn": "2026-12-05T10:30:00Z",
                "status": "built",
            },
        },
    ]
    nothing = provenance(run, [])["predicate"]["runDetails"]
    assert (nothing["metadata"], nothing["byproducts"]) == (
        {"invocationId": "run-20261205T090000Z"},
        [],
    )


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        ({"started": datetime(2026, 12, 5, 9, 0, 0)}, "has no time zone"),
        ({"key": "6f54ca12ff1d"}, r"is not a full key \(64 hex\)"),  # the ledger's short key
        ({"name": "vllm_build"}, "'vllm_build' is not a stage of"),
    ],
)
def test_what_no_provenance_can_say_is_refused(
    write_pins: WritePins, changes: dict[str, Any], refused: str
) -> None:
    run = demo_run(write_pins)
    (stage,) = built(run, "vllm")
    with pytest.raises(ValueError, match=refused):
        provenance(run, [dataclasses.replace(stage, **changes)])
    with pytest.raises(ValueError, match="is not an image id"):
        slsa.statement(run, "verl-demo:gfx942", "5e" * 32, [], pins_sha256="", invocation="")


def test_write_keeps_sorted_keys_and_one_space_indents(
    write_pins: WritePins, tmp_path: Path
) -> None:
    document = slsa.statement(
        demo_run(write_pins), "verl-demo:gfx942", IMAGE_ID, [], pins_sha256="", invocation=""
    )
    path = tmp_path / "provenance.intoto.json"
    slsa.write(path, document)
    assert path.read_text(encoding="utf-8") == json.dumps(document, indent=1, sort_keys=True) + "\n"


def _drop(document: Any, *path: str | int) -> None:
    *parents, last = path
    for part in parents:
        document = document[part]
    del document[last]


def _set(value: Any) -> Callable[..., None]:
    def put(document: Any, *path: str | int) -> None:
        *parents, last = path
        for part in parents:
            document = document[part]
        document[last] = value

    return put


BUILDER = ("predicate", "runDetails", "builder")
DEFINITION = ("predicate", "buildDefinition")
METADATA = ("predicate", "runDetails", "metadata")
SUBJECT_SHA256 = ("subject", 0, "digest", "sha256")
FIRST = (*DEFINITION, "resolvedDependencies", 0)  # a patch: name and digest, no uri


@pytest.mark.parametrize(
    ("how", "where", "refused_at"),
    [
        (_drop, (*BUILDER, "id"), BUILDER),  # no builder id
        (_drop, ("subject", 0, "digest"), ("subject", 0)),  # a subject without its digest
        (_drop, (*DEFINITION, "externalParameters"), DEFINITION),
        (_drop, ("predicate", "runDetails"), ("predicate",)),
        (_set({"name": "torch"}), FIRST, FIRST),  # neither uri nor digest nor content
        (_set({"gitCommit": "3a856b1c"}), (*FIRST, "digest"), (*FIRST, "digest", "gitCommit")),
        (_set("5e" * 31 + "5"), SUBJECT_SHA256, None),  # 63 hex
        (_set("5E" * 32), SUBJECT_SHA256, None),  # upper case
        (_set([]), ("subject",), None),
        (_set("https://slsa.dev/provenance/v0.2"), ("predicateType",), None),
        (_set("https://in-toto.io/Statement/v0.1"), ("_type",), None),
        (_set("verl build"), (*DEFINITION, "buildType"), None),  # no URI
        (_set("HTTPS://Example.com/b"), (*DEFINITION, "buildType"), None),  # not normalized
        (_set({}), (*DEFINITION, "externalParameters"), None),  # empty is unset
        (_set("2026-12-05T10:00:00+01:00"), (*METADATA, "startedOn"), None),  # not UTC
        (_set("2026-12-05 09:00:00Z"), (*METADATA, "finishedOn"), None),
        (_set(3), (*BUILDER, "version", "verl-rocm-graph"), None),
    ],
)
def test_the_schema_refuses_a_broken_statement(
    write_pins: WritePins,
    how: Callable[..., None],
    where: tuple[str | int, ...],
    refused_at: tuple[str | int, ...] | None,
) -> None:
    document = provenance(demo_run(write_pins))
    assert errors(document) == []
    broken = copy.deepcopy(document)
    how(broken, *where)
    assert errors(broken) == [refused_at or where]


def test_the_schema_takes_what_the_specs_allow() -> None:
    """Only the required fields; null and empty optional ones (unset, by the parsing rules);
    extension fields; an algorithm of one's own; a SHA-256 git commit; a fraction of a second."""
    minimal: dict[str, Any] = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "_", "digest": {"sha256": "5e" * 32}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://example.com/build/v1",
                "externalParameters": {"repository": "https://github.com/octocat/hello-world"},
            },
            "runDetails": {"builder": {"id": "https://example.com/builder"}},
        },
    }
    assert errors(minimal) == []
    fuller = copy.deepcopy(minimal)
    fuller["example_extension"] = True
    fuller["subject"][0]["digest"]["arn"] = "arn:aws:ec2:region:123:image/ami-123abcd"
    fuller["predicate"]["buildDefinition"] |= {
        "internalParameters": None,
        "resolvedDependencies": [
            {"uri": "git+https://github.com/octocat/hello-world@refs/heads/main",
             "digest": {"gitCommit": "7fd1a60b01f91b314f59955a4e4d4e80d8edf11d"}},
            {"digest": {"gitCommit": "ab" * 32}, "name": None, "annotations": {"n": [1, None]}},
            {"uri": "https://cloudbuild.googleapis.com/GoogleHostedWorker@v1", "digest": {}},
            {"content": "eyAicmVzdWx0IjogIlNVQ0NFU1MiIH0=", "mediaType": "application/json"},
        ],
    }  # fmt: skip
    fuller["predicate"]["runDetails"] |= {
        "metadata": {"startedOn": "1985-04-12T23:20:50.52Z", "finishedOn": None},
        "byproducts": None,
    }
    assert errors(fuller) == []
