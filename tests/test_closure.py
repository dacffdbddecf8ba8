"""A stage's closure: read from a build's output, kept in the lock file, refused when missing."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

import stages
from rocmgraph.building.execute import secret_texts
from rocmgraph.building.session import Session
from rocmgraph.commands import imageaudit, lock
from rocmgraph.commands.imageaudit import Package
from rocmgraph.common.errors import EngineError, LockError
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import closure, explain
from rocmgraph.graph.closure import Closure, Fetched, LockFile
from rocmgraph.graph.invocation import Options, Run, check_closures
from rocmgraph.graph.recipe import PIP_SECRET

SHA = {name: name[0] * 64 for name in ("alpha", "beta", "cpp", "delta")}
INDEX = "http://127.0.0.1:28470/packages"


def report(*installs: tuple[str, str, str]) -> list[str]:
    """pip's report of ``installs`` (name, version, url), as pip prints it: indented JSON."""
    document = {
        "version": "1",
        "install": [
            {
                "download_info": {"url": url, "archive_info": {"hashes": {"sha256": SHA[name]}}},
                "metadata": {"name": name, "version": version, "description": "a\nb"},
            }
            for name, version, url in installs
        ],
    }
    return json.dumps(document, indent=2).splitlines()


def step(number: int, texts: list[str]) -> list[str]:
    """``texts`` as BuildKit's plain output shows a step's lines."""
    return [f"#{number} {1 + index / 1000:.3f} {text}" for index, text in enumerate(texts)]


def test_pip_reports_and_apt_receipts_are_read_from_interleaved_steps() -> None:
    pip = step(
        10,
        [
            "Looking in indexes: http://127.0.0.1:28470/simple",
            "Collecting alpha==1.0",
            *report(
                ("alpha", "1.0", f"{INDEX}/alpha-1.0-py3-none-any.whl"),
                ("beta", "2.0", f"{INDEX}/beta-2.0.tar.gz#sha256={SHA['beta']}"),
                ("delta", "0.1", "file:///tmp/wheels/delta-0.1-py3-none-any.whl"),  # context
            ),
            "Successfully installed alpha-1.0 beta-2.0 delta-0.1",
        ],
    )
    apt = step(
        11,
        [
            "Setting up cpp-12 (12.2.0-14) ...",
            "apt-receipt 'http://deb.debian.org/debian/pool/main/g/gcc-12/cpp-12_12.2.0-14_amd64"
            f".deb' cpp-12_12.2.0-14_amd64.deb 10196880 SHA256:{SHA['cpp']}",
        ],
    )
    # Two steps running at once: their lines interleave, each keeps its step's number.
    mixed = [line for pair in zip(pip, apt, strict=False) for line in pair]
    lines = ["#10 [verl 2/5] RUN pip install ...", *mixed, *pip[len(apt) :]]
    assert closure.receipts(lines) == (
        Fetched(
            "apt", "cpp-12", "12.2.0-14", "cpp-12_12.2.0-14_amd64.deb",
            "http://deb.debian.org/debian/pool/main/g/gcc-12/cpp-12_12.2.0-14_amd64.deb",
            SHA["cpp"],
        ),
        Fetched(
            "python", "alpha", "1.0", "alpha-1.0-py3-none-any.whl",
            f"{INDEX}/alpha-1.0-py3-none-any.whl", SHA["alpha"],
        ),
        Fetched(
            "python", "beta", "2.0", "beta-2.0.tar.gz", f"{INDEX}/beta-2.0.tar.gz", SHA["beta"]
        ),
    )  # fmt: skip


def test_the_report_of_an_isolated_builds_requirements_is_read_too() -> None:
    """Verbose, pip shows what its subprocess printed, two spaces in: that pip installs the
    build requirements of a package built in isolation, and reports them."""
    inner = ["  " + line for line in report(("cpp", "80.9", f"{INDEX}/cpp-80.9-py3-none-any.whl"))]
    lines = step(7, [
        "Processing /opt/rocm/share/amd_smi",
        "  Installing build dependencies: started",
        "  Running command pip subprocess to install build dependencies",
        *inner,
        "  Installing build dependencies: finished with status 'done'",
        *report(("delta", "0.1", "file:///opt/rocm/share/amd_smi")),  # the package: local
    ])  # fmt: skip
    assert [(f.name, f.version) for f in closure.receipts(lines)] == [("cpp", "80.9")]


def test_a_step_cut_at_buildkits_log_limit_is_refused_not_read_in_part() -> None:
    lines = [*step(7, report(("alpha", "1.0", f"{INDEX}/alpha-1.0.whl"))[:3])]
    lines.append("#7 2.000 [output clipped, log limit 2MiB reached]")
    with pytest.raises(LockError) as raised:
        closure.receipts(lines)
    assert str(raised.value) == (
        "a build step's output was cut at BuildKit's log limit, so its pip report is not "
        "whole; raise the limit (BUILDKIT_STEP_LOG_MAX_SIZE in dockerd's environment) and lock "
        "again"
    )


def test_an_epoch_in_a_deb_file_name_is_read_back() -> None:
    line = f"#3 0.500 apt-receipt 'http://x/pool/p_1%3a2.0-1_amd64.deb' p_1%3a2.0-1_amd64.deb 9 SHA256:{SHA['cpp']}"  # noqa: E501
    (fetched,) = closure.receipts([line])
    assert (fetched.name, fetched.version) == ("p", "1:2.0-1")


def test_an_apt_receipt_without_a_sha256_is_an_error_not_a_file_left_out() -> None:
    """Ubuntu's indexes list SHA512 too: apt would print that, and a closure would miss
    the file, were it not asked for SHA256 (docker/apt.j2)."""
    receipt = "apt-receipt 'http://x/pool/p_1.0_all.deb' p_1.0_all.deb 640 SHA512:" + "e" * 128
    with pytest.raises(LockError) as raised:
        closure.receipts([f"#3 0.500 {receipt}"])
    assert str(raised.value) == (
        f"cannot read apt's receipt {receipt.removeprefix('apt-receipt ')!r}: a closure "
        "records each file by sha256 (apt-get download --print-uris -o "
        "Acquire::ForceHash=SHA256)"
    )
    assert "--print-uris -o Acquire::ForceHash=SHA256" in (ROOT / "docker/apt.j2").read_text()


def test_a_sealed_build_is_given_the_locked_hashes_in_the_forms_pip_and_apt_check() -> None:
    files = (
        Fetched("apt", "cpp-12", "12.2.0-14", "cpp-12_12.2.0-14_amd64.deb", "u", SHA["cpp"]),
        Fetched("python", "alpha", "1.0+r", "alpha-1.0+r-py3-none-any.whl", "v", SHA["alpha"]),
        Fetched("python", "beta", "2", "beta<2>.tar.gz", "http://p/b", SHA["beta"]),
    )
    sealed = Closure("base", "1" * 64, files)
    assert sealed.links_page().splitlines() == [
        "<!DOCTYPE html>",
        "<html><body>",
        f'<a href="alpha-1.0%2Br-py3-none-any.whl#sha256={SHA["alpha"]}">'
        "alpha-1.0%2Br-py3-none-any.whl</a>",
        f'<a href="beta%3C2%3E.tar.gz#sha256={SHA["beta"]}">beta%3C2%3E.tar.gz</a>',
        "</body></html>",
    ]
    assert sealed.sums() == f"{SHA['cpp']}  cpp-12_12.2.0-14_amd64.deb\n"
    assert Closure("prune", "2" * 64, ()).sums() == ""


def test_a_lock_builds_pip_reports_every_install_and_compiles_quietly() -> None:
    run = Run(Options(pins=str(Path(__file__).parents[1] / "pins.toml")), stages.graph())
    texts = secret_texts(run, INDEX, report=True)
    assert texts[PIP_SECRET] == (  # verbose for isolated builds' reports; `pip wheel` quiet
        f"[global]\nindex-url = {INDEX}\nverbose = 1\n[install]\nreport = -\n[wheel]\nverbose = 0\n"
    )
    sealed = secret_texts(run, INDEX, sealed=True)[PIP_SECRET]
    assert sealed == "[global]\nno-index = true\nfind-links = /mnt/python/index.html\n"


def test_the_lock_file_keeps_closures_by_stage_and_key_and_reads_them_back(
    tmp_path: Path,
) -> None:
    path = closure.lock_path(tmp_path / "pins.toml")
    assert path == tmp_path / "pins.lock.toml"
    assert closure.load(path).closures == {}  # none yet
    files = (
        Fetched("apt", "cpp-12", "12.2.0-14", "cpp.deb", "http://d/cpp.deb", SHA["cpp"]),
        Fetched("python", "alpha", "1.0", "alpha.whl", "http://p/alpha.whl", SHA["alpha"]),
    )
    closures = {
        ("base", "1" * 64): Closure("base", "1" * 64, files),
        ("prune", "2" * 64): Closure("prune", "2" * 64, ()),  # fetches nothing: locked too
    }
    closure.save(LockFile(path, closures))
    text = path.read_text()
    assert text.startswith("# What each stage fetched from the network when it was built")
    assert closure.load(path) == LockFile(path, closures)
    assert closure.load(path).missing({"base": "1" * 64, "prune": "3" * 64}) == ["prune"]


def test_a_broken_lock_file_is_refused_with_its_entry_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "pins.lock.toml"
    path.write_text('[[closure]]\nstage = "base"\nkey = "abc"\n')
    with pytest.raises(LockError) as raised:
        closure.load(path)
    assert str(raised.value) == (
        f"{path}: closure[0]: needs a stage name and a 64-hex key; it is written by "
        "`doit lock closures=1`: delete it and lock again"
    )
    path.write_text(
        f'[[closure]]\nstage = "base"\nkey = "{"1" * 64}"\nfiles = [{{ kind = "x" }}]\n'
    )
    with pytest.raises(LockError) as raised:
        closure.load(path)
    assert str(raised.value) == (
        f"{path}: closure[0].files[0]: needs kind, name, version, file, url, sha256 as text; it "
        "is written by `doit lock closures=1`: delete it and lock again"
    )


@pytest.mark.parametrize(
    ("locked", "escape"),
    [
        (False, ", or build with hermetic=0 (the network on, as the images' labels record)"),
        (True, ""),  # for CI: the lock is the only way
    ],
)
def test_a_build_refuses_stages_without_a_closure_naming_them_and_the_fix(
    tmp_path: Path, locked: bool, escape: str
) -> None:
    pins = tmp_path / "pins.toml"
    pins.write_text((Path(__file__).parents[1] / "pins.toml").read_text())
    run = Run(Options(pins=str(pins), locked=locked), stages.graph())
    base, rocm = run.open_keys["base"], run.open_keys["rocm"]
    closure.save(
        LockFile(closure.lock_path(pins), {("base", base.key): Closure("base", base.key, ())})
    )
    check_closures(run, ["base"])  # locked: no complaint
    with pytest.raises(LockError) as raised:
        check_closures(run, ["base", "rocm"])
    assert str(raised.value) == (
        f"{tmp_path}/pins.lock.toml holds no closure for rocm at {rocm.short}: what they fetch "
        "as they build is not locked, so they cannot build with the network off; run `doit "
        f"lock closures=1` where the network allows and commit pins.lock.toml{escape}"
    )


DPKG_LIST = """\
Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
||/ Name           Version      Architecture Description
+++-==============-============-============-=================================
ii  cpp-12         12.2.0-14    amd64        GNU C preprocessor
ii  gcc:amd64      4:12.2.0-3   amd64        GNU C compiler
rc  old-thing      1.0          amd64        removed, its configuration kept
"""
STATUS = """\
Package: cpp-12
Status: install ok installed
Version: 12.2.0-14
Description: GNU C preprocessor
 a continuation line: not a field

Package: old-thing
Status: deinstall ok config-files
Version: 1.0
"""


def test_what_an_image_holds_is_traced_by_base_closure_or_pin_and_the_rest_named() -> None:
    held = imageaudit.apt_packages(DPKG_LIST) | imageaudit.python_packages(
        "torch==2.12.0+rocm7.14.0.lw.git1a2b3c4d\nMegatron_Core==0.18.0\nvllm==0.22.1rc1\n"
        "sglang-kernel==0.4.2.post2\n"
        "requests==2.32.0\n"
    )
    assert imageaudit.apt_status(STATUS) == {Package("apt", "cpp-12", "12.2.0-14")}
    fetched = Fetched("python", "megatron-core", "0.18.0", "m.whl", "http://p/m.whl", SHA["beta"])
    gcc = Fetched("apt", "gcc", "4:12.2.0-3", "gcc.deb", "http://d/gcc.deb", SHA["cpp"])
    pins = Run(Options(pins=str(Path(__file__).parents[1] / "pins.toml")), stages.graph()).pins
    traced = imageaudit.trace(
        held, imageaudit.apt_status(STATUS), [Closure("verl", "1" * 64, (fetched, gcc))], pins
    )
    # cpp-12: the base; gcc, megatron-core: a closure; torch (a pinned wheel), vllm and
    # sglang-kernel (pinned sources): pins; requests came from the network unrecorded.
    assert traced == imageaudit.Traced(1, 2, 3, (Package("python", "requests", "2.32.0"),))
    assert imageaudit.as_text("verl-rocm:gfx942", traced).splitlines() == [
        "verl-rocm:gfx942: 7 packages; traced: 1 by the base image's digest, 2 by a closure's "
        "sha256, 3 by a pinned source or wheel",
        "untraced python requests 2.32.0: in no closure, pin or base image",
    ]
    with pytest.raises(LockError) as raised:
        imageaudit.verdict("verl-rocm:gfx942", traced)
    assert str(raised.value) == (
        "verl-rocm:gfx942 holds 1 package(s) that no closure, pin or base image traces; run "
        "`doit lock closures=1` and build again"
    )


def test_a_locked_closure_seals_its_stage_and_moves_its_key_and_those_after_it(
    tmp_path: Path,
) -> None:
    pins = tmp_path / "pins.toml"
    pins.write_text((Path(__file__).parents[1] / "pins.toml").read_text())
    opened = Run(Options(pins=str(pins)), stages.graph()).keys
    apt = Fetched("apt", "cpp-12", "12.2.0-14", "cpp.deb", "http://d/cpp.deb", SHA["cpp"])
    locked = Closure("base", opened["base"].key, (apt,))
    closure.save(LockFile(closure.lock_path(pins), {("base", locked.key): locked}))
    run = Run(Options(pins=str(pins)), stages.graph())
    assert run.open_keys == opened
    assert (run.sealed("base"), run.sealed("rocm")) == (locked, None)
    assert run.keys["base"].inputs.closure == locked.digest
    moved = {name for name in opened if run.keys[name] != opened[name]}
    assert moved == set(opened)  # base, and every stage built on it
    assert explain.changes(run.keys["base"].inputs, opened["base"].inputs) == [
        "its closure is locked: it builds with the network off"
    ]
    assert Run(Options(pins=str(pins), hermetic=False), stages.graph()).keys == opened


class Killed(BaseException):
    """The run's end, as a kill ends it: between two lines, with no handler run."""


class TagThenDie:
    """An engine that tags, then is killed before anything after the tag runs."""

    def __init__(self) -> None:
        self.tags: list[tuple[str, str]] = []

    def tag(self, source: str, ref: str) -> None:
        self.tags.append((source, ref))
        raise Killed

    def untag(self, ref: str) -> None:
        pass


def locking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build: Any, engine: Any
) -> tuple[Run, Outside]:
    """The real pins, with ``build(name)`` standing for a stage's lock build (every stage
    unbuilt, its parents there) and ``engine`` for the engine that tags: a run, its world."""
    from rocmgraph.building import execute

    pins = tmp_path / "pins.toml"
    pins.write_text((ROOT / "pins.toml").read_text())
    run = Run(Options(pins=str(pins), arch="gfx942"), stages.graph())
    outside = Outside(cache=tmp_path / "cache")
    outside.__dict__["docker"] = engine  # the cached property, filled
    monkeypatch.setattr(
        execute, "rebuild", lambda run, engine, outside, session, name, **_: build(name)
    )
    monkeypatch.setattr(execute, "is_built", lambda *args: False)
    monkeypatch.setattr(execute, "ensure_local", lambda *args, **kwargs: None)
    return run, outside


def test_a_lock_killed_between_a_stage_tag_and_its_record_keeps_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a build's: begun before the tag, so the plan still prices the stage from it."""
    from rocmgraph.building import records

    engine = TagThenDie()
    run, outside = locking(tmp_path, monkeypatch, lambda name: [], engine)  # fetched nothing
    with pytest.raises(Killed):
        lock._lock_closures(run, outside, Session(), closure.lock_path(run.options.pins))
    first = run.graph.order[0]
    assert engine.tags == [(f"verl-rocm/{first}:lock-{run.open_keys[first].short}", run.ref(first))]
    key = run.keys[first]
    record = records.load(run.records_dir, first, tagged=lambda found: found == key.key)
    assert record is not None
    assert (record.key, record.inputs) == (key.key, key.inputs)
    assert record.seconds is not None  # the lock build's, timed: the plan prices from it


class Tags:
    """An engine's tags, as the lock uses them: what it tagged and untagged."""

    def __init__(self) -> None:
        self.tagged: list[str] = []
        self.untagged: list[str] = []

    def tag(self, source: str, ref: str) -> None:
        self.tagged.append(ref)

    def untag(self, ref: str) -> None:
        self.untagged.append(ref)


def test_stages_that_do_not_need_each_other_lock_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nine stages on the wheels build at once (each waits here for all nine: one at a
    time, the first would wait alone), a stage only after its parents; said in the graph's
    order, whatever order they end in."""
    wave = {n for n in stages.graph().order if stages.graph()[n].parents == ("wheels",)}
    together = threading.Barrier(len(wave), timeout=30)
    started: list[str] = []

    def build(name: str) -> list[str]:
        started.append(name)
        if name in wave:
            together.wait()
        return []

    engine = Tags()
    run, outside = locking(tmp_path, monkeypatch, build, engine)
    answer = lock._lock_closures(run, outside, Session(), closure.lock_path(run.options.pins))
    order = run.graph.order
    assert all(started.index(p) < started.index(n) for n in order for p in run.graph[n].parents)
    assert set(started[3:12]) == wave
    lines = answer.lines
    assert [line.split(":")[0] for line in lines[:-1]] == list(order)
    assert lines[0] == f"base: locked at {run.closure_keys['base'].short} (0 python, 0 apt files)"
    assert sorted(engine.tagged) == sorted(run.ref(name) for name in order)
    assert len(closure.load(closure.lock_path(run.options.pins)).closures) == len(order)


def test_a_stage_that_fails_to_lock_keeps_what_its_siblings_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sglang's build fails: the stages building beside it end and are locked, those built
    on it are not begun, and the lock fails with sglang's error."""

    def build(name: str) -> list[str]:
        if name == "sglang":
            raise EngineError("stage sglang: the build failed")
        return []

    engine = Tags()
    run, outside = locking(tmp_path, monkeypatch, build, engine)
    with pytest.raises(EngineError, match=r"^stage sglang: the build failed$"):
        lock._lock_closures(run, outside, Session(), closure.lock_path(run.options.pins))
    locked = {name for name, _ in closure.load(closure.lock_path(run.options.pins)).closures}
    assert locked == set(run.graph.order) - {"sglang", "verl", "assemble", "manifest"}
    assert run.ref("assemble") not in engine.tagged


def test_a_release_tag_builds_from_the_closures_locked_at_the_default_one(
    tmp_path: Path,
) -> None:
    """verl's CI sets GIT_COMMIT_TAG per build (commit_tag=): a build argument of the
    manifest, which changes nothing a build fetches. Its closures are those of the default."""
    pins = tmp_path / "pins.toml"
    pins.write_text((ROOT / "pins.toml").read_text())
    locked = Run(Options(pins=str(pins)), stages.graph())
    closure.save(
        LockFile(
            closure.lock_path(str(pins)),
            {(n, k.key): Closure(n, k.key, ()) for n, k in locked.open_keys.items()},
        )
    )
    release = Run(Options(pins=str(pins), commit_tag="v1.2.0"), stages.graph())
    assert release.open_keys["manifest"].key != locked.open_keys["manifest"].key
    assert release.unlocked == frozenset()
    check_closures(release, list(release.graph.order))  # no LockError
    assert release.sealed("manifest") is not None
    assert release.keys["manifest"].key != locked.keys["manifest"].key  # its own image
