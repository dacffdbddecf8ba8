"""Variable substitution as BuildKit and the shell do it."""

from __future__ import annotations

import pytest

from rocmgraph.dockerfile.expand import MAX_GROWTH, MAX_NESTING, TooLarge, expand

ENV = {"A": "1", "B": "x y", "EMPTY": "", "P": "/opt/rocm-7.0/lib", "REF": "abc"}


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("$A", "1"),
        ("${A}", "1"),
        ('"$B"', "x y"),
        ("'$A'", "$A"),
        ("x\\$A", "x$A"),
        ('"x\\"y"', 'x"y'),
        ("${Z:-d}", "d"),
        ("${A:-d}", "1"),
        ("${EMPTY:-d}", "d"),
        ("${EMPTY-d}", ""),
        ("${Z-d}", "d"),
        ("${Z:-${A}}", "1"),
        ("${Z:-${Y:-q}}", "q"),
        ("${Z:-'a b'}", "a b"),
        ("${A:+set}", "set"),
        ("${Z:+set}", ""),
        ("${EMPTY+set}", "set"),
        ("${P#*/}", "opt/rocm-7.0/lib"),
        ("${P##*/}", "lib"),
        ("${P%/*}", "/opt/rocm-7.0"),
        ("${P%%/*}", ""),
        ("${P/rocm/x}", "/opt/x-7.0/lib"),
        ("${P//o/0}", "/0pt/r0cm-7.0/lib"),
        ("torch==${A}.0", "torch==1.0"),
        ("git+https://h/r@${REF}", "git+https://h/r@abc"),
        ("$", "$"),
    ],
)
def test_values(word: str, value: str) -> None:
    expanded = expand(word, ENV, shell=True)
    assert (expanded.value, expanded.known) == (value, True)


def test_what_it_used_and_what_has_no_value() -> None:
    expanded = expand("${A}-$Z-${Y:?}", ENV)
    assert (expanded.value, expanded.used, expanded.unset) == (
        "1-$Z-${Y:?}",
        frozenset({"A"}),
        frozenset({"Z", "Y"}),
    )
    assert not expanded.known


@pytest.mark.parametrize("word", ["$(uname -m)", "a`b`c", "$((1+2))", "${!A}", "${"])
def test_a_command_or_what_no_static_reading_can_give_is_dynamic(word: str) -> None:
    expanded = expand(word, ENV, shell=True)
    assert expanded.dynamic
    assert not expanded.known


def test_the_backtick_escape_of_a_dockerfile_is_not_a_command() -> None:
    assert expand("a`$Ab", ENV, escape="`").value == "a$Ab"


def test_linear_in_the_word() -> None:
    # 5 MB of text and a million substitutions: quadratic work would take minutes.
    assert expand("a" * 5_000_000, {}).value == "a" * 5_000_000
    assert expand("${A}" * 1_000_000, ENV).value == "1" * 1_000_000


def test_a_substitution_ends_at_its_own_bracket_quotes_and_escapes_kept() -> None:
    expanded = expand("$(a ')' \\) (b))c$A", ENV, shell=True)
    assert (expanded.value, expanded.dynamic) == ("$(a ')' \\) (b))c1", True)


def test_nested_substitutions_cost_a_step_per_bracket_not_per_character() -> None:
    word = "$(" + "echo $(" * 30_000 + "x" + ")" * 30_001 + "$A"
    assert expand(word, ENV, shell=True).value == word[:-2] + "1"


def test_a_word_nested_deeper_than_any_real_one_is_kept_as_written() -> None:
    """${X:-${X:-...}} a thousand deep (a 6 KB line a fuzzer wrote): no RecursionError; the
    levels past MAX_NESTING stay as written, and the word is known only when it runs."""
    word = "${X:-" * 1000 + "1" + "}" * 1000
    found = expand(word, {})
    inner = 1000 - MAX_NESTING
    assert found.value == "${X:-" * inner + "1" + "}" * inner
    assert found.dynamic
    assert not found.known


@pytest.mark.parametrize(
    ("word", "env"),
    [
        ("${A}${A}", {"A": "x" * (MAX_GROWTH // 2 + 1)}),  # ENV A=${A}${A}, doubled once more
        ("$A" * (MAX_GROWTH + 1), {"A": "x"}),  # a million uses of a short value
        ("${A:?}${A:?}", {"A": "x" * MAX_GROWTH}),
        ("${A#y}${A%y}" * 150, {"A": "x" * 4096}),
        ("${A//?/$B}", {"A": "x" * 4096, "B": "y" * 300}),  # 4096 copies of B: 1.2 MB
        ("${A/x/$B}$B", {"A": "x", "B": "y" * (MAX_GROWTH // 2 + 1)}),
    ],
    ids=["doubled", "uses", "checked", "trimmed", "replaced-each", "replaced-once"],
)
def test_a_value_grown_past_the_cap_is_refused(word: str, env: dict[str, str]) -> None:
    """Issue 49: `ENV A=${A}${A}` 32 times took 20 s and 6.3 GB; a value stops at a megabyte."""
    with pytest.raises(TooLarge):
        expand(word, env)


def test_a_value_at_the_cap_expands() -> None:
    half = "x" * (MAX_GROWTH // 2)
    assert expand("${A}${A}", {"A": half}).value == half * 2
    assert expand("${A//x/yy}", {"A": "x" * 4096}).value == "yy" * 4096
