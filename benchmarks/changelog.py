"""Benchmark: a realistic change log replayed on the demo, four ways to build, side by side.

The log: a cold build, a no-op, a vLLM bump, an SGLang bump, a verl bump, a Python
package version, an ENV value, a patch edit, an arch switch (gfx942 -> gfx950), each
on top of the one before. Four ways to build the same pins:

- graph: `doit -n 2 build:image` on the demo's pins, content keys and stage images;
- monolith: the graph rendered as one multi-stage Dockerfile (rocmgraph/building/dockerfiles.py),
  plain `docker build` and BuildKit's layer cache, from the same pre-fetched context;
- squashed: the same file rendered as the graph renders its solves (slim squashed, prune's
  and the source stages' images their /kept or /dist alone), so it makes the graph's image
  (the monolith leaves the removed trees in the layers below: a bigger one).
  Its squashed stage ends with the configuration of the image it squashes, which a
  Dockerfile's author writes by hand: read from that image, built once before the log;
- linear: one FROM, every step after the one before, in verl's order
  (benchmarks/linear.py): the shape verl ships, with BuildKit's layer cache;
- bake: `docker buildx bake` over one target per stage of the monolith's file, each
  naming its parents' targets as contexts (benchmarks/bake.py): what a user of buildx
  would write instead of this project.

Each way starts from an empty BuildKit cache and no images of its own (the squashed
way's one build before the log is not timed, and forgotten before it starts). For each change
it prints the seconds, what was rebuilt (stages for the graph and the monolith, steps
for the linear recipe) and the final image's size. Then the bytes the gfx942 and gfx950
images share (layers below the first that differs), and the build-hours the same log
would cost on the real image (pins.toml), modelled from docker/durations.toml.

Each change also gets the CPU seconds the engine's daemon spent on it (dockerd, with
BuildKit in it: solving, copying, hashing and exporting layers; not the steps' own
processes): the work a way asks of the engine, which this 2-core machine's wall clock
blurs. Left out where no single dockerd of this machine can be read.

    python3 benchmarks/changelog.py [--json rows.json] [--only graph,monolith,squashed,linear,bake]
                                    [--rounds N] [--store classic|containerd]

``--store containerd`` runs every way on an engine that keeps its images in containerd's
store (Docker 29's default): a second dockerd, started for the run, as are the fresh runners.

``--rounds N`` replays each way N times, the order of the ways reversed every other round
(this machine is shared, and the way that runs second met a slower machine in some runs):
each change's time is then the median of its N, and each round's log total is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import bake
import linear
import usershell

import stages
from rocmgraph.building import compilecache, dockerfiles, progress, records
from rocmgraph.building.execute import private_files, secret_texts
from rocmgraph.common.engine import BuildJob, EngineFacts, ImageStore
from rocmgraph.common.layout import ROOT
from rocmgraph.config import pins as pins_module
from rocmgraph.config import pinsedit
from rocmgraph.config.pins import PinPath, Value
from rocmgraph.demo import kernels
from rocmgraph.demo.machine import compile_cache, second_engine
from rocmgraph.demo.profile import DEMO_ROOT, Demo, pins_path
from rocmgraph.demo.serve import Registry
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import estimate, imageconfig
from rocmgraph.graph.dag import dropped_env
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.outside.docker import ENGINE_RACES, DockerEngine

NAMESPACE = "verl-bench"
DOCKER = "/usr/bin/docker"
WAYS = ("graph", "monolith", "squashed", "linear", "bake")
SIDES = ("graph", "monolith", "bake")  # the ways measured evicted and on fresh runners
# On fresh runners, the monolith with BuildKit's registry cache (mode=max) too, where the
# engine exports one (the containerd store; the classic store's docker driver exports none).
REGISTRY_SIDE = "monolith_registry"
# What ccache's direct mode hits when a source builds again at a later commit: the median
# share of its ROCm compile units whose source and in-repository includes kept their blobs,
# over 19 steps of rasmith/vllm's history after the pin (benchmarks/ccache_history.py,
# benchmarks/RESULTS.md). vLLM alone compiles through ccache (CMake's compiler launcher);
# sgl-kernel and causal-conv1d build with torch's BuildExtension, which runs hipcc itself.
CCACHE_HITS = {"vllm": 0.868}
SCALE = 0.25  # demo seconds per real minute of compiling (rocmgraph/demo/kernels.py)
REGISTRY_PORT, REDIS_PORT = 28474, 28475  # the fresh runners' registry and compile cache
# After the log, with BuildKit's cache evicted: nothing changed, then one value.
EVICTED: tuple[tuple[str, dict[PinPath, Value]], ...] = (
    ("no-op", {}),
    ("ENV value", {("env", "NCCL_DEBUG"): "INFO"}),
)
PATCH = "docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch"
SCRATCH = ROOT / ".build" / "benchmark"  # the edited patch lives here: pins name repo paths
EDITED = ".build/benchmark/0001-layernorm-in-place-fused-add-rms-norm.patch"


@dataclass(frozen=True)
class Step:
    """One entry of the change log: its name, the arch it builds, what it edits."""

    name: str
    arch: str
    pins: dict[PinPath, Value]  # pins set before the build
    edit_patch: bool = False


def change_log(commits: dict[str, list[str]], sglang_patches: list[str]) -> list[Step]:
    patches = [EDITED if p == PATCH else p for p in sglang_patches]
    return [
        Step("cold build", "gfx942", {("sources", "sglang", "patches"): tuple(patches)}),
        Step("no-op", "gfx942", {}),
        Step("vLLM bump", "gfx942", {("sources", "vllm", "commit"): commits["vllm"][1]}),
        Step(  # SGLang and its sgl-kernel folder move together, as `doit bump:sglang` moves them
            "SGLang bump",
            "gfx942",
            {
                ("sources", name, "commit"): commits["sglang"][1]
                for name in ("sglang", "sgl_kernel")
            },
        ),
        Step("verl bump", "gfx942", {("sources", "verl", "commit"): commits["verl"][1]}),
        Step("Python package version", "gfx942", {("python", "vllm", "demo-xgrammar"): "0.1.33"}),
        Step("ENV value", "gfx942", {("env", "NCCL_DEBUG"): "WARN"}),
        Step("patch edit", "gfx942", {}, edit_patch=True),
        Step("arch switch", "gfx950", {}),
    ]


def edit_patch(path: Path) -> None:
    """A reviewer's edit: a comment on a line the patch adds (it still applies)."""
    text = path.read_text(encoding="utf-8")
    old = "+            residual = residual.contiguous()\n"
    assert old in text, f"{PATCH} changed: pick another line to edit"
    path.write_text(text.replace(old, old[:-1] + "  # the in-place kernel needs it\n", 1))


# ------------------------------------------------------------ docker


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout


def forget_everything() -> None:
    """No images of the benchmark, and an empty BuildKit cache: a cold start."""
    names = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}").split()
    ours = [n for n in names if n.split("/")[0].split(":")[0].startswith(NAMESPACE)]
    if ours:
        docker("image", "rm", "--force", *ours)
    docker("builder", "prune", "--all", "--force")


def engine_pid() -> int | None:
    """The pid of the dockerd DOCKER_HOST names: /var/run/docker.pid for the default engine,
    the pid file beside the socket of one that second_engine started."""
    host = os.environ.get("DOCKER_HOST", "")
    pidfile = Path("/var/run/docker.pid")
    if host.startswith("unix://"):
        pidfile = Path(host.removeprefix("unix://")).with_name("docker.pid")
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def engine_cpu() -> float | None:
    """The CPU seconds the engine's dockerd and the containerd it started have used so far
    (user and system; containerd unpacks the layers of the containerd store); None when
    the engine's pid or its /proc entry cannot be read."""
    daemon = engine_pid()
    if daemon is None:
        return None
    pids = [daemon, *(pid for pid, parent in _parents().items() if parent == daemon)]
    try:
        return sum(_cpu(pid) for pid in pids)
    except OSError:
        return None


def _parents() -> dict[int, int]:
    """Every process's parent (pid -> ppid), as /proc has them."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.name.isdigit():
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                found[int(entry.name)] = int(fields[1])
    return found


def _cpu(pid: int) -> float:
    # after the command's ")": state is field 3, utime field 14, stime field 15 (proc(5))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def engine_cpu_since(before: float | None) -> float | None:
    """The engine's CPU seconds since ``before`` (an ``engine_cpu()``); None when either
    reading failed."""
    now = engine_cpu()
    return None if before is None or now is None else now - before


def image_bytes(ref: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", ref))


def shared_bytes(first: str, second: str) -> int | None:
    """The bytes of the layers two images share (below the first that differs), read from
    the engine's layer store (this machine's engine, as root); None if it cannot be read."""
    layers = [
        json.loads(docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", ref))
        for ref in (first, second)
    ]
    info = docker("info", "--format", "{{.DockerRootDir}} {{.Driver}}").split()
    store = Path(info[0]) / "image" / info[1] / "layerdb" / "sha256"
    total, chain = 0, ""
    for mine, theirs in zip(*layers, strict=False):
        if mine != theirs:
            break
        chain = (
            mine
            if not chain
            else "sha256:" + hashlib.sha256(f"{chain} {mine}".encode()).hexdigest()
        )
        try:
            total += int((store / chain.split(":", 1)[1] / "size").read_text())
        except OSError:
            return None
    return total


# ------------------------------------------------------------ four ways to build


def doit_build(
    pins: Path, arch: str, *extra: str, target: str = "image", env: dict[str, str] | None = None
) -> tuple[float, str]:
    """``doit build:<target>`` of ``pins`` (and ``extra`` variables), as a user's shell runs
    it, on the engine ``env`` points at: its seconds, and what it printed."""
    started = time.monotonic()
    # -n 2: independent stages build at once, as BuildKit runs a monolith's stages
    result = subprocess.run(
        [sys.executable, "-m", "doit", "-n", "2", f"build:{target}", "network=host",
         "hermetic=0", f"pins={pins}", f"arch={arch}", *extra],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env={**usershell.environ(), **(env or {})},
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(result.stdout[-3000:] + result.stderr)
    return elapsed, result.stdout


def graph_build(pins: Path, arch: str) -> tuple[float, int, str]:
    elapsed, printed = doit_build(pins, arch)
    return elapsed, len(progress.built_stages(printed)), f"{NAMESPACE}:{arch}"


@dataclass(frozen=True)
class Configs:
    """What each squashed stage of the squashed monolith ends with (stage -> lines), read
    from the images of the stages they squash, at these keys (stage -> key)."""

    lines: dict[str, list[str]]
    read_at: dict[str, str]


def file_build(
    way: str, pins: Path, arch: str, work: Path, configs: Configs | None = None
) -> tuple[float, int, str]:
    """The monolith, the squashed monolith (``configs``: what each squashed stage ends with),
    the linear recipe, or bake's targets, built by plain BuildKit from one context."""
    if way == "bake":
        return bake_build(pins, arch, work)
    lines = None
    if configs is not None:  # checked before the clock starts: computing keys is not its cost
        checked = Run(Options(pins=str(pins), arch=arch, network="host"), stages.graph())
        moved = [name for name, key in configs.read_at.items() if checked.keys[name].key != key]
        if moved:  # the configuration read before the log would no longer be the image's
            raise SystemExit(f"the log changed {', '.join(moved)}: read its configuration again")
        lines = configs.lines
    started = time.monotonic()
    run = Run(Options(pins=str(pins), arch=arch, network="host"), stages.graph())
    outside = Outside(logs=work / "logs", network="host")
    context = dockerfiles.prepare(run, outside.engine, outside, work / "context")
    if way == "linear":
        (context / "Dockerfile").write_text(linear.dockerfile(run), encoding="utf-8")
    if way == "squashed":
        (context / "Dockerfile").write_text(dockerfiles.dockerfile(run, lines), encoding="utf-8")
    ref = f"{NAMESPACE}-{way}:{arch}"
    secrets = private_files(secret_texts(run, run.pins.python.index), work / "secrets")
    with (work / f"{way}.out").open("w") as out, secrets as files:
        engine = outside.docker
        engine.out = out
        engine.build(BuildJob(stage=way, ref=ref, context=context, secrets=files))
    elapsed = time.monotonic() - started
    log = (work / "logs" / f"{way}.log").read_text()
    if way == "linear":
        return elapsed, executed_steps(log), ref
    # a squashed stage is two BuildKit stages (what it squashes, and the squash): one here
    owned = dockerfiles.owners(
        dockerfiles.stage_texts(run, squash=way == "squashed", configs=lines)
    )
    return elapsed, executed_stages(log, owned), ref


def bake_build(
    pins: Path, arch: str, work: Path, *, runner: dict[str, str] | None = None,
    cache: str = "", ccache: str = "", contexts: bool = True,
) -> tuple[float, int, str]:  # fmt: skip
    """`docker buildx bake` of one target per stage (benchmarks/bake.py), on the engine
    ``runner`` points at (default: this one); with ``cache``, a fresh runner's (each
    target's cache in that registry repository, and ``ccache``, the shared compile cache).
    ``contexts``: each target names its parents' targets."""
    started = time.monotonic()
    run = Run(Options(pins=str(pins), arch=arch, network="host", compile_cache=ccache),
              stages.graph())  # fmt: skip
    outside = Outside(logs=work / "logs", network="host")
    context = dockerfiles.prepare(run, outside.engine, outside, work / "context")
    env = {**os.environ, **(runner or {})}
    store = store_of(env)
    bakefile = work / "bake.compose.yaml"
    with private_files(secret_texts(run, run.pins.python.index), work / "secrets") as files:
        bakefile.write_text(
            bake.bake_file(
                run, context, files, NAMESPACE, cache=cache, store=store, contexts=contexts
            )
        )
        result = docker_build(
            [DOCKER, "buildx", "bake", "--progress=plain", "-f", str(bakefile),
             *bake.output(store, fresh=bool(cache))], env,
        )  # fmt: skip
    elapsed = time.monotonic() - started
    log = result.stderr + result.stdout
    (work / "bake.out").write_text(log)
    if result.returncode != 0:
        raise SystemExit(log[-6000:])
    final = run.graph.final
    image = f"{cache}/{final}:{arch}" if cache else f"{NAMESPACE}-bake/{final}:{arch}"
    return elapsed, executed_stages(log), image


def docker_build(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A build the benchmark runs itself, run once more where the engine lost one of its
    races (``ENGINE_RACES``), as the graph's builds are (each side gets the same chance)."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    said = result.stdout + result.stderr
    if result.returncode != 0 and any(race in said for race in ENGINE_RACES):
        print(f"{argv[1:3]}: the engine lost a race; building once more", file=sys.stderr)
        result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    return result


def store_of(env: dict[str, str]) -> ImageStore:
    """Where the engine ``env`` points at keeps its images."""
    return engine_facts(env).store


def engine_facts(env: dict[str, str]) -> EngineFacts:
    """What the engine ``env`` points at is, as the JSON names it."""
    return DockerEngine.connect(SCRATCH / "logs", host=env.get("DOCKER_HOST", "")).facts()


def squash_configs(pins: Path, arch: str, work: Path) -> Configs:
    """What each squashed stage of the squashed monolith ends with: the configuration of the
    image it squashes (less its build-only variables), read from that image, built from the
    plain monolith. The log changes no stage that a squashed stage is built on (each build
    checks it)."""
    run = Run(Options(pins=str(pins), arch=arch, network="host"), stages.graph())
    outside = Outside(logs=work / "logs", network="host")
    context = dockerfiles.prepare(run, outside.engine, outside, work / "context")
    secrets = private_files(secret_texts(run, run.pins.python.index), work / "secrets")
    configs = Configs(lines={}, read_at={})
    with (work / "configs.out").open("w") as out, secrets as files:
        engine = outside.docker
        engine.out = out
        for stage in run.graph:
            if stage.squash:
                parent = stage.parents[0]
                ref = f"{NAMESPACE}-configs/{parent}:{arch}"
                engine.build(
                    BuildJob(stage=parent, ref=ref, context=context, secrets=files, target=parent)
                )
                configs.lines[stage.name] = imageconfig.lines(
                    engine.config(ref), dropped_env(stage, run.pins)
                )
                configs.read_at[parent] = run.keys[parent].key
    return configs


def _steps(log: str) -> tuple[dict[str, str], set[str]]:
    """Each step of a plain-progress BuildKit log (id -> stage), and those that ran."""
    stage_of: dict[str, str] = {}
    cached: set[str] = set()
    done: set[str] = set()
    for line in log.splitlines():
        # "[stage 2/5] RUN", or bake's "[target stage 2/5] RUN"
        if match := re.match(r"#(\d+) \[(?:\w+ )?(\w+)\s+\d+/\d+\] (\w+)", line):
            if match.group(3) != "FROM":  # resolving a base is no build
                stage_of[match.group(1)] = match.group(2)
        elif match := re.match(r"#(\d+) CACHED", line):
            cached.add(match.group(1))
        elif match := re.match(r"#(\d+) DONE", line):
            done.add(match.group(1))
    return stage_of, done - cached


def executed_stages(log: str, owners: dict[str, str] | None = None) -> int:
    """The stages that ran a step; ``owners`` maps a BuildKit stage to the stage it is of."""
    stage_of, ran = _steps(log)
    return len({(owners or {}).get(stage_of[s], stage_of[s]) for s in ran if s in stage_of})


def executed_steps(log: str) -> int:
    stage_of, ran = _steps(log)
    return len([step for step in ran if step in stage_of])


# ------------------------------------------------------------ the real image, modelled


def modelled_minutes(log: list[Step], kernel_moves: bool = False) -> dict[str, list[float]]:
    """Minutes each change costs the real image (pins.toml), per way: the graph rebuilds the
    stages whose key changes (the monolith's BuildKit cache, the same stages); the linear
    recipe every stage from the first that changes, in verl's order. A stage's minutes are
    its reference figure (each stage has one), less what ccache hits of a source the graph
    built before (``CCACHE_HITS``; verl's recipe has no compile cache); the base provides
    some (they only check versions: 0). ``kernel_moves``: the SGLang bump changes
    sgl-kernel/ too (its tree id moves), where the demo's leaves it alone."""
    references = estimate.load_references()
    graph = stages.graph()
    with tempfile.TemporaryDirectory() as scratch:
        pins = Path(scratch) / "pins.toml"
        pins.write_text((ROOT / "pins.toml").read_text())
        patch = Path(scratch) / "edited.patch"
        shutil.copy(ROOT / PATCH, patch)
        before: dict[str, str] = {}
        rows: dict[str, list[float]] = {"graph": [], "linear": []}
        edited = False
        for step in log:
            real = _real_pins_edit(step, pins, kernel_moves)
            if real:
                pinsedit.write(pins, [pinsedit.Change(p, "", v) for p, v in real.items()])
            run = Run(Options(pins=str(pins), arch=step.arch), graph)
            keys = {name: key.key for name, key in run.keys.items()}
            # The patch's content is part of sglang's key: marked from its edit on.
            edited = edited or step.edit_patch
            if edited:
                keys["sglang"] += "-edited"
                keys.update({d: keys[d] + "-edited" for d in run.graph.descendants("sglang")})
            changed = {name for name in keys if before.get(name) != keys[name]}
            if step.name == "cold build":
                changed = set(keys)
            # The plan's estimates, none recorded: what the base provides is only checked.
            priced = {
                n: estimate.estimate(n, None, references, check_only=n in run.pins.base.provides)
                for n in keys
            }
            unpriced = [n for n, e in priced.items() if e.source is estimate.Source.NONE]
            if unpriced:
                raise SystemExit(f"docker/durations.toml has no figure for {', '.join(unpriced)}")
            figures = {n: e.seconds / 60 for n, e in priced.items()}
            order = [n for n in linear.ORDER if n in keys]
            first = next((i for i, n in enumerate(order) if n in changed), len(order))
            # A source built before compiles again what ccache does not hit (the shared
            # compile cache holds the build of the pin before).
            cached = {n: CCACHE_HITS.get(n, 0.0) if step.name != "cold build" else 0.0
                      for n in changed}  # fmt: skip
            rows["graph"].append(sum(figures[n] * (1 - cached[n]) for n in changed))
            rows["linear"].append(sum(figures[n] for n in order[first:]))
            before = keys
    return rows


def _real_pins_edit(step: Step, pins: Path, kernel_moves: bool) -> dict[PinPath, Value]:
    """The same change, on the real pins: another commit, another version, another value."""
    other = "0123456789abcdef0123456789abcdef01234567"
    found: dict[PinPath, Value] = {}
    for path in step.pins:
        if path[-1] == "commit":
            found[path] = other
            if path[1] == "sgl_kernel" and kernel_moves:
                found[("sources", "sgl_kernel", "tree")] = other
        elif path[:2] == ("python", "vllm"):
            found[("python", "vllm", "xgrammar")] = "0.1.33"
        elif path[0] == "env":
            found[path] = "WARN"
    return found


# ------------------------------------------------------------ the run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    parser.add_argument("--only", default=",".join(WAYS), help="ways to build, comma-separated")
    parser.add_argument("--rounds", type=int, default=1, help="replays of each way (median)")
    parser.add_argument("--scale", type=float, default=SCALE,
                        help="demo seconds per real minute of compiling")  # fmt: skip
    parser.add_argument("--store", type=ImageStore, default=ImageStore.CLASSIC,
                        help="where the engines keep images: classic or containerd")  # fmt: skip
    parser.add_argument("--bake-stages", action="store_true",
                        help="on fresh runners, bake's targets linked by the Dockerfile's "
                        "stages, not contexts (benchmarks/bake_contexts.py)")  # fmt: skip
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.store is ImageStore.CONTAINERD:  # an engine of its own, for the whole run
            os.environ.update(stack.enter_context(second_engine(args.store)))
        measure(args)


def measure(args: argparse.Namespace) -> None:
    """Every way of ``args`` on the engine DOCKER_HOST names: the tables, and the JSON."""
    ways = [way for way in args.only.split(",") if way]
    facts = engine_facts(dict(os.environ))
    print(f"engine: Docker {facts.server}, buildx {facts.buildx}, the {facts.store.value} "
          "store\n")  # fmt: skip
    log, template, source_archs = prepare_demo()
    rounds: dict[str, list[Rows]] = {way: [] for way in ways}
    shared: dict[str, int | None] = {}
    after: dict[str, Rows] = {}
    shape: dict[str, float] = {}
    for number in range(args.rounds):
        for way in ways if number % 2 == 0 else ways[::-1]:
            done = replay(way, log, template, source_archs, args.scale)
            rounds[way].append(done.rows)
            shared[way], after[way] = done.shared, done.evicted
            shape = shape or done.stage_seconds
            total = sum(float(row["seconds"]) for row in done.rows[2:])
            print(f"round {number + 1}: {way}: the log after the cold build {total:.1f} s",
                  file=sys.stderr)  # fmt: skip
    results = {way: median_rows(replays) for way, replays in rounds.items()}
    sides = [way for way in SIDES if way in ways]
    if "monolith" in ways and facts.store is ImageStore.CONTAINERD:
        sides.insert(sides.index("monolith") + 1, REGISTRY_SIDE)
    fresh = {
        way: fresh_runners(
            way,
            log,
            template,
            source_archs,
            args.scale,
            store=facts.store,
            bake_contexts=not args.bake_stages,
        )
        for way in sides
    }
    modelled = modelled_minutes(log)
    modelled["graph_kernel"] = modelled_minutes(log, kernel_moves=True)["graph"]
    if args.rounds > 1:
        print(f"Each change's time: the median of {args.rounds} rounds.\n")
    report(log, ways, results, shared, modelled)
    report_sides(log, after, fresh)
    shape_rows = cost_shape(shape, args.scale, pins_module.loads(template).base.provides)
    report_shape(shape_rows, args.scale)
    if args.json:
        bump = next(i for i, step in enumerate(log) if step.name == "vLLM bump")
        document = {
            "engine": {"server": facts.server, "buildx": facts.buildx, "store": facts.store.value},
            "scale": args.scale,
            "rows": [
                {"change": step.name, **{way: results[way][i] for way in ways}}
                for i, step in enumerate(log)
            ],
            "evicted": [
                {"change": name, **{way: rows[i] for way, rows in after.items() if rows}}
                for i, (name, _) in enumerate(EVICTED)
            ],
            "fresh_runner": [
                {"change": step.name, **{way: with_ccache(rows[i]) for way, rows in fresh.items()}}
                for i, step in enumerate(log)
            ],
            # the shared compile cache: the vLLM bump on a fresh runner, after another
            # runner built the old pin
            "ccache": with_ccache(fresh["graph"][bump])["ccache"] if "graph" in fresh else None,
            "shared_arch_bytes": shared,
            "stage_seconds": shape_rows,
            "modelled_minutes": {
                way: dict(zip((s.name for s in log), minutes, strict=True))
                for way, minutes in modelled.items()
            },
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n")


Rows = list[dict[str, float | int]]


@dataclass(frozen=True)
class Replay:
    """The change log built one way, from a cold start."""

    rows: Rows  # a row per change
    shared: int | None  # the bytes the two arch's final images share
    evicted: Rows  # for ``SIDES``: the rows of ``evicted``
    stage_seconds: dict[str, float]  # the graph's: each stage's own steps in the cold build


def replay(
    way: str, log: list[Step], template: str, source_archs: tuple[str, ...], scale: float
) -> Replay:
    """The change log built one way, from a cold start."""
    rows: Rows = []
    finals: dict[str, str] = {}
    shape: dict[str, float] = {}
    with cold_world(template, source_archs, scale) as (work, pins):
        configs = None
        if way == "squashed":  # built before the log, then forgotten: not timed
            configs = squash_configs(pins, log[0].arch, work)
            forget_everything()
        for step in log:
            apply(step, pins)
            cpu = engine_cpu()
            if way == "graph":
                seconds, count, ref = graph_build(pins, step.arch)
            else:
                seconds, count, ref = file_build(way, pins, step.arch, work, configs)
            spent = engine_cpu_since(cpu)
            finals[step.arch] = ref
            rows.append(
                {"seconds": round(seconds, 1), "stages": count, "image_bytes": image_bytes(ref)}
            )
            if spent is not None:
                rows[-1]["engine_cpu_seconds"] = round(spent, 1)
            if way == "graph" and len(rows) == 1:
                shape = stage_seconds(pins, step.arch)
            print(f"{way}: {step.name}: {seconds:.1f} s, {count}", file=sys.stderr)
        shared = shared_bytes(finals["gfx942"], finals["gfx950"])
        after = evicted(way, pins, log[-1].arch, work) if way in SIDES else []
        return Replay(rows, shared, after, shape)


def stage_seconds(pins: Path, arch: str) -> dict[str, float]:
    """Each stage's seconds in the graph's build just done, as its record has them: the
    time of its own steps, its export included, whichever build of the solve ran them."""
    run = Run(Options(pins=str(pins), arch=arch, network="host"), stages.graph())
    found = {name: records.seconds(run.records_dir, name, k.key) for name, k in run.keys.items()}
    return {name: seconds for name, seconds in found.items() if seconds is not None}


def evicted(way: str, pins: Path, arch: str, work: Path) -> Rows:
    """After the log, BuildKit's cache evicted, images kept (what its garbage collection does
    once an image of 35-60 GB fills its keep-storage): the rows of ``EVICTED``."""
    docker("builder", "prune", "--all", "--force")
    rows: Rows = []
    for name, change in EVICTED:
        pinsedit.write(pins, [pinsedit.Change(p, "", v) for p, v in change.items()])
        if way == "graph":
            seconds, count, _ = graph_build(pins, arch)
        else:
            seconds, count, _ = file_build(way, pins, arch, work)
        rows.append({"seconds": round(seconds, 1), "stages": count})
        print(f"{way}: evicted, {name}: {seconds:.1f} s, {count}", file=sys.stderr)
    return rows


def fresh_runners(
    way: str, log: list[Step], template: str, source_archs: tuple[str, ...], scale: float,
    *, store: ImageStore, bake_contexts: bool = True,
) -> Rows:  # fmt: skip
    """The log on fresh CI runners: each change on an empty engine (no image, no BuildKit
    cache) of ``store``, sharing a registry and a compile cache with the runners before it.
    The graph uses ``cache=`` and ``compile_cache=``; the monolith its inline cache
    (``BUILDKIT_INLINE_CACHE=1``, ``--cache-from`` the image the runner before pushed), or
    (``monolith_registry``) BuildKit's registry cache in mode=max; bake its targets' caches
    (benchmarks/bake.py); each the same compile cache. A row per change: seconds, stages,
    ccache's figures."""
    rows: Rows = []
    with (
        cold_world(template, source_archs, scale) as (work, pins),
        compile_cache(work / "redis", REDIS_PORT) as ccache,
        second_engine(store) as runner,
    ):
        registry = Registry(work / "registry", REGISTRY_PORT)
        cache = f"127.0.0.1:{REGISTRY_PORT}/{way}-{time.time_ns()}"
        pushed: set[str] = set()
        try:
            for step in log:
                apply(step, pins)
                empty(runner)
                if way == "graph":
                    seconds, printed = doit_build(
                        pins, step.arch, f"cache={cache}", f"compile_cache={ccache}", env=runner
                    )
                    count, stats = len(progress.built_stages(printed)), graph_ccache(printed)
                elif way == "bake":
                    seconds, count, _ = bake_build(
                        pins,
                        step.arch,
                        work,
                        runner=runner,
                        cache=cache,
                        ccache=ccache,
                        contexts=bake_contexts,
                    )
                    said = (work / "bake.out").read_text()
                    stats = compilecache.from_log(said) or compilecache.Stats()
                else:
                    seconds, count, stats = inline_cache_build(
                        pins, step.arch, work, runner=runner, pushed=pushed, ccache=ccache,
                        ref=f"{cache}/monolith:{step.arch}", registry=way == REGISTRY_SIDE,
                    )  # fmt: skip
                rows.append({"seconds": round(seconds, 1), "stages": count,
                             "ccache_hits": stats.hits, "ccache_misses": stats.misses})  # fmt: skip
                print(f"{way}: fresh runner, {step.name}: {seconds:.1f} s, {count}, {stats}",
                      file=sys.stderr)  # fmt: skip
        finally:
            registry.stop()
    return rows


def empty(runner: dict[str, str]) -> None:
    """No image and no BuildKit cache on the engine ``runner`` points at: a fresh runner."""
    env = {**os.environ, **runner}
    listed = subprocess.run([DOCKER, "image", "ls", "--all", "--quiet"], env=env,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    if listed:
        subprocess.run([DOCKER, "image", "rm", "--force", *sorted(set(listed))], env=env,
                       capture_output=True, check=False)  # fmt: skip
    subprocess.run([DOCKER, "builder", "prune", "--all", "--force"], env=env,
                   capture_output=True, check=True)  # fmt: skip


_BUILT_STATS = re.compile(r"\(ccache (\d+) hits?(?: \(\d+ shared\))?, (\d+) miss(?:es)?\)")


def graph_ccache(printed: str) -> compilecache.Stats:
    """The sum of what ccache did in the stages a graph build built (its ``built`` lines)."""
    total = compilecache.Stats()
    for line in printed.splitlines():
        if line.startswith("built ") and (found := _BUILT_STATS.search(line)):
            total += compilecache.Stats(hits=int(found.group(1)), misses=int(found.group(2)))
    return total


def inline_cache_build(
    pins: Path,
    arch: str,
    work: Path,
    *,
    runner: dict[str, str],
    ref: str,
    pushed: set[str],
    ccache: str,
    registry: bool = False,
) -> tuple[float, int, compilecache.Stats]:
    """The monolith on a fresh runner: from the inline cache of the image the runner before
    pushed to ``ref`` (if one did), then pushed for the next (its push counted); or
    (``registry``) from and to BuildKit's registry cache beside it, in mode=max."""
    started = time.monotonic()
    run = Run(Options(pins=str(pins), arch=arch, network="host", compile_cache=ccache),
              stages.graph())  # fmt: skip
    outside = Outside(logs=work / "logs", network="host")
    context = dockerfiles.prepare(run, outside.engine, outside, work / "context")
    cached = ["--build-arg", "BUILDKIT_INLINE_CACHE=1", "--cache-from", ref]
    if registry:
        where = f"{ref.rsplit(':', 1)[0]}:buildcache"
        cached = ["--cache-from", f"type=registry,ref={where}",
                  "--cache-to", bake.REGISTRY_CACHE.format(ref=where)]  # fmt: skip
    env = {**os.environ, **runner}
    with private_files(secret_texts(run, run.pins.python.index), work / "secrets") as files:
        secrets = [
            arg for name, path in files.items() for arg in ("--secret", f"id={name},src={path}")
        ]
        result = docker_build(
            [DOCKER, "buildx", "build", *bake.build_output(store_of(env)), "--progress=plain",
             "--network=host",
             "--tag", ref, *secrets, *(cached if ref in pushed or registry else cached[:2]),
             str(context)], env,
        )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(result.stdout[-3000:] + result.stderr[-3000:])
    if not registry:
        subprocess.run([DOCKER, "push", ref], env=env, capture_output=True, check=True)
    pushed.add(ref)
    elapsed = time.monotonic() - started
    log = result.stderr + result.stdout
    owned = dockerfiles.owners(dockerfiles.stage_texts(run))
    return elapsed, executed_stages(log, owned), compilecache.from_log(log) or compilecache.Stats()


def prepare_demo() -> tuple[list[Step], str, tuple[str, ...]]:
    """The demo's fixtures made (`doit demo`): the change log, the demo's pins as text, and
    the real image's [build].source_archs that every way builds with (the demo's own e2e
    tests build each arch set for itself)."""
    prepared = subprocess.run(
        [sys.executable, "-m", "doit", "demo", "profile=demo"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if prepared.returncode != 0:
        raise SystemExit(prepared.stdout + prepared.stderr)
    built = json.loads((DEMO_ROOT / "fixtures" / "built.json").read_text())
    demo_run = Run(Options(pins=str(pins_path("demo"))), stages.graph())
    log = change_log(built["commits"], list(demo_run.pins.sources["sglang"].patches))
    source_archs = pins_module.load(ROOT / "pins.toml").build.source_archs
    return log, pins_path("demo").read_text(), source_archs


@contextlib.contextmanager
def cold_world(
    template: str, source_archs: tuple[str, ...], scale: float = SCALE
) -> Iterator[tuple[Path, Path]]:
    """A scratch folder and the demo's pins in it (under the benchmark's image name, with
    ``source_archs``, the kernels' work at ``scale``), the edited patch in place, no image of
    the benchmark's and an empty BuildKit cache, and the demo's upstreams served: (the
    folder, the pins file)."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        pins = work / "pins.toml"
        pins.write_text(template)
        pinsedit.write(
            pins,
            [
                pinsedit.Change(("image", "name"), "", NAMESPACE),
                pinsedit.Change(("build", "source_archs"), "", source_archs),
                *kernel_work(scale),
            ],
        )
        SCRATCH.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / PATCH, ROOT / EDITED)
        forget_everything()
        # One world for every way: the demo's upstreams served here, from the start (the
        # graph's `profile=demo` would start them in every build; that is not the graph's cost).
        demo = Demo(stages.graph())
        demo.start(Outside(logs=work / "logs", network="host"))
        try:
            yield work, pins
        finally:
            demo.stop()
            (ROOT / EDITED).unlink(missing_ok=True)


def kernel_work(scale: float) -> list[pinsedit.Change]:
    """Each demo source's kernels, compiling in proportion to its real build at ``scale``."""
    references = estimate.load_references()
    return [
        pinsedit.Change(
            ("sources", name, "env", "DEMO_KERNEL_STEPS"),
            "",
            str(kernels.steps(name, references[name].seconds / 60, scale)),
        )
        for name in kernels.KERNELS
    ]


def apply(step: Step, pins: Path) -> None:
    """What ``step`` changes, written: its pins, and the patch it edits."""
    if step.pins:
        pinsedit.write(pins, [pinsedit.Change(p, "", v) for p, v in step.pins.items()])
    if step.edit_patch:
        edit_patch(ROOT / EDITED)


def median_rows(replays: list[list[dict[str, float | int]]]) -> list[dict[str, float | int]]:
    """One row per change: the median of its times over the replays, and what the first
    replay rebuilt and made (the same in each: the keys and the cache decide it)."""
    return [
        {
            **rows[0],
            **{
                figure: round(statistics.median(float(r[figure]) for r in rows), 1)
                for figure in ("seconds", "engine_cpu_seconds")
                if all(figure in r for r in rows)
            },
        }
        for rows in zip(*replays, strict=True)
    ]


def report(
    log: list[Step],
    ways: list[str],
    results: dict[str, list[dict[str, float | int]]],
    shared: dict[str, int | None],
    modelled: dict[str, list[float]],
) -> None:
    head = " | ".join(f"{way}: time | {'steps' if way == 'linear' else 'stages'}" for way in ways)
    print(f"| change | {head} |")
    print("| --- |" + " ---: | ---: |" * len(ways))
    for i, step in enumerate(log):
        cells = " | ".join(
            f"{results[way][i]['seconds']:.1f} s | {results[way][i]['stages']}" for way in ways
        )
        print(f"| {step.name} | {cells} |")
    totals = " | ".join(
        f"**{sum(float(r['seconds']) for r in results[way][2:]):.1f} s** | "
        f"{sum(int(r['stages']) for r in results[way][2:])}"
        for way in ways
    )
    print(f"| the log after the cold build | {totals} |")
    print()
    print("| | " + " | ".join(ways) + " |")
    print("| --- |" + " ---: |" * len(ways))
    sizes = " | ".join(f"{results[way][-1]['image_bytes'] / 1e6:.0f} MB" for way in ways)
    print(f"| final image | {sizes} |")
    both = " | ".join(
        "n/a" if shared.get(way) is None else f"{(shared[way] or 0) / 1e6:.0f} MB" for way in ways
    )
    print(f"| bytes the gfx942 and gfx950 images share | {both} |")
    for label, rows in (("the cold build", slice(0, 1)), ("the log after it", slice(2, None))):
        spent = [[r.get("engine_cpu_seconds") for r in results[way][rows]] for way in ways]
        cells = " | ".join(
            "n/a" if None in cpu else f"{sum(float(c or 0) for c in cpu):.1f} s" for cpu in spent
        )
        print(f"| engine CPU, {label} | {cells} |")
    print()
    # graph_kernel: the same, with an SGLang bump that changes sgl-kernel/ too
    print("| change (real image, modelled) | graph and monolith | the bump changes sgl-kernel/ "
          "| linear |")  # fmt: skip
    print("| --- | ---: | ---: | ---: |")
    columns = ("graph", "graph_kernel", "linear")
    for i, step in enumerate(log):
        print(
            f"| {step.name} | " + " | ".join(f"{modelled[c][i] / 60:.1f} h" for c in columns) + " |"
        )
    graph, kernel, line = (sum(modelled[c][2:]) / 60 for c in columns)
    ratios = [f"{line / hours:.2f}x" if hours else "n/a" for hours in (graph, kernel)]
    print(f"| the log after the cold build | **{graph:.1f} h** ({ratios[0]}) | **{kernel:.1f} h** "
          f"({ratios[1]}) | **{line:.1f} h** |")  # fmt: skip


def with_ccache(row: dict[str, float | int]) -> dict[str, object]:
    """A fresh runner's row as the JSON has it: ccache's figures as ``{"hits", "misses"}``."""
    figures = {"hits": row["ccache_hits"], "misses": row["ccache_misses"]}
    plain = {k: v for k, v in row.items() if not k.startswith("ccache_")}
    return {**plain, "ccache": figures}


def report_sides(log: list[Step], after: dict[str, Rows], fresh: dict[str, Rows]) -> None:
    """The evicted and fresh-runner tables."""
    ways = [way for way in SIDES if after.get(way)]
    if ways:
        print()
        print("| BuildKit's cache evicted, after the log | "
              + " | ".join(f"{way}: time | stages" for way in ways) + " |")  # fmt: skip
        print("| --- |" + " ---: | ---: |" * len(ways))
        for i, (name, _) in enumerate(EVICTED):
            cells = " | ".join(
                f"{after[way][i]['seconds']:.1f} s | {after[way][i]['stages']}" for way in ways
            )
            print(f"| {name} | {cells} |")
    if not fresh:
        return
    print()
    print("| fresh runner, a registry and a compile cache | "
          + " | ".join(f"{way}: time | stages | ccache hits / misses" for way in fresh)
          + " |")  # fmt: skip
    print("| --- |" + " ---: | ---: | ---: |" * len(fresh))
    for i, step in enumerate(log):
        cells = " | ".join(
            f"{rows[i]['seconds']:.1f} s | {rows[i]['stages']} | "
            f"{rows[i]['ccache_hits']} / {rows[i]['ccache_misses']}"
            for rows in fresh.values()
        )
        print(f"| {step.name} | {cells} |")
    totals = " | ".join(
        f"**{sum(float(r['seconds']) for r in rows[2:]):.1f} s** | |" for rows in fresh.values()
    )
    print(f"| the log after the cold build | {totals} |")


Shape = dict[str, dict[str, float | None]]


def cost_shape(shape: dict[str, float], scale: float, provides: Collection[str]) -> Shape:
    """The demo's cold build beside the real image's, stage by stage: each stage's own
    seconds (``shape``), and its figure in docker/durations.toml at ``scale`` (demo seconds
    per real minute). A stage the base image ``provides`` only checks versions: no figure
    (None)."""
    references = estimate.load_references()
    return {
        name: {
            "demo": round(seconds, 1),
            "scaled_reference": None
            if name in provides
            else round(references[name].seconds / 60 * scale, 3),
        }
        for name, seconds in sorted(shape.items())
        if name in references
    }


def report_shape(rows: Shape, scale: float) -> None:
    """The demo's cost shape against the real image's, stage by stage."""
    if not rows:
        return
    print()
    print(f"| stage, the graph's cold build | demo | the real figure x {scale} | demo / real |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in rows.items():
        demo, real = row["demo"] or 0.0, row["scaled_reference"]
        if real is None:
            print(f"| {name} | {demo:.1f} s | checks only | |")
        else:
            print(f"| {name} | {demo:.1f} s | {real:.3g} s | {demo / real:.1f} |")


if __name__ == "__main__":
    main()
