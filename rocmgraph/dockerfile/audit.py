"""`doit audit dockerfile=<path>`: does a plain Dockerfile pin everything it builds from?

One finding per thing fetched: a base image (FROM, ``COPY --from``, a RUN
mount's ``from=``), a git clone (with the checkout that pins it, wherever it
is: ``cd x && git checkout``, ``git -C x checkout``, ``git reset --hard``, or a
later RUN in that WORKDIR), a package installed by pip, apt, pipx, conda, npm,
cargo or ``go install``, a download (``ADD <url>``, curl, wget, aria2c). Each
names the line of its token and, where a value came through an ARG or ENV,
that place too: the ARG and the clone that uses it are one finding.

The file is read as BuildKit reads it (rocmgraph.dockerfile.syntax), RUN lines
as shell (rocmgraph.dockerfile.shell), variables as BuildKit and the shell substitute
them (rocmgraph.dockerfile.expand), pip's arguments as pip reads them
(rocmgraph.dockerfile.pipargs), the other managers' as theirs
(rocmgraph.dockerfile.managers). What cannot be known from the file (an ARG without a
default, a ``$(command)``) is reported as unknown, never guessed.

Exit codes: 0 when every finding is pinned, 1 when one breaks a policy, 2 when
something could not be checked (or commands nest deeper than the audit reads, or a
value grows larger than it expands), 3 when the file is not a Dockerfile.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rocmgraph.common.errors import LockError, Unchecked
from rocmgraph.dockerfile import managers, pipargs, shell, syntax
from rocmgraph.dockerfile.expand import MAX_GROWTH, MAX_NESTING, Expanded, TooLarge, expand
from rocmgraph.dockerfile.syntax import Instruction, NotADockerfile, Text

FULL = re.compile(r"[0-9a-f]{40}")
SHORT = re.compile(r"[0-9a-f]{7,39}")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
KNOWN = pipargs.names(
    "ADD ARG CMD COPY ENTRYPOINT ENV EXPOSE FROM HEALTHCHECK LABEL MAINTAINER ONBUILD RUN "
    "SHELL STOPSIGNAL USER VOLUME WORKDIR"
)
# Set by BuildKit for the build's platforms: no value can be read from the file.
PLATFORM_ARGS = frozenset(
    f"{side}{part}"
    for side in ("BUILD", "TARGET")
    for part in ("PLATFORM", "OS", "ARCH", "VARIANT")
)
_PIN_SUFFIXES = ("_COMMIT", "_TAG", "_REF", "_SHA", "_REVISION", "_HASH")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash"})
# Commands that run another, and their options that take a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-U", "-C", "-D", "-r", "-t", "-T"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "nice": frozenset({"-n"}),
    "timeout": frozenset({"-s", "-k"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a"}),
    "time": frozenset({"-f", "-o"}),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "command": frozenset(),
    "eatmydata": frozenset(),
}
_DOWNLOADERS = frozenset({"curl", "wget", "aria2c", "rpm"})  # rpm -ivh <url> fetches it
_CHECKSUMS = frozenset({"sha256sum", "sha512sum", "sha384sum", "shasum", "b2sum"})
# The downloaders' options that take the next word as their value.
_DOWNLOAD_OPTIONS = {
    "curl": pipargs.names(
        "-o --output -H --header -d --data --data-binary --data-raw --data-urlencode -u --user "
        "-A --user-agent -e --referer -x --proxy --preproxy -X --request -m --max-time "
        "--connect-timeout --retry --retry-delay --retry-max-time -w --write-out -T "
        "--upload-file -b --cookie -c --cookie-jar -K --config -r --range -y -Y -z --cacert "
        "--cert --key -E --resolve --limit-rate --output-dir -F --form --proto --proto-redir "
        "--max-redirs --interface --dns-servers --netrc-file"
    ),
    "wget": pipargs.names(
        "-O --output-document -o --output-file -a --append-output -P --directory-prefix -i "
        "--input-file -t --tries -T --timeout -U --user-agent --header -e --execute --user "
        "--password -w --wait -Q --quota -B --base --post-data --post-file --load-cookies "
        "--save-cookies --ca-certificate --certificate --private-key -l --level -A -R -D -X -I "
        "--bind-address --limit-rate"
    ),
    "aria2c": pipargs.names(
        "-o --out -d --dir -x --max-connection-per-server -s --split -k --min-split-size -j "
        "--max-concurrent-downloads -i --input-file --header -U --user-agent --all-proxy "
        "--http-proxy --https-proxy --checksum"
    ),
    "rpm": pipargs.names("--root --dbpath -D --define --prefix --relocate --excludepath"),
}
# Those whose every other argument is a URL (rpm's are packages, files and queries).
_URLS_ALONE = frozenset({"curl", "wget", "aria2c"})
# What a script that can fetch something holds somewhere (cheaper to look for than to parse).
_MARKS = ("pip", "git", "curl", "wget", "aria2", "rpm", "$", *managers.BY_COMMAND)
_URL = re.compile(r"(https?|ftp)://\S+")
_GIT_URL = re.compile(r"((https?|git|ssh)://\S+?\.git|git@[^\s:]+:\S+?\.git)(#\S*)?$")


class Kind(StrEnum):
    FROM = "from"
    COPY_FROM = "copy-from"
    MOUNT_FROM = "mount-from"
    CLONE = "clone"
    PIP = "pip"
    # the other package managers: their names in rocmgraph.dockerfile.managers.MANAGERS
    APT = "apt"
    DNF = "dnf"
    APK = "apk"
    PIPX = "pipx"
    CONDA = "conda"
    NPM = "npm"
    YARN = "yarn"
    PNPM = "pnpm"
    CARGO = "cargo"
    GO = "go"
    URL = "url"
    ARG = "arg"


# The value of a finding for `apt-get upgrade`, `dnf update`, `apk upgrade` with no package.
EVERY_PACKAGE = "every installed package"


@dataclass(frozen=True)
class Place:
    line: int
    what: str  # "ARG VLLM_TAG", "git clone", ...


@dataclass(frozen=True)
class Finding:
    kind: Kind
    line: int  # the line of the token that fetches (or pins) it
    value: str
    problems: tuple[str, ...] = ()  # policy violations
    unknown: tuple[str, ...] = ()  # what the file alone cannot tell
    also: tuple[Place, ...] = ()  # other places of the same thing: the ARG it came through
    hashed: bool | None = None  # for downloads: whether a hash checks the content


@dataclass(frozen=True)
class Report:
    file: str
    findings: tuple[Finding, ...]

    @property
    def violations(self) -> int:
        return sum(bool(f.problems) for f in self.findings)

    @property
    def unchecked(self) -> int:
        return sum(bool(f.unknown) and not f.problems for f in self.findings)


def audit(text: str, file: str = "Dockerfile") -> Report:
    """Every finding of the Dockerfile ``text``; NotADockerfile if BuildKit would refuse it."""
    return read(text, file).report


@dataclass(frozen=True)
class Ran:
    """A command some RUN line runs (wrappers such as sudo or env taken off), with its words'
    values and the folder it runs in (None when the file cannot tell)."""

    words: tuple[str, ...]
    line: int
    cwd: str | None
    env: tuple[tuple[str, str], ...] = ()  # its NAME=value prefixes (``MAX_JOBS=64 python ...``)


@dataclass(frozen=True)
class Clone:
    url: str
    ref: str  # "" when nothing pins it
    path: str | None  # where it lands in the image
    line: int  # of the ref that pins it, else of the URL


@dataclass(frozen=True)
class Reading:
    """What a Dockerfile does, as read for the audit and for `doit compare`."""

    report: Report
    ran: tuple[Ran, ...]  # every command of every RUN line, in order
    # (name, value, line) of each ENV the final image has (its stage's and those it builds
    # FROM), in order: a builder stage's are not the image's
    env: tuple[tuple[str, str, int], ...]
    clones: tuple[Clone, ...]
    cmd: tuple[str, ...] | None  # the last CMD
    workdir: str  # the final stage's


def read(text: str, file: str = "Dockerfile", *, record: bool = False) -> Reading:
    """The findings of ``text`` and, with ``record``, every command, ENV and clone too."""
    parsed = syntax.parse(text, file)
    _check(parsed)
    walker = _Walker(file, parsed.escape, record)
    for instruction in parsed.instructions:
        walker.instruction(instruction)
    clones = tuple(
        Clone(c.url.value, c.ref.value if c.ref else "", c.path, c.ref_line if c.ref else c.line)
        for c in walker.clones
    )
    workdir = walker.stage.workdir if walker.stage else "/"
    final = walker.stage.vars.values() if walker.stage else ()
    env = sorted(((var.name, var.value or "", var.line) for var in final if var.env),
                 key=lambda item: item[2])  # fmt: skip
    return Reading(
        Report(file, walker.findings()),
        tuple(walker.ran),
        tuple(env),
        clones,
        walker.cmd,
        workdir,
    )


# What ONBUILD may not hold, as BuildKit says it (its instructions' parseOnBuild).
_NOT_TRIGGERS = {
    "ONBUILD": "Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed",
    "FROM": "FROM isn't allowed as an ONBUILD trigger",
    "MAINTAINER": "MAINTAINER isn't allowed as an ONBUILD trigger",
}


def _check(parsed: syntax.Dockerfile) -> None:
    """What BuildKit refuses beyond its parser: unknown instructions, ONBUILD's forbidden
    triggers, no stage."""
    stage = False
    for instruction in parsed.instructions:
        command = instruction.command
        inner = instruction.inner.command if instruction.inner else None
        for name in (command, inner):
            if name is not None and name not in KNOWN:
                raise NotADockerfile(
                    parsed.file, instruction.start_line, f"unknown instruction: {name or '(none)'}"
                )
        if inner in _NOT_TRIGGERS:
            raise NotADockerfile(parsed.file, instruction.start_line, _NOT_TRIGGERS[inner])
        if command == "FROM":
            if len(instruction.words) not in (1, 3):
                raise NotADockerfile(
                    parsed.file,
                    instruction.start_line,
                    "FROM requires either one or three arguments",
                )
            stage = True
        elif command != "ARG" and not stage:
            raise NotADockerfile(
                parsed.file, instruction.start_line, f"{command} before the first FROM"
            )


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Var:
    name: str
    value: str | None  # None: declared without a default (set at build time, if at all)
    line: int
    env: bool  # an ENV (inherited by stages built FROM this one); else an ARG


@dataclass
class _Clone:
    url: Expanded
    line: int
    path: str | None  # where it lands, when known
    vars: list[_Var]
    ref: Expanded | None = None
    ref_line: int = 0
    ref_vars: list[_Var] = field(default_factory=list)
    branch: bool = False  # the ref is a `--branch` of the clone, not a checkout
    # why the ref is not known, said where it was read (its stage's ARGs, its script's values)
    ref_unknown: tuple[str, ...] = ()
    fetched: Expanded | None = None  # what `git fetch <remote> <ref>` brought (FETCH_HEAD)


@dataclass
class _Stage:
    name: str
    vars: dict[str, _Var]
    workdir: str = "/"
    # The newest clone at each path (None: a path the file cannot tell), which a checkout
    # there pins: looked up, where a search of every clone made 64k clones take 72 s.
    clones: dict[str | None, _Clone] = field(default_factory=dict)

    def child(self, name: str) -> _Stage:
        """A stage built FROM this one: its ENV, WORKDIR and files, not its ARGs."""
        inherited = {k: v for k, v in self.vars.items() if v.env}
        return _Stage(name, inherited, self.workdir, dict(self.clones))


class _Origin(StrEnum):
    """Where a shell variable's value comes from, when the file cannot tell the value."""

    RUNTIME = "is set while the build runs"  # a loop variable, or set in another branch
    COMMAND = "is set from a command run during the build"  # $(...)


@dataclass(frozen=True)
class _Value:
    """A shell variable's value: its text (unknown parts kept as written) and what it
    still depends on, and the branches it was set in (only they surely see it)."""

    text: str
    unset: frozenset[str] = frozenset()
    origin: _Origin | None = None  # set: the text is not known at all
    branches: tuple[int, ...] = ()


_ROOT = -1  # a script's own scope, outside its subshells (whose ids are offsets)


@dataclass
class _Script:
    """One shell script (a RUN line, or a heredoc body run as a script) being walked."""

    text: Text
    values: dict[str, _Value]  # set by the script itself
    outer: Mapping[str, str]  # the stage's ARG and ENV values (its own shadow them)
    verified: bool  # the script checks a checksum (sha256sum -c ...)
    cwd: dict[int, str | None]  # by subshell (the innermost of a command's scopes), or _ROOT
    branches: tuple[int, ...] = ()  # of the item being walked
    parent: _Script | None = None  # the script that runs this one (``bash -c '...'``)

    def lookup(self, name: str) -> _Value | None:
        """The value of ``name`` here: the script's own, else what the script that runs it
        passes on (what it surely sees, set from the start, or an unknown), else the stage's."""
        value = self.values.get(name)
        if value is not None:
            return value
        if self.parent is None:
            text = self.outer.get(name)
            return None if text is None else _Value(text)
        value = self.parent.lookup(name)
        if value is None or (value.origin is None and not self.parent.visible(value)):
            return None
        return _Value(value.text, value.unset, value.origin)

    def visible(self, value: _Value) -> bool:
        """Whether the item being walked surely sees ``value`` (a known one, set outside any
        branch it is not in)."""
        here = self.branches
        return value.origin is None and here[: len(value.branches)] == value.branches

    def names(self) -> Iterator[str]:
        """Every name that may have a value here (some more than once)."""
        return itertools.chain(self.values, self.parent.names() if self.parent else self.outer)

    def origin(self, name: str) -> _Origin | None:
        value = self.lookup(name)
        if value is None:
            return None
        return value.origin or _Origin.RUNTIME  # a value only another branch sets


class _View(Mapping[str, str]):
    """Values looked up one name at a time: what a word costs is what its own variables
    cost, not what every variable in scope does (5,000 ARGs, then 5,000 RUNs)."""

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Seen(_View):
    """The texts of the values a script's item surely sees (with ``commands``, and the
    commands some are set from, as written)."""

    def __init__(self, script: _Script, commands: bool = False) -> None:
        self.script, self.commands = script, commands

    def __getitem__(self, name: str) -> str:
        value = self.script.lookup(name)
        if value is not None and (
            self.script.visible(value) or (self.commands and value.origin is _Origin.COMMAND)
        ):
            return value.text
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (name for name in dict.fromkeys(self.script.names()) if name in self)


class _Known(_View):
    """The variables of a scope that have a value (ARG and ENV), by name."""

    def __init__(self, scope: Mapping[str, _Var]) -> None:
        self.scope = scope

    def __getitem__(self, name: str) -> str:
        value = self.scope[name].value
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name, var in self.scope.items() if var.value is not None)


class _Walker:
    def __init__(self, file: str, escape: str, record: bool = False) -> None:
        self.file, self.escape = file, escape
        self.record = record  # keep every command and ENV (for compare), not only findings
        self.ran: list[Ran] = []
        self.cmd: tuple[str, ...] | None = None
        self.globals: dict[str, _Var] = {}
        self.stages: dict[str, _Stage] = {}
        self.stage: _Stage | None = None
        self.found: list[tuple[int, int, Finding]] = []  # (line, order, finding)
        self.clones: list[_Clone] = []
        self.used: set[int] = set()  # id()s of the vars some finding came through
        self.args: list[_Var] = []

    # ------------------------------------------------------------ instructions

    def instruction(self, ins: Instruction) -> None:
        handler = getattr(self, f"_on_{ins.command.lower()}", None)
        if handler is not None:
            handler(ins)
        if ins.command == "CMD":
            words = ins.words if ins.exec_form else (ins.words[0],) if ins.words else ()
            self.cmd = tuple(word.text for word in words)

    def _on_from(self, ins: Instruction) -> None:
        word = ins.words[0]
        image = self._expand(word.text, self._global_env(), ins.line_of(word))
        name = ins.words[2].text.lower() if len(ins.words) == 3 else str(len(self.stages))
        parent = self.stages.get(image.value.lower()) or self._platform_stage(image)
        if parent is not None:
            self.stage = parent.child(name)
        else:
            self.stage = _Stage(name, {})
            if image.value != "scratch":
                self._image(Kind.FROM, image, ins.line_of(word), self.globals)
        self.stages[name] = self.stage

    def _platform_stage(self, image: Expanded) -> _Stage | None:
        """``FROM base-${TARGETARCH}``: the earlier stage the platform picks (the first that
        fits, for what it passes on: every one of them is a stage, not an image)."""
        if not image.unset or not image.unset <= PLATFORM_ARGS or image.dynamic:
            return None
        parts = re.split(r"\$\{?(?:" + "|".join(sorted(PLATFORM_ARGS)) + r")\}?", image.value)
        pattern = re.compile("[a-z0-9_.-]*".join(re.escape(part.lower()) for part in parts))
        return next((stage for key, stage in self.stages.items() if pattern.fullmatch(key)), None)

    def _on_arg(self, ins: Instruction) -> None:
        for word in ins.words:
            name, has_value, raw = word.text.partition("=")
            line = ins.line_of(word)
            scope = self.stage.vars if self.stage else self.globals
            if has_value:
                value: str | None = self._expand(raw, self._known(), line).value
            elif self.stage is not None and name in self.globals:
                # the global itself: its value, and one finding for it and what uses it
                scope[name] = self.globals[name]
                continue
            else:
                value = None
            var = _Var(name, value, line, env=False)
            scope[name] = var
            self.args.append(var)

    def _known(self) -> _Known:
        """The variables that have a value here (ARG and ENV), by name."""
        return _Known(self._scope())

    def _on_env(self, ins: Instruction) -> None:
        assert self.stage is not None
        pairs: list[tuple[str, str, int]] = []
        if ins.words and "=" not in ins.words[0].text:  # the old form: ENV NAME value
            name, _, raw = re.split(r"([\t\v\f\r ]+)", ins.args.value, maxsplit=1)
            pairs.append((name, raw, ins.start_line))
        else:
            for word in ins.words:
                name, _, raw = word.text.partition("=")
                pairs.append((name, raw, ins.line_of(word)))
        # each value as the stage had them before this ENV (`ENV A=1 B=$A`: B is the old A)
        env = self._known()
        values = [(name, self._expand(raw, env, line).value, line) for name, raw, line in pairs]
        for name, value, line in values:
            self.stage.vars[name] = _Var(name, value, line, env=True)

    def _on_workdir(self, ins: Instruction) -> None:
        assert self.stage is not None
        path = self._expand(ins.args.value, self._known(), ins.start_line).value
        self.stage.workdir = posixpath.normpath(posixpath.join(self.stage.workdir, path))

    def _on_onbuild(self, ins: Instruction) -> None:
        # Runs in the image built FROM this one: audited here, on a copy of the stage.
        if ins.inner is not None and self.stage is not None:
            saved = self.stage
            self.stage = dataclasses.replace(saved, vars=dict(saved.vars), clones={})
            inner = dataclasses.replace(ins.inner, heredocs=ins.heredocs)
            self.instruction(inner)
            self.stage = saved

    def _on_copy(self, ins: Instruction) -> None:
        for flag in ins.flags:
            if flag.text.startswith("--from="):
                self._stage_or_image(Kind.COPY_FROM, flag.text.removeprefix("--from="),
                                     ins.line_of(flag))  # fmt: skip

    def _on_add(self, ins: Instruction) -> None:
        self._on_copy(ins)
        checksum = any(f.text.startswith("--checksum=") for f in ins.flags)
        sources = ins.words[:-1] if len(ins.words) > 1 else ()
        for word in sources:
            line = ins.line_of(word)
            value = (
                self._expand(word.text, self._known(), line)
                if not ins.exec_form
                else Expanded(word.text)
            )
            git = _GIT_URL.match(value.value)
            if git:
                url, _, ref = value.value.partition("#")
                clone = _Clone(Expanded(url), line, None, self._vars(value))
                ref = ref.split(":", 1)[0]
                if ref:
                    clone.ref, clone.ref_line = Expanded(ref), line
                self.clones.append(clone)
            elif _URL.fullmatch(value.value) or value.unset:
                self._download(value, line, hashed=checksum, how="ADD")

    def _on_run(self, ins: Instruction) -> None:
        assert self.stage is not None
        for flag in ins.flags:
            if flag.text.startswith("--mount="):
                options = dict(
                    part.partition("=")[::2]
                    for part in flag.text.removeprefix("--mount=").split(",")
                )
                if options.get("from"):
                    self._stage_or_image(Kind.MOUNT_FROM, options["from"], ins.line_of(flag))
        if ins.exec_form:
            words = tuple(shell.Word(w.text, w.offset) for w in ins.words)
            script = self._script(ins.args)
            self._command(script, shell.Command(words, (), ()), literal=True)
            return
        self._shell(ins.args)
        # once per RUN, not per heredoc: 5,000 heredocs would read the line 5,000 times
        as_script = bool(ins.heredocs) and _runs_as_script(ins.args.value)
        for heredoc in ins.heredocs:
            if as_script:
                lines = heredoc.content.split("\n")
                starts, at = [], 0
                for line in lines:
                    starts.append(at)
                    at += len(line) + 1
                body = Text(heredoc.content, tuple(starts),
                            tuple(heredoc.line + i for i in range(len(lines))))  # fmt: skip
                self._shell(body)

    # ------------------------------------------------------------ images

    def _global_env(self) -> _Known:
        return _Known(self.globals)

    def _stage_or_image(self, kind: Kind, raw: str, line: int) -> None:
        value = self._expand(raw, self._known(), line)
        if value.value.lower() in self.stages or value.value.isdigit():
            return  # an earlier stage, by name or by number
        self._image(kind, value, line, self.stage.vars if self.stage else self.globals)

    def _image(self, kind: Kind, image: Expanded, line: int, scope: Mapping[str, _Var]) -> None:
        problems: list[str] = []
        unknown = self._unknown(image, scope)
        if not unknown and not DIGEST.search(image.value):
            what = {Kind.FROM: "FROM", Kind.COPY_FROM: "COPY --from",
                    Kind.MOUNT_FROM: "RUN --mount from="}[kind]  # fmt: skip
            problems.append(f"{what} without a digest: the tag can move")
        self._add_finding(
            Finding(kind, line, image.value, tuple(problems), tuple(unknown)),
            self._vars(image, scope),
        )

    # ------------------------------------------------------------ shell

    def _script(self, text: Text) -> _Script:
        assert self.stage is not None
        return _Script(text, {}, self._known(), False, {_ROOT: self.stage.workdir})

    def _shell(self, text: Text, script: _Script | None = None) -> None:
        """Walk the shell script ``text``: a RUN line's (``script``: one started by another)."""
        if not self.record and not any(mark in text.value for mark in _MARKS):
            return  # nothing here can fetch anything (and a 5 MB `a && a && ...` costs nothing)
        script = script or self._script(text)
        try:
            items = shell.parse(text.value, (lambda _: True) if self.record else _wanted)
        except shell.TooDeep as deep:
            line = text.line_at(deep.offset)
            raise Unchecked(f"{self.file}:{line}: not audited: commands nested more than "
                            f"{MAX_NESTING} deep (in $(...), subshells, if, case or ||), "
                            "the most it reads") from None  # fmt: skip
        script.verified = any(
            isinstance(item, shell.Command) and _checks_sum(item) for item in items
        )
        for item in items:
            if isinstance(item, shell.Assignment):
                self._assign(script, item)
            else:
                self._command(script, item)

    def _assign(self, script: _Script, item: shell.Assignment) -> None:
        script.branches = item.branches
        if item.loop:
            script.values[item.name] = _Value("", origin=_Origin.RUNTIME)
            return
        if item.value is None:
            return  # `export NAME`: its value stays what it was
        value = self._shell_word(script, item.value)
        origin = _Origin.COMMAND if value.dynamic else None
        script.values[item.name] = _Value(value.value, value.unset, origin, item.branches)

    def _commands_in(self, script: _Script, value: Expanded, word: shell.Word) -> str:
        """``value`` with the variables set from a command written as that command
        (``W=$(ls /w/*.whl); pip install $W``: ``$(ls /w/*.whl)``), for what it names."""
        if all(script.origin(name) is not _Origin.COMMAND for name in value.unset):
            return value.value
        return self._expand_shell(script, word, _Seen(script, commands=True)).value

    def _shell_word(self, script: _Script, word: shell.Word) -> Expanded:
        """A shell word's value; what the variables it uses still depend on goes with it."""
        value = self._expand_shell(script, word, _Seen(script))
        if not value.used:  # most words: nothing to look up
            return value
        found = (script.lookup(name) for name in value.used)
        unset = value.unset.union(*(used.unset for used in found if used is not None))
        return dataclasses.replace(value, unset=unset) if unset != value.unset else value

    def _command(self, script: _Script, command: shell.Command, literal: bool = False) -> None:
        script.branches = command.branches
        words = [
            (Expanded(w.text), w) if literal else pair
            for w in command.words
            for pair in _split(self._shell_word(script, w), w)
        ]
        words = _unwrap(words)
        if not words:
            return
        name = posixpath.basename(words[0][0].value)
        values = [value.value for value, _ in words]
        if self.record:
            line = script.text.line_at(words[0][1].offset)
            env = tuple((n, self._shell_word(script, w).value) for n, w in command.env)
            self.ran.append(Ran(tuple(values), line, _cwd(script, command.scopes), env))
        if name == "cd":
            self._cd(script, command.scopes, words[1:])
        elif name == "git":
            self._git(script, command.scopes, words)
        elif name in _DOWNLOADERS:
            self._downloads(script, words)
        elif name in _SHELLS and (at := _script_argument(values)) is not None:
            self._nested(script, command.scopes, words[at])
        elif (manager := managers.BY_COMMAND.get(name)) is not None:
            self._install(script, manager, words)
        elif not words[0][0].known and _PIP_NAME.search(words[0][1].text):
            self._maybe_pip(script, words)  # "$VENV_PIP" install ...: which pip, the build says
        else:
            args = pip_arguments(values)
            if args is not None:
                self._pip(script, words[len(words) - len(args) :])

    def _maybe_pip(self, script: _Script, words: list[tuple[Expanded, shell.Word]]) -> None:
        """A command the file cannot tell, named like pip, that installs: each requirement is
        unknown (the command may be pip, or not), never dropped and never guessed."""
        found = pipargs.install_arguments([value.value for value, _ in words[1:]])
        if found is None:
            return
        unknown = self._unknown(words[0][0], None, script)
        why = tuple(f"whether pip installs it: {reason}" for reason in unknown)
        for index in found.requirements:
            value, word = words[1 + index]
            line = script.text.line_at(word.offset)
            self._add_finding(Finding(Kind.PIP, line, value.value, (), why), self._vars(value))

    def _nested(
        self, script: _Script, scopes: tuple[int, ...], inner: tuple[Expanded, shell.Word]
    ) -> None:
        """The script of ``sh -c '...'``, walked from the folder and with the values of the
        script that runs it. A quoted one as written between its quotes, so that its lines
        are the file's and a variable it uses that is not known is named where it is used
        (not the whole script passed over); an unquoted one by its value, if known."""
        value, word = inner
        raw, offset = word.text, word.offset
        if _quoted_whole(raw):
            text = script.text.slice(offset + 1, offset + len(raw) - 1)
            if raw[0] == '"':
                text = _unescaped(text)
        elif value.known:
            nested = script.text.slice(min(offset, len(script.text.value)))
            text = Text(value.value, nested.starts, nested.lines)
        else:
            return
        cwd = {_ROOT: _cwd(script, scopes)}
        self._shell(text, _Script(text, {}, script.outer, False, cwd, parent=script))

    def _cd(
        self, script: _Script, scopes: tuple[int, ...], args: list[tuple[Expanded, shell.Word]]
    ) -> None:
        target = args[0][0] if args else Expanded("/root")
        cwd = _cwd(script, scopes)
        path = None
        if target.known and cwd is not None:
            path = posixpath.normpath(posixpath.join(cwd, target.value))
        script.cwd[scopes[-1] if scopes else _ROOT] = path

    # ------------------------------------------------------------ git

    def _git(
        self, script: _Script, scopes: tuple[int, ...], words: list[tuple[Expanded, shell.Word]]
    ) -> None:
        cwd = _cwd(script, scopes)
        at = 1
        while at < len(words) and words[at][0].value.startswith("-"):
            option = words[at][0].value
            if option in ("-C", "-c") and at + 1 < len(words):
                if option == "-C":
                    target = words[at + 1][0]
                    cwd = (posixpath.normpath(posixpath.join(cwd, target.value))
                           if cwd is not None and target.known else None)  # fmt: skip
                at += 2
            else:
                at += 1
        if at >= len(words):
            return
        verb, rest = words[at][0].value, words[at + 1 :]
        if verb == "clone":
            self._clone(script, cwd, rest)
        elif verb in ("checkout", "switch", "reset", "fetch"):
            clone = self._stage_clones().get(cwd)
            if clone is not None:
                self._checkout(script, clone, verb, rest)

    def _stage_clones(self) -> dict[str | None, _Clone]:
        assert self.stage is not None
        return self.stage.clones

    def _clone(
        self, script: _Script, cwd: str | None, rest: list[tuple[Expanded, shell.Word]]
    ) -> None:
        positional: list[tuple[Expanded, shell.Word]] = []
        branch: tuple[Expanded, shell.Word] | None = None
        at = 0
        while at < len(rest):
            value = rest[at][0].value
            if value in ("-b", "--branch") and at + 1 < len(rest):
                branch = rest[at + 1]
                at += 2
                continue
            if value.startswith("--branch="):
                branch = (
                    dataclasses.replace(rest[at][0], value=value.split("=", 1)[1]),
                    rest[at][1],
                )
            elif value in _CLONE_TAKES_VALUE:
                at += 1
            elif not value.startswith("-"):
                positional.append(rest[at])
            at += 1
        if not positional:
            return
        url, word = positional[0]
        directory = positional[1][0] if len(positional) > 1 else None
        path = None
        if cwd is not None and url.known and (directory is None or directory.known):
            name = directory.value if directory else _repo_dir(url.value)
            path = posixpath.normpath(posixpath.join(cwd, name))
        clone = _Clone(url, script.text.line_at(word.offset), path, self._vars(url))
        if branch is not None:
            clone.ref, clone.ref_line = branch[0], script.text.line_at(branch[1].offset)
            clone.ref_vars, clone.branch = self._vars(branch[0]), True
            clone.ref_unknown = tuple(self._unknown(branch[0], None, script))
        self._stage_clones()[path] = clone
        self.clones.append(clone)

    def _checkout(
        self, script: _Script, clone: _Clone, verb: str, rest: list[tuple[Expanded, shell.Word]]
    ) -> None:
        values = [value.value for value, _ in rest]
        if "--" in values and verb != "fetch":  # after it: paths (for fetch: the remote)
            before = values.index("--")
            rest, values = rest[:before], values[:before]
        positional = []
        at = 0
        while at < len(rest):
            value = values[at]
            if value in ("-b", "-B", "--orphan", "-c", "-C", "--create", "--force-create"):
                at += 2
                continue
            if not value.startswith("-"):
                positional.append(rest[at])
            at += 1
        if verb == "fetch":
            if len(positional) >= 2:
                clone.fetched = positional[-1][0]
            return
        if (verb == "reset" and "--hard" not in values) or not positional:
            return
        ref, word = positional[0]
        if ref.value == "FETCH_HEAD" and clone.fetched is not None:
            ref = clone.fetched
        clone.ref, clone.ref_line, clone.branch = ref, script.text.line_at(word.offset), False
        clone.ref_vars = self._vars(ref)
        clone.ref_unknown = tuple(self._unknown(ref, None, script))

    # ------------------------------------------------------------ pip and downloads

    def _pip(self, script: _Script, args: list[tuple[Expanded, shell.Word]]) -> None:
        values = [value.value for value, _ in args]
        parsed = pipargs.install_arguments(values)
        if parsed is None:
            return
        indexes, hashes = parsed.requirements, parsed.hashes
        at = 0
        while at < len(indexes):
            value, word = args[indexes[at]]
            # `name @ url` written as three words: one requirement.
            if at + 2 < len(indexes) and values[indexes[at + 1]] == "@":
                value = _joined(value, " @ ", args[indexes[at + 2]][0])
                at += 2
            editable = indexes[at] in parsed.editable
            at += 1
            line = script.text.line_at(word.offset)
            unknown = self._unknown(value, None, script)
            shown = requirement = pipargs.requirement_of(value.value, editable)
            if _local_substitution(self._commands_in(script, value, word)):
                continue  # `$(realpath dist/*.whl)[extras]`: a file of the build, named later
            if unknown and _only_in_extras(requirement):
                # `torch[device-${arch}]==2.1`: which extra varies, not which version
                unknown, requirement = [], _EXTRAS.sub("[extra]", requirement)
            if unknown:
                ranged = pipargs.written_range(requirement)
                problems = (ranged,) if ranged else ()
                self._add_finding(Finding(Kind.PIP, line, value.value, problems, tuple(unknown)),
                                  self._vars(value))  # fmt: skip
                continue
            judged = pipargs.judge(requirement, hashes, editable)
            if judged.verdict is pipargs.Verdict.LOCAL or not requirement:
                continue
            problems = (judged.problem,) if judged.problem else ()
            self._add_finding(Finding(Kind.PIP, line, shown, problems), self._vars(value))

    def _install(
        self, script: _Script, manager: managers.Manager, words: list[tuple[Expanded, shell.Word]]
    ) -> None:
        """apt, dnf, apk, pipx, conda, npm, yarn, pnpm, cargo, go: each package it installs
        from a registry, judged as pip's are (one with a variable is unknown, never guessed);
        an upgrade of every installed package is one finding."""
        found = managers.install_arguments(manager, [value.value for value, _ in words[1:]])
        if found is None:
            return
        if found.everything is not None:
            value, word = words[1 + found.everything]
            problem = f"{value.value} moves each to the newest there is, not one version"
            self._add_finding(Finding(Kind(manager.name), script.text.line_at(word.offset),
                                      EVERY_PACKAGE, (problem,)), ())  # fmt: skip
            return
        version = None if found.version is None else _option_value(words[1 + found.version][0])
        for at in found.packages:
            value, word = words[1 + at]
            value = _option_value(value)
            if version is not None:  # cargo install x --version 1.2: x@1.2
                value = _joined(value, "@", version)
            judged = managers.judge(manager, value.value)
            if judged.verdict is pipargs.Verdict.LOCAL:
                if _URL.match(value.value):  # dnf install https://.../x.rpm: fetched
                    line = script.text.line_at(word.offset)
                    self._download(value, line, script.verified, "", script)
                continue
            unknown = self._unknown(value, None, script)
            problem = managers.loose(manager, value.value) if unknown else judged.problem
            finding = Finding(Kind(manager.name), script.text.line_at(word.offset), value.value,
                              (problem,) if problem else (), tuple(unknown))  # fmt: skip
            self._add_finding(finding, self._vars(value))

    def _downloads(self, script: _Script, words: list[tuple[Expanded, shell.Word]]) -> None:
        """curl, wget, aria2c: each argument that is not an option's value is a URL to fetch
        (one that holds an unknown variable is an unknown URL); rpm: each URL."""
        tool = posixpath.basename(words[0][0].value)
        takes_value = _DOWNLOAD_OPTIONS[tool]
        checked = script.verified or any(
            value.value == "--checksum" or value.value.startswith("--checksum=")
            for value, _ in words
        )  # aria2c checks a --checksum=sha-256=... itself
        at = 1
        while at < len(words):
            value, word = words[at]
            at += 1
            text = value.value
            if text.startswith("-") and text != "-":
                if text in takes_value:
                    at += 1  # its value is a file, a header, a proxy: not fetched
                continue
            if _URL.match(text) or (not value.known and tool in _URLS_ALONE):
                self._download(value, script.text.line_at(word.offset), checked, "", script)

    def _download(self, value: Expanded, line: int, hashed: bool, how: str,
                  script: _Script | None = None) -> None:  # fmt: skip
        unknown = self._unknown(value, None, script)
        problems: tuple[str, ...] = ()
        if not hashed:  # whatever the URL turns out to be: no hash checks what comes
            problems = (f"{how + ' ' if how else ''}downloads a URL whose content no hash checks",)
        self._add_finding(
            Finding(Kind.URL, line, value.value, problems, tuple(unknown), hashed=hashed),
            self._vars(value),
        )

    # ------------------------------------------------------------ variables

    def _expand(self, raw: str, env: Mapping[str, str], line: int) -> Expanded:
        """The value of the Dockerfile word ``raw`` on ``line`` (the file's escape character)."""
        try:
            return expand(raw, env, self.escape)
        except TooLarge:
            raise self._too_large(line) from None

    def _expand_shell(self, script: _Script, word: shell.Word, env: Mapping[str, str]) -> Expanded:
        """The value of a shell word of ``script`` (the shell's escape character)."""
        try:
            return expand(word.text, env, "\\", shell=True)
        except TooLarge:  # its line found only now: a RUN line has thousands of words
            raise self._too_large(script.text.line_at(word.offset)) from None

    def _too_large(self, line: int) -> Unchecked:
        return Unchecked(f"{self.file}:{line}: not audited: a variable's value grows past "
                         f"{MAX_GROWTH} characters, the most it expands")  # fmt: skip

    def _scope(self) -> Mapping[str, _Var]:
        return self.stage.vars if self.stage else self.globals

    def _vars(self, value: Expanded, scope: Mapping[str, _Var] | None = None) -> list[_Var]:
        scope = self._scope() if scope is None else scope
        return [scope[name] for name in sorted(value.used | value.unset) if name in scope]

    def _unknown(self, value: Expanded, scope: Mapping[str, _Var] | None,
                 script: _Script | None = None) -> list[str]:  # fmt: skip
        scope = self._scope() if scope is None else scope
        found = []
        if value.dynamic:
            found.append("its value comes from a command run during the build")
        for name in sorted(value.unset):
            if script is not None and (origin := script.origin(name)) is not None:
                found.append(f"${name} {origin}")
            elif name in PLATFORM_ARGS:
                found.append(f"${name} is set by BuildKit for the build's platform")
            elif name in scope:
                found.append(f"ARG {name} has no default: its value comes from --build-arg")
            else:
                found.append(f"${name} is not set in this Dockerfile")
        return found

    # ------------------------------------------------------------ findings

    def _add_finding(self, finding: Finding, through: Iterable[_Var]) -> None:
        places = []
        for var in through:
            self.used.add(id(var))
            places.append(Place(var.line, f"{'ENV' if var.env else 'ARG'} {var.name}"))
        if places:  # (most findings come through no variable: no copy for them)
            also = tuple(dict.fromkeys((*finding.also, *places)))
            finding = dataclasses.replace(finding, also=also)
        self.found.append((finding.line, len(self.found), finding))

    def findings(self) -> tuple[Finding, ...]:
        for clone in self.clones:
            self._add_finding(*_clone_finding(clone))
        for var in self.args:
            if (id(var) not in self.used and var.name.upper().endswith(_PIN_SUFFIXES)
                    and var.value and SHORT.fullmatch(var.value)):  # fmt: skip
                finding = Finding(Kind.ARG, var.line, f"{var.name}={var.value}",
                                  ("short commit id: names no fixed commit",))  # fmt: skip
                self.found.append((var.line, len(self.found), finding))
        return tuple(finding for _, _, finding in sorted(self.found, key=lambda f: f[:2]))


def _clone_finding(clone: _Clone) -> tuple[Finding, list[_Var]]:
    url = clone.url.value
    through = [*clone.vars, *clone.ref_vars]
    if clone.ref is None:
        return Finding(Kind.CLONE, clone.line, url,
                       ("git clone without a commit checkout: unpinned",)), through  # fmt: skip
    ref = clone.ref.value
    also = () if clone.ref_line == clone.line else (Place(clone.line, "git clone"),)
    unknown = clone.ref_unknown
    problems: tuple[str, ...] = ()
    if unknown:
        pass
    elif clone.branch and not FULL.fullmatch(ref):
        problems = (f"clones {ref}, a branch or tag, not a commit",)
    elif SHORT.fullmatch(ref):
        problems = ("short commit id: names no fixed commit",)
    elif not FULL.fullmatch(ref):
        problems = (f"checks out {ref}, a branch or tag, not a commit",)
    finding = Finding(Kind.CLONE, clone.ref_line, f"{url}@{ref}", problems, unknown, also)
    return finding, through


# ---------------------------------------------------------------- small pure helpers

_CLONE_TAKES_VALUE = pipargs.names(
    "--depth -o --origin -j --jobs --reference --reference-if-able --template "
    "--separate-git-dir --shallow-since --shallow-exclude -u --upload-pack -c --config "
    "--filter --server-option --bundle-uri"
)


def _wanted(name: str) -> bool:
    """The commands that can fetch something, or move where a later one does."""
    base = posixpath.basename(name)
    return (
        base in ("cd", "git", "pip", "uv") or base in _WRAPPERS or base in _DOWNLOADERS
        or base in _SHELLS or base in _CHECKSUMS or base in managers.BY_COMMAND
        or base.startswith(("pip", "python")) or base.endswith(".sh") or "$" in name
    )  # fmt: skip


def _joined(first: Expanded, between: str, second: Expanded) -> Expanded:
    """Two words read as one (pip's ``name @ url``; cargo's ``x --version 1.2``: ``x@1.2``)."""
    return Expanded(f"{first.value}{between}{second.value}", first.used | second.used,
                    first.unset | second.unset, first.dynamic or second.dynamic)  # fmt: skip


def _option_value(value: Expanded) -> Expanded:
    """What an option word gives: ``--version=1.2`` gives ``1.2``; any other word, itself."""
    if not value.value.startswith("-"):
        return value
    return dataclasses.replace(value, value=value.value.partition("=")[2])


def _split(value: Expanded, word: shell.Word) -> list[tuple[Expanded, shell.Word]]:
    """The words the shell makes of ``word``: an unquoted variable's value is split at
    blanks (``pip install $PKGS``, PKGS="a==1 b==2", installs two)."""
    parts = value.value.split()
    if value.quoted or value.dynamic or not value.used or len(parts) < 2:
        return [(value, word)]
    return [(dataclasses.replace(value, value=part), word) for part in parts]


def _unescaped(text: Text) -> Text:
    """The inside of a double-quoted word as the shell hands it on: a backslash before
    ``"``, ``\\``, ``$`` or a backquote dropped, each character still on its line."""
    value = text.value
    out: list[str] = []
    moved: list[int] = []  # moved[i]: where value's i-th character lands
    at = 0
    while at < len(value):
        moved.append(len(out))
        if value[at] == "\\" and value[at + 1 : at + 2] in ('"', "\\", "$", "`"):
            moved.append(len(out))
            at += 1
        out.append(value[at])
        at += 1
    moved.append(len(out))
    return Text("".join(out), tuple(moved[start] for start in text.starts), text.lines)


def _quoted_whole(raw: str) -> bool:
    """Whether the shell word ``raw`` is one quoted string (``'...'``, ``"..."``), its
    closing quote the word's last character."""
    if len(raw) < 2 or raw[0] not in "'\"":
        return False
    if raw[0] == "'":
        return raw.find("'", 1) == len(raw) - 1
    at = 1
    while at < len(raw) and raw[at] != '"':
        at += 2 if raw[at] == "\\" else 1
    return at == len(raw) - 1


def _script_argument(values: list[str]) -> int | None:
    """Where the script of ``sh -c 'script'`` is (``-c`` alone or among flags: ``-lc``)."""
    at = 1
    while at < len(values) and values[at].startswith("-") and not values[at].startswith("--"):
        if "c" in values[at][1:]:
            return at + 1 if at + 1 < len(values) else None
        at += 2 if values[at] == "-o" else 1  # -o takes an option name
    return None


def _checks_sum(command: shell.Command) -> bool:
    words = [w.text for w in command.words]
    return (
        bool(words)
        and posixpath.basename(words[0]) in _CHECKSUMS
        and ("-c" in words or "--check" in words or any(w.startswith("-c") for w in words[1:2]))
    )


def _runs_as_script(args: str) -> bool:
    """Whether BuildKit runs a RUN's heredoc as a shell script: ``RUN <<EOF`` alone, or
    fed to a shell (``RUN bash <<EOF``); ``RUN python3 <<EOF`` or ``cat <<EOF`` is data."""
    words = [w for w in args.split() if not re.fullmatch(r"\d*<<-?.*", w)]
    if not words:
        return True
    return posixpath.basename(words[0]) in _SHELLS and not any(w == "-c" for w in words)


def _unwrap(words: list[tuple[Expanded, shell.Word]]) -> list[tuple[Expanded, shell.Word]]:
    """The command a wrapper runs: ``sudo -E pip ...``, ``env X=1 pip ...``, ``nice -n 5 ...``."""
    while words and (name := posixpath.basename(words[0][0].value)) in _WRAPPERS:
        takes_value = _WRAPPERS[name]
        at = 1
        while at < len(words):
            value = words[at][0].value
            if name == "env" and "=" in value and not value.startswith("-"):
                at += 1  # NAME=value for the command
            elif value.startswith("-") and value != "-":
                at += 2 if value in takes_value else 1
            else:
                break
        if name == "timeout":
            at += 1  # the duration
        words = words[at:]
    return words


def pip_arguments(values: list[str]) -> list[str] | None:
    """The arguments pip gets (after ``pip``, ``python -m pip``, ``uv pip``), or None."""
    name = posixpath.basename(values[0])
    if re.fullmatch(r"pip[0-9.]*", name):
        return values[1:]
    if name == "uv" and values[1:2] == ["pip"]:
        return values[2:]
    for at in range(1, len(values) - 1):
        if values[at] == "-m":
            return values[at + 2 :] if re.fullmatch(r"pip[0-9.]*", values[at + 1]) else None
        if not values[at].startswith("-"):
            return None
    return None


_EXTRAS = re.compile(r"\[[^\]]*\]")
# "$VENV_PIP", "${PIP:-pip3}": pip as a word of the name, not inside one ($PIPELINE)
_PIP_NAME = re.compile(r"(?<![a-z])pip(?![a-z])", re.IGNORECASE)
# $(realpath dist/*.whl), $(echo ${DIR}/x*.whl), $(ls /tmp/w/*.whl): a local path, found later
_PATH_OF = re.compile(r"\$\((?:realpath|readlink(?: -[a-z]+)?|echo|ls(?: -[a-z1]+)?)\s+([^()`]*)\)")


def _local_substitution(requirement: str) -> bool:
    """Whether a requirement is a local path once its path-printing substitutions run."""
    paths = _PATH_OF.findall(requirement)
    rest = _PATH_OF.sub("/local", requirement)
    remote = any("://" in path for path in paths)
    return (
        bool(paths)
        and not remote
        and "$" not in rest
        and "`" not in rest
        and (pipargs.judge(rest).verdict is pipargs.Verdict.LOCAL)
    )


def _only_in_extras(requirement: str) -> bool:
    """Whether every ``$`` of a requirement sits inside its ``[extras]``."""
    return "$" in requirement and "$" not in _EXTRAS.sub("", requirement)


def _cwd(script: _Script, scopes: tuple[int, ...]) -> str | None:
    """Where a command in ``scopes`` runs: where the innermost of them with a ``cd`` went."""
    cwd = script.cwd
    scope = next((scope for scope in reversed(scopes) if scope in cwd), _ROOT)
    return cwd.get(scope)


def _repo_dir(url: str) -> str:
    """Where ``git clone <url>`` puts the tree: its last path part, without ``.git``."""
    last = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return last.removesuffix(".git") or last


# ---------------------------------------------------------------- reports


def verdict(report: Report) -> None:
    """Raise for the exit code: 1 on a violation, 2 when something could not be checked."""
    total = len(report.findings)
    if report.violations:
        raise LockError(f"audit: {report.violations} of {total} findings in {report.file} "
                        "break a policy")  # fmt: skip
    if report.unchecked:
        raise Unchecked(f"audit: {report.unchecked} of {total} findings in {report.file} "
                        "could not be checked")  # fmt: skip


def as_json(report: Report) -> str:
    return json.dumps(
        {
            "file": report.file,
            "findings": [_jsonable(finding) for finding in report.findings],
            "violations": report.violations,
            "unchecked": report.unchecked,
        },
        indent=2,
    )


def _jsonable(finding: Finding) -> dict[str, object]:
    document = dataclasses.asdict(finding)
    document["kind"] = str(finding.kind)
    document["problems"] = list(finding.problems)
    document["unknown"] = list(finding.unknown)
    document["also"] = [{"line": p.line, "what": p.what} for p in finding.also]
    return document


def as_text(report: Report) -> str:
    return "\n".join(_lines(report))


def _lines(report: Report) -> Iterator[str]:
    for finding in report.findings:
        where = f"{report.file}:{finding.line}"
        places = "; ".join(f"{p.what} at line {p.line}" for p in finding.also)
        also = f" ({places})" if places else ""
        verdicts = [*finding.problems, *(f"unknown: {u}" for u in finding.unknown)] or ["pinned"]
        value = finding.value if len(finding.value) <= 120 else finding.value[:117] + "..."
        for text in verdicts:
            yield f"{where}: {finding.kind} {value}{also}: {text}"
    total = len(report.findings)
    yield (f"{report.file}: {total} findings, {report.violations} break a policy, "
           f"{report.unchecked} could not be checked")  # fmt: skip
