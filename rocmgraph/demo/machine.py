"""Another machine, for the fleet tests and benchmarks: a second Docker engine beside the
first, and the compile cache machines share (a redis).

It has its own data root, exec root and socket, and starts its own containerd;
it shares nothing with the first engine but the registries both reach on
127.0.0.1 (dockerd takes 127.0.0.0/8 registries as plain http by itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rocmgraph.common.engine import ImageStore
from rocmgraph.common.errors import EngineError
from rocmgraph.outside import proc

DOCKER = "/usr/bin/docker"  # docker.io's client, with docker-buildx beside it


@contextmanager
def second_engine(store: ImageStore = ImageStore.CLASSIC) -> Iterator[dict[str, str]]:
    """Start another dockerd, keeping its images in ``store``; yield the environment that
    points the docker CLI at it. Its flags are $DOCKERD_ARGS, as bootstrap.sh gives the
    first one."""
    # A short path: the exec root holds unix sockets, whose paths may not pass 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="vrg-b-", dir="/tmp"))
    socket = root / "docker.sock"
    flags = shlex.split(os.environ.get("DOCKERD_ARGS", "--bridge=none --iptables=false"))
    config = root / "daemon.json"
    snapshotter = store is ImageStore.CONTAINERD  # Docker 29's default, a feature before it
    config.write_text(json.dumps({"features": {"containerd-snapshotter": snapshotter}}))
    daemon = proc.spawn(
        ["dockerd", *flags, f"--config-file={config}", f"--data-root={root}/data",
         f"--exec-root={root}/exec", f"--host=unix://{socket}", f"--pidfile={root}/docker.pid"],
        log=root / "dockerd.log",
    )  # fmt: skip
    env = {"DOCKER_HOST": f"unix://{socket}"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                proc.run([DOCKER, "version"], env={**os.environ, **env}, timeout=10)
                break
            except proc.CommandFailed:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise EngineError(
                        f"the second dockerd did not start; see {root}/dockerd.log"
                    ) from None
                time.sleep(0.3)
        yield env
    finally:
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(root, ignore_errors=True)


def images(env: dict[str, str]) -> set[str]:
    """The tagged images of the engine ``env`` points at."""
    out = proc.run([DOCKER, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
                   env={**os.environ, **env}).stdout  # fmt: skip
    return {line for line in out.split() if not line.endswith(":<none>")}


@contextmanager
def compile_cache(folder: Path, port: int, password: str = "") -> Iterator[str]:
    """Debian's redis-server on 127.0.0.1:``port`` (its files in ``folder``): the shared
    compile cache, as ``compile_cache=`` takes it; with ``password``, one it requires (given
    in a file of its owner's alone: on redis-server's command line, `ps` would show it)."""
    if shutil.which("redis-server") is None:
        raise EngineError("redis-server is not installed; run bash bootstrap.sh")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "redis.conf"
    config.touch(mode=0o600)
    config.chmod(0o600)  # touch leaves the mode of a file there already
    config.write_text(f"requirepass {password}\n" if password else "")
    server = proc.spawn(
        ["redis-server", str(config), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(folder)],
        log=folder / "redis.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise EngineError(f"redis-server did not start; see {folder}/redis.log")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)
