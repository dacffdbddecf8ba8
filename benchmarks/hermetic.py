"""Benchmark: a cold build of the demo with the network against one with the network off.

In a fresh pins folder with images of their own (namespace verl-hermetic), BuildKit's cache
emptied before each cold build:

1. open: `doit build:image hermetic=0` cold, every stage with the network (today's build);
2. lock: `doit lock closures=1` (each stage built again with the network, every step anew);
3. sealed: the stage images removed, BuildKit's cache emptied again, the package index
   pointed at a closed port: `doit build:image locked=1` cold, every stage from its closure;
4. from nothing, the work of the README's main job: cold again, the index back, no lock file:
   `doit lock closures=1` (each stage built once with the network, under its key), then
   `doit build:image` (every stage sealed).

Printed: the seconds of each, the closures' files and bytes, what `doit audit image=`
traces of the image's packages, and the image's bytes by what traces them: a file as the
base image (pinned by digest) has it; a file a package owns (dpkg's lists, pip's RECORDs;
each package traced as above); a file of a pinned source's tree; the rest, named.

    python3 benchmarks/hermetic.py
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import stages
from rocmgraph.common.layout import ROOT, default_cache
from rocmgraph.config import pinsedit
from rocmgraph.config.pins import load
from rocmgraph.demo.machine import DOCKER
from rocmgraph.demo.profile import Demo, pins_path
from rocmgraph.fetch.store import Store
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import closure
from rocmgraph.outside.docker import DockerEngine

NAMESPACE = "verl-hermetic"


def doit(pins: Path, *args: str) -> tuple[float, str]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "doit", *args, "profile=demo", f"pins={pins}", "arch=gfx942"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 1) or (result.returncode and args[0] != "audit"):
        sys.exit(f"doit {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return time.monotonic() - started, result.stdout


def cold(namespace: str) -> None:
    """No image of ``namespace``, nothing in BuildKit's cache."""
    listed = subprocess.run([DOCKER, "images", "--format", "{{.Repository}}:{{.Tag}}"],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    mine = [ref for ref in listed if ref.startswith(f"{namespace}/") or ref.startswith(namespace)]
    if mine:
        subprocess.run([DOCKER, "image", "rm", *mine], capture_output=True, check=True)
    subprocess.run([DOCKER, "builder", "prune", "--all", "--force"], capture_output=True,
                   check=True)  # fmt: skip


OWNED = (
    "import importlib.metadata as m, os\n"
    "for d in m.distributions():\n"
    "    for f in d.files or ():\n"
    "        print(os.path.normpath(d.locate_file(f)))\n"
)


def bytes_traced(engine: DockerEngine, image: str, base: str, python: str) -> dict[str, int]:
    """The bytes of ``image``'s files, by what traces them."""
    files = {path: f for path, f in engine.files(image).items() if f.kind == "file"}
    below = engine.files(base)
    owned = set(engine.output(image, "sh", "-c", "cat /var/lib/dpkg/info/*.list").split("\n"))
    owned |= set(engine.output(image, python, "-c", OWNED).split("\n"))
    found = dict.fromkeys(("base image", "packages", "sources", "rest"), 0)
    rest: dict[str, int] = {}
    for path, file in files.items():
        if path in below and below[path].digest == file.digest:
            found["base image"] += file.size
        elif path in owned:
            found["packages"] += file.size
        elif path.startswith("/workspace/") and not path.startswith("/workspace/.manifest"):
            found["sources"] += file.size
        else:
            found["rest"] += file.size
            folder = "/".join(path.split("/")[:4])
            rest[folder] = rest.get(folder, 0) + file.size
    for folder, size in sorted(rest.items(), key=lambda item: -item[1])[:5]:
        print(f"  rest: {folder}: {size / 1e6:.2f} MB")
    return found


def main() -> None:
    prepared = subprocess.run(  # the demo's fixtures and pins, as a fresh clone lacks them
        [sys.executable, "-m", "doit", "demo", "profile=demo"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if prepared.returncode != 0:
        sys.exit(f"doit demo failed:\n{prepared.stdout}{prepared.stderr}")
    with tempfile.TemporaryDirectory(prefix="hermetic-") as tmp:
        pins = Path(tmp) / "pins.toml"
        pins.write_text(pins_path("demo").read_text())
        pinsedit.write(pins, [pinsedit.Change(("image", "name"), "verl-demo", NAMESPACE)])
        cold(NAMESPACE)
        open_seconds, _ = doit(pins, "build:image", "hermetic=0")
        lock_seconds, _ = doit(pins, "lock", "closures=1")
        _, audited = doit(pins, "audit", f"image={NAMESPACE}:gfx942")
        cold(NAMESPACE)
        closed = pinsedit.Change(("python", "index"), "", "http://127.0.0.1:9/simple")
        index = load(pins).python.index
        pinsedit.write(pins, [closed])  # the index gone: no key reads it
        sealed_seconds, _ = doit(pins, "build:image", "locked=1")
        lock = closure.load(closure.lock_path(pins))
        files = {item for entry in lock.closures.values() for item in entry.files}
        store = Store(default_cache())
        size = sum(store.path(item.sha256, item.file).stat().st_size for item in files)
        kinds = {kind: sum(1 for item in files if item.kind == kind) for kind in closure.KINDS}
        traced = re.search(r": (\d+ packages; traced: .*)", audited)
        print(f"cold build, network on:   {open_seconds:6.1f} s")
        print(f"lock closures=1:          {lock_seconds:6.1f} s")
        print(f"cold build, network off:  {sealed_seconds:6.1f} s")
        counted = f"{kinds['python']} python, {kinds['apt']} apt"
        print(f"closures: {len(lock.closures)} stages, {len(files)} files ({counted}), "
              f"{size / 1e6:.1f} MB, each by sha256")  # fmt: skip
        print(f"image packages: {traced[1] if traced else audited.strip()}")
        pinned = load(pins)
        engine = DockerEngine.connect(Path(tmp) / "logs")
        base = pinned.base.image + (f"@{pinned.base.digest}" if pinned.base.digest else "")
        demo = Demo(stages.graph())  # its registry serves the base image, which may not be here
        demo.start(Outside(logs=Path(tmp) / "logs"))
        try:
            found = bytes_traced(
                engine, f"{NAMESPACE}:gfx942", base, f"{pinned.python.venv}/bin/python"
            )
        finally:
            demo.stop()
        total = sum(found.values())
        shares = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in found.items())
        print(f"image bytes: {total / 1e6:.1f} MB in files: {shares}; "
              f"traced {100 * (total - found['rest']) / total:.1f}%")  # fmt: skip
        pinsedit.write(pins, [pinsedit.Change(("python", "index"), "", index)])
        first_lock, first_build = from_nothing(pins)
        print(f"from nothing: lock {first_lock:.1f} s + sealed build {first_build:.1f} s = "
              f"{first_lock + first_build:.1f} s")  # fmt: skip
        cold(NAMESPACE)


def from_nothing(pins: Path) -> tuple[float, float]:
    """The work of the README's main job on a fresh machine (no image, no cache, no closure
    locked), its two parts timed apart: the lock, then the sealed build."""
    cold(NAMESPACE)
    closure.lock_path(pins).unlink()
    lock_seconds, _ = doit(pins, "lock", "closures=1")
    build_seconds, _ = doit(pins, "build:image")
    return lock_seconds, build_seconds


if __name__ == "__main__":
    main()
