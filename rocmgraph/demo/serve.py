"""The demo's servers on 127.0.0.1: its files over HTTP, and an OCI registry."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from pathlib import Path
from typing import Any

from rocmgraph.errors import EngineError, FetchError
from rocmgraph.outside import proc
from rocmgraph.outside.http import Http


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
            raise EngineError(
                f"demo: cannot serve on 127.0.0.1:{port} ({exc.strerror}); "
                "is another demo build running?"
            ) from None
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class Registry:
    """Debian's docker-registry, storing under ``root``."""

    def __init__(self, root: Path, port: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{port}\n"
        )
        self.url = f"http://127.0.0.1:{port}/v2/"
        try:
            self.process = proc.spawn(
                ["docker-registry", "serve", str(config)], log=root / "registry.log"
            )
        except proc.CommandMissing:
            raise EngineError(
                "demo: docker-registry is not installed (apt-get install docker-registry)"
            ) from None
        self._wait(port)

    def _wait(self, port: int) -> None:
        http = Http(timeout=1, attempts=1)
        for _ in range(200):
            if self.process.poll() is not None:
                raise EngineError(
                    f"demo: the registry on 127.0.0.1:{port} did not start (port busy?)"
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
