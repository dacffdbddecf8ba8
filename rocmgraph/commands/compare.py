"""`doit compare dockerfile=<path>`: an upstream recipe beside the graph, fact by fact.

The recipe is read as the audit reads it (BuildKit's grammar, RUN as shell, variables
resolved: rocmgraph.dockerfile.audit.read). Every fact it states is listed: its base
image, the sources it clones and the ref it checks out, the Python packages and wheels
it installs (with their dependencies or not, upgrading what is there with -U or not),
how it builds each clone (editable, in pip's isolated environment or not, -U, the
variables on its command line), the order of its installs (the later one wins), its apt
packages and repositories, its runtime environment, the files it edits with sed (a patch
of the graph must touch each), its links, its cleanup, its command and working folder.
The graph's side of the order is read from its own rendered recipes, as the recipe is
read. Each fact is set beside what the graph does (the pins and the rendered recipes):
the same, different, or not at all. A difference the project makes on purpose is listed,
with its reason, in docker/differences.toml; docs/following-verl.md's table is made from
it. Any other difference fails the command: that is how a maintainer sees
what the graph must follow when verl changes its recipe.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import unquote

import tomli
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from rocmgraph.common.engine import familiar
from rocmgraph.common.errors import CompareError, VariableError, cut, shown
from rocmgraph.common.layout import DOCKER, ROOT
from rocmgraph.config.pins import Pins
from rocmgraph.dockerfile import audit, pipargs, syntax
from rocmgraph.dockerfile.audit import Kind, Reading
from rocmgraph.dockerfile.expand import expand
from rocmgraph.graph.dag import dropped_env
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.recipe import render
from rocmgraph.trees.patches import read_patch

DIFFERENCES = DOCKER / "differences.toml"
_APT = ("apt", "apt-get")
_APT_CACHES = ("/var/lib/apt/lists", "/var/cache/apt")
_GITHUB = re.compile(r"(?:https?://|git@)github\.com[/:]([^/]+)/([^/#@]+?)(?:\.git)?/?$")


class Fact(StrEnum):
    BASE = "base"  # the image it starts from
    SOURCE = "source"  # a git clone, and the ref it checks out
    PIP = "pip"  # a Python package from an index
    WHEEL = "wheel"  # a wheel by URL
    APT = "apt"  # an apt package
    APT_RECOMMENDS = "apt-recommends"  # whether an apt install takes recommended packages
    APT_REPO = "apt-repo"  # an apt repository
    ENV = "env"  # a variable of the runtime environment
    BUILD = "build"  # a clone built and installed (editable or not)
    REQUIREMENTS = "requirements"  # a requirements file of a clone it installs (pip -r)
    PATCH = "patch"  # a file it edits in place (sed -i)
    LINK = "link"  # a symbolic link it makes
    CLEANUP = "cleanup"  # a path it removes
    PRUNE = "prune"  # a folder whose kernel files of other archs it removes
    UNINSTALL = "uninstall"  # a package it removes
    SUBMODULES = "submodules"  # a clone whose submodules it checks out
    DEPS = "deps"  # a package pip installs with its dependencies, or without (--no-deps)
    UPGRADE = "upgrade"  # a package pip installs upgrading what is there (-U), or not
    BUILD_ENV = "build-env"  # a variable a clone's build is given on its command line
    ORDER = "order"  # one install, then the next: the later one wins where both touch a package
    CMD = "cmd"
    WORKDIR = "workdir"


class Status(StrEnum):
    SAME = "same"
    DIFFERS = "differs"
    MISSING = "missing"  # the graph does not do it
    ADDED = "added"  # the graph does it, the recipe does not
    EXPLAINED = "explained"  # differs, is missing or added on purpose (docker/differences.toml)


@dataclass(frozen=True)
class Stated:
    """One fact of the recipe."""

    fact: Fact
    key: str  # what it is about: a package, a variable, a repository, a file
    value: str  # what the recipe says of it
    line: int


@dataclass(frozen=True)
class Row:
    stated: Stated
    status: Status
    graph: str  # what the graph does, and where (a pin, a recipe)
    why: str = ""  # for an explained difference


@dataclass(frozen=True)
class Comparison:
    recipe: str
    rows: tuple[Row, ...]
    stale: tuple[str, ...]  # explanations that match no difference any more
    differences: str  # the file the explanations come from
    explained_as: str = ""  # the recipe whose entries there explain it; "" for none
    listed: tuple[str, ...] = ()  # the recipes that file has entries for

    @property
    def unexplained(self) -> list[Row]:
        return [row for row in self.rows if row.status in UNEXPLAINED]


UNEXPLAINED = (Status.DIFFERS, Status.MISSING, Status.ADDED)
Judged = tuple[Stated, Status, str]


def compare(
    text: str, recipe: str, run: Run, differences: Path = DIFFERENCES, named: str = ""
) -> Comparison:
    """``text`` (an upstream Dockerfile at the path ``recipe``) beside the graph of ``run``;
    the differences made on purpose are read from ``differences``: the entries for the
    recipe ``named`` (recipe=), else for the file's name, else for the one recipe whose
    entries all match the file's differences (a copy saved under another name)."""
    reading = audit.read(text, recipe, record=True)
    graph = _Graph(run)
    facts = list(_facts(reading))
    ordered = _order(reading, graph)
    judged: list[Judged] = [(item, *graph.judge(item)) for item in [*facts, *ordered]]
    judged += [(item, Status.ADDED, where) for item, where in graph.added(judged)]
    entries = read_differences(differences)
    listed = tuple(sorted({entry.recipe for entry in entries}))
    if named and named not in listed:
        raise VariableError(
            f"recipe={cut(named)}: {_relative(differences)} has no entries for it; name a "
            f"recipe it has entries for ({_either(listed)}), or add its entries there"
        )
    explained_as = named or _recipe_of(Path(recipe).name, entries, judged)
    explained = _explained(entries, explained_as)
    rows = []
    used: set[tuple[str, str]] = set()
    for item, status, where in judged:
        why = explained.get((item.fact, item.key), "")
        if status in UNEXPLAINED and why:
            used.add((item.fact, item.key))
            rows.append(Row(item, Status.EXPLAINED, where, why))
        else:
            rows.append(Row(item, status, where))
    stale = tuple(f"{fact} {key}" for (fact, key) in sorted(explained) if (fact, key) not in used)
    return Comparison(recipe, tuple(rows), stale, _relative(differences), explained_as, listed)


def _recipe_of(name: str, entries: tuple[Difference, ...], judged: list[Judged]) -> str:
    """The recipe whose entries explain a file named ``name``: its own name when entries
    give it; else the one whose entries all match a difference of the file and explain the
    most of them (a renamed copy reads as its original; a fingerprint of the text would
    lose it at upstream's first edit, which is when compare matters); else none."""
    listed = {entry.recipe for entry in entries}
    if name in listed:
        return name
    differing = {(item.fact, item.key) for item, status, _ in judged if status in UNEXPLAINED}
    fits = sorted(
        (len(explained), recipe)
        for recipe in listed
        if (explained := _explained(entries, recipe)).keys() <= differing
    )
    if not fits or (len(fits) > 1 and fits[-1][0] == fits[-2][0]):
        return ""  # none fits, or two fit as well: the user names it (recipe=)
    return fits[-1][1]


def _explained(entries: tuple[Difference, ...], recipe: str) -> dict[tuple[str, str], str]:
    """(fact, key) -> why, of the entries for ``recipe``."""
    return {fact: entry.why for entry in entries if entry.recipe == recipe for fact in entry.facts}


def _either(names: tuple[str, ...]) -> str:
    """``recipe=a, recipe=b or recipe=c``."""
    words = [f"recipe={name}" for name in names]
    return f"{', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else "".join(words)


@dataclass(frozen=True)
class Difference:
    """One entry of docker/differences.toml."""

    recipe: str  # the upstream recipe's file name
    facts: tuple[tuple[Fact, str], ...]  # (kind, key) as `doit compare` names them
    why: str


@dataclass(frozen=True)
class Choice:
    """A way the graph works differently from every recipe, in a fact compare counts as the
    same (a patch as a diff where the recipe runs sed): docs/following-verl.md lists it."""

    what: str
    why: str


def _table(path: Path) -> dict[str, list[dict[str, object]]]:
    name = _relative(path)
    try:
        table = tomli.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (tomli.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CompareError(f"{name}: not TOML ({exc}); fix the file") from None
    kinds = {"difference", "choice"}
    if set(table) - kinds or not all(isinstance(table[k], list) for k in table):
        raise CompareError(
            f"{name}: holds only [[difference]] and [[choice]] tables; move the rest out"
        )
    return table


def read_choices(path: Path = DIFFERENCES) -> tuple[Choice, ...]:
    found = []
    for number, entry in enumerate(_table(path).get("choice", []), 1):
        what, why = (entry.get("what"), entry.get("why")) if isinstance(entry, dict) else ("", "")
        if (
            not isinstance(entry, dict)
            or set(entry) != {"what", "why"}
            or not (isinstance(what, str) and isinstance(why, str))
        ):
            raise CompareError(
                f"{_relative(path)}: choice {number}: give exactly what and why, as strings"
            )
        found.append(Choice(" ".join(what.split()), " ".join(why.split())))
    return tuple(found)


def read_differences(path: Path = DIFFERENCES) -> tuple[Difference, ...]:
    """Every entry of ``path``; CompareError naming the entry and the fix when one is wrong."""
    name = _relative(path)
    entries = _table(path).get("difference", [])
    found = []
    for number, entry in enumerate(entries, 1):
        where = f"{name}: difference {number}"
        if not isinstance(entry, dict) or set(entry) != {"recipe", "fact", "why"}:
            keys = sorted(entry) if isinstance(entry, dict) else []
            raise CompareError(f"{where} has keys {keys}; give exactly recipe, fact and why")
        recipe, facts, why = entry["recipe"], entry["fact"], entry["why"]
        facts = [facts] if isinstance(facts, str) else facts
        if not isinstance(recipe, str) or not recipe or "/" in recipe:
            raise CompareError(
                f"{where}: recipe = {shown(recipe)}; give the recipe's file name, such as "
                f'"Dockerfile.rocm"'
            )
        if not isinstance(why, str) or not why.strip():
            raise CompareError(f"{where}: why is empty; say why the graph differs")
        if not isinstance(facts, list) or not facts:
            raise CompareError(f"{where}: fact must be a string or a list of strings")
        parsed = []
        for named in facts:
            kind, _, key = named.partition(" ") if isinstance(named, str) else ("", "", "")
            if kind not in set(Fact) or not key:
                raise CompareError(
                    f"{where}: fact {shown(named)} is not <kind> <key> with a kind of "
                    f"{', '.join(Fact)}; copy it from `doit compare`'s output"
                )
            parsed.append((Fact(kind), key))
        found.append(Difference(recipe, tuple(parsed), " ".join(why.split())))
    return tuple(found)


def _relative(path: Path) -> str:
    """``path`` relative to the repository when it is in it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ---------------------------------------------------------------- the recipe's facts


def _facts(reading: Reading) -> Iterator[Stated]:
    for finding in reading.report.findings:
        if finding.kind is Kind.FROM:
            yield Stated(Fact.BASE, "image", finding.value, finding.line)
        elif finding.kind is Kind.PIP:
            yield _requirement(finding.value, finding.line)
    for clone in reading.clones:
        yield Stated(Fact.SOURCE, repo_name(clone.url), clone.ref, clone.line)
    final = {name: (value, line) for name, value, line in reading.env}  # the last value counts
    for name, (value, line) in sorted(final.items(), key=lambda item: item[1][1]):
        yield Stated(Fact.ENV, name, value, line)
    clones = {clone.path: clone for clone in reading.clones if clone.path}
    for ran in reading.ran:
        yield from _ran_facts(ran, clones)
    if reading.cmd is not None:
        yield Stated(Fact.CMD, "CMD", json.dumps(list(reading.cmd)), 0)
    yield Stated(Fact.WORKDIR, "WORKDIR", reading.workdir, 0)


_INSTALLS = (Fact.BUILD, Fact.REQUIREMENTS, Fact.DEPS, Fact.UNINSTALL, Fact.PIP)
Place = tuple[int, ...]  # where an install runs: (stage,) line, command


def _installs(reading: Reading) -> Iterator[tuple[Stated, Place]]:
    """Each install of a recipe, with where it runs: its line and its command's number (two
    commands of one line, ``pip uninstall x && pip install y``, run one after the other)."""
    clones = {clone.path: clone for clone in reading.clones if clone.path}
    for index, ran in enumerate(reading.ran):
        for item in _ran_facts(ran, clones):
            if item.fact in _INSTALLS:
                yield item, (ran.line, index)


def _last(installs: Iterator[tuple[str | None, Place]]) -> dict[str, Place]:
    """Where each thing is installed last: what is installed again takes its later place."""
    last: dict[str, Place] = {}
    for name, at in installs:
        if name is not None:
            last[name] = max(at, last.get(name, at))
    return last


def _order(reading: Reading, graph: _Graph) -> Iterator[Stated]:
    """The recipe's install order, one fact per step from one install to the next, among the
    things both the recipe and the graph install: "before", or "with" (one pip command)."""
    placed = _last((graph.installs(item), at) for item, at in _installs(reading))
    both = sorted((at, name) for name, at in placed.items() if name in graph.installed)
    for (before, first), (after, then) in itertools.pairwise(both):
        value = "with" if before == after else "before"
        yield Stated(Fact.ORDER, f"{first}, {then}", value, after[0])


def _split_ref(url: str) -> tuple[str, str]:
    """``https://host/org/repo@ref`` -> (url, ref); a URL with no ref -> (url, "")."""
    scheme, _, rest = url.partition("://")
    path, _, ref = rest.rpartition("@") if "@" in rest else (rest, "", "")
    return f"{scheme}://{path}", ref


def repo_name(url: str) -> str:
    """``https://github.com/ROCm/aiter.git`` -> ``rocm/aiter``; another host: the URL."""
    match = _GITHUB.match(url)
    return f"{match.group(1)}/{match.group(2)}".lower() if match else url


def _requirement(value: str, line: int) -> Stated:
    if value.startswith("git+"):  # a source installed straight from its repository
        url, ref = _split_ref(value.removeprefix("git+").split("#", 1)[0])
        return Stated(Fact.SOURCE, repo_name(url), ref, line)
    name = unquote(posixpath.basename(value.split("#", 1)[0]))  # repo.radeon.com writes + as %2B
    if "://" in value and name.endswith(".whl"):
        try:
            dist = parse_wheel_filename(name)[0]
        except InvalidWheelFilename:
            dist = canonicalize_name(name)
        return Stated(Fact.WHEEL, str(dist), name, line)
    try:
        parsed = Requirement(value)
    except InvalidRequirement:
        return Stated(Fact.PIP, value, "", line)
    if parsed.url:  # name @ git+URL@ref#subdirectory=python: the fragment is no ref
        url, ref = _split_ref(parsed.url.removeprefix("git+").split("#", 1)[0])
        return Stated(Fact.SOURCE, repo_name(url), ref, line)
    return Stated(Fact.PIP, str(canonicalize_name(parsed.name)), str(parsed.specifier), line)


Clones = Mapping[str, audit.Clone]  # where each clone of the recipe lands


def _ran_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    name = posixpath.basename(ran.words[0])
    if name in _APT:
        return _apt_facts(ran)
    handler = _HANDLERS.get(name)
    if handler is not None:
        return handler(ran, clones)
    return _python_facts(ran, clones)


def _apt_facts(ran: audit.Ran) -> Iterator[Stated]:
    words = list(ran.words)
    if "install" in words:
        after = words[words.index("install") + 1 :]
        taken = "no" if "--no-install-recommends" in after else "yes"
        yield Stated(Fact.APT_RECOMMENDS, "apt install", taken, ran.line)
        for option, word in zip(["", *after], after, strict=False):
            if option in _APT_TAKES_VALUE:  # -o Dpkg::Options::=--force-confold: no package
                continue
            if not word.startswith("-") and "/" not in word:
                yield Stated(Fact.APT, word.split("=", 1)[0], word.partition("=")[2], ran.line)


# apt-get's options whose value is the next word
_APT_TAKES_VALUE = ("-o", "--option", "-t", "--target-release", "--default-release", "-c",
                    "--config-file")  # fmt: skip


def _deb_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    """``echo "deb [...] <url> <suite> <components>" > /etc/apt/sources.list.d/x.list``"""
    for word in ran.words:
        if word.startswith("deb "):
            url = next((part for part in word.split() if "://" in part), "")
            yield Stated(Fact.APT_REPO, url.rstrip("/"), word, ran.line)


def _sed_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    if any(w == "-i" or (w.startswith("-") and "i" in w[1:]) for w in ran.words):
        for path in _sed_files(list(ran.words)):
            # a path only a running build knows ("$FILE" from a find) stays as written
            place = path if "$" in path else _in_tree(path, ran.cwd, clones)
            yield Stated(Fact.PATCH, place, "sed -i", ran.line)


def _ln_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    operands = [w for w in ran.words[1:] if not w.startswith("-")]
    if any(w.startswith("-") and "s" in w for w in ran.words) and len(operands) >= 2:
        target, link = operands[-2:]
        yield Stated(Fact.LINK, _site(link), _site(target), ran.line)


def _git_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    """``git submodule update`` in a clone: its submodules go into the build."""
    if ran.words[1:3] == ("submodule", "update"):
        place = _in_tree(".", ran.cwd, clones)
        if ":" in place and not place.startswith("site:"):
            flags = " ".join(word for word in ran.words[3:] if word.startswith("-"))
            yield Stated(Fact.SUBMODULES, place.split(":", 1)[0], flags, ran.line)


def _rm_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    if not any(w.startswith("-") and "r" in w for w in ran.words):
        return
    for path in (w for w in ran.words[1:] if not w.startswith("-")):
        full = posixpath.normpath(posixpath.join(ran.cwd or "/", path))
        if not any(full == root or full.startswith(f"{root}/") for root in clones):
            # (removing its own clone, or a build folder in it, is the recipe's build work)
            place = full if ran.cwd and not path.startswith("/") else path  # as [cleanup]
            yield Stated(Fact.CLEANUP, place, "rm -rf", ran.line)


def _python_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    """``pip uninstall``; a build of a clone: ``pip install [-e] <path>``, ``setup.py <verb>``."""
    words = list(ran.words)
    args = audit.pip_arguments(words)
    if args and args[:1] == ["uninstall"]:
        for package in (a for a in args[1:] if not a.startswith("-")):
            yield Stated(Fact.UNINSTALL, str(canonicalize_name(package)), "", ran.line)
    elif args and (install := pipargs.install_arguments(args)) is not None:
        for option, value in itertools.pairwise(args):
            if option in ("-r", "--requirement"):
                place = _in_tree(value, ran.cwd, clones)
                yield Stated(Fact.REQUIREMENTS, place, "pip install -r", ran.line)
        for at in install.requirements:
            editable = at in install.editable
            arg = pipargs.requirement_of(args[at], editable)
            if pipargs.judge(arg, editable=editable).verdict is not pipargs.Verdict.LOCAL:
                yield from _deps_fact(arg, "--no-deps" in args, install.upgrade, ran.line)
                continue
            place = _in_tree(arg, ran.cwd, clones)
            if ":" in place and not place.startswith("site:"):
                flags = [flag for flag in _PIP_FLAGS if set(_PIP_FLAGS[flag]) & set(args)]
                how = " ".join(["pip install", *(["-e"] if editable else []), *flags])
                repo, folder = place.split(":", 1)
                yield Stated(Fact.BUILD, repo, f"{how} {folder or '.'}", ran.line)
                yield from _env_facts(ran, repo)
            else:  # a package folder of the image (ROCm's amd_smi), or wheels built earlier
                yield Stated(Fact.PIP, place, "", ran.line)
    else:
        script = next((w for w in words[1:] if w.endswith(".py")), "")
        if posixpath.basename(script).startswith("setup") and ran.cwd:
            verb = words[words.index(script) + 1] if words.index(script) + 1 < len(words) else ""
            place = _in_tree(script, ran.cwd, clones)
            if ":" in place and not place.startswith("site:"):
                repo, script_path = place.split(":", 1)
                deps = " --no-deps" if "--no-deps" in words else ""
                folder = posixpath.dirname(script_path) or "."
                yield Stated(Fact.BUILD, repo, f"setup.py {verb}{deps} {folder}", ran.line)
                yield from _env_facts(ran, repo)


# The pip flags of a clone's build that change what it builds or installs, as compare writes
# them (in this order), and how a recipe may spell each.
_PIP_FLAGS = {
    "-U": ("-U", "--upgrade"),
    "--no-build-isolation": ("--no-build-isolation",),
    "--no-deps": ("--no-deps",),
}


def _env_facts(ran: audit.Ran, repo: str) -> Iterator[Stated]:
    """The variables a clone's build command is given before its name (``MAX_JOBS=64``)."""
    for name, value in ran.env:
        yield Stated(Fact.BUILD_ENV, f"{repo} {name}", value, ran.line)


def _deps_fact(requirement: str, no_deps: bool, upgrade: bool, line: int) -> Iterator[Stated]:
    """Whether pip installs a package from an index, or a source from its repository (by
    the repository's name), with its dependencies, and whether it upgrades (-U) what is there
    already (a wheel's URL is another fact's)."""
    stated = _requirement(requirement, line)
    named = stated.fact is Fact.PIP and stated.key == str(canonicalize_name(stated.key))
    if stated.fact is Fact.SOURCE or named:  # a name, not what pip could not read
        yield Stated(Fact.DEPS, stated.key, "no-deps" if no_deps else "deps", line)
        yield Stated(Fact.UPGRADE, stated.key, "-U" if upgrade else "no -U", line)


def _find_facts(ran: audit.Ran, clones: Clones) -> Iterator[Stated]:
    """``find <dir> -name '*gfx*' | ... rm``: the folders where it prunes other archs' kernels."""
    words = list(ran.words)
    patterns = [
        value
        for option, value in itertools.pairwise(words)
        if option in ("-name", "-iname", "-path", "-ipath", "-regex")
    ]
    if not any("gfx" in pattern for pattern in patterns):
        return
    for word in words[1:]:
        if word.startswith(("-", "(", "!")):
            break  # the folders come before the first test
        yield Stated(Fact.PRUNE, posixpath.normpath(word), "kernel files of other archs", ran.line)


_HANDLERS = {
    "echo": _deb_facts,
    "find": _find_facts,
    "git": _git_facts,
    "printf": _deb_facts,
    "sed": _sed_facts,
    "ln": _ln_facts,
    "rm": _rm_facts,
}


def _sed_files(words: list[str]) -> list[str]:
    """The files ``sed -i`` edits: what follows its script (given with -e or as the first
    word that is no option)."""
    rest = words[1:]
    files, script_seen = [], any(w in ("-e", "--expression") for w in rest)
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word in ("-e", "--expression", "-f"):
            skip = True
        elif word.startswith("-"):
            continue
        elif not script_seen:
            script_seen = True
        else:
            files.append(word)
    return files


def _in_tree(path: str, cwd: str | None, clones: Mapping[str, audit.Clone]) -> str:
    """A file as ``<repo>:<path in it>`` (a clone's file), or ``site:<path>`` (an installed
    package's), or the absolute path."""
    full = posixpath.normpath(posixpath.join(cwd or "/", path))
    for root, clone in sorted(clones.items(), key=lambda item: -len(item[0])):
        if full == root.rstrip("/") or full.startswith(root.rstrip("/") + "/"):
            return f"{repo_name(clone.url)}:{full[len(root.rstrip('/')) + 1 :] or '.'}"
    return _site(full)


def _site(path: str) -> str:
    """A path in site-packages (``/opt/venv/lib/python3.12/site-packages/x``, ``$SP/x``) as
    ``site:x``; others as they are."""
    match = re.search(r"(?:/(?:site|dist)-packages|^\$\{?SP\}?)/(.*)", path)
    return f"site:{match.group(1)}" if match else path


# ---------------------------------------------------------------- the graph's side


class _Graph:
    """What the graph does, from its pins and its rendered recipes."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.pins: Pins = run.pins
        self.env = _rendered_env(run)
        self.patched = _patched_files(run.pins)
        self.judges = {
            Fact.BASE: self._base, Fact.SOURCE: self._source, Fact.PIP: self._pip,
            Fact.WHEEL: self._wheel, Fact.APT: self._apt, Fact.APT_REPO: self._apt_repo,
            Fact.APT_RECOMMENDS: self._apt_recommends, Fact.ENV: self._env,
            Fact.PATCH: self._patch, Fact.LINK: self._link,
            Fact.CLEANUP: self._cleanup, Fact.UNINSTALL: self._uninstall, Fact.CMD: self._cmd,
            Fact.WORKDIR: self._workdir, Fact.BUILD: self._build, Fact.PRUNE: self._prune,
            Fact.REQUIREMENTS: self._requirements, Fact.SUBMODULES: self._submodules,
            Fact.DEPS: self._deps, Fact.BUILD_ENV: self._build_env, Fact.ORDER: self._order,
            Fact.UPGRADE: self._upgrade,
        }  # fmt: skip

    def judge(self, stated: Stated) -> tuple[Status, str]:
        return self.judges[stated.fact](stated)

    def added(self, judged: list[tuple[Stated, Status, str]]) -> list[tuple[Stated, str]]:
        """What the graph puts in the image that no fact of the recipe matched: a source
        built here, a folder it prunes, a variable of the runtime environment."""
        matched = {(item.fact, item.key) for item, _, _ in judged}  # the recipe has them
        met = {where for _, _, where in judged}
        found = []
        for name, source in self.pins.sources.items():
            key = repo_name(source.repo)
            if name not in self.pins.base.provides and (Fact.SOURCE, key) not in matched:
                found.append((Stated(Fact.SOURCE, key, source.commit, 0), f"[sources.{name}]"))
        for pinned in self.pins.prune.dirs:
            if f"[prune].dirs: {pinned}" not in met:
                found.append((Stated(Fact.PRUNE, pinned, "", 0), "[prune].dirs"))
        for name, (value, where) in sorted(self.env.items()):
            # what the base image sets itself is in the recipe's image too, unwritten
            if (Fact.ENV, name) not in matched and name not in self.pins.base.keeps_env:
                found.append((Stated(Fact.ENV, name, value, 0), where))
        return found

    def _base(self, stated: Stated) -> tuple[Status, str]:
        ours = self.pins.base.image
        same = _image_name(ours) == _image_name(stated.value)
        return (Status.SAME if same else Status.DIFFERS), f"[base].image = {ours}"

    def _source(self, stated: Stated) -> tuple[Status, str]:
        for name, source in self.pins.sources.items():
            if repo_name(source.repo) != stated.key:
                continue
            where = f"[sources.{name}] commit {source.commit or '-'}, tag {source.tag or '-'}"
            ref = stated.value
            same = (
                (not ref and not source.commit)
                or ref in (source.tag, source.commit)
                or (bool(ref) and bool(source.commit) and source.commit.startswith(ref))
            )
            if name in self.pins.base.provides:
                where += " (the base image provides it)"
            return (Status.SAME if same else Status.DIFFERS), where
        return Status.MISSING, "no [sources.*] has this repository"

    def _pip(self, stated: Stated) -> tuple[Status, str]:
        if stated.key.startswith("/"):  # a package folder the image holds, or built wheels
            if stated.key.endswith(".whl"):
                return Status.SAME, "stage assemble installs the wheels the source stages build"
            if stated.key in self.pins.rocm.pip:
                return Status.SAME, "[rocm].pip"
            return Status.MISSING, "not in [rocm].pip"
        pinned = self._pinned_packages()
        if stated.key not in pinned:
            return Status.MISSING, "not installed by the graph"
        where, version = pinned[stated.key]
        if not version:
            same = not stated.value
            return (Status.SAME if same else Status.DIFFERS), f"{where} = (unpinned)"
        # pinning what the recipe leaves open follows it: the pin is one of the versions it allows
        allowed = SpecifierSet(stated.value).contains(version, prereleases=True)
        return (Status.SAME if allowed else Status.DIFFERS), f"{where} = {version}"

    def _pinned_packages(self) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        python = self.pins.python
        for group in ("tools", "stack", "vllm", "sglang"):
            for name, version in getattr(python, group).items():
                found[str(canonicalize_name(name))] = (f"[python.{group}].{name}", version)
        for name, wheel in self.pins.wheels.items():
            found[str(canonicalize_name(name))] = (f"[wheels.{name}].version", wheel.version)
        return found

    def _wheel(self, stated: Stated) -> tuple[Status, str]:
        for name, wheel in self.pins.wheels.items():
            if canonicalize_name(name) == stated.key:
                where = f"[wheels.{name}].file = {wheel.file or '(not locked)'}"
                return (Status.SAME if wheel.file == stated.value else Status.DIFFERS), where
        return Status.MISSING, "no [wheels.*] of this package"

    def _apt(self, stated: Stated) -> tuple[Status, str]:
        if stated.key in self.pins.base.apt:
            return Status.SAME, "[base].apt"
        if stated.key in self.pins.rocm.packages:
            return Status.SAME, f"[rocm.packages].{stated.key}"
        return Status.MISSING, "not in [base].apt or [rocm.packages]"

    def _apt_recommends(self, stated: Stated) -> tuple[Status, str]:
        ours = "yes" if self.pins.base.apt_recommends else "no"
        where = f"[base].apt_recommends = {str(self.pins.base.apt_recommends).lower()}"
        return (Status.SAME if ours == stated.value else Status.DIFFERS), where

    def _apt_repo(self, stated: Stated) -> tuple[Status, str]:
        urls = {
            repo.url.rstrip("/"): f"[rocm.repos.{n}]" for n, repo in self.pins.rocm.repos.items()
        }
        urls |= {
            repo.url.rstrip("/"): f"[base.repos.{n}]" for n, repo in self.pins.base.repos.items()
        }
        key = re.sub(r"\$\{?\w+\}?", "*", stated.key)
        for url, where in urls.items():
            if re.fullmatch(re.escape(key).replace(r"\*", ".*"), url):
                return Status.SAME, where
        return Status.MISSING, "no apt repository of the pins"

    def _env(self, stated: Stated) -> tuple[Status, str]:
        if stated.key not in self.env:
            return Status.MISSING, "not in the image's environment"
        value, where = self.env[stated.key]
        return (Status.SAME if value == stated.value else Status.DIFFERS), f"{where}: {value}"

    def _patch(self, stated: Stated) -> tuple[Status, str]:
        patch = self.patched.get(stated.key)
        return (Status.SAME, patch) if patch else (Status.MISSING, "no patch touches it")

    def _link(self, stated: Stated) -> tuple[Status, str]:
        target = self.pins.links.get(stated.key)
        if target is None:
            return Status.MISSING, "not in [links]"
        return (Status.SAME if target == stated.value else Status.DIFFERS), f"[links] -> {target}"

    def _cleanup(self, stated: Stated) -> tuple[Status, str]:
        if stated.key in self.pins.cleanup.paths:
            return Status.SAME, "[cleanup].paths"
        if stated.key.startswith(_APT_CACHES):
            return (
                Status.SAME,
                "apt's lists and archives are BuildKit cache mounts: never in a layer",
            )
        return Status.MISSING, "not in [cleanup].paths"

    def _prune(self, stated: Stated) -> tuple[Status, str]:
        for pinned in self.pins.prune.dirs:
            parts = stated.key.split("/")
            depth = len(pinned.rstrip("/").split("/"))
            if len(parts) >= depth and fnmatch.fnmatchcase("/".join(parts[:depth]), pinned):
                return Status.SAME, f"[prune].dirs: {pinned}"
        return Status.MISSING, "under no [prune].dirs"

    def _requirements(self, stated: Stated) -> tuple[Status, str]:
        repo, _, file = stated.key.partition(":")
        for name, source in self.pins.sources.items():
            if repo_name(source.repo) == repo:
                where = f"[sources.{name}].requirements"
                return (Status.SAME if file in source.requirements else Status.MISSING), where
        return Status.MISSING, "no [sources.*] has this repository"

    def _uninstall(self, stated: Stated) -> tuple[Status, str]:
        for name, source in self.pins.sources.items():
            if stated.key in {str(canonicalize_name(u)) for u in source.uninstall}:
                return Status.SAME, f"[sources.{name}].uninstall"
        return Status.MISSING, "no [sources.*].uninstall names it"

    def _build(self, stated: Stated) -> tuple[Status, str]:
        """A clone's build: the source of that repository that builds that folder, and
        whether it installs the same way (editable, with or without dependencies, in pip's
        isolated build environment or in the image's, upgrading what is there)."""
        how, _, folder = stated.value.rpartition(" ")
        name = self._built_by(stated.key, folder)
        if name is None:
            return Status.MISSING, "no [sources.*] has this repository"
        source = self.pins.sources[name]
        if name in self.pins.base.provides:
            return Status.DIFFERS, f"[sources.{name}]: the base image provides it"
        words = how.split()
        pip = words[0] == "pip"  # setup.py's own verbs build in the image, and are not pip's
        isolated = "--no-build-isolation" not in self._recipe_of(name)
        ours = (False, source.install_deps, isolated, source.upgrade)
        theirs = (
            "develop" in words or "-e" in words,
            "--no-deps" not in words if pip else source.install_deps,
            pip and "--no-build-isolation" not in words,
            "-U" in words,
        )
        layout = f", its tree at {source.workspace}" if source.workspace else ""
        deps = "with its dependencies" if source.install_deps else "without its dependencies"
        build = "in pip's isolated environment" if isolated else "with --no-build-isolation"
        upgrade = ", -U" if source.upgrade else ""
        where = f"stage {name} builds a wheel of {folder} {build}, installed {deps}{upgrade}"
        return (Status.SAME if ours == theirs else Status.DIFFERS), where + layout

    def _built_by(self, repo: str, folder: str) -> str | None:
        """The source of ``repo`` that builds ``folder`` (else its first)."""
        named = [name for name, s in self.pins.sources.items() if repo_name(s.repo) == repo]
        return next((n for n in named if folder in self.pins.sources[n].subdirs), None) or (
            named[0] if named else None
        )

    def _recipe_of(self, source: str) -> str:
        """The rendered recipe of the stage that builds ``source``."""
        stage = next((s for s in self.run.graph if source in s.sources), None)
        if stage is None:
            return ""
        return render(stage, self.pins, self.run.archs)

    def _build_env(self, stated: Stated) -> tuple[Status, str]:
        """A variable of a clone's build: MAX_JOBS is [build].max_jobs, an arch variable gets
        the arch set, any other is the source's [sources.*.env]."""
        repo, _, variable = stated.key.rpartition(" ")
        name = self._built_by(repo, "")
        if name is None:
            return Status.MISSING, "no [sources.*] has this repository"
        source = self.pins.sources[name]
        if variable == "MAX_JOBS":
            ours = str(self.pins.build.max_jobs)
            return (Status.SAME if ours == stated.value else Status.DIFFERS), (
                f"[build].max_jobs = {ours}"
            )
        if variable in source.arch_env:
            return Status.SAME, f"[sources.{name}].arch_env: the arch set of the build"
        if variable in source.env:
            ours = source.env[variable]
            where = f"[sources.{name}.env].{variable} = {ours}"
            return (Status.SAME if ours == stated.value else Status.DIFFERS), where
        return Status.MISSING, f"[sources.{name}] does not set {variable}"

    def installs(self, item: Stated) -> str | None:
        """What an install (of a recipe, or of the graph's own recipes) installs, named alike
        on both sides: a source by its name in the pins, a package, a removal. The build
        tools ([python.tools]) are none: they go in first, and only builds use them."""
        if item.fact is Fact.UNINSTALL:
            return f"{item.key} (removed)"
        if item.fact is Fact.BUILD:
            return self._built_by(item.key, item.value.rpartition(" ")[2])
        if item.fact is Fact.REQUIREMENTS and ":" in item.key:  # they go in with their source
            return self._built_by(item.key.split(":", 1)[0], "")
        if item.fact is Fact.DEPS and "/" in item.key:  # pip install git+<repository>
            return self._built_by(item.key, "")
        if item.fact is Fact.DEPS:
            tools = {str(canonicalize_name(name)) for name in self.pins.python.tools}
            return None if item.key in tools else item.key
        return self._paths.get(item.key)  # the graph's own: a wheel, a tree, requirements

    @functools.cached_property
    def _paths(self) -> dict[str, str]:
        """The paths the graph's recipes install a source from (its wheels, its tree, the
        requirements assemble resolves for it) -> the source."""
        workdir, paths = self.pins.base.workdir, {}
        for name, source in self.pins.sources.items():
            paths[f"/src/{name}"] = paths[f"/dist/{name}/*.whl"] = name
            paths[f"/tmp/{name}-requires.txt"] = name
            if source.workspace:
                paths[f"{workdir}/{source.workspace}"] = name
        return paths

    @functools.cached_property
    def _final_line(self) -> list[str]:
        return _lineage(self.run, self.run.graph.closure(self.run.graph.final))

    @functools.cached_property
    def installed(self) -> dict[str, Place]:
        """Where the graph installs each thing last: (its stage's place in the final image's
        line, the line and command of its rendered recipe)."""
        run, found = self.run, []
        for at, name in enumerate(self._final_line):
            text = render(run.graph[name], self.pins, run.archs)
            reading = audit.read(text, f"{name} recipe", record=True)
            found += [(self.installs(item), (at, *place)) for item, place in _installs(reading)]
        return _last(iter(found))

    def _order(self, stated: Stated) -> tuple[Status, str]:
        first, then = stated.key.split(", ")
        before, after = self.installed[first], self.installed[then]
        ours = "with" if before == after else "before" if before < after else "after"
        stages = self._final_line
        where = f"stage {stages[before[0]]} installs {first} {ours} {then}"
        if before[0] != after[0]:
            where += f" (stage {stages[after[0]]})"
        return (Status.SAME if ours == stated.value else Status.DIFFERS), where

    def _deps(self, stated: Stated) -> tuple[Status, str]:
        found = self._pip_installed(stated.key)
        if found is None:
            return _pip_missing(stated.key)
        table, name = found
        if table == "sources":
            deps = self.pins.sources[name].install_deps
            where = f"[sources.{name}].install_deps = {str(deps).lower()}"
            return (Status.SAME if deps == (stated.value == "deps") else Status.DIFFERS), where
        default = "deps" if table in ("tools", "stack") else "no-deps"
        mode = self.pins.python.install.get(name, default)
        where = f"[python.{table}] installs it with " + (
            "its dependencies" if mode == "deps" else "--no-deps"
        )
        return (Status.SAME if mode == stated.value else Status.DIFFERS), where

    def _upgrade(self, stated: Stated) -> tuple[Status, str]:
        """-U: a source the pins upgrade as it installs ([sources.*].upgrade); a package of
        the pins never (its pin, or one resolution, names what it gets)."""
        found = self._pip_installed(stated.key)
        if found is None:
            return _pip_missing(stated.key)
        table, name = found
        if table == "sources":
            upgrade = self.pins.sources[name].upgrade
            where = f"[sources.{name}].upgrade = {str(upgrade).lower()}"
            return (Status.SAME if upgrade == (stated.value == "-U") else Status.DIFFERS), where
        where = f"[python.{table}] installs it without -U"
        return (Status.SAME if stated.value == "no -U" else Status.DIFFERS), where

    def _pip_installed(self, key: str) -> tuple[str, str] | None:
        """Where the graph installs what a recipe's pip install names by ``key``: ("sources",
        its name) for a repository (git+URL), (its [python.*] group, its name as the pins
        write it) for a package; None for neither."""
        if "/" in key:
            name = self._built_by(key, "")
            return None if name is None else ("sources", name)
        for group in ("tools", "stack", "vllm", "sglang"):
            names = {
                str(canonicalize_name(name)): name for name in getattr(self.pins.python, group)
            }
            if key in names:
                return group, names[key]
        return None

    def _submodules(self, stated: Stated) -> tuple[Status, str]:
        named = [n for n, s in self.pins.sources.items() if repo_name(s.repo) == stated.key]
        if not named:
            return Status.MISSING, "no [sources.*] has this repository"
        fetched = all(self.pins.sources[name].submodules for name in named)
        where = f"[sources.{named[0]}].submodules = {str(fetched).lower()}"
        return (Status.SAME if fetched else Status.DIFFERS), where

    def _cmd(self, stated: Stated) -> tuple[Status, str]:
        ours = json.dumps(list(self.pins.image.cmd))
        return (Status.SAME if ours == stated.value else Status.DIFFERS), f"[image].cmd = {ours}"

    def _workdir(self, stated: Stated) -> tuple[Status, str]:
        ours = self.pins.image.workdir or self.pins.base.workdir
        same = ours == stated.value
        return (Status.SAME if same else Status.DIFFERS), f"[image].workdir = {ours}"


def _pip_missing(key: str) -> tuple[Status, str]:
    """What pip installs by ``key`` that the graph does not install."""
    if "/" in key:
        return Status.MISSING, "no [sources.*] has this repository"
    return Status.MISSING, "not installed by the graph"


def _image_name(image: str) -> str:
    """``docker.io/library/ubuntu:22.04@sha256:...`` and ``ubuntu:22.04`` name one image."""
    return familiar(image.split("@", 1)[0])


def _rendered_env(run: Run) -> dict[str, tuple[str, str]]:
    """The final image's environment as the graph's recipes set it: name -> (value, stage),
    from the base stage down to the final one, less the build-only variables."""
    env: dict[str, tuple[str, str]] = {}
    known: dict[str, str] = {}
    dropped: set[str] = set()
    final = run.graph.closure(run.graph.final)
    lineage = _lineage(run, final)
    for name in lineage:
        stage = run.graph[name]
        dropped |= set(dropped_env(stage, run.pins))
        parsed = syntax.parse(render(stage, run.pins, run.archs), f"{name} recipe")
        for ins in parsed.instructions:
            if ins.command != "ENV":
                continue
            for word in ins.words:
                variable, _, raw = word.text.partition("=")
                value = expand(raw, known).value
                known[variable] = value
                env[variable] = (value, f"stage {name}")
    return {k: v for k, v in env.items() if k not in dropped}


def _lineage(run: Run, stages: tuple[str, ...]) -> list[str]:
    """The stages whose images the final one is built FROM (each stage's first parent), not
    those it only copies from."""
    line, name = [], run.graph.final
    while True:
        line.append(name)
        parents = run.graph[name].parents
        if not parents or parents[0] not in stages:
            return list(reversed(line))
        name = parents[0]


def _patched_files(pins: Pins) -> dict[str, str]:
    """``<repo>:<path>`` or ``site:<path>`` -> the patch file that edits it."""
    found = {}
    for source in pins.sources.values():
        for patch in source.patches:
            for file in read_patch(patch).files:
                found[f"{repo_name(source.repo)}:{file}"] = patch
    for patches in pins.python.patches.values():
        for patch in patches:
            for file in read_patch(patch).files:
                found[f"site:{file}"] = patch
    return found


# ---------------------------------------------------------------- reports


def verdict(comparison: Comparison) -> None:
    """Fail unless every difference is explained, and every explanation still needed."""
    unexplained = comparison.unexplained
    if unexplained or comparison.stale:
        parts = []
        if unexplained:
            parts.append(f"{len(unexplained)} differences are not explained")
        if comparison.stale:
            parts.append(f"{len(comparison.stale)} explanations match nothing any more")
        raise CompareError(
            f"compare {comparison.recipe}: {' and '.join(parts)}; follow the recipe, or say "
            f"why not in {comparison.differences}{_unmatched(comparison)}"
        )


def _unmatched(comparison: Comparison) -> str:
    """When no entries explain the recipe though the file has some: which, and how to name
    the one it is a copy of."""
    if comparison.explained_as or not comparison.listed:
        return ""
    return (
        f", which has entries for {', '.join(comparison.listed)} only (for a copy of one, "
        f"name it: {_either(comparison.listed)})"
    )


def as_text(comparison: Comparison) -> str:
    lines = []
    for row in comparison.rows:
        stated = row.stated
        where = f"{comparison.recipe}:{stated.line}" if stated.line else comparison.recipe
        value = f" {stated.value}" if stated.value else ""
        tail = f" ({row.why})" if row.why else ""
        lines.append(f"{where}: {stated.fact} {stated.key}{value}: {row.status}: {row.graph}{tail}")
    lines += [f"{comparison.differences}: stale: {item}" for item in comparison.stale]
    if comparison.explained_as not in ("", Path(comparison.recipe).name):
        lines.append(
            f"{comparison.recipe}: explained by the entries for {comparison.explained_as} in "
            f"{comparison.differences}"
        )
    counts = {status: sum(row.status is status for row in comparison.rows) for status in Status}
    lines.append(f"{comparison.recipe}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def as_json(comparison: Comparison) -> str:
    return json.dumps(
        {
            "recipe": comparison.recipe,
            "rows": [
                {**asdict(row.stated), "status": str(row.status), "graph": row.graph,
                 "why": row.why}
                for row in comparison.rows
            ],
            "stale": list(comparison.stale),
            "explained_as": comparison.explained_as,
        },
        indent=2,
    )  # fmt: skip
