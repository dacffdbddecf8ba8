"""Variable substitution as BuildKit and the shell do it: ``$V``, ``${V:-default}``, quotes.

One function, ``expand``, turns a word as written into the value it has,
given the variables known at that point (ARG and ENV in a Dockerfile, and
assignments earlier in a RUN line). It does what BuildKit's lexer does
(frontend/dockerfile/shell/lex.go): single quotes are literal, double quotes
keep ``$`` live, the escape character takes the next character, and the
operators ``-``, ``:-``, ``+``, ``:+``, ``?``, ``:?``, ``#``, ``##``, ``%``,
``%%``, ``/`` and ``//`` nest. It never guesses: a variable with no known value
keeps its text and is named in ``unset``; a command substitution or arithmetic
makes the word ``dynamic``. Linear in the word, and its value is at most
MAX_GROWTH characters longer than the word: past that it fails (TooLarge), as
``ENV A=${A}${A}`` forty times would double a value to a terabyte.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Runs of characters that mean nothing special, by escape character and stop character.
_LITERAL = {
    (escape, stop): re.compile("[^" + re.escape(f"{escape}$'\"`{stop}") + "]+")
    for escape in ("\\", "`")
    for stop in ("", "}", "/")
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-]")
_PAIRS = (":-", ":+", ":?", "##", "%%", "//")
_OPERATORS = (*_PAIRS, "-", "+", "?", "#", "%", "/")
_LONG_VALUE = 4096  # prefix/suffix patterns are tried at every cut: only on short values
# Deeper than any real script nests. ${V:-${W:-...}} past it is kept as written (dynamic):
# each level is a few frames of Python's stack, which a fuzzed 6 KB line would otherwise
# exhaust. Commands nested past it are refused (rocmgraph.dockerfile.shell).
MAX_NESTING = 100
# What substitution may add to one word, in characters (a megabyte, where a long real value,
# a PATH or a list of packages, is a few kilobytes).
MAX_GROWTH = 1 << 20


class TooLarge(Exception):
    """A word whose variables would make its value more than MAX_GROWTH characters longer
    than the word itself."""

    def __init__(self) -> None:
        super().__init__(f"a value grows past {MAX_GROWTH} characters")


@dataclass(frozen=True)
class Expanded:
    value: str
    used: frozenset[str] = frozenset()  # variables whose value went in
    unset: frozenset[str] = frozenset()  # variables with no known value (kept as written)
    dynamic: bool = False  # a command substitution or arithmetic: known only when it runs
    quoted: bool = False  # some part was quoted (so an empty value is still a word)

    @property
    def known(self) -> bool:
        return not self.unset and not self.dynamic


@dataclass
class _State:
    used: set[str] = field(default_factory=set)
    unset: set[str] = field(default_factory=set)
    dynamic: bool = False
    quoted: bool = False


def expand(
    word: str, env: Mapping[str, str], escape: str = "\\", *, shell: bool = False
) -> Expanded:
    """The value of ``word``. ``shell``: it is a shell word (a RUN line), where the
    backquote substitutes a command; in Dockerfile words it is the escape or literal."""
    if _LITERAL[(escape, "")].fullmatch(word):
        return Expanded(word)  # nothing to substitute (most words): no scan
    state = _State()
    value, _ = _Scanner(word, env, escape, shell, state).run(0, "")
    return Expanded(
        value, frozenset(state.used), frozenset(state.unset), state.dynamic, state.quoted
    )


class _Scanner:
    def __init__(
        self, text: str, env: Mapping[str, str], escape: str, shell: bool, state: _State
    ) -> None:
        self.text, self.env, self.escape, self.shell, self.state = text, env, escape, shell, state
        self.depth = 0  # the ${...} this scan is inside
        self.grown = 0  # characters the variables' values put in so far

    def _grow(self, value: str) -> str:
        """``value``, put in for a variable: TooLarge past MAX_GROWTH in all."""
        self.grown += len(value)
        if self.grown > MAX_GROWTH:
            raise TooLarge
        return value

    def run(self, at: int, stop: str) -> tuple[str, int]:
        """Expand from ``at`` up to the unquoted ``stop`` (or the end); the value and where
        scanning ended (after ``stop``)."""
        out: list[str] = []
        text, end = self.text, len(self.text)
        while at < end:
            char = text[at]
            if stop and char == stop:
                return "".join(out), at + 1
            match = _LITERAL[(self.escape, stop)].match(text, at)
            if match:
                out.append(match.group(0))
                at = match.end()
                continue
            if char == self.escape:
                if at + 1 < end:
                    out.append(text[at + 1])
                at += 2
            elif char == "'":
                close = text.find("'", at + 1)
                close = end if close < 0 else close
                out.append(text[at + 1 : close])
                self.state.quoted = True
                at = close + 1
            elif char == '"':
                value, at = self._double(at + 1)
                out.append(value)
                self.state.quoted = True
            elif char == "$":
                value, at = self._dollar(at)
                out.append(value)
            elif char == "`" and self.shell:
                out.append(self._backquote(at))
                at += len(out[-1])
            else:
                out.append(char)
                at += 1
        return "".join(out), at

    def _double(self, at: int) -> tuple[str, int]:
        out: list[str] = []
        text, end = self.text, len(self.text)
        while at < end:
            char = text[at]
            if char == '"':
                return "".join(out), at + 1
            if char == "$":
                value, at = self._dollar(at)
                out.append(value)
            elif char == self.escape and at + 1 < end and text[at + 1] in ('"', "$", self.escape):
                out.append(text[at + 1])
                at += 2
            elif char == "`" and self.shell:
                out.append(self._backquote(at))
                at += len(out[-1])
            else:
                out.append(char)
                at += 1
        return "".join(out), at

    def _backquote(self, at: int) -> str:
        """A `command` substitution as written: known only when it runs."""
        close = self.text.find("`", at + 1)
        self.state.dynamic = True
        return self.text[at : len(self.text) if close < 0 else close + 1]

    def _dollar(self, at: int) -> tuple[str, int]:
        """``$`` at ``at``: the value it stands for, and where scanning goes on."""
        text = self.text
        after = text[at + 1 : at + 2]
        if after == "(":  # $(command) or $((arithmetic)): known only when it runs
            return self._opaque(at, at + 1)
        if after == "{":
            return self._braced(at)
        match = _NAME.match(text, at + 1)
        if not match:
            return "$", at + 1
        return self._lookup(match.group(0), f"${match.group(0)}"), match.end()

    def _opaque(self, at: int, bracket: int) -> tuple[str, int]:
        """A ``$(...)`` or a ``${...}`` beyond a static reading: kept as written, dynamic."""
        close = _matching(self.text, bracket)
        self.state.dynamic = True
        return self.text[at:close], close

    def _braced(self, at: int) -> tuple[str, int]:
        """``${NAME}``, ``${NAME<op>word}``: the value, and where scanning goes on."""
        text = self.text
        match = _NAME.match(text, at + 2)
        if not match:  # ${} or ${!indirect}
            return self._opaque(at, at + 1)
        name, end = match.group(0), match.end()
        if text.startswith("}", end):
            return self._lookup(name, f"${{{name}}}"), end + 1
        op = text[end : end + 2] if text[end : end + 2] in _PAIRS else text[end : end + 1]
        if op not in _OPERATORS or self.depth >= MAX_NESTING:
            return self._opaque(at, at + 1)
        self.depth += 1
        try:
            if op in ("/", "//"):
                pattern, end = self.run(end + len(op), "/")
                replacement, end = self.run(end, "}")
            else:
                pattern, end = self.run(end + len(op), "}")
                replacement = ""
        finally:
            self.depth -= 1
        return self._operate(name, op, pattern, replacement, text[at:end]), end

    def _operate(self, name: str, op: str, word: str, replacement: str, raw: str) -> str:
        """What ``${name<op>word}`` is (``raw`` as written, kept when the value is unknown)."""
        known = name in self.env
        value = self.env.get(name, "")
        if known:
            self.state.used.add(name)
        empty = not known or (op.startswith(":") and value == "")
        if op[-1] in "-+":  # a default, or an alternative
            return (word if empty else value) if op[-1] == "-" else ("" if empty else word)
        if not known:
            self.state.unset.add(name)
        elif len(value) > _LONG_VALUE and op[-1] != "?":
            self.state.dynamic = True
        if not known or (self.state.dynamic and len(value) > _LONG_VALUE):
            return raw
        if op[-1] == "?":
            return self._grow(value)
        if op[0] == "/":
            room = MAX_GROWTH - self.grown
            return self._grow(_replace(value, word, replacement, every=op == "//", room=room))
        return self._grow(_trim(value, word, longest=len(op) == 2, prefix=op[0] == "#"))

    def _lookup(self, name: str, raw: str) -> str:
        if name in self.env:
            self.state.used.add(name)
            return self._grow(self.env[name])
        self.state.unset.add(name)
        return raw


# A quoted run, an escaped character, or a bracket: what matters in finding a closing one.
_BRACKET_TOKENS = {
    opening: re.compile(rf"'[^']*'?|\\.?|[{re.escape(opening + closing)}]", re.DOTALL)
    for opening, closing in (("(", ")"), ("{", "}"))
}


def _matching(text: str, at: int) -> int:
    """After the bracket that closes the one at ``at`` (``(`` or ``{``), quotes respected."""
    opening = text[at]
    depth = 0
    for token in _BRACKET_TOKENS[opening].finditer(text, at):
        mark = token.group()
        if mark == opening:
            depth += 1
        elif len(mark) == 1 and mark in ")}":
            depth -= 1
            if depth == 0:
                return token.end()
    return len(text)


def _trim(value: str, pattern: str, *, longest: bool, prefix: bool) -> str:
    cuts = range(len(value), -1, -1) if longest else range(len(value) + 1)
    for cut in cuts:
        part = value[:cut] if prefix else value[len(value) - cut :]
        if fnmatch.fnmatchcase(part, pattern):
            return value[cut:] if prefix else value[: len(value) - cut]
    return value


def _replace(value: str, pattern: str, replacement: str, *, every: bool, room: int) -> str:
    """``value`` with the first (``every``: each) match of ``pattern`` replaced: TooLarge as
    soon as it is longer than ``room`` (``${A//?/$B}`` makes len(A) copies of B)."""
    regex = re.compile(fnmatch.translate(pattern).removeprefix("(?s:").removesuffix(")\\Z"))
    length = len(value)

    def one(match: re.Match[str]) -> str:
        nonlocal length
        length += len(replacement) - len(match.group())
        if length > room:
            raise TooLarge
        return replacement

    return regex.sub(one, value, count=0 if every else 1)
