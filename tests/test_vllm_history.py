"""vLLM's real history (tests/fixtures/history/vllm): the check's facts of its ROCm build on
every commit against facts.toml, and the second method (setup.py run with recording stubs,
real CMake on PYTORCH_ROCM_ARCH: benchmarks/setupfacts.py, buildfiles.py) agreeing with them
on the commits read by hand."""

from __future__ import annotations

import buildfiles
import pytest
import setupfacts
import tomli
from conftest import ROOT, need

from rocmgraph.config import pins

FACTS = ROOT / "tests" / "fixtures" / "history" / "vllm" / "facts.toml"
INDEX = buildfiles.load("vllm")
PINS = pins.load(ROOT / "pins.toml")
# Read by hand too: the pin, the middle commit, the head.
BY_HAND = (
    "18d87a87dc39c1a50f452b218fdcc3aeec48d18e",
    "69f3150981e4bc8a09439eb7cae0095605b964b4",
    "397094da1768c7a6f29dfa4f70079d793ac747df",
)


def expected() -> dict[str, dict[str, object]]:
    data = tomli.loads(FACTS.read_text())
    assert data["repository"] == INDEX.repository
    commits: dict[str, dict[str, object]] = data["commits"]
    return commits


def check(commit: str) -> setupfacts.Facts:
    return setupfacts.source_facts(PINS, "vllm", PINS.sources["vllm"], INDEX.read(commit))


def test_every_commit_has_its_expected_facts_and_the_hand_read_ones_are_marked() -> None:
    assert list(expected()) == list(INDEX.commits)
    text = FACTS.read_text()
    for commit in BY_HAND:
        assert "# by hand" in text.split(f"[commits.{commit}]")[0].rsplit("\n[", 1)[-1]
    assert text.count("# by hand") == len(BY_HAND)


def test_the_check_gives_the_expected_facts_on_every_commit() -> None:
    for commit, facts in expected().items():
        assert check(commit).as_table() == {"folder": ".", **facts}, commit


def test_vllms_version_is_given_only_by_the_variables_its_get_version_reads() -> None:
    """setup.py asks setuptools_scm without dist_name: the _FOR_VLLM variable gives nothing."""
    run = setupfacts.run_vllm(PINS, INDEX.read(INDEX.head), list(INDEX.commits[INDEX.head]))
    assert {k: v for k, v in run.flags.items() if "VERSION" in k} == {
        "VLLM_VERSION_OVERRIDE=9.9.9": "version 9.9.9",
        "SETUPTOOLS_SCM_PRETEND_VERSION=9.9.9": "version 9.9.9+rocm70",
        "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM=9.9.9": (
            "LookupError: setuptools-scm was unable to detect version (no .git)"
        ),
    }
    assert check(INDEX.head).version_env == (
        "SETUPTOOLS_SCM_PRETEND_VERSION",
        "VLLM_VERSION_OVERRIDE",
    )


def test_the_fetches_the_pins_mark_are_made_only_under_the_variables_they_name() -> None:
    run = setupfacts.run_vllm(PINS, INDEX.read(INDEX.head), list(INDEX.commits[INDEX.head]))
    assert (run.taken, run.result, run.build) == (
        (),
        "setup() reached",
        "cmake -DVLLM_TARGET_DEVICE=rocm",
    )
    assert {k: v for k, v in run.flags.items() if "VERSION" not in k} == {
        "VLLM_REQUIRE_RUST_FRONTEND=1": "rust_extensions, Rust required",
        "VLLM_USE_PRECOMPILED=1": "urllib:https://pypi.amd.com/vllm-rocm/simple/vllm/",
    }


@pytest.mark.parametrize("commit", BY_HAND)
def test_setup_py_run_and_real_cmake_agree_with_the_check(commit: str) -> None:
    need("cmake")  # Debian's, as benchmarks/buildfiles.py runs it
    assert buildfiles.vllm_commit(INDEX, commit).disagreements() == []
