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
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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

script, out = sys.argv[1], sys.argv[2]
record = {"env": [], "commands": [], "setup": None, "extensions": [], "exit": None,
          "error": ""}


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
    record["commands"].append([str(a) for a in argv] if isinstance(argv, (list, tuple))
                              else str(argv).split())
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
    def make(name, sources=(), **kwargs):
        args = kwargs.get("extra_compile_args") or {}
        flags = [f for v in (args.values() if isinstance(args, dict) else [args]) for f in v]
        record["extensions"].append({"kind": kind, "name": name, "sources": len(sources),
                                     "flags": [str(f) for f in flags],
                                     "macros": [list(m) for m in kwargs.get("define_macros", [])]})
        return types.SimpleNamespace(name=name)
    return make


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
    record["setup"] = {"name": kwargs.get("name"), "version": kwargs.get("version"),
                       "ext_modules": len(kwargs.get("ext_modules") or []),
                       "rust_extensions": [str(getattr(e, "target", e)) for e in rust]}


module("setuptools", setup=setup, find_packages=lambda *a, **k: [],
       Extension=extension("Extension"))
if sys.argv[3] == "rust":
    module("setuptools_rust", build_rust=type("build_rust", (), {}),
           RustExtension=lambda target, **kwargs: types.SimpleNamespace(target=target),
           Binding=types.SimpleNamespace(PyO3="PyO3"))
else:
    sys.modules["setuptools_rust"] = None
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

    @property
    def result(self) -> str:
        if self.error:
            return self.error
        if self.exit:
            return f"exit {self.exit}"
        return "setup() reached" if self.setup is not None else "no setup() call"


def run_script(folder: Path, script: str, env: Mapping[str, str], rust: bool = True) -> Record:
    """``script`` run in ``folder`` under the harness, with only ``env`` and PATH set."""
    with tempfile.TemporaryDirectory(prefix="setupfacts-") as scratch:
        harness, out = Path(scratch) / "harness.py", Path(scratch) / "record.json"
        harness.write_text(HARNESS)
        argv = [sys.executable, "-I", str(harness), script, str(out), "rust" if rust else "-"]
        subprocess.run(argv, cwd=folder, env={"PATH": os.defpath, **env}, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        data = json.loads(out.read_text())
    flags = [f for ext in data["extensions"] for f in ext["flags"]]
    return Record(tuple(dict.fromkeys(data["env"])), tuple(map(tuple, data["commands"])),
                  data["setup"], tuple(flags), data["exit"], data["error"])  # fmt: skip


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
    flags: Mapping[str, str]  # "VARIABLE=value" -> the flags naming an arch, or the result
    says: str = ""  # setup()'s own name and version, where they differ from pyproject's


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
    check: tuple[Facts, Facts]
    run: tuple[Observed, Observed | None]

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
