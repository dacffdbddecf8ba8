"""Dockerfiles as BuildKit reads them: instructions, flags, heredocs, and where each token is.

This follows BuildKit's own parser (moby/buildkit, frontend/dockerfile/parser)
rule for rule: parser directives (``# escape=``), a UTF-8 byte order mark,
line continuations (``\\`` then only blanks, not after another escape),
comment and blank lines inside continuations, heredocs (``<<EOF``, ``<<-EOF``,
quoted names, several on one line), the exec (JSON) form, ``--flags`` before the
arguments, ONBUILD's inner instruction, and its limit of 65535 bytes a line.
The tests check it against that parser (the ``dockerfile`` package wraps it)
on generated and real-world files.

It is written here rather than called because the official parser is
quadratic in the length of one instruction (joining continuation lines, and
its heredoc lexer): 100,000 continuation lines take it 3.6 s, one 60 KB word
after RUN 0.95 s. This one reads every character a bounded number of times,
and it keeps what the official one drops: the line of every character of a
joined instruction, so a report can name the line of a token.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from rocmgraph.common.errors import UsageError

MAX_LINE = 65535  # bytes; BuildKit's scanner refuses a longer line
HEREDOC_COMMANDS = frozenset({"ADD", "COPY", "RUN"})
# Go's unicode.IsSpace (Python's str.isspace also counts \x1c-\x1f, which Go does not).
SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_SPACES = "".join(sorted(SPACE))
_NOT_SPACE = re.compile(f"[^{re.escape(_SPACES)}]")
_SPLIT = re.compile(r"[\t\v\f\r ]+")  # where BuildKit splits a command from its arguments
_DIRECTIVE = re.compile(r"([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_DIRECTIVES = ("syntax", "escape", "check")
_HEREDOC = re.compile(r"(\d*)<<(-?)\s*([^<]*)", re.DOTALL)


class NotADockerfile(UsageError):
    """The file is not one BuildKit would build: binary, empty, or refused by its parser."""

    def __init__(self, file: str, line: int, problem: str) -> None:
        self.file, self.line, self.problem = file, line, problem
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: not a Dockerfile BuildKit accepts: {problem}")


@dataclass(frozen=True)
class Text:
    """A string joined from several lines, which remembers the line of each character."""

    value: str
    starts: tuple[int, ...]  # offsets in value where a line's piece begins
    lines: tuple[int, ...]  # that piece's line in the file

    def line_at(self, offset: int) -> int:
        return self.lines[max(bisect.bisect_right(self.starts, offset) - 1, 0)]

    def slice(self, start: int, end: int | None = None) -> Text:
        """The part from ``start`` to ``end``, still knowing its lines."""
        end = len(self.value) if end is None else end
        if len(self.starts) == 1:
            return Text(self.value[start:end], (0,), self.lines)
        first = max(bisect.bisect_right(self.starts, start) - 1, 0)
        last = max(bisect.bisect_right(self.starts, max(end - 1, start)) - 1, 0)
        starts = [0] + [s - start for s in self.starts[first + 1 : last + 1]]
        return Text(self.value[start:end], tuple(starts), self.lines[first : last + 1])

    @classmethod
    def plain(cls, value: str, line: int) -> Text:
        return cls(value, (0,), (line,))


@dataclass(frozen=True)
class Word:
    """One argument as written (quotes kept), and its offset in the instruction's arguments."""

    text: str
    offset: int


@dataclass(frozen=True)
class Heredoc:
    name: str
    content: str
    expand: bool  # an unquoted name: variables in the body are expanded
    chomp: bool  # <<-: leading tabs are stripped
    fd: int
    line: int  # the body's first line


@dataclass(frozen=True)
class Instruction:
    command: str  # upper case: RUN, FROM, ...
    flags: tuple[Word, ...]  # --mount=..., --from=... (quotes removed, as BuildKit keeps them)
    args: Text  # everything after the flags, continuation lines joined
    words: tuple[Word, ...]  # the arguments split as this instruction splits them
    exec_form: bool  # the arguments were a JSON array (``words`` are its strings)
    start_line: int
    end_line: int
    heredocs: tuple[Heredoc, ...] = ()
    inner: Instruction | None = None  # ONBUILD's instruction
    flag_lines: tuple[int, ...] = ()  # the line of each flag (its offset is the instruction's)

    def line_of(self, word: Word) -> int:
        for flag, line in zip(self.flags, self.flag_lines, strict=False):
            if flag is word:
                return line
        return self.args.line_at(word.offset)


@dataclass(frozen=True)
class Dockerfile:
    file: str
    escape: str
    directives: tuple[tuple[str, str], ...]
    instructions: tuple[Instruction, ...]


def parse(text: str, file: str = "Dockerfile") -> Dockerfile:
    """The instructions of ``text``; NotADockerfile when BuildKit would refuse it."""
    if "\x00" in text:
        raise NotADockerfile(file, 0, "it holds binary data (NUL bytes)")
    return _Parser(text, file).run()


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()  # the newline that ends the last line starts no new one
        self.ended = [True] * len(self.lines)  # each line had a newline ...
        if text and not text.endswith("\n"):
            self.ended[-1] = False  # ... but perhaps the last
        self.at = 0  # the next line to read (0-based)
        self.escape = "\\"
        self.directives: list[tuple[str, str]] = []
        self.directives_done = False

    # ------------------------------------------------------------ lines

    def _next(self) -> str | None:
        """The next line without its newline ("\\r" kept), or None at the end."""
        if self.at >= len(self.lines):
            return None
        raw = self.lines[self.at]
        self.at += 1
        if len(raw) * 4 > MAX_LINE and len(raw.encode("utf-8", "surrogateescape")) > MAX_LINE:
            raise NotADockerfile(
                self.file, self.at, f"the line is longer than {MAX_LINE} bytes, the most it reads"
            )
        if self.at == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]  # a UTF-8 byte order mark, as BuildKit discards it
        return raw

    # ------------------------------------------------------------ the file

    def run(self) -> Dockerfile:
        instructions: list[Instruction] = []
        while (raw := self._next()) is not None:
            line = _trim_newline(raw)
            line = _lstrip(line)
            self._directive(line)
            start = self.at
            if _is_comment(line):
                continue
            piece, continued = self._continuation(line)
            if not continued and piece == "":
                continue
            if not continued:  # the common case: one line
                instructions.append(self._instruction(Text.plain(piece, start), start))
                continue
            pieces: list[tuple[str, int]] = [(piece, start)]
            while continued:
                raw = self._next()
                if raw is None:
                    break  # the file ends in a continuation: the instruction ends too
                line = _trim_newline(raw)
                self._directive(line)
                if _is_comment(line) or _lstrip(line) == "":
                    continue  # comment and empty lines inside a continuation are skipped
                piece, continued = self._continuation(line)
                pieces.append((piece, self.at))
            text = _join(pieces)
            instruction = self._instruction(text, start)
            instructions.append(instruction)
        if not instructions:
            raise NotADockerfile(self.file, 0, "it has no instructions")
        return Dockerfile(self.file, self.escape, tuple(self.directives), tuple(instructions))

    def _directive(self, line: str) -> None:
        """Parser directives come before anything else; the first other line ends them."""
        if self.directives_done:
            return
        match = _DIRECTIVE.fullmatch(_lstrip(line[1:])) if line.startswith("#") else None
        name = match.group(1).lower() if match else ""
        if not match or name not in _DIRECTIVES:
            self.directives_done = True
            return
        if any(seen == name for seen, _ in self.directives):
            raise NotADockerfile(
                self.file, self.at, f"only one {name} parser directive can be used"
            )
        value = match.group(2)
        if name == "escape":
            if value not in ("\\", "`"):
                raise NotADockerfile(
                    self.file, self.at, f"invalid escape token '{value}' does not match ` or \\"
                )
            self.escape = value
        self.directives.append((name, value))

    def _continuation(self, line: str) -> tuple[str, bool]:
        """The line without its continuation token, and whether it had one.

        The token is the escape character followed by nothing but blanks, and not
        itself escaped (BuildKit's rule: the character before it is not the
        escape character, unless the token stands alone on the line).
        """
        stripped = line.rstrip(" \t")
        if not stripped.endswith(self.escape):
            return line, False
        if len(stripped) == 1:
            return "", True
        if stripped[-2] == self.escape:
            return line, False
        return stripped[:-1], True

    # ------------------------------------------------------------ one instruction

    def _instruction(self, text: Text, start: int, inner: bool = False) -> Instruction:
        value = text.value
        begin = _skip_space(value, 0)
        end = len(value.rstrip(_SPACES))
        split = _SPLIT.search(value, begin, end)
        command = value[begin : split.start() if split else end]
        flags: list[Word] = []
        args_start = args_end = split.end() if split else end
        if split:
            args_start, flags = _flags(value, split.end(), end, self.escape)
            args_end = end
            args_start = _skip_space(value, args_start)
        args = text.slice(args_start, max(args_start, args_end))
        lines = tuple(text.line_at(flag.offset) for flag in flags)
        upper = command.upper()
        if upper == "ONBUILD" and not inner:
            sub = self._instruction(args, start, inner=True) if args.value else None
            heredocs = self._heredocs(sub) if sub else ()
            return Instruction(upper, tuple(flags), args, (), False, start, self.at, heredocs, sub,
                               flag_lines=lines)  # fmt: skip
        words, exec_form = _arguments(upper, args.value, self.escape, self.file, self.at)
        instruction = Instruction(
            upper, tuple(flags), args, words, exec_form, start, self.at, flag_lines=lines
        )
        if inner:
            return instruction
        heredocs = self._heredocs(instruction)
        if heredocs:
            instruction = dataclasses.replace(instruction, heredocs=heredocs, end_line=self.at)
        return instruction

    def _heredocs(self, instruction: Instruction) -> tuple[Heredoc, ...]:
        """The bodies of the heredocs the instruction opens, read from the lines after it."""
        if instruction.command not in HEREDOC_COMMANDS or instruction.exec_form:
            return ()
        line = f"{instruction.command} {instruction.args.value}"
        if "<<" not in line:
            return ()
        found = []
        for fd, chomp, name, expand in _heredoc_names(line):
            body: list[str] = []
            first = self.at + 1
            while True:
                raw = self._next()
                if raw is None:
                    raise NotADockerfile(self.file, instruction.start_line, "unterminated heredoc")
                candidate = _trim_newline(raw)
                if chomp:
                    candidate = candidate.lstrip("\t")
                if candidate == name:
                    break
                body.append(raw + ("\n" if self.ended[self.at - 1] else ""))
            found.append(Heredoc(name, "".join(body), expand, chomp, fd, first))
        return tuple(found)


# ---------------------------------------------------------------- pieces of BuildKit's grammar


def _trim_newline(line: str) -> str:
    return line.rstrip("\r\n")


def _lstrip(line: str) -> str:
    return line.lstrip(_SPACES)


def _skip_space(value: str, at: int) -> int:
    match = _NOT_SPACE.search(value, at)
    return match.start() if match else len(value)


def _is_comment(line: str) -> bool:
    return _lstrip(line).startswith("#")


def _join(pieces: list[tuple[str, int]]) -> Text:
    starts, lines, offset = [], [], 0
    for piece, line in pieces:
        starts.append(offset)
        lines.append(line)
        offset += len(piece)
    return Text("".join(piece for piece, _ in pieces), tuple(starts), tuple(lines))


def _flags(value: str, at: int, end: int, escape: str) -> tuple[int, list[Word]]:
    """BuildKit's ``--flag`` words before the arguments: where the arguments start, and them.

    A bare ``--`` ends the flags.
    """
    flags: list[Word] = []
    while True:
        at = _skip_space(value, at)
        if at >= end or not value.startswith("--", at) or at + 1 >= end:
            return at, flags
        start = at
        text, at, quoted = _flag_word(value, at, end, escape)
        if text == "--":
            return at, flags
        if quoted or text:
            flags.append(Word(text, start))


def _flag_word(value: str, at: int, end: int, escape: str) -> tuple[str, int, bool]:
    """One flag, its quotes removed and escapes taken (in either quote too), where it ends,
    and whether it had quotes (an empty quoted flag still counts)."""
    word: list[str] = []
    quote, quoted = "", False
    while at < end:
        char = value[at]
        if char == escape:
            if at + 1 < end:
                at += 1
                word.append(value[at])
            else:
                quote = ""  # an escape at the very end is dropped
        elif quote:
            if char == quote:
                quote = ""
            else:
                word.append(char)
        elif char in SPACE:
            break
        elif char in "'\"":
            quote, quoted = char, True
        else:
            word.append(char)
        at += 1
    return "".join(word), at, quoted


Split = tuple[tuple["Word", ...], bool]  # the words, and whether they came in exec form


def _arguments(command: str, args: str, escape: str, file: str, line: int) -> Split:
    """The arguments split as BuildKit splits them for ``command``; and whether exec form."""
    how = _SPLITTERS.get(command, _one_string)
    return how(command, args, escape, file, line)


def _maybe_exec(command: str, args: str, escape: str, file: str, line: int) -> Split:
    """RUN, CMD, ENTRYPOINT, SHELL: a JSON array, or the whole text as one string;
    ADD, COPY, VOLUME: a JSON array, or words split at blanks."""
    parsed = _json_array(args, file, line)
    if parsed is not None:
        return parsed, True
    if command in ("ADD", "COPY", "VOLUME"):
        return _whitespace_words(args), False
    return _one_string(command, args, escape, file, line)


def _one_string(command: str, args: str, escape: str, file: str, line: int) -> Split:
    return ((Word(args, 0),) if args else ()), False


def _blank_separated(command: str, args: str, escape: str, file: str, line: int) -> Split:
    return _whitespace_words(args), False


def _assignments(command: str, args: str, escape: str, file: str, line: int) -> Split:
    """ARG, ENV, LABEL: shell-like words (quotes kept); ENV and LABEL need ``name=value``."""
    words = tuple(shell_words(args, escape))
    if command != "ARG" and words:
        _check_pairs(command, args, words, file, line)
    return words, False


def _healthcheck(command: str, args: str, escape: str, file: str, line: int) -> Split:
    """``NONE``, or ``CMD`` and a command in either form."""
    kind = next((i for i, c in enumerate(args) if c in SPACE), len(args))
    if kind == 0:
        return (), False
    rest = _skip_space(args, kind)
    parsed = _json_array(args[rest:], file, line)
    if parsed is not None:
        return (Word(args[:kind], 0), *(Word(w.text, w.offset + rest) for w in parsed)), True
    tail = (Word(args[rest:], rest),) if args[rest:] else ()
    return (Word(args[:kind], 0), *tail), False


_SPLITTERS = {
    **dict.fromkeys(("RUN", "CMD", "ENTRYPOINT", "SHELL", "ADD", "COPY", "VOLUME"), _maybe_exec),
    **dict.fromkeys(("FROM", "EXPOSE"), _blank_separated),
    **dict.fromkeys(("ARG", "ENV", "LABEL"), _assignments),
    "HEALTHCHECK": _healthcheck,
}


def _check_pairs(command: str, args: str, words: tuple[Word, ...], file: str, line: int) -> None:
    """ENV and LABEL: ``name=value ...``, or the old ``name value`` form."""
    if "=" not in words[0].text:
        if len(_SPLIT.split(args, maxsplit=1)) < 2:
            raise NotADockerfile(file, line, f"{command} must have two arguments")
        return
    for word in words:
        if "=" not in word.text:
            raise NotADockerfile(
                file,
                line,
                f"Syntax error - can't find = in {json.dumps(word.text)}. "
                "Must be of the form: name=value",
            )


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _json_array(args: str, file: str, line: int) -> tuple[Word, ...] | None:
    """The strings of a JSON array (exec form) and where each is; None when it is not one."""
    lead = _skip_space(args, 0)
    if not args.startswith("[", lead):
        return None
    try:
        items = json.loads(args[lead:])
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    if not all(isinstance(item, str) for item in items):
        raise NotADockerfile(
            file, line, "when using JSON array syntax, arrays must be comprised of strings only"
        )
    # An array of strings only: its n-th string token is its n-th item.
    offsets = [match.start() for match in _JSON_STRING.finditer(args, lead)]
    return tuple(Word(item, offset) for item, offset in zip(items, offsets, strict=True))


_BLANKS = re.compile(r"[^\t\v\f\r ]+")


def _whitespace_words(args: str) -> tuple[Word, ...]:
    return tuple(Word(match.group(0), match.start()) for match in _BLANKS.finditer(args))


_SPACE_CLASS = "".join(sorted(SPACE)).replace("\\", "")


def _word_pattern(escape: str, heredoc: bool) -> re.Pattern[str]:
    """A token of BuildKit's word scans: a quoted run, an escaped character, ``<<`` and the
    blanks after it (the heredoc scan only), a run of blanks, or a run of anything else."""
    e, blanks = re.escape(escape), re.escape(_SPACE_CLASS)
    double = f'"(?:[^"{e}]|{e}.)*"?' if escape else '"[^"]*"?'
    parts = [double, "'[^']*'?", f"{e}.", f"{e}$"]
    if heredoc:
        parts.append(f"<<[{blanks}]*")
    parts += [f"[{blanks}]+", f"[^{blanks}'\"{e}{'<' if heredoc else ''}]+", "."]
    return re.compile("|".join(parts), re.DOTALL)


_WORDS = {(escape, heredoc): _word_pattern(escape, heredoc)
          for escape in ("\\", "`") for heredoc in (False, True)}  # fmt: skip


def shell_words(args: str, escape: str = "\\") -> Iterator[Word]:
    """BuildKit's word splitting for ARG, ENV and LABEL: blanks split, quotes kept.

    Inside double quotes (and outside quotes) the escape character keeps the
    next character; inside single quotes it is literal; an escape character at
    the very end is dropped.
    """
    start = -1
    for match in _WORDS[(escape, False)].finditer(args):
        token = match.group(0)
        if token[0] in SPACE:
            if start >= 0:
                yield Word(args[start : match.start()], start)
                start = -1
        elif token == escape and match.end() == len(args):
            if start >= 0:
                yield Word(args[start : match.start()], start)
            return
        elif start < 0:
            start = match.start()
    if start >= 0:
        yield Word(args[start:], start)


def _heredoc_names(line: str) -> Iterator[tuple[int, bool, str, bool]]:
    """(fd, chomp, name, expand) of each heredoc the line opens (``<<EOF``, ``2<<-'EOF'``).

    Words are split as BuildKit's heredoc scan splits them: quotes and escapes
    kept, blanks after ``<<`` joined to it; an unterminated quote means no heredoc.
    """
    for word in _raw_words(line):
        match = _HEREDOC.fullmatch(word)
        if not match or not match.group(3):
            continue
        rest = match.group(3)
        name = _unquote(rest)
        if not name:
            continue
        quotes = sum(rest.count(q) for q in "'\"")
        expand = quotes == sum(name.count(q) for q in "'\"")  # no quote was removed
        yield int(match.group(1) or 0), match.group(2) == "-", name, expand


def _raw_words(line: str) -> list[str]:
    words: list[str] = []
    word: list[str] = []
    for match in _WORDS[("\\", True)].finditer(line):
        token = match.group(0)
        if token[0] in "'\"" and (len(token) == 1 or token[-1] != token[0]):
            return []  # an open quote: BuildKit's lexer fails, and finds no heredoc at all
        if token[0] in SPACE:
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(token)
    if word:
        words.append("".join(word))
    return words


def _unquote(word: str) -> str | None:
    """A heredoc name with its quotes and escapes removed; None if a quote is open."""
    out: list[str] = []
    for match in _WORDS[("\\", False)].finditer(word):
        token = match.group(0)
        if token[0] == "'":
            if len(token) == 1 or token[-1] != "'":
                return None
            out.append(token[1:-1])
        elif token[0] == '"':
            if len(token) == 1 or token[-1] != '"' or _escaped(token, len(token) - 1):
                return None
            out.append(re.sub(r'\\([\\"$])', r"\1", token[1:-1]))
        elif token[0] == "\\" and len(token) == 2:
            out.append(token[1])
        else:
            out.append(token)
    return "".join(out)


def _escaped(text: str, at: int) -> bool:
    count = 0
    while at - count - 1 >= 0 and text[at - count - 1] == "\\":
        count += 1
    return count % 2 == 1
