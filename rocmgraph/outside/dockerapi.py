"""The Docker engine's own API over its unix socket, for the questions every run asks:
is this stage image there, and what is it made of. The CLI answers them too, but costs a
process start (a Go binary: 20 to 40 ms) per question. And the one change every run makes,
the tag of its image's friendly name, and the one file it reads from that image (its SBOM),
from a container that is made and removed but never started (a start costs a third of a
second).

One image is asked at a time (``GET /images/{ref}/json``, about 1.5 ms; a run's stages
side by side), not the list of all (``/images/json``): the list's cost grows with every
image the engine holds (0.25 s for 480 images), a run's with the stages it asks about.

Only where the CLI itself would talk to that socket: DOCKER_HOST unset or unix://,
and no docker context chosen (DOCKER_CONTEXT, or a current context in the CLI's
config). Anywhere else, or when the socket does not answer as an engine, this
says None and the caller asks the CLI, which also words what is wrong.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import posixpath
import socket
import tarfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO
from urllib.parse import quote

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


class NoAnswer(Exception):
    """The socket is no engine that answers: the caller asks the CLI, which words why."""


def inspect(path: Path, ref: str, timeout: float = 30) -> dict[str, object] | None:
    """``docker image inspect ref``, as one question to the engine at ``path``: None when
    it holds no image ``ref``; raises NoAnswer when ``path`` is no engine that answers."""
    connection = _UnixConnection(path, timeout)
    try:
        return _inspect(connection, ref)
    finally:
        connection.close()


def inspect_many(
    path: Path, refs: Sequence[str], threads: int = 4, timeout: float = 30
) -> dict[str, dict[str, object] | None]:
    """``inspect`` of every ref of ``refs``, asked side by side: a question mostly waits for
    the engine, so ``threads`` connections, each kept for its share, answer 160 refs in half
    the time one does. Raises NoAnswer if any question got none."""
    found: dict[str, dict[str, object] | None] = {}
    failed: list[NoAnswer] = []

    def ask(share: Sequence[str]) -> None:
        connection = _UnixConnection(path, timeout)
        try:
            for ref in share:
                found[ref] = _inspect(connection, ref)
        except NoAnswer as exc:
            failed.append(exc)
        finally:
            connection.close()

    unique = list(dict.fromkeys(refs))
    workers = [
        threading.Thread(target=ask, args=(unique[n::threads],), daemon=True)
        for n in range(min(threads, len(unique)))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failed:
        raise failed[0]
    return found


def _inspect(connection: _UnixConnection, ref: str) -> dict[str, object] | None:
    """One ``GET /images/{ref}/json`` on ``connection`` (kept open for the next)."""
    try:
        connection.request("GET", f"/images/{quote(ref, safe='')}/json")
        response = connection.getresponse()
        found = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise NoAnswer(f"{connection.path}: {exc}") from None
    if not isinstance(found, dict):
        raise NoAnswer(f"{connection.path}: no engine's answer")
    if response.status in (400, 404) and "message" in found:  # no such image, or no such name
        return None
    if response.status != 200:
        raise NoAnswer(f"{connection.path}: {response.status} {found.get('message', '')}")
    return found


def tag(path: Path, ref: str, alias: str, timeout: float = 30) -> None:
    """``docker tag ref alias``, as one question to the engine at ``path``. Raises NoAnswer
    for any answer but done (no such image included): the caller asks the CLI, whose error
    words it."""
    repo, _, name = alias.rpartition(":")
    if not repo or "/" in name:  # no tag, or the colon of a registry's port
        repo, name = alias, "latest"
    query = f"repo={quote(repo, safe='')}&tag={quote(name, safe='')}"
    connection = _UnixConnection(path, timeout)
    try:
        _ask(connection, "POST", f"/images/{quote(ref, safe='')}/tag?{query}", None, 201)
    finally:
        connection.close()


def disk_usage(path: Path, timeout: float = 120) -> int:
    """The bytes of every image layer the engine at ``path`` holds (``docker system df``).
    Raises NoAnswer when ``path`` is no engine that answers."""
    connection = _UnixConnection(path, timeout)
    try:
        data = json.loads(_ask(connection, "GET", "/system/df", None, 200))
    except ValueError as exc:
        raise NoAnswer(f"{path}: {exc}") from None
    finally:
        connection.close()
    return int(data.get("LayersSize", 0))


LINKS_FOLLOWED = 8  # a symbolic link to a link …: as far as `cat` would go, give or take


def read_file(path: Path, ref: str, file: str, timeout: float = 30) -> str:
    """The text of ``file`` in the image ``ref``, as questions to the engine at ``path``: a
    container made (never started, reaching nothing), the file's archive (``docker cp``;
    a symbolic link's target's in turn, as ``cat`` follows it: /etc/os-release is one), the
    container removed. Raises NoAnswer for any answer but the file: the caller asks the
    CLI, whose error words what is wrong (no such image, no such file)."""
    connection = _UnixConnection(path, timeout)
    try:
        made = _ask(connection, "POST", "/containers/create",
                    {"Image": ref, "Cmd": ["true"], "NetworkDisabled": True}, 201)  # fmt: skip
        container = quote(str(json.loads(made)["Id"]), safe="")
        file = posixpath.normpath(posixpath.join("/", file))
        try:
            for _ in range(LINKS_FOLLOWED):
                archive = _ask(connection, "GET", f"/containers/{container}/archive?path="
                               f"{quote(file, safe='')}", None, 200)  # fmt: skip
                text, link = _entry(io.BytesIO(archive))
                if not link:
                    break
                file = posixpath.normpath(posixpath.join(posixpath.dirname(file), link))
        finally:
            _ask(connection, "DELETE", f"/containers/{container}?force=1", None, 204)
    except (KeyError, ValueError, TypeError) as exc:
        raise NoAnswer(f"{path}: {exc}") from None
    finally:
        connection.close()
    if text is None:
        raise NoAnswer(f"{path}: {file} in {ref} is not a file")
    return text


def archived_text(archive: IO[bytes]) -> str | None:
    """The text of the one file of a tar stream, as ``docker cp -L <container>:<file> -``
    gives it; None if it is no file (a folder), or no tar stream (the CLI's, when it
    failed: its error says why)."""
    return _entry(archive)[0]


def _entry(archive: IO[bytes]) -> tuple[str | None, str]:
    """The text of the first entry of a tar stream if it is a file, and where it points
    if it is a symbolic link ("": it is none)."""
    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            member = tar.next()
            if member is None:
                return None, ""
            if member.issym():
                return None, member.linkname
            found = tar.extractfile(member)
            return (found.read().decode("utf-8", "replace") if found is not None else None), ""
    except tarfile.TarError:
        return None, ""


def _ask(connection: _UnixConnection, method: str, url: str, body: object, expected: int) -> bytes:
    """One question on ``connection`` (kept open for the next); its answer's body, or
    NoAnswer when the status is not ``expected``."""
    try:
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        connection.request(method, url, body=data, headers=headers)
        response = connection.getresponse()
        answer = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise NoAnswer(f"{connection.path}: {exc}") from None
    if response.status != expected:
        raise NoAnswer(f"{connection.path}: {method} {url}: {response.status}")
    return answer
