"""The command line's variables: every one a doit command takes, what it does, and what can
be checked of its value before any task is made (a wrong one stops the run with exit 3).
doit keeps the values; this module reads them through its public ``get_var``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import doit

from rocmgraph.building import progress
from rocmgraph.common.errors import VariableError, cut, shown
from rocmgraph.common.spelling import closest
from rocmgraph.config import kinds
from rocmgraph.config.archs import parse_archs
from rocmgraph.demo import profile as demo_profile

# ccache's remote storage where compile_cache= names none: a URL with a password in it stays
# off the command line (and out of `ps`), as CI passes a secret.
COMPILE_CACHE_ENV = "VERL_GRAPH_COMPILE_CACHE"
REDIS_PASSWORD_ENV = "REDISCLI_AUTH"  # a redis:// compile cache's password, as redis-cli's
FORMATS = ("text", "json")  # the reports'
GRAPH_FORMATS = ("svg", "mermaid", "dot")  # doit graph's
PROFILES = ("", *demo_profile.PROFILES)  # "": the pins file's own (pins.toml by default)
# A flag's words, either case. Anything else is refused: `force=false` must not force.
FLAG_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def flag(name: str, value: str) -> bool:
    """``force=1``/``true``/``yes`` is on, ``0``/``false``/``no`` off; nothing else is a flag."""
    try:
        return FLAG_WORDS[value.lower()]
    except KeyError:
        raise VariableError(
            f"{name}={cut(value)}: not a flag; write {name}=1, true or yes to turn it on, "
            f"{name}=0, false or no to leave it off"
        ) from None


def check_format(name: str, value: str, formats: Sequence[str] = FORMATS) -> None:
    """``value`` is one of ``formats``: a report's (text, json) unless a task says others."""
    if value not in formats:
        raise VariableError(f"{name}={cut(value)}: unknown format; use {_either(name, formats)}")


def _any_format(name: str, value: str) -> None:
    """The command line's check, before the task is known: a format of any task; the task
    checks its own."""
    if value not in (*FORMATS, *GRAPH_FORMATS):
        raise VariableError(
            f"{name}={cut(value)}: unknown format; use {_either(name, FORMATS)}, or for graph "
            f"{_either(name, GRAPH_FORMATS)}"
        )


def _either(name: str, values: Sequence[str]) -> str:
    """``format=a, format=b or format=c``."""
    words = [f"{name}={value}" for value in values]
    return f"{', '.join(words[:-1])} or {words[-1]}"


def _profile(name: str, value: str) -> None:
    if value not in PROFILES:
        known = ", ".join(f"profile={profile}" for profile in PROFILES if profile)
        raise VariableError(f"{name}={cut(value)}: unknown profile; use {known} or none")


def _arch(name: str, value: str) -> None:
    if value:  # arch= (empty) is the default arch set of the pins file
        parse_archs(value)


def _count(name: str, value: str) -> None:
    if not value.isdigit() or int(value) < 1:
        raise VariableError(f"{name}={cut(value)}: not a count; write {name}=1, {name}=2, ...")


def seconds(name: str, value: str) -> float | None:
    """``wait=30`` is 30 seconds, ``wait=0`` none; no value (``wait=``) is no end."""
    if not value:
        return None
    try:
        found = float(value)
    except ValueError:
        found = -1.0
    if not 0 <= found < float("inf"):
        raise VariableError(f"{name}={cut(value)}: not a number of seconds; write {name}=0, "
                            f"{name}=30, ...")  # fmt: skip
    return found


def _registry(name: str, value: str) -> None:
    problem = kinds.IMAGE_NAME.problem(value) if value else None
    if problem:
        raise VariableError(
            f"{name}={cut(value)}: {problem.removeprefix(repr(value) + ' ').strip()}; write "
            f"{name}=<registry>/<path>, e.g. {name}=registry.example.org/verl-rocm"
        )


HOST_SCHEMES = ("unix", "tcp", "ssh", "npipe", "fd")  # what DOCKER_HOST takes


def hosts(value: str) -> tuple[str, ...]:
    """``builders=unix:///run/a.sock,ssh://build-2``: the Docker hosts, each as DOCKER_HOST
    names one (raises VariableError)."""
    found = tuple(host.strip() for host in value.split(",") if host.strip())
    for host in found:
        scheme = host.split("://", 1)[0] if "://" in host else ""
        if scheme not in HOST_SCHEMES or not host.split("://", 1)[1]:
            raise VariableError(
                f"builders={cut(value)}: {cut(host)} is not a Docker host; write each as "
                "DOCKER_HOST would, e.g. builders=unix:///run/a.sock,ssh://user@build-2"
            )
    if len(set(found)) != len(found):
        raise VariableError(f"builders={cut(value)}: a host is named twice; name each once")
    return found


def _hosts(name: str, value: str) -> None:
    hosts(value)


def _compile_cache(name: str, value: str) -> None:
    # A password may come here (never in the pins): checked without it, hidden in logs.
    parts = urlsplit(value)
    bare = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()
    problem = kinds.COMPILE_CACHE.problem(bare)
    if problem:
        raise VariableError(
            f"{name}={cut(value)}: {problem.removeprefix(shown(bare)).strip()}; "
            f"{kinds.COMPILE_CACHE.fix_for(bare)}"
        )


def _progress(name: str, value: str) -> None:
    if value not in progress.MODES:
        raise VariableError(
            f"{name}={cut(value)}: unknown progress; use progress=auto, progress=plain or "
            "progress=quiet"
        )


def _any(name: str, value: str) -> None:
    """A value that only an action can check (a path, a commit)."""


@dataclass(frozen=True)
class Variable:
    """A command-line variable: what it does, and what can be checked of its value
    without reading any file (raises VariableError)."""

    doc: str
    check: Callable[[str, str], object] = _any


# Every variable a doit command takes, name -> what it does. One line per variable:
# one not listed here is refused with a suggestion, never silently ignored.
VARIABLES: dict[str, Variable] = {
    "pins": Variable("the pins file; default pins.toml, or the profile's"),
    "arch": Variable("the archs to build for, e.g. gfx942,gfx950; default [build].archs", _arch),
    "locked": Variable("1 refuses anything unlocked, for CI", flag),
    "hermetic": Variable(
        "0 builds every stage with the network, its closure locked or not (default 1: a stage "
        "with no closure locked is refused)",
        flag,
    ),
    "closures": Variable(
        "1 makes lock build each stage with the network and record what it fetched", flag
    ),
    "network": Variable("docker build --network; default $VERL_GRAPH_NETWORK"),
    "profile": Variable("demo (or demo702) builds an offline demo profile", _profile),
    "format": Variable(
        "text or json, for plan, patches, preflight and audit; svg, mermaid or dot for graph",
        _any_format,
    ),
    "out": Variable("where graph writes; default .build/graph.svg (svg), else stdout"),
    "jobs": Variable("the builders the plan prices the build on (as doit -n); 2", _count),
    "to": Variable("the commit or tag bump:<source> moves to"),
    "force": Variable("1 lets a bump write despite a conflicting patch", flag),
    "dry": Variable("1 makes a bump write nothing", flag),
    "dockerfile": Variable("a plain Dockerfile: for audit to check, or compare to set beside"),
    "recipe": Variable(
        "the recipe whose docker/differences.toml entries explain compare's dockerfile=, "
        "e.g. Dockerfile.rocm; default its file name, or the one whose entries match it"
    ),
    "check": Variable("1 makes render only check that the docs are fresh", flag),
    "commit_tag": Variable("the manifest's training_docker_version (verl's GIT_COMMIT_TAG); DEV"),
    "cache": Variable(
        "the registry stage images are shared through; default [cache].registry", _registry
    ),
    "cache_required": Variable("1 fails the run when the cache does not answer, for CI", flag),
    "push": Variable("1 pushes the friendly tag to the cache too", flag),
    "builders": Variable(
        "Docker hosts that build stages at once (with doit -n N and cache=), comma-separated",
        _hosts,
    ),
    "builder": Variable("the buildx builder to build on (docker buildx build --builder)"),
    "image": Variable("the image verify checks against the pins, e.g. verl-rocm:gfx942"),
    "stage": Variable("the stage verify builds again without cache and compares, e.g. vllm"),
    "progress": Variable(
        "auto (a live view in a terminal, else a line per event), plain (and every build's "
        "output) or quiet (the summary and errors)",
        _progress,
    ),
    "compile_cache": Variable(
        "ccache's shared remote storage, e.g. redis://host:6379; default [build].compile_cache",
        _compile_cache,
    ),
    "trace": Variable(
        "where a build writes its timeline (Chrome trace-event JSON, for Perfetto); "
        "default trace.json beside run.json"
    ),
    "wait": Variable(
        "seconds a build waits for another run's build of the same stage; default no end", seconds
    ),
}


def command_line(argv: Sequence[str]) -> dict[str, str]:
    """The variables of the doit command line ``argv`` (``doit plan arch=gfx942``:
    ``{"arch": "gfx942"}``), as doit read them."""
    # doit's public get_var(name) cannot list what was given that we do not know, so the
    # names come from argv by doit's own rule (a word not starting with - that holds =),
    # and each value from doit: a word doit did not take as a variable is not one.
    names = [word.split("=", 1)[0] for word in argv if not word.startswith("-") and "=" in word]
    values = {name: doit.get_var(name) for name in names}
    return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True)
class Variables:
    """The command line's variables, all known and checked."""

    given: Mapping[str, str]

    @classmethod
    def checked(
        cls, given: Mapping[str, str], environ: Mapping[str, str] = os.environ
    ) -> Variables:
        for name, value in sorted(given.items()):
            known = VARIABLES.get(name)
            if known is None:
                raise VariableError(_unknown(name, value))
            known.check(name, value)
        if environ.get(COMPILE_CACHE_ENV) and "compile_cache" not in given:
            _compile_cache(COMPILE_CACHE_ENV, environ[COMPILE_CACHE_ENV])
        return cls(dict(given))

    def text(self, name: str, default: str = "") -> str:
        return self.given.get(_known(name), default)

    def flag(self, name: str, default: bool = False) -> bool:
        return flag(name, self.given.get(_known(name), "1" if default else "0"))


def _known(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"variable {name!r} is read but not in variables.VARIABLES")  # a bug
    return name


def _unknown(name: str, value: str) -> str:
    close = closest(name, sorted(VARIABLES))
    hint = f"did you mean {close}= ({VARIABLES[close].doc})? " if close else ""
    return (
        f"{cut(name)}={cut(value)}: unknown variable; "
        f"{hint}known variables: {', '.join(sorted(VARIABLES))}"
    )
