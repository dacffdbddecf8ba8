"""Benchmark: what the graph pays that a Dockerfile does not: the squash, and an image a stage.

1. Every stage of the demo built alone, in build order, from an empty BuildKit cache, with
   the pins of the change log's cold build (`doit build:<stage>`: each finds its parents
   built): its wall time and the engine's CPU seconds (dockerd's: BuildKit's solving,
   copying, hashing and exporting; not the steps' own processes).
2. Each squashed stage's parts, from its log: the copy of the trimmed tree and the export
   of its one layer. The rest of its build is the content hash BuildKit takes of the tree
   before it copies it, with the process's start and the step that trims the tree. Beside
   them, the rate at which the disk under the engine's data takes writes, flushed: a
   squash reads, hashes and writes every byte of the image it squashes again, where a
   plain Dockerfile, which leaves the removed trees in the layers below, does none of it.
3. What a stage image costs beyond its steps: the final stage's image, then two, then
   three down its first parents, removed and built again with every step cached, each
   count in turn, round after round. Each image is a build session of its own (solved,
   exported, named); a Dockerfile's build is one.

    python3 benchmarks/coldprofile.py
"""

from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import changelog

import stages
from rocmgraph.graph.invocation import Options, Run

# "#6 [slim 1/2] COPY --from=slim_trimmed / /" and its "#6 DONE 7.7s"; the image's
# "#8 exporting layers 3.5s done"
_COPY = re.compile(r"^#(\d+) \[[\w.-]+ \d+/\d+\] COPY --from=\S+ / /$", re.MULTILINE)
_EXPORT = re.compile(r"^#\d+ exporting layers ([\d.]+)s done$", re.MULTILINE)


@dataclass(frozen=True)
class SquashParts:
    """A squash's copy and its layer's export, in seconds, as its build log gives them."""

    copy: float
    export: float


def squash_parts(log: str) -> SquashParts | None:
    """The squash's parts in a stage's BuildKit log (``--progress=plain``); None when the
    log has no copy of a whole tree, or did not finish it."""
    copy = _COPY.search(log)
    export = _EXPORT.search(log)
    if copy is None or export is None:
        return None
    done = re.search(rf"^#{copy.group(1)} DONE ([\d.]+)s$", log, re.MULTILINE)
    if done is None:
        return None
    return SquashParts(copy=float(done.group(1)), export=float(export.group(1)))


def write_rate(folder: Path, megabytes: int = 512) -> float:
    """MB (10^6 bytes, as image sizes are given) per second that ``folder``'s disk takes,
    the file flushed before the clock stops (as the engine's layers reach the disk in a
    build that writes more than memory holds)."""
    block = os.urandom(1_000_000)
    target = folder / ".coldprofile-write-rate"
    started = time.monotonic()
    try:
        with target.open("wb") as out:
            for _ in range(megabytes):
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        return megabytes / (time.monotonic() - started)
    finally:
        target.unlink(missing_ok=True)


@dataclass(frozen=True)
class Timed:
    """A build's wall seconds, and the engine's CPU seconds in it (None: not read)."""

    seconds: float
    engine_cpu: float | None

    def shown(self, digits: int = 1) -> str:
        cpu = "?" if self.engine_cpu is None else f"{self.engine_cpu:.{digits}f}"
        return f"{self.seconds:.{digits}f} s ({cpu} s)"


def timed(pins: Path, target: str, arch: str) -> Timed:
    cpu = changelog.engine_cpu()
    seconds, _ = changelog.doit_build(pins, arch, target=target)
    return Timed(seconds, changelog.engine_cpu_since(cpu))


def main() -> None:
    log, template, source_archs = changelog.prepare_demo()
    cold = log[0]
    with changelog.cold_world(template, source_archs) as (_, pins):
        changelog.apply(cold, pins)
        options = Options(pins=str(pins), arch=cold.arch, network="host", hermetic=False)
        run = Run(options, stages.graph())  # as doit_build's runs: the refs it builds
        alone = {name: timed(pins, name, cold.arch) for name in run.graph.order}
        squashed = {
            name: squash_parts((run.state_dir / "logs" / f"{name}.log").read_text())
            for name in run.graph.order
            if run.graph[name].squash
        }
        sizes = {name: changelog.image_bytes(run.ref(name)) for name in squashed}
        images = image_costs(run, pins, cold.arch)
    print("each stage alone, from cold: wall (engine CPU)")
    for name, built in alone.items():
        print(f"  {name:<20}{built.shown()}")
    cpus = [built.engine_cpu for built in alone.values()]
    known = [cpu for cpu in cpus if cpu is not None]
    total = Timed(
        sum(built.seconds for built in alone.values()),
        sum(known) if len(known) == len(cpus) else None,
    )
    print(f"  {'all, one by one':<20}{total.shown()}")
    root = Path(changelog.docker("info", "--format", "{{.DockerRootDir}}").strip())
    rate = write_rate(root)
    print(f"\nthe disk under {root} takes {rate:.0f} MB/s, flushed")
    for name, parts in squashed.items():
        megabytes = sizes[name] / 1e6
        if parts is None:
            print(f"{name}: its log has no squash to read")
            continue
        rest = alone[name].seconds - parts.copy - parts.export
        print(
            f"{name} ({megabytes:.0f} MB, squashed): copy {parts.copy:.1f} s, export"
            f" {parts.export:.1f} s, the rest of its build {rest:.1f} s (the content hash of"
            f" the tree, the process's start, the trim); writing its {megabytes:.0f} MB"
            f" alone takes this disk {megabytes / rate:.1f} s"
        )
    print("\nthe final stages' images removed, their steps cached in BuildKit, then `doit"
          " build:image`: wall (engine CPU)")  # fmt: skip
    for names, runs in images:
        middle = statistics.median(built.seconds for built in runs)
        each = ", ".join(built.shown(2) for built in runs)
        print(f"  {len(names)} image(s) ({', '.join(names)}): median {middle:.2f} s; {each}")


def image_costs(
    run: Run, pins: Path, arch: str, rounds: int = 3
) -> list[tuple[list[str], list[Timed]]]:
    """What each stage image costs a build beyond its steps: the final stage's image, then
    its parent's too, then their parent's, removed and built again with every step cached
    in BuildKit. Each count in turn, ``rounds`` times: (the stages, their builds)."""
    chain = [run.graph.final]
    while len(chain) < 3 and run.graph[chain[-1]].parents:
        chain.append(run.graph[chain[-1]].parents[0])
    found: list[tuple[list[str], list[Timed]]] = [
        (chain[:count], []) for count in range(1, len(chain) + 1)
    ]
    changelog.doit_build(pins, arch)  # the friendly tag, on the image every round removes
    # A round first, not timed: built one by one, each stage's steps were keyed on its
    # parent's image; built in one solve, a stage's are keyed on its parent's steps in the
    # same file, which misses BuildKit's cache once (README, "One solve").
    for number in range(rounds + 1):
        for names, builds in found:
            # the image itself goes, not a tag of it: the final one's friendly tag goes too
            refs = [run.ref(name) for name in names]
            changelog.docker("image", "rm", run.friendly_tag(), *refs)
            built = timed(pins, "image", arch)
            if number:
                builds.append(built)
    return found


if __name__ == "__main__":
    main()
