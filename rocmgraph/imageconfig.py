"""An image's configuration as Dockerfile instructions, to carry it over a flattened copy.

``docker import`` makes an image from a filesystem with no configuration; its
``--change`` takes the instructions that set one (ENV, WORKDIR, USER, CMD,
ENTRYPOINT, EXPOSE, VOLUME, STOPSIGNAL, HEALTHCHECK, LABEL, ONBUILD). SHELL is
not among them: it comes back in a second step, a build of one SHELL line, which
adds no layer. Pure: the engine inspects and applies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Changes:
    instructions: tuple[str, ...]  # for `docker import --change`
    shell: tuple[str, ...] | None  # for a SHELL line after it (None: the default shell)


def changes(config: Mapping[str, Any], drop_env: Sequence[str] = ()) -> Changes:
    """The instructions that give an image ``config`` (``docker image inspect``'s
    ``.Config``), leaving out the variables named in ``drop_env``."""
    found: list[str] = []
    for entry in config.get("Env") or []:
        name, _, value = entry.partition("=")
        if name not in drop_env:
            found.append(f"ENV {name}={json.dumps(value)}")
    for instruction, key in (("WORKDIR", "WorkingDir"), ("USER", "User"),
                             ("STOPSIGNAL", "StopSignal")):  # fmt: skip
        if config.get(key):
            found.append(f"{instruction} {config[key]}")
    for instruction, key in (("ENTRYPOINT", "Entrypoint"), ("CMD", "Cmd")):
        if config.get(key) is not None:
            found.append(f"{instruction} {json.dumps(config[key])}")
    found += [f"EXPOSE {port}" for port in sorted(config.get("ExposedPorts") or {})]
    volumes = sorted(config.get("Volumes") or {})
    if volumes:
        found.append(f"VOLUME {json.dumps(volumes)}")
    if config.get("Healthcheck"):
        found.append(healthcheck(config["Healthcheck"]))
    found += [f"ONBUILD {trigger}" for trigger in config.get("OnBuild") or []]
    found += [
        f"LABEL {json.dumps(key)}={json.dumps(value)}"
        for key, value in sorted((config.get("Labels") or {}).items())
    ]
    shell = config.get("Shell")
    return Changes(tuple(found), tuple(shell) if shell else None)


def healthcheck(check: Mapping[str, Any]) -> str:
    """``HEALTHCHECK [--interval=...] CMD ...`` (or ``NONE``) from the inspected form."""
    test = list(check.get("Test") or [])
    if not test or test[0] == "NONE":
        return "HEALTHCHECK NONE"
    options = [
        f"--{flag}={check[key] // 1_000_000}ms"
        for flag, key in (("interval", "Interval"), ("timeout", "Timeout"),
                          ("start-period", "StartPeriod"), ("start-interval", "StartInterval"))
        if check.get(key)
    ]  # fmt: skip
    if check.get("Retries"):
        options.append(f"--retries={check['Retries']}")
    command = json.dumps(test[1:]) if test[0] == "CMD" else " ".join(test[1:])
    return " ".join(["HEALTHCHECK", *options, "CMD", command])
