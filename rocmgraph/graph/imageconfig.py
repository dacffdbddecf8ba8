"""An image's configuration as Dockerfile instructions, to carry it over a squashed copy.

A squashed stage starts ``FROM scratch``, with no configuration. These lines
give it back what the image it copies had: ENV, WORKDIR, USER, CMD,
ENTRYPOINT, EXPOSE, VOLUME, STOPSIGNAL, HEALTHCHECK, LABEL, ONBUILD, and SHELL
apart (the caller adds it last). Values are quoted for the Dockerfile: a ``$``
in a variable stays a ``$``. Pure: the engine inspects and appends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Changes:
    instructions: tuple[str, ...]  # for `docker import --change`
    shell: tuple[str, ...] | None  # for a SHELL line after it (None: the default shell)


def changes(config: Mapping[str, object], drop_env: Sequence[str] = ()) -> Changes:
    """The instructions that give an image ``config`` (``docker image inspect``'s
    ``.Config``), leaving out the variables named in ``drop_env``."""
    found: list[str] = []
    for entry in _strings(config.get("Env")):
        name, _, value = entry.partition("=")
        if name not in drop_env:
            found.append(f"ENV {name}={_quoted(value)}")
    for instruction, key in (("WORKDIR", "WorkingDir"), ("USER", "User"),
                             ("STOPSIGNAL", "StopSignal")):  # fmt: skip
        if config.get(key):
            found.append(f"{instruction} {config[key]}")
    for instruction, key in (("ENTRYPOINT", "Entrypoint"), ("CMD", "Cmd")):
        if config.get(key) is not None:
            found.append(f"{instruction} {json.dumps(config[key])}")
    found += [f"EXPOSE {port}" for port in sorted(_table(config.get("ExposedPorts")))]
    volumes = sorted(_table(config.get("Volumes")))
    if volumes:
        found.append(f"VOLUME {json.dumps(volumes)}")
    if config.get("Healthcheck"):
        found.append(healthcheck(_table(config["Healthcheck"])))
    found += [f"ONBUILD {trigger}" for trigger in _strings(config.get("OnBuild"))]
    found += [
        f"LABEL {_quoted(key)}={_quoted(str(value))}"
        for key, value in sorted(_table(config.get("Labels")).items())
    ]
    shell = _strings(config.get("Shell"))
    return Changes(tuple(found), tuple(shell) if shell else None)


def lines(config: Mapping[str, object], drop_env: Sequence[str] = ()) -> list[str]:
    """The Dockerfile lines that give an image ``config``, its SHELL last."""
    wanted = changes(config, drop_env)
    shell = [] if wanted.shell is None else [f"SHELL {json.dumps(list(wanted.shell))}"]
    return [*wanted.instructions, *shell]


def healthcheck(check: Mapping[str, object]) -> str:
    """``HEALTHCHECK [--interval=...] CMD ...`` (or ``NONE``) from the inspected form."""
    test = _strings(check.get("Test"))
    if not test or test[0] == "NONE":
        return "HEALTHCHECK NONE"
    options = [
        f"--{flag}={value // 1_000_000}ms"
        for flag, key in (("interval", "Interval"), ("timeout", "Timeout"),
                          ("start-period", "StartPeriod"), ("start-interval", "StartInterval"))
        if isinstance(value := check.get(key), int) and value
    ]  # fmt: skip
    if check.get("Retries"):
        options.append(f"--retries={check['Retries']}")
    command = json.dumps(test[1:]) if test[0] == "CMD" else " ".join(test[1:])
    return " ".join(["HEALTHCHECK", *options, "CMD", command])


def _quoted(text: str) -> str:
    """``text`` in double quotes as a Dockerfile reads it back: backslash, quote and dollar
    escaped, nothing expanded."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _strings(value: object) -> list[str]:
    """A list of strings of the inspected config; anything else is none."""
    return [str(item) for item in value] if isinstance(value, list) else []


def _table(value: object) -> dict[str, object]:
    """A table of the inspected config (``{"8080/tcp": {}}``); anything else is empty."""
    return {str(key): item for key, item in value.items()} if isinstance(value, dict) else {}
