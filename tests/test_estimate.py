"""What a plan costs: estimates, their sources, the total and the time on N builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmgraph.common.errors import PinsError
from rocmgraph.graph.estimate import (
    REFERENCE_FILE,
    Estimate,
    Reference,
    Source,
    critical_path,
    duration,
    estimate,
    load_references,
    makespan,
    total,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "~0 s"),
        (42.4, "~42 s"),
        (59.6, "~1 min 00 s"),
        (185, "~3 min 05 s"),
        (3599.4, "~59 min 59 s"),
        (3600, "~1 h 00 min"),
        (6120, "~1 h 42 min"),
        (3900, "~1 h 05 min"),
        (7 * 3600 + 29.9 * 60, "~7 h 30 min"),
    ],
)
def test_durations_read_as_estimates(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_an_estimate_is_recorded_else_the_reference_else_none() -> None:
    references = {"vllm": Reference("vllm", 3600.0, "https://example.org", "an hour")}
    assert estimate("vllm", 95.0, references) == Estimate(95.0, Source.RECORDED)
    assert estimate("vllm", None, references) == Estimate(3600.0, Source.REFERENCE)
    assert estimate("sglang", None, references) == Estimate(0.0, Source.NONE)
    assert Estimate(95.0, Source.RECORDED).text() == "~1 min 35 s"
    assert Estimate(3600.0, Source.REFERENCE).text() == "~1 h 00 min (ref)"
    assert Estimate(0.0, Source.NONE).text() == "?"


# A diamond and a tail: base -> (vllm 60, sglang 35, verl 5) -> assemble 2 -> manifest 1
PARENTS = {
    "base": (),
    "vllm": ("base",),
    "sglang": ("base",),
    "verl": ("base",),
    "assemble": ("vllm", "sglang", "verl"),
    "manifest": ("assemble",),
}
SECONDS = {"base": 10.0, "vllm": 60.0, "sglang": 35.0, "verl": 5.0, "assemble": 2.0}
SECONDS |= {"manifest": 1.0}


def test_one_builder_takes_the_whole_work() -> None:
    assert makespan(SECONDS, PARENTS, 1) == sum(SECONDS.values()) == 113.0


def test_two_builders_overlap_the_independent_stages() -> None:
    # base 10; then vllm (longest path first) beside sglang, then verl beside vllm: 10+60; +2+1
    assert makespan(SECONDS, PARENTS, 2) == 73.0
    assert makespan(SECONDS, PARENTS, 8) == 73.0  # the critical path bounds it


def test_stages_built_already_cost_nothing_and_do_not_wait() -> None:
    only = {"sglang": 35.0, "assemble": 2.0, "manifest": 1.0}
    assert makespan(only, PARENTS, 2) == 38.0
    assert makespan({}, PARENTS, 2) == 0.0


def test_the_critical_path_is_the_longest_chain_and_bounds_the_wall_time() -> None:
    chain = critical_path(SECONDS, PARENTS)
    assert chain == ("base", "vllm", "assemble", "manifest")
    assert sum(SECONDS[name] for name in chain) == makespan(SECONDS, PARENTS, 8)
    # Parents built already are not on it; a tie goes to the name first in sorted order.
    only = {"sglang": 35.0, "verl": 35.0, "assemble": 2.0}
    assert critical_path(only, PARENTS) == ("sglang", "assemble")
    assert critical_path({"b": 1.0, "a": 1.0}, {}) == ("a",)
    assert critical_path({}, PARENTS) == ()


def test_the_longest_path_goes_first() -> None:
    # Two builders, a long chain and two short leaves: a greedy order by name would start
    # a and b first and leave the chain for later (1 + 10 + 10); the chain first takes 20.
    seconds = {"a": 1.0, "b": 1.0, "chain1": 10.0, "chain2": 10.0}
    parents = {"chain2": ("chain1",)}
    assert makespan(seconds, parents, 2) == 20.0


def test_the_total_counts_sources_and_words_the_price() -> None:
    estimates = {
        "vllm": Estimate(3600.0, Source.REFERENCE),
        "sglang": Estimate(2100.0, Source.REFERENCE),
        "verl": Estimate(300.0, Source.RECORDED),
        "assemble": Estimate(120.0, Source.RECORDED),
        "manifest": Estimate(0.0, Source.NONE),
    }
    price = total(estimates, PARENTS, 2)
    assert (price.work, price.wall) == (6120.0, 3720.0)
    assert price.text() == (
        "5 stages to build: ~1 h 42 min of work, ~1 h 02 min on 2 builders "
        "(2 recorded, 2 reference figures of the real image, 1 without an estimate)"
    )
    one = total({"verl": Estimate(30.0, Source.RECORDED)}, PARENTS, 1)
    assert one.text() == "1 stage to build: ~30 s of work, ~30 s on 1 builder (1 recorded)"
    assert total({}, PARENTS, 2).text() == "nothing to build"


def test_every_reference_figure_is_cited() -> None:
    references = load_references()
    assert {"vllm", "aiter", "flash_attention"} <= set(references)
    for reference in references.values():
        assert reference.source.startswith("https://"), reference
        assert reference.says.strip()


def test_a_bad_reference_file_names_the_key_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "durations.toml"
    path.write_text('[vllm]\nminutes = "an hour"\nsource = "https://x"\nsays = "long"\n')
    with pytest.raises(PinsError) as raised:
        load_references(path)
    assert str(raised.value) == (
        f"{path}: vllm.minutes: is not a positive number; each [<stage>] has minutes "
        "(a positive number), source (a URL) and says (a quote)"
    )
    path.write_text("[vllm]\nminutes = 60\nsource = 'https://x'\n")
    with pytest.raises(PinsError, match=r"vllm\.says: is missing or empty"):
        load_references(path)
    assert REFERENCE_FILE.name == "durations.toml"
