"""SGLang's two ROCm builds at one commit, read two ways: the check's facts (treefacts and
preflight over the upstream files, the pins' overlay at sgl-kernel's home of that commit),
and what the setup scripts do when run, with stubs that record it (the second method).

``check_facts`` is pure over a ``Read``. ``run_facts`` executes each folder's setup script
(setup_rocm.py through the overlay; python/setup.py) in a python3 subprocess: setuptools,
setuptools_rust, torch and its cpp_extension are stubs that record the calls; every command
and download is recorded and refused (no network); ``os.environ`` records which variables are
read. An arch variable is one whose value reaches the compile flags; its split is how
"gfx942;gfx950" and "gfx942,gfx950" come out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from rocmgraph.config.pins import GitSource, Pins
from rocmgraph.trees import cmake, preflight, treefacts
from rocmgraph.trees.treefacts import Read, Split

# sgl-kernel's homes, oldest first: it moved to python/sglang/kernels/aot (#32648).
KERNEL_HOMES = ("sgl-kernel", "python/sglang/kernels/aot")
NO_CMAKE = "the ROCm build runs setup_rocm.py (setuptools), not CMakeLists.txt"
NO_HOME = "no setup_rocm.py in any home: " + ", ".join(KERNEL_HOMES)


@dataclass(frozen=True)
class Facts:
    """One source's build at one commit, as the check reads it."""

    source: str
    folder: str  # "" when the source's build files are not in the tree
    dist: str  # "" when nothing names it (then ``unread`` says why)
    version: str
    version_from: str  # treefacts.VersionFrom's value
    taken: tuple[str, ...] = ()  # fetches the ROCm build makes: "what ref (file:line)"
    not_taken: tuple[str, ...] = ()  # "what: why"
    unknown: tuple[str, ...] = ()  # conditions the check cannot decide, with fetches under
    arch: tuple[str, ...] = ()  # "VARIABLE: split (file:line)"
    requires: tuple[str, ...] = ()
    unread: str = ""
    version_env: tuple[str, ...] = ()  # variables that give a git-versioned build its version
    paths: tuple[str, ...] = ()  # "path (the pins' key, or the -r naming it)"

    def as_table(self, *left_out: str) -> dict[str, object]:
        """As an expected-facts file writes it: lists for tuples, ``left_out`` and the
        source's name and unread reason left out."""
        table = dataclasses.asdict(self)
        for key in ("source", "unread", *left_out):
            del table[key]
        return {key: list(v) if isinstance(v, tuple) else v for key, v in table.items()}


# ---------------------------------------------------------------- the check's facts


def kernel_home(read: Read) -> str:
    """The folder holding setup_rocm.py at this commit, or ""."""
    return next((home for home in KERNEL_HOMES if read(f"{home}/setup_rocm.py") is not None), "")


def at_home(source: GitSource, home: str) -> GitSource:
    """``source`` (pinned at sgl-kernel/) moved to ``home``: its folder and overlay."""
    old = source.subdirs[0]

    def moved(path: str) -> str:
        return home + path.removeprefix(old) if path.startswith(f"{old}/") else path

    overlay = {moved(target): moved(origin) for target, origin in source.overlay.items()}
    return dataclasses.replace(source, subtree=home, subdirs=(home,), overlay=overlay)


def overlaid(read: Read, overlay: Mapping[str, str]) -> Read:
    """The tree as the stage builds it: each overlay target read from its origin."""
    return lambda path: read(overlay.get(path, path))


def check_facts(pins: Pins, read: Read) -> tuple[Facts, Facts]:
    """The facts of sglang's python/ and of sgl-kernel at its home of ``read``'s commit."""
    sglang = pins.sources["sglang"]
    home = kernel_home(read)
    if not home:
        missing = Facts("sgl_kernel", "", "", "", "", unread=NO_HOME)
        return source_facts(pins, "sglang", sglang, read), missing
    kernel = at_home(pins.sources["sgl_kernel"], home)
    return (
        source_facts(pins, "sglang", sglang, read),
        source_facts(pins, "sgl_kernel", kernel, overlaid(read, kernel.overlay)),
    )


def source_facts(pins: Pins, name: str, source: GitSource, read: Read) -> Facts:
    folder = source.subdirs[0]
    origin = {target: f"{origin}" for target, origin in source.overlay.items()}
    dist = treefacts.dist(read, folder)
    if dist is None:
        return Facts(name, folder, "", "", "", unread="no [project] or setup() names it")
    facts = preflight.rocm_build(pins, source)
    fetches = preflight.build_fetches(read, folder, facts)
    taken = [f for f in fetches if not _given_or_skipped(source, f)]
    arch = treefacts.arch_reads(read, treefacts.join(folder, "setup.py"))
    arch += treefacts.cmake_arch_reads(read, folder)
    return Facts(
        name,
        folder,
        dist.name,
        dist.version,
        str(dist.version_from),
        tuple(_fetch(f, origin) for f in taken),
        tuple(_not_taken(read, folder, source, fetches)),
        tuple(r.upstream for r in preflight.undecided_rows(name, read, folder, facts)),
        tuple(f"{a.variable}: {a.split} ({_at(a.where, origin)})" for a in arch),
        tuple(_needed(n) for n in treefacts.build_requirements(read, folder)),
        version_env=dist.version_env,
        paths=path_facts(pins, name, source, read),
    )


def path_facts(pins: Pins, name: str, source: GitSource, read: Read) -> tuple[str, ...]:
    """The paths the pins name in the tree (preflight's path rows), ``source`` as read."""
    moved = dataclasses.replace(pins, sources={**pins.sources, name: source})
    return tuple(
        f"{row.upstream} ({row.pins})"
        for row in preflight.rows(moved, {name: read})
        if row.fact is preflight.Fact.PATH
    )


def _needed(need: treefacts.Needed) -> str:
    return need.text + (f" ({need.why})" if need.why else "")


def _given_or_skipped(source: GitSource, fetch: treefacts.Fetch) -> bool:
    return (fetch.unless in source.inputs and bool(fetch.unless)) or (
        fetch.what in source.skipped_fetches
    )


def _not_taken(
    read: Read, folder: str, source: GitSource, fetches: Sequence[treefacts.Fetch]
) -> list[str]:
    """The fetches the pins give or skip, and a CMake file's that the build never runs."""
    found = [f"{f.what}: given by {f.unless}" for f in fetches if f.unless in source.inputs]
    found += [f"{f.what}: {source.skipped_fetches[f.what]}" for f in fetches
              if f.what in source.skipped_fetches]  # fmt: skip
    if read(treefacts.join(folder, "CMakeLists.txt")) is not None and not treefacts.runs_cmake(
        read, folder
    ):
        evaluation = cmake.evaluate(read, folder, cmake.rocm(cmake.ROCM_ARCHS))
        found += [f"{f.name}: {NO_CMAKE}" for f in evaluation.fetches]
    return found


def _fetch(fetch: treefacts.Fetch, origin: Mapping[str, str]) -> str:
    return f"{fetch.what} {fetch.ref}".strip() + f" ({_at(fetch.where, origin)})"


def _at(where: treefacts.Where, origin: Mapping[str, str]) -> str:
    """file:line at the file the line is in: an overlay's origin, as preflight says it."""
    return f"{origin.get(where.file, where.file)}:{where.line}"


# ---------------------------------------------------------------- the second method

# Run by python3 -I in a scratch copy of the folder: argv is the script, the record's path,
# and whether setuptools_rust is importable. Nothing is compiled, fetched or run.
HARNESS = r"""
import json, os, runpy, subprocess, sys, types, urllib.request

script, out, build = sys.argv[1], sys.argv[2], sys.argv[4] == "build"
record = {"env": [], "commands": [], "setup": None, "extensions": [], "exit": None,
          "error": "", "scm": [], "build": ""}


class Environ(dict):
    def get(self, key, default=None):
        record["env"].append(key)
        return super().get(key, default)

    def __getitem__(self, key):
        record["env"].append(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        record["env"].append(key)
        return super().__contains__(key)


os.environ = Environ(os.environ)


def command(*args, **kwargs):
    argv = args[0] if args else kwargs.get("args", "")
    words = [str(a) for a in argv] if isinstance(argv, (list, tuple)) else str(argv).split()
    record["commands"].append(words)
    if build and words[:1] == ["cmake"]:
        return b""  # the build's own cmake: recorded, said to succeed, so the next is seen
    raise FileNotFoundError(2, "no command runs in the harness", str(argv))


for name in ("run", "call", "check_call", "check_output", "Popen", "getoutput",
             "getstatusoutput"):
    setattr(subprocess, name, command)
os.system = command


def download(url, *args, **kwargs):
    record["commands"].append(["urllib", str(getattr(url, "full_url", url))])
    raise OSError("no network in the harness")


urllib.request.urlopen = urllib.request.urlretrieve = download


def module(name, **attrs):
    made = types.ModuleType(name)
    made.__dict__.update(attrs)
    sys.modules[name] = made
    return made


def extension(kind):
    class Made:  # a class, as vLLM's CMakeExtension derives from setuptools' Extension
        def __init__(self, name, sources=(), **kwargs):
            args = kwargs.get("extra_compile_args") or {}
            flags = [f for v in (args.values() if isinstance(args, dict) else [args]) for f in v]
            macros = [list(m) for m in kwargs.get("define_macros", [])]
            record["extensions"].append({"kind": kind, "name": name, "sources": len(sources),
                                         "flags": [str(f) for f in flags], "macros": macros})
            self.name = name
    Made.__name__ = kind
    return Made


class build_ext:
    debug = False

    def __init__(self, extensions, temp):
        self.extensions, self.build_temp, self.build_lib = extensions, temp, temp

    def get_ext_fullpath(self, name):
        return os.path.join(self.build_lib, *name.split(".")) + ".so"


class BuildExtension:
    @classmethod
    def with_options(cls, **options):
        return cls


cpp = module("torch.utils.cpp_extension", BuildExtension=BuildExtension,
             CUDAExtension=extension("CUDAExtension"), CppExtension=extension("CppExtension"),
             ROCM_HOME="/opt/rocm", CUDA_HOME=None, IS_HIP_EXTENSION=True)
utils = module("torch.utils", cpp_extension=cpp)
module("torch", utils=utils, __version__="2.9.0+rocm7.0",
       version=types.SimpleNamespace(hip="7.0", cuda=None),
       cuda=types.SimpleNamespace(is_available=lambda: False))  # an image build: no GPU


def setup(**kwargs):
    rust = kwargs.get("rust_extensions") or []
    cmdclass = kwargs.get("cmdclass") or {}
    record["setup"] = {"name": kwargs.get("name"), "version": kwargs.get("version"),
                       "ext_modules": len(kwargs.get("ext_modules") or []),
                       "rust_extensions": [str(getattr(e, "name", e)) for e in rust],
                       "rust_optional": [bool(getattr(e, "optional", False)) for e in rust],
                       "cmdclass": {k: v.__name__ for k, v in cmdclass.items()}}
    if build and "build_ext" in cmdclass:  # the wheel's build_ext step, its commands recorded
        try:
            cmdclass["build_ext"](kwargs.get("ext_modules") or [], "build").build_extensions()
        except Exception as exc:
            record["build"] = f"{type(exc).__name__}: {exc}"


module("setuptools", setup=setup, find_packages=lambda *a, **k: [],
       Extension=extension("Extension"))
module("setuptools.command")
module("setuptools.command.build_ext", build_ext=build_ext)
if sys.argv[3] == "rust":
    rust_build = module("setuptools_rust.build", build_rust=type("build_rust", (), {}))
    module("setuptools_rust", build_rust=rust_build.build_rust, build=rust_build,
           # setuptools-rust keeps a target given as a name as {"": name}
           RustExtension=lambda target, **kwargs: types.SimpleNamespace(
               **{"optional": False, **kwargs, "name": target, "target": {"": target}}),
           Binding=types.SimpleNamespace(PyO3="PyO3", Exec="Exec"))
else:
    sys.modules["setuptools_rust"] = None


def get_version(**kwargs):
    # setuptools_scm's pretend variables: the one named for the distribution only where
    # it is named (dist_name=), as setuptools_scm reads them; no .git here, so no other.
    record["scm"].append(sorted(kwargs))
    name = kwargs.get("dist_name")
    keys = ["SETUPTOOLS_SCM_PRETEND_VERSION"]
    if name:
        keys.insert(0, "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + name.upper().replace("-", "_"))
    for key in keys:
        if os.environ.get(key):
            return os.environ.get(key)
    raise LookupError("setuptools-scm was unable to detect version (no .git)")


module("setuptools_scm", get_version=get_version)
sys.argv = [script, "bdist_wheel"]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exc:
    record["exit"] = exc.code if isinstance(exc.code, int) else 1
except Exception as exc:
    record["error"] = f"{type(exc).__name__}: {exc}"
with open(out, "w") as stream:
    json.dump(record, stream)
"""

PROBE = "gfx950"  # a value that is no default of any script read here
LISTS = {Split.SEMICOLON: "gfx942;gfx950", Split.COMMA: "gfx942,gfx950"}


@dataclass(frozen=True)
class Record:
    """One run of a setup script."""

    env: tuple[str, ...]  # variables read, in order, each once
    commands: tuple[tuple[str, ...], ...]
    setup: Mapping[str, object] | None  # setup()'s arguments, None if never reached
    flags: tuple[str, ...]  # every extension's compile flags
    exit: int | None
    error: str
    build: str = ""  # how build_ext stopped, when run and it did

    @property
    def result(self) -> str:
        if self.error:
            return self.error
        if self.exit:
            return f"exit {self.exit}"
        return "setup() reached" if self.setup is not None else "no setup() call"


def run_script(
    folder: Path, script: str, env: Mapping[str, str], rust: bool = True, build: bool = False
) -> Record:
    """``script`` run in ``folder`` under the harness, with only ``env`` and PATH set; with
    ``build``, setup() goes on into the cmdclass's build_ext, its cmake said to succeed."""
    with tempfile.TemporaryDirectory(prefix="setupfacts-") as scratch:
        harness, out = Path(scratch) / "harness.py", Path(scratch) / "record.json"
        harness.write_text(HARNESS)
        argv = [sys.executable, "-I", str(harness), script, str(out), "rust" if rust else "-",
                "build" if build else "-"]  # fmt: skip
        subprocess.run(argv, cwd=folder, env={"PATH": os.defpath, **env}, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        data = json.loads(out.read_text())
    flags = [f for ext in data["extensions"] for f in ext["flags"]]
    return Record(tuple(dict.fromkeys(data["env"])), tuple(map(tuple, data["commands"])),
                  data["setup"], tuple(flags), data["exit"], data["error"],
                  data["build"])  # fmt: skip


@dataclass(frozen=True)
class Observed:
    """What the second method finds for one source at one commit."""

    source: str
    folder: str
    dist: str
    version: str
    taken: tuple[str, ...]  # named as the check names them, without file:line
    arch: tuple[str, ...]  # "VARIABLE: split"
    result: str  # the run with no arch variable set, or "no setup script"
    env: tuple[str, ...]  # every variable the script reads
    flags: Mapping[str, str]  # "VARIABLE=value" -> what the run does then: its arch flags,
    # the version setup() gets, the fetches it makes; or its result
    says: str = ""  # setup()'s own name and version, where they differ from pyproject's
    # Read for vLLM only so far (None: not read, not compared):
    version_from: str = ""  # "git" when setup()'s version came from setuptools_scm
    version_env: tuple[str, ...] | None = None  # variables that alone give setup() a version
    requires: tuple[str, ...] | None = None
    paths: tuple[str, ...] | None = None
    build: str = ""  # what build_ext ran, where the run went on into it


def materialize(read: Read, paths: Sequence[str], overlay: Mapping[str, str], into: Path) -> None:
    """The tree's files, each overlay target written with its origin's text."""
    for path in [*paths, *overlay]:
        text = read(overlay.get(path, path))
        if text is not None:
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            (into / path).write_text(text)


def run_facts(pins: Pins, read: Read, paths: Sequence[str]) -> tuple[Observed, Observed | None]:
    """The second method for sglang's python/ and sgl-kernel at its home (None: none)."""
    home = kernel_home(read)
    kernel = at_home(pins.sources["sgl_kernel"], home) if home else None
    with tempfile.TemporaryDirectory(prefix="setupfacts-tree-") as scratch:
        root = Path(scratch)
        materialize(read, paths, kernel.overlay if kernel else {}, root)
        # The rust/ workspace python/setup.py asks cargo about is not in the fixtures: an
        # empty Cargo.toml stands for it, so that the script gets as far as asking.
        (root / "rust").mkdir()
        (root / "rust" / "Cargo.toml").write_text("")
        sglang = observe("sglang", root, "python")
        return sglang, observe("sgl_kernel", root, home) if home else None


def observe(source: str, root: Path, folder: str) -> Observed:
    with (root / folder / "pyproject.toml").open("rb") as stream:
        table = tomllib.load(stream)
    project = table.get("project", {})
    version = str(project.get("version", ""))
    if "version" in project.get("dynamic", []):
        version = str(table.get("tool", {}).get("setuptools_scm", {}).get("fallback_version", ""))
    modules = table.get("tool", {}).get("setuptools-rust", {}).get("ext-modules", [])
    rust = [f"cargo: {m.get('path', m.get('target'))}" for m in modules]
    if not (root / folder / "setup.py").is_file():
        return Observed(source, folder, str(project.get("name", "")), version, tuple(rust), (),
                        "no setup script", (), {})  # fmt: skip
    base = run_script(root / folder, "setup.py", {})
    arch = [(v, _split(root / folder, v, base)) for v in base.env if _is_arch(root / folder, v)]
    said = base.setup or {}
    name = str(project.get("name") or said.get("name") or "")
    says = f"setup() says {said.get('name')} {said.get('version')}" if said.get("version") and (
        said.get("name"), said.get("version")) != (name, version) else ""  # fmt: skip
    flags = {
        f"{v}={value}": _shown(run_script(root / folder, "setup.py", {v: value}))
        for v, _ in arch
        for value in (PROBE, LISTS[Split.SEMICOLON])
    }
    return Observed(
        source, folder, name, version,
        tuple(rust + _fetches(f"{folder}/setup.py", base)),
        tuple(f"{v}: {split}" for v, split in arch),
        base.result.replace(str(root), "<tree>"), base.env, flags, says,
    )  # fmt: skip


def _is_arch(folder: Path, variable: str) -> bool:
    """Whether the variable's value reaches the compile flags."""
    return any(PROBE in flag for flag in run_script(folder, "setup.py", {variable: PROBE}).flags)


def _split(folder: Path, variable: str, base: Record) -> Split:
    """The separators on which a list in ``variable`` comes out as one flag per arch."""
    works = set()
    for split, value in LISTS.items():
        flags = _arch_flags(run_script(folder, "setup.py", {variable: value}))
        if any("gfx942" in f and "gfx950" not in f for f in flags) and any(
            "gfx950" in f and "gfx942" not in f for f in flags
        ):
            works.add(split)
    if len(works) == 2:
        return Split.EITHER
    return works.pop() if works else Split.UNKNOWN


def _shown(record: Record) -> str:
    return " ".join(_arch_flags(record)) or record.result


def _arch_flags(record: Record) -> tuple[str, ...]:
    return tuple(f for f in record.flags if "gfx" in f)


def _fetches(script: str, record: Record) -> list[str]:
    """The run's fetches, named as the check names them: a Rust extension built (cargo
    fetches its crates: setup() given one, or cargo asked to find them), each download."""
    found = []
    rust = (record.setup or {}).get("rust_extensions") or any(
        c[:1] == ("cargo",) for c in record.commands
    )
    if rust:
        found.append(f"{script}:rust_extensions")
    for words in record.commands:
        if words[:1] == ("urllib",) or words[:2] == ("git", "clone") or words[:1] in (
            ("curl",), ("wget",)):  # fmt: skip
            found.append(f"{script}:{':'.join(words[:1] + tuple(w for w in words if '://' in w))}")
    return found


# ---------------------------------------------------------------- vLLM's setup.py, run

PROBE_VERSION = "9.9.9"
# setuptools reads a [project] license string (PEP 639) from 77.0.0 on.
LICENSE_STRING = "setuptools>=77.0.0 (a PEP 639 license)"


def run_vllm(pins: Pins, read: Read, paths: Sequence[str]) -> Observed:
    """vLLM's setup.py run as the recipe runs it (the pinned version in its version_env, the
    inputs given, PYTORCH_ROCM_ARCH set) and on into build_ext; then once per variable that
    might give it a version, and once per variable the pins' marks of fetches name."""
    source = pins.sources["vllm"]
    given = {"PYTORCH_ROCM_ARCH": LISTS[Split.SEMICOLON]}
    given |= {variable: f"/src/{path}" for variable, path in source.inputs.items()}
    versioned = given | dict.fromkeys(source.version_env, source.version)
    with tempfile.TemporaryDirectory(prefix="setupfacts-vllm-") as scratch:
        root = Path(scratch)
        materialize(read, paths, {}, root)
        with (root / "pyproject.toml").open("rb") as stream:
            table = tomllib.load(stream)
        base = run_script(root, "setup.py", versioned, build=True)
        bare = run_script(root, "setup.py", given)
        when = _versions(root, given, bare, str(table["project"]["name"]))
        when |= _switches(root, versioned, source.skipped_fetches.values())
        works = tuple(v.split("=", 1)[0] for v, said in when.items()
                      if said.startswith(f"version {PROBE_VERSION}"))  # fmt: skip
        return Observed(
            "vllm", ".", str(table["project"]["name"]), _fallback(table),
            tuple(f for f in _fetches("setup.py", base) if not _optional_rust(f, base)),
            (), base.result, base.env, when,
            version_from="git" if bare.error.startswith("LookupError") else "",
            version_env=tuple(sorted(works)), requires=_requires(table),
            paths=tuple(_pip_paths(root, source)), build=_configured(base),
        )  # fmt: skip


def _fallback(table: Mapping[str, Any]) -> str:
    scm = table.get("tool", {}).get("setuptools_scm", {})
    return str(scm.get("fallback_version", "")) if "setuptools_scm" in table.get("tool", {}) else ""


def _versions(root: Path, given: Mapping[str, str], bare: Record, name: str) -> dict[str, str]:
    """Each variable that may give setup() a version (read by the bare run, or setuptools_scm's
    for the distribution) set alone to PROBE_VERSION: the version setup() gets, or why none."""
    named = f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{name.upper().replace('-', '_')}"
    candidates = dict.fromkeys([v for v in bare.env if "VERSION" in v] + [named])
    found = {}
    for variable in candidates:
        record = run_script(root, "setup.py", {**given, variable: PROBE_VERSION})
        said = (record.setup or {}).get("version")
        found[f"{variable}={PROBE_VERSION}"] = f"version {said}" if said else record.result
    return found


def _switches(root: Path, given: Mapping[str, str], reasons: Iterable[str]) -> dict[str, str]:
    """What setup.py fetches with each variable set that the pins' marks name as why a fetch
    is not taken (VLLM_USE_PRECOMPILED), and whether its Rust extensions are optional."""
    found = {}
    for variable in sorted({v for r in reasons for v in re.findall(r"\b[A-Z][A-Z0-9_]{3,}\b", r)}):
        record = run_script(root, "setup.py", {**given, variable: "1"})
        rust = _rust_optional(record)
        said = [f.split(":", 1)[1] for f in _fetches("setup.py", record)]
        said += ["Rust optional" if all(rust) else "Rust required"] if rust else []
        found[f"{variable}=1"] = ", ".join(said) or record.result
    return found


def _optional_rust(fetch: str, record: Record) -> bool:
    """A Rust extension setup() is given as optional: a build without cargo goes on."""
    optional = _rust_optional(record)
    return fetch.endswith(":rust_extensions") and bool(optional) and all(optional)


def _rust_optional(record: Record) -> list[bool]:
    """Whether each Rust extension setup() was given is optional."""
    said = (record.setup or {}).get("rust_optional")
    return [bool(each) for each in said] if isinstance(said, list) else []


def _requires(table: Mapping[str, Any]) -> tuple[str, ...]:
    """[build-system] requires as pip takes them, and what a license string asks of setuptools."""
    system = table.get("build-system", {})
    found = []
    for written in system.get("requires", []):
        try:
            Requirement(written)
        except InvalidRequirement:
            continue
        found.append(written)
    license_ = table.get("project", {}).get("license")
    if system.get("build-backend", "").startswith("setuptools") and isinstance(license_, str):
        found.append(LICENSE_STRING)
    return tuple(found)


def _pip_paths(root: Path, source: GitSource) -> list[str]:
    """The pins' folders and requirements files that are there, with every file the latter
    include (-r), followed as pip follows them, to any depth."""
    found = [folder for folder in source.subdirs if (root / folder).is_dir()]
    files = list(source.requirements)
    while files:
        path = files.pop(0)
        if not (root / path).is_file() or path in found:
            continue
        found.append(path)
        for line in (root / path).read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] in (["-r"], ["--requirement"]) and len(words) > 1:
                files.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), words[1])))
    return found


def _configured(record: Record) -> str:
    """The cmake configure build_ext ran, by what it tells CMake of the device."""
    for words in record.commands:
        if words[:1] == ("cmake",) and "--build" not in words and "--version" not in words:
            device = [w for w in words if w.startswith("-DVLLM_TARGET_DEVICE=")]
            return f"cmake {' '.join(device)}".strip()
    return record.build or "no cmake"


# ---------------------------------------------------------------- the comparison


def plain(fact: str) -> str:
    """A fact without its (file:line), as the run says it."""
    return fact.rsplit(" (", 1)[0] if fact.endswith(")") else fact


def disagreements(check: Facts, run: Observed | None) -> list[str]:
    """Each fact the two methods say differently."""
    if run is None:
        return [] if check.unread else [f"{check.source}: the run found no setup script"]
    found = []
    pairs = [
        ("dist", check.dist, run.dist),
        ("version", check.version, run.version),
        ("fetches", sorted(map(plain, check.taken)), sorted(run.taken)),
        ("arch", sorted(map(plain, check.arch)), sorted(run.arch)),
    ]
    if run.version_from:
        pairs.append(("version from", check.version_from, run.version_from))
    if run.version_env is not None:
        pairs.append(("version_env", sorted(check.version_env), sorted(run.version_env)))
    if run.requires is not None:
        pairs.append(("requires", list(check.requires), list(run.requires)))
    if run.paths is not None:
        pairs.append(("paths", sorted(map(plain, check.paths)), sorted(run.paths)))
    for what, said, seen in pairs:
        if said != seen:
            found.append(f"{check.source} {what}: check {said}, run {seen}")
    return found


# ---------------------------------------------------------------- the report

# The control: a setup script that fetches twice, so that an empty fetch column is the
# scripts' doing, not the harness's.
CONTROL = """\
import subprocess, urllib.request
from setuptools import setup
for fetch in (lambda: subprocess.run(["git", "clone", "https://example.org/x.git"]),
              lambda: urllib.request.urlopen("https://example.org/x.tar.gz")):
    try:
        fetch()
    except OSError:
        pass
setup(name="control", version="1")
"""


def control() -> list[str]:
    """The fetches the harness records from CONTROL."""
    with tempfile.TemporaryDirectory(prefix="setupfacts-control-") as scratch:
        (Path(scratch) / "setup.py").write_text(CONTROL)
        return _fetches("setup.py", run_script(Path(scratch), "setup.py", {}))


@dataclass(frozen=True)
class Commit:
    commit: str
    check: tuple[Facts, ...]  # SGLang's two builds, or vLLM's one
    run: tuple[Observed | None, ...]

    def disagreements(self) -> list[str]:
        return [d for c, r in zip(self.check, self.run, strict=True) for d in disagreements(c, r)]


def _cell(items: Sequence[str]) -> str:
    return "<br>".join(items) or "none"


def _facts_cell(f: Facts) -> str:
    if f.unread:
        return f"{f.source}: {f.unread}"
    version = f"{f.version or '-'} ({f.version_from})"
    return f"{f.source} at {f.folder}/: {f.dist} {version}; arch {', '.join(f.arch) or 'none'}"


def _run_cell(o: Observed | None) -> str:
    if o is None:
        return "no setup_rocm.py"
    flags = "; ".join(f"{k}: {v}" for k, v in o.flags.items())
    env = f"; reads {', '.join(o.env)}" if o.env else ""
    return f"{o.source}: {o.result}{env}" + (f"; {flags}" if flags else "") + (
        f"; {o.says}" if o.says else "")  # fmt: skip


def _not_taken_cell(f: Facts) -> str:
    """CMake's fetches never run, said once with why; any other one by one."""
    cmake_only = [n.split(":", 1)[0] for n in f.not_taken if n.endswith(NO_CMAKE)]
    rest = [n for n in f.not_taken if not n.endswith(NO_CMAKE)]
    said = [f"{f.source}: {', '.join(cmake_only)} ({NO_CMAKE})"] if cmake_only else []
    return _cell(said + rest)


def report(commits: Sequence[Commit], controlled: Sequence[str]) -> str:
    lines = [
        "# SGLang's ROCm builds: the check's facts beside setup_rocm.py run with stubs",
        "",
        "Written by `python3 benchmarks/buildfiles.py setup` from tests/fixtures/history/sglang",
        "(upstream files, unpatched; sgl-kernel read at its home of each commit with the pins'",
        "overlay moved there: pyproject.toml <- pyproject_rocm.toml, setup.py <- setup_rocm.py).",
        "The check: `benchmarks/setupfacts.check_facts` (treefacts and preflight). The run: each",
        "folder's setup script executed by python3 with stub setuptools, setuptools_rust, torch",
        "and torch.utils.cpp_extension that record setup(), the extensions and their flags;",
        "every command and download recorded and refused; os.environ's reads recorded. An arch",
        f"variable is one whose value ({PROBE}) reaches the flags; its split is how",
        f"{LISTS[Split.SEMICOLON]!r} and {LISTS[Split.COMMA]!r} come out (unknown: neither",
        "gives one flag per arch). Versions are read from pyproject with tomllib, as setuptools",
        "reads [project]; python/setup.py's rust/ workspace is an empty stand-in Cargo.toml.",
        "",
        "| commit | facts (check) | fetches taken on ROCm | not taken | unknown conditions "
        "| setup script run | disagreements |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in commits:
        lines.append(_row([
            c.commit[:8],
            "<br>".join(_facts_cell(f) for f in c.check),
            _cell([f"{f.source}: {t}" for f in c.check for t in f.taken]),
            "<br>".join(_not_taken_cell(f) for f in c.check if f.not_taken) or "none",
            _cell([f"{f.source}: {u}" for f in c.check for u in f.unknown]),
            "<br>".join(_run_cell(o) for o in c.run),
            _cell(c.disagreements()),
        ]))  # fmt: skip
    lines += [
        "",
        "## Control: the harness records fetches",
        "",
        "A setup script that runs `git clone` and `urllib.request.urlopen` (both refused) and",
        f"calls setup(): the run records {_cell(list(controlled))}.",
        "",
    ]
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def vllm_report(commits: Sequence[Commit]) -> str:
    lines = [
        "# vLLM's ROCm build: the check's facts beside setup.py run with stubs and real CMake",
        "",
        "Written by `python3 benchmarks/buildfiles.py setup --fork vllm` from",
        "tests/fixtures/history/vllm (upstream files, unpatched). The check:",
        "`setupfacts.source_facts` over [sources.vllm] (treefacts and preflight). The run:",
        "setup.py executed by python3 with the recipe's variables (the pinned version in",
        "version_env, the inputs, PYTORCH_ROCM_ARCH) and stub torch (ROCm), setuptools,",
        "setuptools_rust and setuptools_scm (a pretend variable or nothing: no .git), then on",
        "into its build_ext with cmake recorded and said to succeed; once more per variable",
        f"that might give a version (set alone to {PROBE_VERSION}) and per variable the pins'",
        "marks name (set to 1). Build requirements: pyproject read with tomllib, each checked",
        "by packaging; paths: the pins' files followed through -r as pip does. Arch: Debian's",
        f"cmake 3.25 in script mode (buildfiles' driver) with PYTORCH_ROCM_ARCH {PROBE},",
        f"{LISTS[Split.SEMICOLON]!r} and {LISTS[Split.COMMA]!r}: the split that gives both",
        "archs. setup.py itself reads no arch variable.",
        "",
        "| commit | dist, version (from) | version variables: check / run | arch: check / run "
        "| build requirements | setup.py fetches: taken / not taken (check) | run with the "
        "marks' variables | paths | disagreements |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in commits:
        f, o = c.check[0], c.run[0]
        assert o is not None
        versions = {k: v for k, v in o.flags.items() if "VERSION" in k}
        switches = {k: v for k, v in o.flags.items() if k not in versions}
        lines.append(_row([
            c.commit[:8],
            f"{f.dist} {f.version or '-'} ({f.version_from}); run: {o.dist}, {o.result}",
            f"{', '.join(f.version_env)} / " + "<br>".join(f"{k}: {v}" for k, v in
                                                          versions.items()),
            f"{', '.join(f.arch) or 'none'} / {', '.join(o.arch) or 'none'}",
            f"{len(f.requires)} / {len(o.requires or ())}",
            f"{_cell(list(f.taken))} / {_cell(list(f.not_taken))}",
            "<br>".join(f"{k}: {v}" for k, v in switches.items()) + f"<br>{o.build}",
            _cell(list(f.paths)),
            _cell(c.disagreements()),
        ]))  # fmt: skip
    return "\n".join([*lines, ""])
