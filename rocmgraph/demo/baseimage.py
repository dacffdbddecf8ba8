"""The demo's operating system: a Debian root filesystem from mmdebstrap, in a local registry.

It is rebuilt only when its own inputs change (suite, packages): the inputs'
hash names the local image. The 7.0.2-like profile starts from it as verl's
7.0.2 recipe starts from ubuntu:22.04, pinned by digest from the demo
registry; the demo's rocm/primus (primus.py) is built on it.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from rocmgraph.demo.published import published
from rocmgraph.outside import proc
from rocmgraph.outside.docker import DockerEngine

SUITE = "bookworm"
INCLUDE = ("ca-certificates", "git", "python3", "python3-venv")
LOCAL = "verl-demo/rootfs"


def inputs_key() -> str:
    return hashlib.sha256(repr((SUITE, INCLUDE, "apt")).encode()).hexdigest()[:12]


def local_ref() -> str:
    """The local image of the root filesystem, by the hash of its inputs."""
    return f"{LOCAL}:{inputs_key()}"


def rootfs(engine: DockerEngine, scratch: Path) -> str:
    """The local image of the root filesystem, made unless it is there; its reference."""
    local = local_ref()
    if not engine.image_exists(local):
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            tarball = Path(tmp) / "rootfs.tar"
            proc.run(["mmdebstrap", "--quiet", "--variant=apt", f"--include={','.join(INCLUDE)}",
                      SUITE, str(tarball)], timeout=1800)  # fmt: skip
            engine.import_rootfs(tarball, local, ['CMD ["/bin/bash"]'])
    return local


def ensure(engine: DockerEngine, ref: str, scratch: Path) -> str:
    """``ref`` (registry/name:tag) holds the demo's operating system; return its digest."""
    return published(engine, ref, inputs_key(), lambda: rootfs(engine, scratch))
