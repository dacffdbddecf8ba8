"""pip's command line, read as pip reads it: which words of an install are requirements.

``pip install --trusted-host h --timeout 60 -r reqs.txt torch==2.1 ./local``
installs one package, ``torch==2.1``: option values, requirement files and
local paths are not packages. The same holds for ``uv pip install``. Each
requirement is then judged: pinned to one version, to a full commit, or by a
hash, or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from packaging.requirements import InvalidRequirement, Requirement


def names(text: str) -> frozenset[str]:
    """A set of words, written as one string."""
    return frozenset(text.split())


# Options (pip's and uv's) whose value is the next word unless written --opt=value.
_TAKES_VALUE = names(
    """
    -r --requirement -c --constraint -e --editable -i --index-url --extra-index-url
    -f --find-links --trusted-host --timeout --retries --resume-retries --upgrade-strategy
    --no-binary --only-binary --platform --python-version --implementation --abi -t --target
    --prefix --root --src --progress-bar --log --log-file --proxy --cert --client-cert
    --cache-dir --exists-action --global-option --install-option -C --config-settings
    --report --group --python --keyring-provider --use-feature --use-deprecated
    --root-user-action --build-constraint --override --overrides --index --default-index
    --index-strategy --torch-backend --prerelease --resolution --link-mode -p
    --reinstall-package --upgrade-package -P --no-build-isolation-package --exclude-newer
    --python-platform --extra --excludes --allow-insecure-host
    """
)
# pip's options that may come before the subcommand and take a value.
_GLOBAL_TAKES_VALUE = names(
    "--log --log-file --proxy --retries --resume-retries --timeout --exists-action "
    "--trusted-host --cert --client-cert --cache-dir --python --use-feature "
    "--use-deprecated --keyring-provider"
)
# `name`, `name[extra]`, `name==1.2.3`: what most installs say.
_SIMPLE = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._,-]*\])?(==[0-9][A-Za-z0-9.+!_-]*)?"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_FULL_COMMIT = re.compile(r"[0-9a-f]{40}")
_HASH = re.compile(r"#(?:.*&)?(sha256|sha384|sha512)=[0-9a-fA-F]+")
_LOCAL_ARCHIVE = re.compile(r".*\.(whl|tar\.gz|tgz|tar\.bz2|zip)$", re.IGNORECASE)


class Verdict(StrEnum):
    PINNED = "pinned"  # one exact version, a full commit, or a hash
    UNPINNED = "unpinned"
    LOCAL = "local"  # a path: what it holds is the recipe's own business


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    problem: str = ""


@dataclass(frozen=True)
class Install:
    """The words of a ``pip install`` that matter to what it installs."""

    requirements: tuple[int, ...]  # the indexes of the words that are requirements
    hashes: bool  # --require-hashes
    editable: frozenset[int]  # those of the requirements given with -e
    upgrade: bool = False  # -U/--upgrade: what is installed already moves to the newest allowed


def install_arguments(args: list[str]) -> Install | None:
    """For ``pip ...`` arguments (the words after pip): its requirements; None unless it
    installs. ``-e <req>`` (editable) is a requirement too; ``-r``/``-c`` files are not."""
    at = 0
    while at < len(args) and args[at].startswith("-"):  # global options before the command
        at += 2 if args[at] in _GLOBAL_TAKES_VALUE else 1
    if at >= len(args) or args[at] != "install":
        return None
    found: list[int] = []
    editable: set[int] = set()
    hashes = upgrade = False
    at += 1
    while at < len(args):
        word = args[at]
        upgrade = upgrade or word == "--upgrade" or "U" in _short_flags(word)
        if word == "--":
            found += range(at + 1, len(args))
            break
        if word in ("-e", "--editable") and at + 1 < len(args):
            found.append(at + 1)
            editable.add(at + 1)
            at += 2
            continue
        if word.startswith("--editable=") or (word.startswith("-e") and len(word) > 2):
            found.append(at)  # -e<path>, --editable=<path>
            editable.add(at)
        elif word == "--require-hashes":
            hashes = True
        elif word in _TAKES_VALUE:
            at += 1  # its value is not a package
        elif word.startswith("-") and not word.startswith("--") and _value_follows(word):
            at += 1  # -Ur requirements.txt: -U, then -r and its value
        elif not word.startswith("-"):
            found.append(at)
        at += 1
    return Install(tuple(found), hashes, frozenset(editable), upgrade)


def _short_flags(word: str) -> str:
    """The letters of short options grouped in one word (``-qU`` -> ``qU``), up to the first
    one that takes a value (``-rU`` reads the file ``U``)."""
    if not word.startswith("-") or word.startswith("--"):
        return ""
    for at, letter in enumerate(word[1:], start=1):
        if f"-{letter}" in _TAKES_VALUE:
            return word[1 : at + 1]
    return word[1:]


def _value_follows(word: str) -> bool:
    """Whether short options grouped in one word (``-Ur``, ``-qr``) end with one that takes
    a value, which is then the next word (``-rfile`` holds its own)."""
    flags = _short_flags(word)
    return f"-{flags[-1:]}" in _TAKES_VALUE and len(flags) == len(word) - 1


def requirement_of(word: str, editable: bool) -> str:
    """The requirement a word gives: ``--editable=./x`` and ``-e./x`` give ``./x``."""
    if editable and word.startswith("-"):
        return word.removeprefix("--editable=") if word.startswith("--") else word[2:]
    return word


def judge(requirement: str, hashes: bool = False, editable: bool = False) -> Judged:
    """Whether one requirement names fixed content (``--require-hashes``: hashes given). An
    editable one is a project folder unless it is a VCS URL: pip takes nothing else."""
    if _is_local(requirement) or (editable and "://" not in requirement):
        return Judged(Verdict.LOCAL)
    simple = _SIMPLE.fullmatch(requirement)
    if simple:  # the common forms, without the cost of a full parse
        if simple.group(1):
            return Judged(Verdict.PINNED)
        return Judged(Verdict.UNPINNED, "unpinned: no ==version")
    url = requirement
    if not _SCHEME.match(requirement):  # a name, perhaps with `@ url`
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement:
            return Judged(Verdict.UNPINNED, f"cannot read {requirement!r} as a requirement")
        if parsed.url is None:
            return _judge_version(parsed)
        url = parsed.url
    return _judge_url(url, hashes)


def _is_local(requirement: str) -> bool:
    """A path, as pip tells one from a name: a separator, a leading dot, or a local archive."""
    if "://" in requirement:
        return requirement.startswith("file:")
    if requirement.startswith((".", "/", "~")) or "/" in requirement:
        return True
    return bool(_LOCAL_ARCHIVE.fullmatch(requirement))


def _judge_version(parsed: Requirement) -> Judged:
    clauses = list(parsed.specifier)
    if not clauses:
        return Judged(Verdict.UNPINNED, "unpinned: no ==version")
    exact = [c for c in clauses if c.operator in ("==", "===") and not c.version.endswith("*")]
    if exact:
        return Judged(Verdict.PINNED)
    return Judged(Verdict.UNPINNED, f"pinned to a range ({parsed.specifier}), not one version")


def _judge_url(url: str, hashes: bool) -> Judged:
    if url.startswith("git+"):
        path = url.split("#", 1)[0]
        ref = path.rsplit("@", 1)[1] if "@" in path.split("://", 1)[-1] else ""
        if _FULL_COMMIT.fullmatch(ref):
            return Judged(Verdict.PINNED)
        if not ref:
            return Judged(Verdict.UNPINNED, "git+ URL without a commit: unpinned")
        return Judged(Verdict.UNPINNED, f"git+ URL pinned to {ref}, not a full commit")
    if _HASH.search(url) or hashes:
        return Judged(Verdict.PINNED)
    return Judged(Verdict.UNPINNED, "installs a URL whose content no hash checks")


_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_RANGE_OPERATOR = re.compile(r"~=|!=|>=|<=|(?<![<>=!~])[<>](?!=)")


def written_range(requirement: str) -> str:
    """Why a requirement with variables is a range whatever they hold: the range operators of
    its own text (``x${V}>=${W}``: ``>=``); "" when it has an ``==`` or none."""
    written = _VARIABLE.sub("", requirement.split(";", 1)[0])
    ranged = ", ".join(_RANGE_OPERATOR.findall(written)) if "==" not in written else ""
    if not ranged:
        return ""
    return f"pinned to a range ({ranged}) whatever its variables hold, not one version"
