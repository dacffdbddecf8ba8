"""A small world for the fixed-input tests: upstream git repositories, a wheel index, apt
keys, a PyPI JSON API and a registry's manifest on 127.0.0.1, and a pins file that points at
them. A world is made from a real profile (pins.toml, pins-rocm702.toml): what it serves
follows that profile's pins."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import tomli
import tomlkit
from conftest import PINS, ROOT, edit_toml, run_doit
from packaging.utils import canonicalize_name
from servers import LoopbackServer, Route, closed_url, commit, git, make_repo

import stages
from rocmgraph.building import context
from rocmgraph.config import pins
from rocmgraph.config.pins import PinPath
from rocmgraph.demo import patchimages
from rocmgraph.fetch import apt
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.registry import Reference
from rocmgraph.trees import patches

PINS_702 = ROOT / "pins-rocm702.toml"
# pins.toml names its wheels by version only (repo.radeon.com's 7.14 file names are not
# known here): the world's index lists these files for them. A profile that names its
# files (pins-rocm702.toml) gets exactly those.
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
LISTED = {name: file for name, (_, file) in WHEELS.items()}  # what the index lists
MEGATRON_JSON = "/pypi/megatron-core/json"  # PyPI's JSON API: the project's document
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\npretend\n-----END PGP PUBLIC KEY BLOCK-----\n"
DIGEST = "sha256:" + "ab" * 32
# What the pins.toml world has pinned by hand, as its tests expect: the ROCm apt version and
# IPython's (so that its lock fills only what its upstreams serve), the base's digest (the
# base stays rocm/primus, not the world's registry), a base that provides none of the
# stages its tests build, and the version of each wheel its index lists.
BY_HAND_714: Mapping[PinPath, Any] = {
    ("rocm", "packages", "rocm"): "7.14.0.70140-1",
    ("base", "provides"): [],
    ("base", "digest"): DIGEST,
    ("python", "sglang", "ipython"): "9.6.0",
    **{("wheels", name, "version"): version for name, (version, _) in WHEELS.items()},
}


@dataclass(frozen=True)
class World:
    root: Path
    server: LoopbackServer
    pins: Path
    repos: dict[str, Path]
    commits: dict[str, str]  # the full commit each source is pinned at (or resolves to)
    env: dict[str, str]
    wheels: dict[str, str]  # the exact file the index lists for each wheel
    keys: dict[PinPath, bytes]  # each apt key's sha256 pin -> the key served for it
    versions: dict[PinPath, str]  # each unpinned package -> the version lock should find
    digest: str  # what the base image's tag points to, when the profile left it unpinned

    def pins_text(self) -> str:
        return self.pins.read_text()


def values_blanked(text: str) -> str:
    """A pins file's text with every string value emptied: what must stay when only values
    change (comments, spacing, order)."""
    return re.sub(r'= "[^"]*"', '= ""', text)


def locked_run(world: World, monkeypatch: pytest.MonkeyPatch, arch: str = "gfx942") -> Run:
    """The world locked, and a Run of its pins in this process (its environment set)."""
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    assert run_doit("lock", f"pins={world.pins}", env=world.env).returncode == 0
    return Run(Options(pins=str(world.pins), arch=arch), stages.graph())


def prepare(run: Run, stage: str, dest: Path) -> Path:
    """Stage ``stage``'s build context, fetched as a command fetches it (through this
    process's cache, as its environment names it)."""
    outside = Outside()
    return context.prepare(run, outside.engine, outside, stage, dest)


def wheel_bytes(name: str) -> bytes:
    return f"wheel {name}".encode() * 100


def key_bytes(name: str) -> bytes:
    """A stand-in apt key, its own for each repository."""
    return KEY if name == "rocm" else KEY.replace(b"pretend", f"pretend {name}".encode())


def zipped(files: dict[str, str]) -> bytes:
    """A zip archive (a wheel) of ``files``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


UPSTREAM = ROOT / "tests" / "fixtures" / "upstream"  # real files of the real upstreams


def _source_files(name: str, real: pins.Pins) -> dict[str, str]:
    """What the recipe and preflight read of the source: the real upstream's files where
    tests/fixtures/upstream has them, else a build of its own in each of its subdirs that
    is what its pins say (its distribution, version and arch variables); then the files its
    patches touch, its requirements files and its overlay's origins."""
    source = real.sources[name]
    files = _upstream(source, real) or {"setup.py": f"# {name}\n"}
    for patch in source.patches:
        for path, text in patchimages.preimage(patches.read_patch(patch)).items():
            files.setdefault(path, text)
    for path in (*source.requirements, *source.overlay.values()):
        files.setdefault(path, f"# {path} of {name}\n")
    for folder in source.subdirs:
        built = [files.get(_joined(folder, build), "") for build in ("setup.py", "pyproject.toml")]
        if not any(text.count("\n") > 1 for text in built):  # none, or a one-line stand-in
            files[_joined(folder, "setup.py")] = _setup(name, source)
            if source.version_env:  # its version from git, as setuptools_scm reads it
                files[_joined(folder, "pyproject.toml")] = (
                    f'[project]\nname = "{source.dist or name}"\ndynamic = ["version"]\n\n'
                    "[tool.setuptools_scm]\n"
                )
    if source.subtree and not source.subdirs:  # a folder given to another build
        files[f"{source.subtree}/__init__.py"] = f"# {source.subtree} of {name}\n"
    return files


def fixture_folder(entry: dict[str, str]) -> str:
    """Where a fixture's files are, under tests/fixtures/upstream: <owner>/<repo>, or
    <owner>/<repo>@<at> for a second commit of one repository."""
    owner_repo = entry["repo"].removeprefix("https://github.com/")
    return f"{owner_repo}@{entry['at']}" if "at" in entry else owner_repo


def _upstream(source: pins.GitSource, real: pins.Pins) -> dict[str, str]:
    """The committed files of the source's real repository, asking for the trees the
    profile gives its build (the tag of triton_kernels a profile pins)."""
    listed = tomli.loads((UPSTREAM / "SOURCES.toml").read_text())["file"]
    files = {
        entry["path"]: (UPSTREAM / fixture_folder(entry) / entry["path"]).read_text()
        for entry in listed
        # a commit pinned by its short id, as published, is the one it begins
        if entry["repo"] == source.repo
        and source.commit
        and entry["commit"].startswith(source.commit)
    }
    for path in source.inputs.values():
        tag = real.sources[path.split("/", 1)[0]].tag
        cmake = "cmake/external_projects/triton_kernels.cmake"
        if tag and cmake in files:
            files[cmake] = re.sub(
                r'(DEFAULT_TRITON_KERNELS_TAG) "[^"]*"', rf'\1 "{tag}"', files[cmake]
            )
    return files


def _setup(name: str, source: pins.GitSource) -> str:
    """A setup.py that builds what the pins say: the distribution, at the version, reading
    each arch variable split as the pins join it."""
    separator = {"semicolon": ";", "comma": ",", "space": " "}[source.arch_separator]
    reads = "".join(
        f'ARCHS_{i} = os.environ.get("{variable}", "").split("{separator}")\n'
        for i, variable in enumerate(source.arch_env)
    )
    version = "" if source.version_env else f', version="{source.version or "0.1"}"'
    return (
        f"# {name}\nimport os\n\nimport setuptools\n\n{reads}"
        f'setuptools.setup(name="{source.dist or name}"{version})\n'
    )


def _joined(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


def _served(server: LoopbackServer, url: str, body: bytes) -> str:
    """Serve ``body`` at ``url``'s path and query; return the world's URL for it."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    server.routes[path] = Route(body)
    return server.url + path


@contextmanager
def make_world(
    root: Path,
    profile: Path,
    by_hand: Mapping[PinPath, Any] | None = None,
    listed: Mapping[str, str] = LISTED,
) -> Iterator[World]:
    """The world of ``profile``, with ``by_hand`` pinned first (as a user would); its wheel
    index lists the file ``listed`` names for each wheel the profile names no file of."""
    text = profile.read_text()
    for path, value in (by_hand or {}).items():
        text = edit_toml(text, path, value)
    real, document = pins.loads(text, profile.name), tomlkit.parse(text)
    with LoopbackServer() as server:
        repos, commits = _upstreams(root / "upstream", real, document)
        wheels = _wheel_index(server, real, document, listed)
        keys = _apt_keys(server, real, document)
        versions = _pypi(server, real) | _apt_repos(server, real, document)
        digest = _registry(server, real, document)
        pins_path = root / profile.name
        pins_path.write_text(tomlkit.dumps(document))
        env = {
            "VERL_GRAPH_CACHE": str(root / "cache"),
            "VERL_GRAPH_PYPI": f"{server.url}/pypi",
            # No engine here: a command that asks one says so, and never reaches this host's.
            "VERL_GRAPH_DOCKER": str(root / "no-docker"),
        }
        yield World(root, server, pins_path, repos, commits, env, wheels, keys, versions, digest)


def _upstreams(
    root: Path, real: pins.Pins, document: Any
) -> tuple[dict[str, Path], dict[str, str]]:
    """A repository per upstream: the pinned commit, then one more; pinned as published
    (full, short, by tag or not at all), and reached through ``[mirrors]``. Sources of one
    repository (SGLang and its sgl-kernel folder) share it."""
    repos, commits = {}, {}
    mirrors = document.setdefault("mirrors", tomlkit.table())  # its comments stay
    by_repo: dict[str, list[str]] = {}
    for name, source in real.sources.items():  # the whole tree's source first, names it
        by_repo.setdefault(source.repo, []).append(name)
    for url, names in by_repo.items():
        names.sort(key=lambda name: bool(real.sources[name].subtree))
        files = {path: text for name in names for path, text in _source_files(name, real).items()}
        repo = root / names[0]
        first = make_repo(repo, files, branch=real.sources[names[0]].branch)
        head = commit(repo, {"NEWS": f"{names[0]} moves on\n"}, "later work")
        mirrors[url] = f"file://{repo}"
        for name in names:
            source, pinned = real.sources[name], document["sources"][name]
            if not _upstream(source, real):  # its own tree: none of the real one's fetches
                pinned.pop("skipped_fetches", None)
            repos[name] = repo
            if source.tag and name == names[0]:
                git(repo, "tag", "-a", source.tag, "-m", "release", first)
            if len(source.commit) == 40:
                pinned["commit"] = commits[name] = first
            elif source.commit:  # short as published: lock records the full id
                pinned["commit"] = first[: len(source.commit)]
                commits[name] = first
            elif source.tag:  # lock resolves the tag
                commits[name] = first
            else:  # unpinned upstream: lock takes the branch head
                commits[name] = head
    return repos, commits


def _wheel_index(
    server: LoopbackServer, real: pins.Pins, document: Any, listed: Mapping[str, str]
) -> dict[str, str]:
    """A flat index per folder of the profile's indexes, listing one build of each wheel."""
    wheels: dict[str, str] = {}
    pages: dict[str, list[str]] = {}
    for name, wheel in real.wheels.items():
        file = wheel.file or listed[name]
        folder = f"/{PurePosixPath(urlsplit(wheel.index).path).name}/"
        quoted = file.replace("+", "%2B")
        server.routes[f"{folder}{quoted}"] = Route(wheel_bytes(name))
        pages.setdefault(folder, []).append(f'<a href="{quoted}">{file}</a>')
        document["wheels"][name]["index"] = f"{server.url}{folder}"
        wheels[name] = file
    for folder, links in pages.items():
        server.routes[folder] = Route("\n".join(links).encode())
    return wheels


def _apt_keys(server: LoopbackServer, real: pins.Pins, document: Any) -> dict[PinPath, bytes]:
    """The ROCm key and each base repository's key, at their URLs' paths and queries."""
    keys: dict[PinPath, bytes] = {("rocm", "key_sha256"): key_bytes("rocm")}
    document["rocm"]["key_url"] = _served(server, real.rocm.key_url, key_bytes("rocm"))
    for name, repo in real.base.repos.items():
        keys["base", "repos", name, "key_sha256"] = key_bytes(name)
        document["base"]["repos"][name]["key_url"] = _served(server, repo.key_url, key_bytes(name))
    return keys


def _apt_repos(server: LoopbackServer, real: pins.Pins, document: Any) -> dict[PinPath, str]:
    """When a ROCm package is unpinned, the ROCm repositories' package indexes: the one
    named rocm (else the first) lists one version of each unpinned package, and every one
    lists a package of its own."""
    unpinned = [name for name, version in real.rocm.packages.items() if not version]
    if not unpinned:
        return {}
    main = "rocm" if "rocm" in real.rocm.repos else next(iter(real.rocm.repos))
    versions: dict[PinPath, str] = {}
    for name, repo in real.rocm.repos.items():
        # A description line that reads like a field is not one.
        stanzas = [f"Package: {name}-tools\nVersion: 1.0-1\nDescription: tools\n Version: 0\n"]
        if name == main:
            for major, package in enumerate(unpinned, 1):
                version = f"{real.rocm.version}.{major}-1"
                versions["rocm", "packages", package] = version
                stanzas.append(f"Package: {package}\nArchitecture: amd64\nVersion: {version}\n")
        body = gzip.compress("\n".join(stanzas).encode())
        for component in repo.components:
            _served(server, apt.index_url(repo, component), body)
        document["rocm"]["repos"][name]["url"] = server.url + urlsplit(repo.url).path
    return versions


def _pypi(server: LoopbackServer, real: pins.Pins) -> dict[PinPath, str]:
    """PyPI's document for each package a patch touches (a wheel of the patched files at the
    pinned version) and for each package left unpinned (a history of releases)."""
    for name, patch_files in real.python.patches.items():
        version = real.python.stack[name]
        files = {}
        for patch in patch_files:
            files.update(patchimages.preimage(patches.read_patch(patch)))
        body = zipped(files)
        wheel_name = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        server.routes[f"/files/{wheel_name}"] = Route(body)
        release = [
            {
                "filename": wheel_name,
                "url": f"{server.url}/files/{wheel_name}",
                "digests": {"sha256": hashlib.sha256(body).hexdigest()},
            }
        ]
        project = {"releases": {version: release}}
        server.routes[f"/pypi/{name}/json"] = Route(json.dumps(project).encode())
    versions = {}
    unpinned = [path for path, version in real.python.packages() if not version]
    for major, path in enumerate(unpinned, 1):  # each its own versions
        versions[path] = f"{major}.1.0"
        history = json.dumps(release_history(path[-1], major)).encode()
        server.routes[f"/pypi/{canonicalize_name(path[-1])}/json"] = Route(history)
    return versions


def release_history(name: str, major: int) -> dict[str, Any]:
    """A project's releases as PyPI lists them: ``<major>.1.0`` is the newest that pip
    installs on CPython 3.12 (an older one, a pre-release, a yanked release and one that
    needs a newer Python come with it)."""

    def release(version: str, **extra: Any) -> list[dict[str, Any]]:
        filename = f"{canonicalize_name(name).replace('-', '_')}-{version}-py3-none-any.whl"
        digest = hashlib.sha256(filename.encode()).hexdigest()
        return [{"filename": filename, "url": f"/files/{filename}",
                 "digests": {"sha256": digest}, "yanked": False, "requires_python": None,
                 **extra}]  # fmt: skip

    return {
        "info": {"name": name},
        "releases": {
            f"{major}.0.0": release(f"{major}.0.0"),
            f"{major}.1.0": release(f"{major}.1.0", requires_python=">=3.9"),
            f"{major}.2.0rc1": release(f"{major}.2.0rc1"),
            f"{major}.3.0": release(f"{major}.3.0", yanked=True),
            f"{major}.4.0": release(f"{major}.4.0", requires_python=">=3.13"),
        },
    }


def _registry(server: LoopbackServer, real: pins.Pins, document: Any) -> str:
    """An unpinned base image is taken from the world's registry, which names its digest
    (as a registry answers a manifest request); a pinned one is left as it is."""
    if real.base.digest:
        return ""
    ref = Reference.parse(real.base.image)
    digest = "sha256:" + hashlib.sha256(real.base.image.encode()).hexdigest()
    server.routes[f"/v2/{ref.repository}/manifests/{ref.tag}"] = Route(
        b"{}", headers={"Docker-Content-Digest": digest}
    )
    document["base"]["image"] = f"{urlsplit(server.url).netloc}/{ref.repository}:{ref.tag}"
    return digest


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """The world of pins.toml."""
    with make_world(tmp_path, PINS, BY_HAND_714) as made:
        yield made


# The versions verl's 7.0.2 recipe reads from git, unknown to its pins as published (the
# world's upstreams have tags of their own): what `doit lock` and the user make of them.
PUBLISHED_702: Mapping[PinPath, Any] = {
    ("sources", "vllm", "version"): "",
    ("sources", "aiter", "version"): "",
}


@pytest.fixture
def world_702(tmp_path: Path) -> Iterator[World]:
    """The world of pins-rocm702.toml, as published: its git versions not yet pinned."""
    with make_world(tmp_path, PINS_702, PUBLISHED_702) as made:
        yield made


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
    text = world.pins_text().replace(world.commits["sglang"], moved)  # SGLang's and the folder's
    if pins.loads(text).sources["sgl_kernel"].tree:  # locked: the folder's id moves too
        tree = git(repo, "rev-parse", f"{moved}:sgl-kernel")  # a submodule: the commit it pins
        text = edit_toml(text, ["sources", "sgl_kernel", "tree"], tree)
    world.pins.write_text(text)
    return moved
