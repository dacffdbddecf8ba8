"""Build the demo's upstreams on disk: git repositories, wheels, a package index, an apt repo.

Everything lands under ``<root>/www``, which the demo server serves as is:
- ``git/<source>.git``: bare repositories (git's dumb HTTP protocol);
- ``rocm-rel-7.14/``: a repo.radeon.com-style flat wheel index, ``+`` as ``%2B``,
  two torch builds of one version side by side;
- ``simple/``, ``packages/``: a package index (the build tools, fetched from
  PyPI once on the host, and the demo's own small packages);
- ``pypi/<name>/json``: PyPI's JSON API for megatron-core;
- ``apt/7.14/``: ROCm packages whose files are kernel-like blobs for several
  archs under /opt/rocm (rocmfiles.py), in a repository signed with a generated
  key (``rocm.gpg.key``).
Beside ``www``, ``primus/`` is the build context of the demo's rocm/primus (primus.py).
The commits and wheels are deterministic: the demo pins files pin their ids and
hashes. Only the key is new on each machine; `doit lock` records its hash.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rocmgraph.common.fsutil import sha256_file
from rocmgraph.common.layout import ROOT
from rocmgraph.demo import primus, rocmfiles, upstreams
from rocmgraph.demo.wheelfile import make_wheel
from rocmgraph.outside import proc
from rocmgraph.outside.git import git

ROCM_VERSION = "7.14.0.70140-1"
# Build tools, fetched from PyPI on the host, once: setuptools_scm gives vLLM and SGLang
# their versions (packaging is its one dependency on Python 3.11).
TOOLS = ("setuptools==80.9.0", "wheel==0.45.1", "setuptools-scm==8.3.1", "packaging==25.0")
PRIMUS_TOOLS = ("setuptools-", "wheel-")  # the build tools rocm/primus's venv ships
_WHEN = "2026-01-01T00:00:00+00:00"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "verl-rocm-graph demo",
    "GIT_AUTHOR_EMAIL": "demo@verl-rocm-graph.invalid",
    "GIT_AUTHOR_DATE": _WHEN,
    "GIT_COMMITTER_NAME": "verl-rocm-graph demo",
    "GIT_COMMITTER_EMAIL": "demo@verl-rocm-graph.invalid",
    "GIT_COMMITTER_DATE": _WHEN,
    "GIT_CONFIG_GLOBAL": "/dev/null",
}

# name -> (version, the pinned file's git hash, a second build beside it)
ROCM_WHEELS = {
    "torch": ("2.12.0", "lw.git1a2b3c4d", "lw.git5e6f7a8b"),
    "triton": ("3.7.0", "git0badcafe", ""),
    "torchvision": ("0.27.0", "gitb919bd0c", ""),
    "torchaudio": ("2.12.0", "gite3c6ee2b", ""),
    "apex": ("1.12.0a0", "git07c3ee53", ""),
}
PACKAGES = {  # the demo's own packages on its package index: name -> (version, requires)
    "demo-tilelang": ("0.1.0", ()),
    "demo-xgrammar": ("0.1.32", ()),
    "demo-soundfile": ("0.13.1", ()),
}
NEWER = {"demo-xgrammar": "0.1.33"}  # a later release beside the pinned one, for a version bump


@dataclass(frozen=True)
class Built:
    commits: dict[str, list[str]]  # source -> its commits, oldest first
    wheels: dict[str, tuple[str, str]]  # name -> (pinned file, sha256)


def stamp() -> str:
    """What the fixtures are made of: this code and the patches they are cut from."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")) + sorted(
        (ROOT / "docker/patches").rglob("*.patch")
    ):
        digest.update(path.read_bytes())
    digest.update(repr((ROCM_VERSION, TOOLS)).encode())
    return digest.hexdigest()


def build(root: Path) -> Built:
    """Make the fixtures under ``root`` unless they are already made from the same code."""
    done = root / "built.json"
    if done.is_file():
        recorded = json.loads(done.read_text())
        if recorded.get("stamp") == stamp():
            return Built(recorded["commits"], {k: tuple(v) for k, v in recorded["wheels"].items()})
    shutil.rmtree(root, ignore_errors=True)
    www = root / "www"
    built = Built(_git(root, www / "git"), _rocm_wheels(www / "rocm-rel-7.14"))
    _package_index(root, www)
    _apt(root, www)
    # rocm/primus carries the same torch stack, with setuptools and wheel in its venv.
    tools = [w for w in sorted((www / "packages").glob("*.whl")) if w.name.startswith(PRIMUS_TOOLS)]
    pinned = [www / "rocm-rel-7.14" / file for file, _ in built.wheels.values()]
    primus.write_context(root / "primus", pinned + tools)
    done.write_text(
        json.dumps({"stamp": stamp(), "commits": built.commits, "wheels": built.wheels})
    )
    return built


# ---------------------------------------------------------------- git


def _git(root: Path, served: Path) -> dict[str, list[str]]:
    commits = {}
    for name, history in upstreams.histories().items():
        work = root / "work" / name
        work.mkdir(parents=True)
        git("init", "--quiet", "--initial-branch=main", str(work), env=_IDENTITY)
        ids = []
        for message, files in history:
            for path, text in files.items():
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_text(text, encoding="utf-8")
            git("add", "--all", cwd=work, env=_IDENTITY)
            git("commit", "--quiet", "--no-verify", "-m", message, cwd=work, env=_IDENTITY)
            ids.append(git("rev-parse", "HEAD", cwd=work).strip())
        if name in upstreams.TAGS:
            git("tag", upstreams.TAGS[name], ids[0], cwd=work, env=_IDENTITY)
        bare = served / f"{name}.git"
        git("clone", "--quiet", "--bare", str(work), str(bare), env=_IDENTITY)
        git("update-server-info", cwd=bare)
        commits[name] = ids
    return commits


# ---------------------------------------------------------------- wheels


def rocm_wheel(name: str, version: str, build: str) -> tuple[str, bytes]:
    full = f"{version}+rocm7.14.0.{build}"
    files = {f"{name}/__init__.py": f'"""{name} (demo ROCm build)."""\n\n__version__ = "{full}"\n'}
    return make_wheel(name, full, files, tag="cp311-cp311-linux_x86_64")


def _rocm_wheels(index: Path) -> dict[str, tuple[str, str]]:
    index.mkdir(parents=True)
    pinned, links = {}, []
    for name, (version, build, other) in ROCM_WHEELS.items():
        for variant in (build, other):
            if not variant:
                continue
            file, data = rocm_wheel(name, version, variant)
            (index / file).write_bytes(data)
            links.append(f'<a href="{file.replace("+", "%2B")}">{file}</a><br>')
            if variant == build:
                pinned[name] = (file, hashlib.sha256(data).hexdigest())
    (index / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return pinned


def _package_index(root: Path, www: Path) -> None:
    files = www / "packages"
    files.mkdir(parents=True)
    proc.run(["python3", "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
              "--dest", str(files), *TOOLS], timeout=600)  # fmt: skip
    releases = [(name, version, requires) for name, (version, requires) in PACKAGES.items()]
    releases += [(name, version, PACKAGES[name][1]) for name, version in NEWER.items()]
    for name, version, requires in releases:
        module = name.replace("-", "_")
        file, data = make_wheel(name, version, {f"{module}/__init__.py": f'"""{name}."""\n'},
                                requires=requires)  # fmt: skip
        (files / file).write_bytes(data)
    file, data = make_wheel("megatron-core", "0.18.0", upstreams.megatron_files())
    (files / file).write_bytes(data)
    release = [{"filename": file, "url": f"../../packages/{file}",
                "digests": {"sha256": hashlib.sha256(data).hexdigest()}}]  # fmt: skip
    api = www / "pypi" / "megatron-core"
    api.mkdir(parents=True)
    (api / "json").write_text(json.dumps({"releases": {"0.18.0": release}}))
    by_project: dict[str, list[Path]] = {}
    for wheel in sorted(files.glob("*.whl")):
        project = wheel.name.split("-", 1)[0].lower().replace("_", "-")
        by_project.setdefault(project, []).append(wheel)
    for project, wheels in by_project.items():
        page = www / "simple" / project / "index.html"
        page.parent.mkdir(parents=True)
        links = [
            f'<a href="../../packages/{w.name}#sha256={sha256_file(w)}">{w.name}</a><br>'
            for w in wheels
        ]
        page.write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")


# ---------------------------------------------------------------- apt


def _apt(root: Path, www: Path) -> None:
    repo = www / "apt" / "7.14"
    pool = repo / "pool" / "main"
    pool.mkdir(parents=True)
    stanzas = []
    packages: dict[str, dict[str, str | bytes]] = {
        package: {path: _rocm_file(package, path, size) for path, size in files.items()}
        for package, files in rocmfiles.kernel_files().items()
    }
    packages["amd-smi-lib"] = dict(rocmfiles.AMD_SMI)
    for package, files in packages.items():
        stanzas.append(_deb(root, pool, package, files, depends=""))
    stanzas.append(
        _deb(root, pool, "rocm", {}, depends=", ".join(f"{p} (= {ROCM_VERSION})" for p in packages))
    )
    index = repo / "dists" / "demo" / "main" / "binary-amd64" / "Packages"
    index.parent.mkdir(parents=True)
    index.write_text("\n".join(stanzas))
    data = index.read_bytes()
    release = repo / "dists" / "demo" / "Release"
    release.write_text(
        "Origin: verl-demo\nLabel: verl-demo\nSuite: demo\nCodename: demo\n"
        "Architectures: amd64\nComponents: main\nDate: Thu, 01 Jan 2026 00:00:00 UTC\n"
        f"SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data)} main/binary-amd64/Packages\n"
    )
    gnupg = root / "gnupg"
    gnupg.mkdir(mode=0o700)
    gpg = [
        "gpg",
        "--homedir",
        str(gnupg),
        "--batch",
        "--yes",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]
    try:
        uid = "verl-rocm-graph demo apt <demo@verl-rocm-graph.invalid>"
        proc.run([*gpg, "--quick-gen-key", uid, "rsa2048", "sign", "never"], timeout=120)
        proc.run(
            [*gpg, "--clearsign", "--output", str(release.with_name("InRelease")), str(release)]
        )
        key = proc.run([*gpg, "--armor", "--export"]).stdout
    finally:
        proc.run(["gpgconf", "--homedir", str(gnupg), "--kill", "all"])
    (www / "rocm.gpg.key").write_text(key)


def _rocm_file(package: str, path: str, size: int) -> str | bytes:
    if path == ".info/version":  # 7.14.0-70140, as apt's ROCm writes it
        return ROCM_VERSION.rsplit("-", 1)[0].replace(".70140", "-70140") + "\n"
    return rocmfiles.blob(package, path, size)


def _deb(root: Path, pool: Path, package: str, files: dict[str, str | bytes], depends: str) -> str:
    tree = root / "debs" / package
    for path, data in files.items():
        target = tree / "opt" / "rocm" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    control = (
        f"Package: {package}\nVersion: {ROCM_VERSION}\nArchitecture: amd64\n"
        "Maintainer: verl-rocm-graph demo <demo@verl-rocm-graph.invalid>\n"
        + (f"Depends: {depends}\n" if depends else "")
        + f"Description: {package} (demo): ROCm's files, kernels for {', '.join(rocmfiles.ARCHS)}\n"
    )
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(control)
    deb = pool / f"{package}_{ROCM_VERSION}_amd64.deb"
    proc.run(
        ["dpkg-deb", "--root-owner-group", "-Znone", "--build", str(tree), str(deb)], timeout=300
    )
    data = deb.read_bytes()
    relative = deb.relative_to(pool.parent.parent)
    return (
        f"{control}Filename: {relative}\nSize: {len(data)}\n"
        f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
    )
