"""The demo's servers on 127.0.0.1: its files over HTTP, and an OCI registry."""

from __future__ import annotations

import functools
import http.server
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rocmgraph.common.errors import EngineError, FetchError
from rocmgraph.outside import ports, proc
from rocmgraph.outside.http import Http


def taken(port: int, why: str) -> EngineError:
    """``port`` is taken by something that is no demo build: a demo build serves only while
    it holds the port's lock (turns.on_port), which the caller does."""
    holder = ports.listener(port) or "a process this user cannot see"
    return EngineError(
        f"demo: cannot serve on 127.0.0.1:{port} ({why}); {holder} holds it and is no demo "
        "build: stop it (the demo's pins name this port, so the demo cannot move)"
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class Files:
    """``www`` over HTTP (git's dumb protocol included), in a thread of this process."""

    def __init__(self, www: Path, port: int) -> None:
        handler = functools.partial(_Quiet, directory=str(www))
        try:
            self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as exc:
            raise taken(port, exc.strerror or "cannot bind it") from None
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class Registry:
    """Debian's docker-registry, storing under ``root``.

    It runs as a process of its own, so a run killed with SIGKILL would leave it serving
    and its port taken. Its pid and its owner's (this process) are kept in
    ``registry.pid``: the next start stops a registry whose owner is dead, and names the
    owner when it still runs."""

    def __init__(self, root: Path, port: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.pidfile = root / "registry.pid"
        self._sweep(port)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{port}\n"
        )
        self.url = f"http://127.0.0.1:{port}/v2/"
        try:
            self.log = root / "registry.log"
            self.process = proc.spawn(["docker-registry", "serve", str(config)], log=self.log)
        except proc.CommandMissing:
            raise EngineError(
                "demo: docker-registry is not installed (apt-get install docker-registry)"
            ) from None
        self.pidfile.write_text(f"{self.process.pid} {os.getpid()}\n")
        self._wait(port)

    def _sweep(self, port: int) -> None:
        """Stop the registry a dead run left serving; refuse to touch a live run's."""
        try:
            registry, owner = (int(n) for n in self.pidfile.read_text().split())
        except (OSError, ValueError):
            return
        if owner != os.getpid() and ports.alive(owner):
            raise EngineError(
                f"demo: the registry on 127.0.0.1:{port} belongs to a demo build that is still "
                f"running (pid {owner}: {ports.command_line(owner)}); wait for it to end"
            )
        if ports.alive(registry) and "docker-registry" in ports.command_line(registry):
            os.kill(registry, signal.SIGTERM)
            for _ in range(100):
                if not ports.alive(registry):
                    break
                time.sleep(0.05)
        self.pidfile.unlink(missing_ok=True)

    def _wait(self, port: int) -> None:
        http = Http(timeout=1, attempts=1)
        for _ in range(200):
            if self.process.poll() is not None:
                self.pidfile.unlink(missing_ok=True)
                if ports.listener(port):
                    raise taken(port, "the registry did not start")
                raise EngineError(
                    f"demo: the registry on 127.0.0.1:{port} did not start (see {self.log})"
                )
            try:
                http.get(self.url)
                return
            except FetchError:
                time.sleep(0.05)
        self.stop()
        raise EngineError(f"demo: the registry on 127.0.0.1:{port} did not answer")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.pidfile.unlink(missing_ok=True)
