"""RUN lines read as shell: commands in order, their words as written, their subshells."""

from __future__ import annotations

import pytest

from rocmgraph.dockerfile.expand import MAX_NESTING
from rocmgraph.dockerfile.shell import Assignment, Command, TooDeep, Word, parse


def names(script: str) -> list[str]:
    return [item.words[0].text for item in parse(script) if isinstance(item, Command)]


def test_commands_come_in_the_order_written_from_every_construct() -> None:
    script = (
        "set -e; if [[ -f x ]]; then a; elif b; then c; else d; fi && e || f | g; "
        "for i in 1; do h; done; while i; do j; done; case $x in y) k;; esac; "
        "{ l; }; (m); n $(o `p`) <(q); r() { s; }; ! t"
    )
    assert names(script) == [
        "set", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p",
        "q", "s", "t",
    ]  # fmt: skip


def test_words_keep_their_quotes_and_offsets_and_prefix_assignments_stay_apart() -> None:
    (command,) = parse("X=1 pip install 'a b' \"$C\" d\\ e")
    assert command == Command(
        words=(Word("pip", 4), Word("install", 8), Word("'a b'", 16), Word('"$C"', 22),
               Word("d\\ e", 27)),
        env=(("X", Word("1", 2)),),
        scopes=(),
    )  # fmt: skip


def test_lasting_assignments_come_out_and_subshells_are_named() -> None:
    items = parse("A=1; export B=2 C; (cd x && git y) | tee; cd z")
    assignments = [(i.name, i.value.text if i.value else None) for i in items
                    if isinstance(i, Assignment)]  # fmt: skip
    assert assignments == [("A", "1"), ("B", "2"), ("C", None)]
    commands = [i for i in items if isinstance(i, Command)]
    cd_in, git, tee, cd_out = commands
    assert cd_in.scopes == git.scopes
    assert len(cd_in.scopes) == 2
    assert tee.scopes == cd_in.scopes[:1]
    assert cd_out.scopes == ()


def test_unwanted_commands_are_skipped_but_their_substitutions_are_read() -> None:
    items = parse("echo $(pip install x) && ls", wanted=lambda name: name == "pip")
    assert [[w.text for w in i.words] for i in items if isinstance(i, Command)] == [
        ["pip", "install", "x"]
    ]


def test_offsets_count_characters_not_bytes() -> None:
    (command,) = parse("é=1 pip install 'ä==1'")
    assert isinstance(command, Command)
    assert command.words[2] == Word("'ä==1'", 16)


def test_what_no_shell_parses_still_gives_what_it_can() -> None:
    assert names("((( pip install a; )) git clone b") != []


def test_commands_nested_past_the_limit_are_refused_where_the_level_past_it_opens() -> None:
    """Subshells, substitutions and branches count alike; a hundred deep is read."""
    inner = "( " * (MAX_NESTING - 1) + "if a; then pip install x; fi" + " )" * (MAX_NESTING - 1)
    assert names(inner)[-1] == "pip"
    with pytest.raises(TooDeep) as refused:
        parse("echo ok; " + "( " * MAX_NESTING + "$(pip install x)" + " )" * MAX_NESTING)
    assert refused.value.offset == len("echo ok; ") + 2 * MAX_NESTING
