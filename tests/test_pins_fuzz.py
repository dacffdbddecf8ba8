"""The pins loader, fuzzed: whatever the file holds, a result or one line, never a traceback.

Documents are the real pins.toml mutated by structure (a value replaced by any
TOML value, a key dropped or added) and by text (lines dropped, doubled, cut or
spliced with random text, a value written as noise: too deep, too long, half a
string), and random text and bytes. Each either loads into Pins or is refused
with a PinsError whose message is one short line that starts with the file's
name. The profile in conftest makes every run the same; the whole file takes a
few seconds.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
import tomli
from conftest import PINS
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rocmgraph.common.errors import PinsError
from rocmgraph.config import pins

FILE = "fuzz/pins.toml"
LONGEST_MESSAGE = 1500  # a message names a key, a value cut to 200 characters, and a fix
REAL_TEXT = PINS.read_text(encoding="utf-8")
REAL_DATA = tomli.loads(REAL_TEXT)

fuzz = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])


def check(load: Callable[[], pins.Pins], file: str = FILE) -> None:
    """``load()`` gives Pins, or one PinsError line that names the file."""
    try:
        result = load()
    except PinsError as error:
        message = str(error)
        event("refused as text" if error.where.startswith("line ") else "refused by the schema")
        assert message.startswith(f"{file}: "), message
        assert len(message.splitlines()) == 1, message  # \r, \x1c, \u2028 ... split lines too
        assert len(message) <= LONGEST_MESSAGE, message[:300]
    else:
        event("loaded")
        assert isinstance(result, pins.Pins)


# ---------------------------------------------------------------- TOML, written out


def toml_value(value: object) -> str:
    """``value`` as an inline TOML value: the whole document stays one table per line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # inf, -inf, nan and 1e+300 are TOML too
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def toml_key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def toml_document(data: dict[str, Any]) -> str:
    return "".join(f"{toml_key(key)} = {toml_value(value)}\n" for key, value in data.items())


def test_the_writer_writes_the_real_pins_as_they_are() -> None:
    # Mutations of this document start from valid pins: the fuzz reaches past the parser.
    assert pins.loads(toml_document(REAL_DATA)) == pins.loads(REAL_TEXT)


# ---------------------------------------------------------------- structured mutations

SCALARS = (
    st.text(max_size=30)
    | st.text(min_size=300, max_size=3000)  # messages must cut it
    | st.sampled_from(["", "gfx942", "1.0", "/opt/rocm", "https://x.org:0/", "2026-02-30"])
    | st.integers()
    | st.booleans()
    | st.floats()
    | st.dates()
    | st.times()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def paths(node: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in a document: keys of tables and items of arrays."""
    found = [path] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*path, index))
    return found


PLACES = paths(REAL_DATA)


def copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: copy(value) for key, value in node.items()}
    if isinstance(node, list):
        return [copy(value) for value in node]
    return node


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    data = copy(REAL_DATA)
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(PLACES))
        parent: Any = data
        try:
            for part in place[:-1]:
                parent = parent[part]
            parent[place[-1]]  # the place may be gone after an earlier mutation
        except (KeyError, IndexError, TypeError):
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[place[-1]] = draw(VALUES)
        elif action == "delete":
            del parent[place[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(VALUES)
        else:
            parent.append(draw(VALUES))
    return toml_document(data)


@fuzz
@given(mutated_documents())
def test_a_structured_mutation_of_the_real_pins_is_pins_or_one_line(text: str) -> None:
    check(lambda: pins.loads(text, FILE))


# ---------------------------------------------------------------- text mutations

LINES = REAL_TEXT.splitlines(keepends=True)
TOKENS = ["[", "]]", "{", '"', "'''", '"""', "=", "\\", "#", "\ufeff", "\x00", "\r", "[[a]]"]
EXTREMES = ["[" * 450, "{a=" * 450, "9" * 5000, "x" * 5000]  # too deep, too long
NOISE = st.text(max_size=40) | st.sampled_from(TOKENS) | st.sampled_from(EXTREMES)


@st.composite
def spliced_documents(draw: st.DrawFn) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "double", "splice", "revalue", "cut", "swap"]))
        if action == "revalue":  # noise where a value starts
            key, equals, _ = lines[at].partition("=")
            lines[at] = f"{key}{equals} {draw(NOISE)}\n"
        elif action == "drop":
            del lines[at]
        elif action == "double":
            lines.insert(at, lines[at])
        elif action == "splice":
            column = draw(st.integers(0, len(lines[at])))
            lines[at] = lines[at][:column] + draw(NOISE) + lines[at][column:]
        elif action == "cut":
            lines = [*lines[:at], lines[at][: draw(st.integers(0, len(lines[at])))]]
        else:
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        if not lines:
            break
    return "".join(lines)


@fuzz
@given(spliced_documents())
def test_a_text_mutation_of_the_real_pins_is_pins_or_one_line(text: str) -> None:
    check(lambda: pins.loads(text, FILE))


VALUE_LINES = [n for n, line in enumerate(LINES) if "=" in line and not line.startswith("#")]


@fuzz
@given(st.sampled_from(VALUE_LINES), NOISE)
def test_any_value_written_as_noise_is_pins_or_one_line(at: int, noise: str) -> None:
    key, equals, _ = LINES[at].partition("=")
    text = "".join([*LINES[:at], f"{key}{equals} {noise}\n", *LINES[at + 1 :]])
    check(lambda: pins.loads(text, FILE))


# ---------------------------------------------------------------- random input


@fuzz
@given(st.text() | st.text(alphabet="[]{}=\"'#.,\n abc123", max_size=200))
def test_random_text_is_refused_in_one_line(text: str) -> None:
    check(lambda: pins.loads(text, FILE))


@fuzz
@given(data=st.binary(max_size=300) | st.binary(max_size=60).map(REAL_TEXT.encode().__add__))
def test_random_bytes_in_a_file_are_refused_in_one_line(
    data: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz.toml"
    path.write_bytes(data)
    check(lambda: pins.load(path), str(path))
