"""SGLang's real history (tests/fixtures/history/sglang): the check's facts of its two ROCm
builds on every commit against expected.toml, and the second method, its setup scripts run
with recording stubs (benchmarks/setupfacts.py), agreeing with them."""

from __future__ import annotations

import buildfiles
import pytest
import setupfacts
import tomli
from conftest import ROOT

from rocmgraph.config import pins

EXPECTED = ROOT / "tests" / "fixtures" / "history" / "sglang" / "expected.toml"
INDEX = buildfiles.load("sglang")
PINS = pins.load(ROOT / "pins.toml")
# Read by hand too: the pin, the last commit at sgl-kernel/, the first after the move, the head.
BY_HAND = (
    "0801cc05ed202544e2e5c67d6b0a1d454de54fca",
    "38636120238b58efd6776ceff0caba474453925b",
    "12eadf86f12aec2e6f81a6e38b61b964a4c6b529",
    "d55f1c28e223226575d40d4449266630eaf2a277",
)


def expected() -> dict[str, dict[str, dict[str, object]]]:
    data = tomli.loads(EXPECTED.read_text())
    assert data["repository"] == INDEX.repository
    commits: dict[str, dict[str, dict[str, object]]] = data["commits"]
    return commits


def test_every_commit_has_its_expected_facts_and_the_hand_read_ones_are_marked() -> None:
    assert list(expected()) == list(INDEX.commits)
    text = EXPECTED.read_text()
    for commit in BY_HAND:
        assert text.index("# by hand") < text.index(f"[commits.{commit}.sglang]")
    assert text.count("# by hand") == len(BY_HAND)


def test_the_check_gives_the_expected_facts_on_every_commit() -> None:
    for commit, sources in expected().items():
        found = setupfacts.check_facts(PINS, INDEX.read(commit))
        # version_env and paths: read for vLLM only
        assert {f.source: f.as_table("version_env", "paths") for f in found} == sources, commit


def test_no_false_alarm_and_no_miss_on_any_commit() -> None:
    """What the check says the ROCm build fetches is what the runs recorded (expected)."""
    for commit, sources in expected().items():
        for check in setupfacts.check_facts(PINS, INDEX.read(commit)):
            said = {setupfacts.plain(f) for f in check.taken}
            taken = sources[check.source]["taken"]
            assert isinstance(taken, list)
            made = {setupfacts.plain(str(f)) for f in taken}
            assert (said - made, made - said) == (set(), set()), commit


@pytest.mark.parametrize("commit", BY_HAND)
def test_the_setup_scripts_run_agree_with_the_check(commit: str) -> None:
    read = INDEX.read(commit)
    check = setupfacts.check_facts(PINS, read)
    run = setupfacts.run_facts(PINS, read, list(INDEX.commits[commit]))
    assert setupfacts.Commit(commit, check, run).disagreements() == []


def test_upstream_setup_rocm_takes_one_target_and_exits_on_a_list() -> None:
    _, kernel = setupfacts.run_facts(PINS, INDEX.read(INDEX.head), list(INDEX.commits[INDEX.head]))
    assert kernel is not None
    assert (kernel.folder, kernel.arch, kernel.result) == (
        "python/sglang/kernels/aot",
        ("AMDGPU_TARGET: unknown",),
        "setup() reached",
    )
    assert dict(kernel.flags) == {
        "AMDGPU_TARGET=gfx950": "--amdgpu-target=gfx950",
        "AMDGPU_TARGET=gfx942;gfx950": "exit 1",
    }


def test_python_setup_stops_without_cargo_once_it_discovers_its_rust_extensions() -> None:
    sglang, _ = setupfacts.run_facts(PINS, INDEX.read(INDEX.head), list(INDEX.commits[INDEX.head]))
    assert sglang.taken == ("python/setup.py:rust_extensions",)
    assert sglang.env == ("SGLANG_BUILD_RUST_EXTS",)
    assert sglang.result == (
        "RuntimeError: cargo is required to discover the Rust extension modules in <tree>/rust "
        "(and to build them); install a Rust toolchain, or set SGLANG_BUILD_RUST_EXTS=none to "
        "build without Rust extensions"
    )


def test_the_harness_records_fetches_so_none_is_the_scripts_doing() -> None:
    assert setupfacts.control() == [
        "setup.py:git:https://example.org/x.git",
        "setup.py:urllib:https://example.org/x.tar.gz",
    ]


def test_a_tree_without_setup_rocm_in_any_home_is_said_unread() -> None:
    read = INDEX.read(INDEX.pin)

    def without_kernel(path: str) -> str | None:
        return None if path.endswith("setup_rocm.py") else read(path)

    sglang, kernel = setupfacts.check_facts(PINS, without_kernel)
    assert sglang.dist == "sglang"
    assert (kernel.folder, kernel.unread) == (
        "",
        "no setup_rocm.py in any home: sgl-kernel, python/sglang/kernels/aot",
    )
    assert setupfacts.disagreements(kernel, None) == []
