"""The Docker engine's own API over its unix socket, for the question every run asks:
which images are tagged. The CLI answers it too, but costs a process start (a Go
binary: 20 to 40 ms), which is most of what a run that builds nothing spends waiting.

Only where the CLI itself would talk to that socket: DOCKER_HOST unset or unix://,
and no docker context chosen (DOCKER_CONTEXT, or a current context in the CLI's
config). Anywhere else, or when the socket does not answer as an engine, this
says None and the caller asks the CLI, which also words what is wrong.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SOCKET = Path("/var/run/docker.sock")


def local_socket(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The socket the docker CLI would use, if it is a local one; else None."""
    if environ.get("DOCKER_CONTEXT"):
        return None
    config = Path(environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
    try:
        current = json.loads(config.read_text(encoding="utf-8")).get("currentContext", "")
    except (OSError, ValueError, AttributeError):
        current = ""
    if current and current != "default":
        return None
    host = environ.get("DOCKER_HOST", "")
    if not host:
        return DEFAULT_SOCKET
    if host.startswith("unix://"):
        return Path(host.removeprefix("unix://"))
    return None  # tcp://, ssh://, npipe://: the CLI knows how


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


def image_tags(path: Path, timeout: float = 30) -> dict[str, str] | None:
    """Every tagged image, ``repo:tag`` -> image id, as ``docker image ls`` lists them;
    None if ``path`` is no engine that answers."""
    found = images(path, timeout)
    return None if found is None else {tag: image.id for tag, image in found.items()}


@dataclass(frozen=True)
class Image:
    id: str
    size: int  # bytes, its parents' layers included (``docker image ls``'s SIZE)


def images(path: Path, timeout: float = 30) -> dict[str, Image] | None:
    """Every tagged image, ``repo:tag`` -> its id and size, in one question to the engine;
    None if ``path`` is no engine that answers."""
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("GET", "/images/json")
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            return None
        listed = json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()
    if not isinstance(listed, list):
        return None
    return {
        tag: Image(str(image["Id"]), int(image.get("Size") or 0))
        for image in listed
        if isinstance(image, dict)
        for tag in image.get("RepoTags") or ()
        if tag != "<none>:<none>"
    }


def disk_usage(path: Path, timeout: float = 120) -> int:
    """The bytes of every image layer the engine at ``path`` holds (``docker system df``)."""
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("GET", "/system/df")
        response = connection.getresponse()
        data = json.loads(response.read())
    finally:
        connection.close()
    return int(data.get("LayersSize", 0))
