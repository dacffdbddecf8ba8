"""Real servers on 127.0.0.1 for tests: HTTP with scripted misbehaviour, and git upstreams."""

from __future__ import annotations

import gzip
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

Handler = http.server.BaseHTTPRequestHandler


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] | None = None
    drop_after: int | None = None  # send this many bytes of the body, then hang up
    delay: float = 0.0  # seconds before answering
    failures: int = 0  # answer the first N requests by dropping the connection
    hits: int = 0


class _QuietServer(http.server.ThreadingHTTPServer):
    """A client that hangs up before its answer ends (a fetch that gave up, then retried)
    is the client's business: no traceback on stderr, where tests read a run's warnings."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Served:
    """An HTTP server on 127.0.0.1, in a thread, for the time of a ``with`` block."""

    def __init__(self, handler: type[Handler]) -> None:
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class LoopbackServer(_Served):
    """An HTTP server on 127.0.0.1: scripted routes, and a static directory for the rest."""

    def __init__(self, root: Path | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.root = root
        server = self

        class _Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(server.root or "/nonexistent"), **kwargs)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                route = server.routes.get(self.path)
                if route is None:
                    super().do_GET()
                    return
                server.serve(self, route)

        super().__init__(_Handler)

    def serve(self, handler: Handler, route: Route) -> None:
        route.hits += 1
        if route.delay:
            time.sleep(route.delay)
        if route.hits <= route.failures:
            handler.close_connection = True
            return
        handler.send_response(route.status)
        for name, value in (route.headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(route.body)))
        handler.end_headers()
        if route.drop_after is not None:
            handler.wfile.write(route.body[: route.drop_after])
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.wfile.write(route.body)


def closed_url() -> str:
    """An http://127.0.0.1 URL where nothing listens (a server's port, once it is gone)."""
    with LoopbackServer() as server:
        return server.url


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_repo(path: Path, files: dict[str, str], branch: str = "main") -> str:
    """A new git repository with one commit of ``files``; returns the commit id."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", f"--initial-branch={branch}")
    git(path, "config", "user.email", "upstream@example.org")
    git(path, "config", "user.name", "Upstream")
    return commit(path, files, "initial")


def commit(path: Path, files: Mapping[str, str | None], message: str) -> str:
    """Write (or, for None, delete) ``files`` and commit; returns the commit id."""
    for name, text in files.items():
        target = path / name
        if text is None:
            git(path, "rm", "--quiet", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        git(path, "add", name)
    git(path, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(path, "rev-parse", "HEAD")


def serve_bare(repo: Path, root: Path, name: str) -> Path:
    """A bare copy of ``repo`` under ``root`` that a static HTTP server can serve (dumb git)."""
    bare = root / name
    git(root, "clone", "--quiet", "--bare", str(repo), str(bare))
    git(bare, "update-server-info")
    return bare


class Registry:
    """A real OCI registry (Debian's docker-registry) on 127.0.0.1, storing under ``root``."""

    def __init__(self, root: Path) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.root = root
        config = root / "config.yml"
        root.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
        )
        self.process = subprocess.Popen(
            ["docker-registry", "serve", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Registry:
        import requests

        for _ in range(100):
            try:
                requests.get(f"http://{self.host}/v2/", timeout=1).close()
                return self
            except requests.ConnectionError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("docker-registry did not start")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def push(self, repository: str, tag: str, config: bytes) -> str:
        """Push a one-config, no-layer image through the registry API; return its digest."""
        import hashlib
        import json

        import requests

        base = f"http://{self.host}/v2/{repository}"
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        started = requests.post(f"{base}/blobs/uploads/", timeout=10)
        location = started.headers["Location"]
        separator = "&" if "?" in location else "?"
        url = location if location.startswith("http") else f"http://{self.host}{location}"
        requests.put(f"{url}{separator}digest={config_digest}", data=config, timeout=10)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": config_digest,
                    "size": len(config),
                },
                "layers": [],
            }
        ).encode()
        response = requests.put(
            f"{base}/manifests/{tag}",
            data=manifest,
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
            timeout=10,
        )
        response.raise_for_status()
        return "sha256:" + hashlib.sha256(manifest).hexdigest()

    def push_index(self, repository: str, tag: str, children: dict[str, dict[str, str]]) -> None:
        """Push an OCI image index (what an engine with the containerd store pushes): each
        manifest of ``children`` (digest -> its platform) by its digest."""
        import json

        import requests

        base = f"http://{self.host}/v2/{repository}"
        accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest,
                    "size": int(
                        requests.head(
                            f"{base}/manifests/{digest}", headers=accept, timeout=10
                        ).headers["Content-Length"]
                    ),
                    "platform": platform,
                }
                for digest, platform in children.items()
            ],
        }
        requests.put(
            f"{base}/manifests/{tag}",
            data=json.dumps(index).encode(),
            headers={"Content-Type": "application/vnd.oci.image.index.v1+json"},
            timeout=10,
        ).raise_for_status()


class GitHttpServer(_Served):
    """Smart HTTP git (``git http-backend``, as GitHub speaks it) for the repositories under
    ``root``, on 127.0.0.1. ``cut_pack`` sends half of each pack it serves and then hangs up
    (``stall`` instead: sends half and waits), so a fetch fails half way through."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cut_pack = False
        self.stall = 0.0  # seconds to wait after half a pack
        self.packs_served = 0
        server = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.backend(self, b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                server.backend(self, body)

        super().__init__(_Handler)

    def backend(self, handler: Handler, body: bytes) -> None:
        path, _, query = handler.path.partition("?")
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": handler.command,
            "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GIT_PROTOCOL": handler.headers.get("Git-Protocol", ""),
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        is_pack = handler.command == "POST" and b"PACK" in payload
        if is_pack:
            self.packs_served += 1
        if is_pack and (self.cut_pack or self.stall):
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            time.sleep(self.stall)
            handler.close_connection = True
            return
        handler.wfile.write(payload)


def many_files(count: int, size: int = 6000) -> dict[str, str]:
    """Files of random text: enough objects that git keeps a fetch as one pack (index-pack)."""
    import secrets

    return {f"data/{n:04}.txt": secrets.token_hex(size // 2) + "\n" for n in range(count)}


@contextmanager
def failing_upstream(kind: str, www: Path, repo: Path) -> Iterator[tuple[str, str]]:
    """``repo`` served from ``www`` by a server that fails half way through the pack; yields
    the URL and the reason the fetch names. ``cut``: smart HTTP hangs up; ``stalled``: smart
    HTTP goes quiet (the fetch's timeout ends it); ``dumb``: a static server hangs up."""
    www.mkdir(parents=True, exist_ok=True)
    bare = www / "up.git"
    if not bare.exists():
        git(www, "clone", "--quiet", "--bare", str(repo), str(bare))
    git(bare, "fetch", "--quiet", str(repo), "+refs/heads/*:refs/heads/*")
    dropped = "the connection was dropped during the transfer"
    if kind == "dumb":  # GitHub no longer speaks it; mirrors on plain web servers do
        git(bare, "repack", "-a", "-d", "--quiet")
        git(bare, "update-server-info")
        with LoopbackServer(www) as server:
            for pack in (bare / "objects" / "pack").glob("*.pack"):
                body = pack.read_bytes()
                route = Route(body, drop_after=len(body) // 2)
                server.routes[f"/up.git/objects/pack/{pack.name}"] = route
            yield f"{server.url}/up.git", dropped
        return
    with GitHttpServer(www) as smart:
        if kind == "cut":
            smart.cut_pack = True
        else:
            smart.stall = 30
        yield f"{smart.url}/up.git", dropped if kind == "cut" else "timed out"
