"""A small world for the fixed-input tests: upstream git repositories, a wheel index,
an apt key and a PyPI JSON API on 127.0.0.1, and a pins file that points at them."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit
from conftest import PINS
from servers import LoopbackServer, Route, closed_url, commit, git, make_repo

from rocmgraph import patches, pins

WHEELS = {
    "torch": ("2.12.0", "torch-2.12.0+rocm7.14.0.lw.git1a2b3c4d-cp312-cp312-linux_x86_64.whl"),
    "triton": ("3.7.0", "triton-3.7.0+rocm7.14.0.git0badcafe-cp312-cp312-linux_x86_64.whl"),
    "torchvision": (
        "0.27.0",
        "torchvision-0.27.0+rocm7.14.0.gitb919bd0c-cp312-cp312-linux_x86_64.whl",
    ),
    "torchaudio": (
        "2.12.0",
        "torchaudio-2.12.0+rocm7.14.0.gite3c6ee2b-cp312-cp312-linux_x86_64.whl",
    ),
    "apex": ("1.12.0a0", "apex-1.12.0a0+rocm7.14.0.git07c3ee53-cp312-cp312-linux_x86_64.whl"),
}
MEGATRON_JSON = "/pypi/megatron-core/json"  # PyPI's JSON API: the project's document
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\npretend\n-----END PGP PUBLIC KEY BLOCK-----\n"
DIGEST = "sha256:" + "ab" * 32


@dataclass
class World:
    root: Path
    server: LoopbackServer
    pins: Path
    repos: dict[str, Path]
    commits: dict[str, str]  # the full commit each source is pinned at (or resolves to)
    env: dict[str, str]

    def pins_text(self) -> str:
        return self.pins.read_text()


def wheel_bytes(name: str) -> bytes:
    return f"wheel {name}".encode() * 100


def zipped(files: dict[str, str]) -> bytes:
    """A zip archive (a wheel) of ``files``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _source_files(name: str, real: pins.Pins) -> dict[str, str]:
    """What the recipe reads of the source: the files its patches touch, its requirements
    files, its overlay's origins and a project in each of its subdirs."""
    source = real.sources[name]
    files = {"setup.py": f"# {name}\n"}
    for patch in source.patches:
        files.update(patches.preimage(patches.read_patch(patch)))
    for path in (*source.requirements, *source.overlay.values()):
        files.setdefault(path, f"# {path} of {name}\n")
    for folder in source.subdirs:
        if not any(path.startswith(f"{folder}/") for path in files):
            files[f"{folder}/setup.py"] = f"# {folder} of {name}\n"
    return files


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    real = pins.load(PINS)
    with LoopbackServer() as server:
        repos, commits = {}, {}
        document = tomlkit.parse(PINS.read_text())
        mirrors = tomlkit.table()
        for name, source in real.sources.items():
            repo = tmp_path / "upstream" / name
            first = make_repo(repo, _source_files(name, real), branch=source.branch)
            head = commit(repo, {"NEWS": f"{name} moves on\n"}, "later work")
            repos[name] = repo
            mirrors[source.repo] = f"file://{repo}"
            pinned = document["sources"][name]
            if len(source.commit) == 40:
                pinned["commit"] = commits[name] = first
            elif source.commit:  # short as published: lock records the full id
                pinned["commit"] = first[:9]
                commits[name] = first
            elif source.tag:
                git(repo, "tag", "-a", source.tag, "-m", "release", first)
                commits[name] = first
            else:  # unpinned upstream: lock takes the branch head
                commits[name] = head
        document["mirrors"] = mirrors
        page = []
        for name, (version, file) in WHEELS.items():
            quoted = file.replace("+", "%2B")
            server.routes[f"/rocm-rel-7.14/{quoted}"] = Route(wheel_bytes(name))
            page.append(f'<a href="{quoted}">{file}</a>')
            entry = document["wheels"][name]
            entry["index"] = f"{server.url}/rocm-rel-7.14/"
            entry["version"] = version
        server.routes["/rocm-rel-7.14/"] = Route("\n".join(page).encode())
        server.routes["/rocm.gpg.key"] = Route(KEY)
        document["rocm"]["key_url"] = f"{server.url}/rocm.gpg.key"
        document["rocm"]["packages"]["rocm"] = "7.14.0.70140-1"
        document["base"]["provides"] = tomlkit.array()
        document["base"]["digest"] = DIGEST
        document["python"]["sglang"]["ipython"] = "9.6.0"
        megatron = patches.preimage(patches.read_patch(real.python.patches["megatron-core"][0]))
        body = zipped(megatron)
        wheel_name = "megatron_core-0.18.0-py3-none-any.whl"
        server.routes[f"/files/{wheel_name}"] = Route(body)
        release = [
            {
                "filename": wheel_name,
                "url": f"{server.url}/files/{wheel_name}",
                "digests": {"sha256": hashlib.sha256(body).hexdigest()},
            }
        ]
        server.routes[MEGATRON_JSON] = Route(json.dumps({"releases": {"0.18.0": release}}).encode())
        pins_path = tmp_path / "pins.toml"
        pins_path.write_text(tomlkit.dumps(document))
        env = {"VERL_GRAPH_CACHE": str(tmp_path / "cache"), "VERL_GRAPH_PYPI": f"{server.url}/pypi"}
        yield World(tmp_path, server, pins_path, repos, commits, env)


def kernel_as_submodule(world: World, tmp_path: Path, kernel_url: str) -> str:
    """SGLang with sgl-kernel (which patches touch) as a submodule at ``kernel_url``, and a
    submodule no patch touches that nobody can fetch; returns the new commit, pinned."""
    repo = world.repos["sglang"]
    kernel = tmp_path / "sgl-kernel"
    files = {
        str(path.relative_to(repo / "sgl-kernel")): path.read_text()
        for path in (repo / "sgl-kernel").rglob("*")
        if path.is_file()
    }
    make_repo(kernel, files)
    git(repo, "rm", "-r", "--quiet", "sgl-kernel")
    git(repo, "submodule", "add", "--quiet", f"file://{kernel}", "sgl-kernel")
    git(repo, "submodule", "add", "--quiet", f"file://{kernel}", "3rdparty/flashinfer")
    git(repo, "config", "-f", ".gitmodules", "submodule.3rdparty/flashinfer.url",
        f"{closed_url()}/flashinfer.git")  # fmt: skip
    git(repo, "config", "-f", ".gitmodules", "submodule.sgl-kernel.url", kernel_url)
    git(repo, "add", ".gitmodules")
    moved = commit(repo, {}, "sgl-kernel and flashinfer as submodules")
    world.pins.write_text(world.pins_text().replace(world.commits["sglang"], moved))
    return moved
