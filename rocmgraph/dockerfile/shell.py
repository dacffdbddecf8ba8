"""RUN lines read as shell: every simple command, in order, with its words as written.

A real shell grammar (tree-sitter's bash grammar) parses the script, so
commands after ``then``/``else``, in ``;``, ``&&``, ``||`` and ``|`` chains,
in loops, ``case`` arms, functions, subshells and ``$(...)`` are all found,
and quoting is the shell's. The grammar recovers from what it cannot parse, so
a script is never refused for its syntax; it parses in linear time, and nesting
costs no recursion here. Commands nested more than MAX_NESTING deep (in ``$(...)``,
subshells, if/case arms, ``||``) are refused (``TooDeep``): each would carry the
text of all those inside it, which grows with the square of the depth.

What comes out is flat and plain: each command's words as written (with
their offsets, for line numbers), the ``NAME=value`` words before it, and the
subshells it runs in (a ``cd`` inside one does not move the commands after
it). Assignments that outlive their command (``X=1;``, ``export X=1``) come
out as their own items.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocmgraph.dockerfile.expand import MAX_NESTING

_SCOPES = frozenset({"subshell", "pipeline", "command_substitution", "process_substitution"})
# What can hold a command inside a word: $(...), `...`, <(...).
_NESTED = (b"$(", b"`", b"<(", b">(")


@dataclass(frozen=True)
class Word:
    text: str  # as written: quotes and $ kept (rocmgraph.dockerfile.expand gives its value)
    offset: int  # in the script, in characters


@dataclass(frozen=True)
class Command:
    words: tuple[Word, ...]  # the command's name, then its arguments
    env: tuple[tuple[str, Word], ...]  # NAME=value words before it (for it alone)
    scopes: tuple[int, ...]  # the subshells it runs in, outermost first
    branches: tuple[int, ...] = ()  # the branches it is in (if/elif/else and case arms, ||)


@dataclass(frozen=True)
class Assignment:
    """``NAME=value`` that holds for the rest of its scope (bare, via export/declare, or a
    ``for NAME in ...`` loop, whose values are known only when it runs)."""

    name: str
    value: Word | None  # None: declared without a value (``export NAME``), or a loop
    scopes: tuple[int, ...]
    loop: bool = False
    # The branches it is in, outermost first: an if/elif/else or case arm, the right of ||.
    # Only what runs in the same branch surely sees it.
    branches: tuple[int, ...] = ()


Item = Command | Assignment


class TooDeep(Exception):
    """Commands nested more than MAX_NESTING deep; ``offset``: where the level past it opens."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"commands nested more than {MAX_NESTING} deep at character {offset}")
        self.offset = offset


@functools.cache
def _parser() -> Any:
    # tree-sitter loads a compiled grammar: made once per process, when first needed.
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def parse(script: str, wanted: Callable[[str], bool] = lambda _: True) -> list[Item]:
    """The commands and lasting assignments of ``script``, in the order they are written.

    Only commands whose name ``wanted`` takes come out: the others' arguments are
    not even read (a 5 MB ``echo`` costs nothing), unless they hold commands of
    their own, which are.
    """
    data = script.encode("utf-8", "surrogateescape")
    cursor = _parser().parse(data).walk()
    visit = _Visitor(data, _Offsets(script, data), wanted)
    scopes, branches = _Open(), _Open()  # the subshells and the branches around us
    depth = 0
    while True:
        node = cursor.node
        kind = node.type
        if kind in _SCOPES:
            scopes.push(depth, node.start_byte * 2 + (kind == "pipeline"))
        elif kind in _ARMS:
            _open_arm(node, depth, branches)
        if len(scopes.stack) + len(branches.stack) > MAX_NESTING:
            raise TooDeep(visit.offset(node.start_byte))
        visit.branches = branches.ids
        descend = visit(node, scopes.ids)
        if descend and cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return visit.items
            depth -= 1
        scopes.leave(depth)
        branches.leave(depth)


@dataclass
class _Open:
    """The subshells (or branches) the walk is inside, outermost first: the depth and id of
    each, and their ids (made again only when they change: a node costs no copy of them)."""

    stack: list[tuple[int, int]] = field(default_factory=list)
    ids: tuple[int, ...] = ()

    def push(self, depth: int, ident: int) -> None:
        self.stack.append((depth, ident))
        self.ids = (*self.ids, ident)

    def leave(self, depth: int) -> None:
        """The walk is back at ``depth``: what it left ran in them, what comes next does not."""
        while self.stack and self.stack[-1][0] >= depth:
            self.stack.pop()
        self.ids = self.ids[: len(self.stack)]  # (all of it: the same tuple, not a copy)


_ARMS = frozenset({"then", "elif_clause", "else_clause", "case_item", "||"})


def _open_arm(node: Any, depth: int, branches: _Open) -> None:
    """A branch starts: an if's `then` part, an elif or else, a case arm, the right of ||.

    Each is open while what follows it in its parent is walked: `then` and `||` are
    tokens whose branch is the rest of their parent (so it closes with the parent);
    an elif, else or case arm is a node of its own (it closes with that node).
    """
    kind = node.type
    parent = node.parent
    if kind == "then":
        if parent is not None and parent.type == "if_statement":
            branches.push(depth - 1, node.start_byte)
        return
    if kind == "||":
        branches.push(depth - 1, node.end_byte)
        return
    if kind in ("elif_clause", "else_clause"):
        branches.leave(depth - 1)  # the `then` part (or the elif before) ends here
    branches.push(depth, node.start_byte)


_LEAVES = frozenset({"word", "raw_string", "number", "comment", "heredoc_body"})


class _Visitor:
    """What one node of the tree adds to the items, and whether to look inside it."""

    def __init__(self, data: bytes, offset: _Offsets, wanted: Callable[[str], bool]) -> None:
        self.data, self.offset, self.wanted = data, offset, wanted
        self.items: list[Item] = []
        self.branches: tuple[int, ...] = ()  # of the node visited

    def __call__(self, node: Any, scopes: tuple[int, ...]) -> bool:
        kind, data, offset = node.type, self.data, self.offset
        branches = self.branches
        if kind == "command":
            command = _command(node, data, offset, scopes, self.wanted)
            if command is not None:
                self.items.append(dataclasses.replace(command, branches=branches))
            return _nested(node, data)
        if kind == "declaration_command":
            self.items += [
                dataclasses.replace(item, branches=branches)
                for item in _declaration(node, data, offset, scopes)
            ]
        elif kind == "for_statement" and (variable := node.child_by_field_name("variable")):
            self.items.append(Assignment(_text(variable, data), None, scopes, True, branches))
        elif kind == "variable_assignment":
            parent = node.parent
            if parent is None or parent.type not in ("command", "declaration_command"):
                item = _assignment(node, data, offset, scopes)
                self.items.append(dataclasses.replace(item, branches=branches))
            return _nested(node, data)
        return kind not in _LEAVES


def _nested(node: Any, data: bytes) -> bool:
    """Whether a node's text may hold commands of its own (a substitution)."""
    return any(data.find(mark, node.start_byte, node.end_byte) >= 0 for mark in _NESTED)


def _command(
    node: Any,
    data: bytes,
    offset: _Offsets,
    scopes: tuple[int, ...],
    wanted: Callable[[str], bool],
) -> Command | None:
    words: list[Word] = []
    env: list[tuple[str, Word]] = []
    name = node.child_by_field_name("name")
    if name is None or not wanted(_text(name, data)):
        return None
    end = -1
    for child in node.named_children:
        kind = child.type
        if kind == "variable_assignment" and not words:
            assignment = _assignment(child, data, offset, scopes)
            if assignment.value is not None:
                env.append((assignment.name, assignment.value))
        elif kind == "command_name" or not (kind.endswith("redirect") or kind == "comment"):
            if child.start_byte == end and words:  # no blank between: the same shell word
                words[-1] = Word(words[-1].text + _text(child, data), words[-1].offset)
            else:
                words.append(_word(child, data, offset))
            end = child.end_byte
    return Command(tuple(words), tuple(env), scopes)


def _declaration(
    node: Any, data: bytes, offset: _Offsets, scopes: tuple[int, ...]
) -> list[Assignment]:
    found = []
    for child in node.named_children:
        if child.type == "variable_assignment":
            found.append(_assignment(child, data, offset, scopes))
        elif child.type == "variable_name":
            found.append(Assignment(_text(child, data), None, scopes))
    return found


def _assignment(node: Any, data: bytes, offset: _Offsets, scopes: tuple[int, ...]) -> Assignment:
    name = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    word = _word(value, data, offset) if value is not None else Word("", offset(node.end_byte))
    return Assignment(_text(name, data) if name is not None else "", word, scopes)


def _word(node: Any, data: bytes, offset: _Offsets) -> Word:
    return Word(_text(node, data), offset(node.start_byte))


def _text(node: Any, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")


class _Offsets:
    """Byte offsets (tree-sitter's) to character offsets (the script's)."""

    def __init__(self, script: str, data: bytes) -> None:
        self.ascii = len(script) == len(data)
        self.starts: list[int] = []
        if not self.ascii:  # only when needed: the byte where each character starts
            at = 0
            for char in script:
                self.starts.append(at)
                at += len(char.encode("utf-8", "surrogateescape"))

    def __call__(self, byte: int) -> int:
        if self.ascii:
            return byte
        return max(bisect.bisect_right(self.starts, byte) - 1, 0)
