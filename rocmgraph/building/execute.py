"""Build stages: skip those whose image exists, render the rest into one solve (solve.py)
and hand it to an engine; share what was built through the stage cache.

Every function takes the engine it builds on: the task layer chooses it (one run
may well use several)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from rocmgraph.building import compilecache, failure, records, trace, turns
from rocmgraph.building.ledger import Entry, Status
from rocmgraph.building.session import Session
from rocmgraph.common import disk, failpoints
from rocmgraph.common.engine import BuildJob, Engine
from rocmgraph.common.errors import BuildFailed, CacheError, EngineError, GraphToolError
from rocmgraph.common.fsutil import atomic_write_text, owned
from rocmgraph.config import kinds
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import imageconfig, solve
from rocmgraph.graph.dag import dropped_env
from rocmgraph.graph.invocation import Run, check_closures, check_locked
from rocmgraph.graph.recipe import CCACHE_SECRET, CLOSURE_LINKS, PIP_SECRET
from rocmgraph.outside import credentials, leftovers, proc

# The build argument of each command-line variable a stage takes (as verl's recipe names it).
BUILD_ARGS = {"commit_tag": "GIT_COMMIT_TAG"}
KEY_LABEL = "org.verl-rocm-graph.key"  # every stage image says its key; a pull is checked by it
HERMETIC_LABEL = "org.verl-rocm-graph.hermetic"  # "true": built with the network off


def is_built(run: Run, engine: Engine, stage: str) -> bool:
    return engine.image_exists(run.ref(stage))


def is_tagged(run: Run, engine: Engine) -> bool:
    """The friendly tag names the final stage's image already."""
    image = engine.image_id(run.ref(run.graph.final))
    return image is not None and engine.image_id(run.friendly_tag()) == image


def is_cached(run: Run, outside: Outside, session: Session, name: str) -> bool:
    """Whether the shared cache holds the image of stage ``name`` whole; False without a
    cache, or when it does not answer (said once: the build goes on here)."""
    if not session.answers(run.cache):
        return False
    try:
        return outside.cache_registry.has(run.cached_ref(name))
    except GraphToolError as exc:
        # Built past, unless the run cannot do without it.
        needed = ""
        if run.options.cache_required:
            needed = "cache_required=1 forbids building past it: check the registry, or drop "
            needed += "cache_required"
        elif run.options.builders:
            needed = "builders= passes stages between the builders through it: check the "
            needed += "registry, or build without builders="
        if needed:
            said = f"the stage cache {run.cache} does not answer ({exc}); {needed}"
            raise CacheError(said) from None
        if session.silence(run.cache):
            _warn(f"the stage cache {run.cache} does not answer ({exc}); building here")
        return False


def is_done(run: Run, engine: Engine, outside: Outside, session: Session, name: str) -> bool:
    """Whether stage ``name`` needs nothing from this run: built here, and with a shared
    cache, in the cache (pulled only when a build needs it; a stage built here and not
    shared yet is pushed)."""
    if run.cache:
        cached = is_cached(run, outside, session, name)
        if session.answers(run.cache):
            return cached
    return is_built(run, engine, name)


def ensure_local(
    run: Run,
    engine: Engine,
    outside: Outside,
    session: Session,
    name: str,
    *,
    where: str = "",
    pull: bool = True,
) -> None:
    """The image of stage ``name`` in ``engine``: there already, pulled from the shared
    cache (``pull``: not tried already), or built (its parents made local the same way)."""
    if is_built(run, engine, name):
        return
    if run.cache:  # built by another builder of this run: shared once its push ends
        session.pushed(run.cached_ref(name))
    if pull and is_cached(run, outside, session, name) and _pull(run, engine, session, name):
        return
    build_stage(run, engine, outside, session, name, where=where)


def pull_side_by_side(
    run: Run, engine: Engine, outside: Outside, session: Session, names: Sequence[str]
) -> set[str]:
    """Pull at once the stages of ``names`` that the shared cache holds and ``engine``
    lacks: a pull waits on the link and on unpacking its layers one after another, not on
    the pull before it (a vLLM bump on a fresh runner needs the wheels' image to compile
    on and verl's to assemble on). The stages whose pull was tried, pulled or not (said)."""
    wanted = []
    for name in names if run.cache else ():
        if is_built(run, engine, name):
            continue
        session.pushed(run.cached_ref(name))  # built by another builder of this run
        if is_cached(run, outside, session, name):
            wanted.append(name)
    if wanted:
        with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
            fetched = list(pool.map(lambda name: _fetch(run, engine, session, name), wanted))
        # Taken in once every pull has ended: a lying image may be another stage's under a
        # second tag, and removing its tag must not remove what a pull still registers.
        for name in [name for name, ok in zip(wanted, fetched, strict=True) if ok]:
            _adopt(run, engine, session, name)
    return set(wanted)


def _pull(run: Run, engine: Engine, session: Session, name: str) -> bool:
    """Pull stage ``name`` from the cache and tag it as built here; False (said) when the
    pull fails or the image's key label is not the key its tag claims."""
    return _fetch(run, engine, session, name) and _adopt(run, engine, session, name)


def _fetch(run: Run, engine: Engine, session: Session, name: str) -> bool:
    """Pull stage ``name``'s image from the cache; False (said) when the pull fails."""
    cached = run.cached_ref(name)
    started = time.monotonic()
    try:
        engine.pull(cached)
    except GraphToolError as exc:
        if proc.interrupted():  # stopped by Ctrl-C, in a thread of pull_side_by_side
            raise
        _warn(f"could not pull {cached} ({exc}); building it here")
        return False
    session.timeline.transfer(trace.Transfer.PULL, name, started, time.monotonic())
    return True


def _adopt(run: Run, engine: Engine, session: Session, name: str) -> bool:
    """Tag the image pulled for stage ``name`` as built here, and drop the cache's tag;
    False (said) when its key label is not the key its tag claims."""
    cached, key = run.cached_ref(name), run.keys[name].key
    # Another run on this engine may pull the same tag at once and remove it when done:
    # what follows names the image by its id.
    image = engine.image_id(cached)
    if image is None:  # it did already, once it had tagged the stage
        engine.refresh()
        return is_built(run, engine, name)
    label = engine.labels(image).get(KEY_LABEL, "")
    if label == key:
        engine.tag(image, run.ref(name))
        known = session.ledger.entries().get(name)
        if known is None or known.status is not Status.BUILT:  # built by another builder: so
            session.ledger.record(name, Entry(Status.PULLED, key=run.keys[name].short))
    with contextlib.suppress(GraphToolError):  # gone: removed by the other run's pull
        engine.untag(cached)  # the stage's own tag keeps the image
    if label != key:
        _warn(
            f"refused {cached}: its key label is {label[:12] or 'missing'}, not the key its "
            "tag claims; building it here"
        )
    return label == key


def _push_soon(run: Run, engine: Engine, session: Session, name: str) -> None:
    """Push stage ``name`` in the background, one push at a time: the stages after it build
    meanwhile (``pushes_done`` waits for them all)."""
    session.push_soon(run.cached_ref(name), lambda: _push(run, engine, session, name))


def pushes_done(run: Run, session: Session) -> None:
    """Wait for every push begun so far (the image is shared once its run ends)."""
    session.pushes_done()
    not_shared = session.ledger.not_shared()
    if run.cache and not_shared:
        session.console.say(f"not shared through {run.cache}: {', '.join(not_shared)}")


def _push(run: Run, engine: Engine, session: Session, name: str) -> None:
    """Share what was built; a push that fails fails nothing: it is said once, and the
    cache is not asked again in this run (the next build of the key elsewhere builds it)."""
    cached = run.cached_ref(name)
    if not session.answers(run.cache):
        session.ledger.shared(name, False)  # the cache stopped answering after it was begun
        return
    try:
        engine.tag(run.ref(name), cached)
        started = time.monotonic()
        engine.push(cached)
        session.timeline.transfer(trace.Transfer.PUSH, name, started, time.monotonic())
        session.console.say(f"pushed {name} {run.keys[name].short} to {run.cache}")
        session.ledger.shared(name, True)
    except GraphToolError as exc:
        session.ledger.shared(name, False)
        if session.silence(run.cache):
            _warn(f"stage {name} was built but not pushed to {run.cache} ({exc}); pushing "
                  "nothing more in this run")  # fmt: skip
    finally:
        with contextlib.suppress(GraphToolError):
            engine.untag(cached)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def build_stage(
    run: Run, engine: Engine, outside: Outside, session: Session, name: str, *, where: str = ""
) -> bool:
    """Build stage ``name`` on ``engine`` (the builder named ``where``, if one of several)
    unless its image exists there; True when it built."""
    return name in build_stages(run, engine, outside, session, (name,), where=where)


# How a stage a build had to make ended: None when it was built.
Outcome = Callable[[str, "GraphToolError | None"], None]


def build_stages(
    run: Run,
    engine: Engine,
    outside: Outside,
    session: Session,
    names: Sequence[str],
    *,
    where: str = "",
    done: Outcome | None = None,
) -> set[str]:
    """Build those of ``names`` whose image ``engine`` lacks, and the parents they need that
    are neither there nor in the shared cache (their inputs fetched through ``outside``), in
    as few solves as squashed stages allow; the stages built. ``done`` hears how each stage
    to build ended, as it ends; the first failure is raised once every solve that could run
    has run. A stage whose closure is not locked is refused (hermetic=1, the default)."""
    if run.options.locked:
        check_locked(run)
    for name in [name for name in names if is_built(run, engine, name)]:
        if session.answers(run.cache) and not is_cached(run, outside, session, name):
            _push_soon(run, engine, session, name)  # built before the cache was set, or unpushed
    todo = to_build(run, engine, outside, session, names)
    if run.options.hermetic or run.options.locked:
        check_closures(run, todo)
    builds = _Builds(
        run, engine, outside, session, where=where, tell=done or (lambda name, error: None)
    )
    with contextlib.ExitStack() as held:
        # One build of a stage key at a time, among all runs that share this state directory
        # (its context folder is named by the key): a second run waits, then finds it built.
        for name in sorted(todo):
            key = run.keys[name].short
            me = turns.Holder.me(",".join(run.archs), f"builds {name} {key}")
            turn = run.state_dir / "turns" / f"{name}-{key}"
            held.enter_context(turns.held(turn, me, run.options.wait))
        if todo:
            engine.refresh()  # another run may have built some since this one looked
            # Asked again together: the stages to build and the parents they take.
            engine.image_ids([run.ref(n) for n in run.graph.order if n in _with_parents(run, todo)])
        left = [name for name in todo if not is_built(run, engine, name)]
        sealed = {name for name in left if run.sealed(name)}
        for wave in solve.waves(run.graph, left, sealed):
            builds.solve(wave)
    first = next((builds.failed[n] for n in run.graph.order if n in builds.failed), None)
    if first is not None:
        raise first
    return builds.built


def _with_parents(run: Run, names: Sequence[str]) -> set[str]:
    return {*names, *(parent for name in names for parent in run.graph[name].parents)}


def to_build(
    run: Run, engine: Engine, outside: Outside, session: Session, names: Sequence[str]
) -> list[str]:
    """Those of ``names`` whose image ``engine`` lacks, and the parents they need that are
    neither there nor in the shared cache (a parent another builder of this run pushes
    counts once pushed), in build order."""
    found: set[str] = set()
    todo = [name for name in names if not is_built(run, engine, name)]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        for parent in run.graph[name].parents:
            if parent in found or is_built(run, engine, parent):
                continue
            if run.cache:
                session.pushed(run.cached_ref(parent))
            if not is_cached(run, outside, session, parent):
                todo.append(parent)
    return [name for name in run.graph.order if name in found]


class _Builds:
    """The solves of one ``build_stages``, one after the other: what they built, and the
    error of each stage that failed (its own, or that of the stage it waited for)."""

    def __init__(
        self, run: Run, engine: Engine, outside: Outside, session: Session, *, where: str,
        tell: Outcome,
    ) -> None:  # fmt: skip
        self.run, self.engine, self.outside, self.where, self.tell = (
            run, engine, outside, where, tell
        )  # fmt: skip
        self.session = session
        self.built: set[str] = set()
        self.failed: dict[str, GraphToolError] = {}
        # The stages whose image holds their own files alone (a source stage's /dist, prune's
        # trees): built FROM scratch, on no parent's layers.
        self.scratch: set[str] = set()
        self._seconds: dict[str, float] = {}

    def solve(self, wave: tuple[str, ...], *, fresh: bool = False) -> None:
        """Build ``wave`` in one solve (solve.py), less the stages whose parent failed;
        ``fresh``: its own steps run anew, none taken from BuildKit's cache."""
        wave = self._left(wave, self.failed)  # they wait for the next run
        if not wave:
            return
        with contextlib.ExitStack() as held:
            folder, kept = _context_folder(self.run, wave[-1], held)
            again = self._solve(wave, folder, kept, fresh)
        for name in again:  # once the folder is free: a stage built again takes it too
            # Alone, on its parent's image, and anew: BuildKit 0.13 matches the steps built on
            # the other copy of the parent to those on its image, and would give them back.
            self.solve((name,), fresh=True)

    def _solve(
        self, wave: tuple[str, ...], context_dir: Path, kept: bool, fresh: bool
    ) -> list[str]:
        """Build ``wave`` from ``context_dir``; the stages to build again, alone."""
        owners, unprepared = self._prepare(wave, context_dir)
        wave = self._left(wave, unprepared)  # a fetch, a patch, a parent
        if not wave:
            return []
        failpoints.reached("context")
        run = self.run
        for name in wave:
            key = run.keys[name]
            records.begin(run.records_dir, name, key.key, key.inputs)  # before its tag can exist
            self.session.ledger.start(name, key.short, last_seconds(run, name), self.where)
        errors: dict[str, GraphToolError] = {}
        sealed = run.sealed(wave[0]) is not None  # a wave is sealed or not throughout (waves)
        with (
            _StageLogs(self.outside.logs, run, wave, self.session) as logs,
            _secrets(run, sealed=sealed) as (secrets, hide),
        ):
            router = solve.Router(owners, logs.tell)
            jobs = {
                # each build's own output, as docker gave it, beside the stage logs
                name: dataclasses.replace(
                    _job(run, wave, name, context_dir, secrets=secrets, hide=hide),
                    log=self.outside.logs / "builds" / f"{name}-{run.keys[name].short}.log",
                    on_line=functools.partial(router.feed, name),
                    no_cache=fresh,
                )
                for name in wave
            }
            started, ended = time.monotonic(), {}
            for name, error, image in _run_all(self.engine, jobs):
                if error is None:
                    self._built(name, logs.seconds(name), logs, image)
                else:
                    errors[name], ended[name] = error, time.monotonic()
            for name in (name for name in wave if name in errors):
                self._failed(name, router.failed(name), errors, logs, ended[name] - started)
        again = self._misbuilt(wave)
        self._record([name for name in wave if name in self.built])
        if not errors and not kept:
            shutil.rmtree(context_dir, ignore_errors=True)  # kept when a build fails, to look at
        return again

    def _misbuilt(self, wave: tuple[str, ...]) -> list[str]:
        """The stages of ``wave`` that are not built on their parent's image as tagged, and
        the stages of it built on them: untagged, to build again one at a time. BuildKit's
        cache can hold two results of one step (a rebuild without cache adds one), and two
        builds of one solve may each take another: a stage would ship a copy of its
        parent's layers instead of sharing them. A stage FROM scratch is on no parent's
        layers; one whose parent failed has no image to compare with (its error is said)."""
        run, engine, again = self.run, self.engine, []
        for name in wave:
            parent = (run.graph[name].parents or ("",))[0]
            unchecked = parent not in wave or parent in self.failed or name in self.scratch
            if name not in self.built or unchecked:
                continue
            if parent in again or not _shares(engine, run.ref(parent), run.ref(name)):
                again.append(name)
                self.built.discard(name)
                engine.untag(run.ref(name))
        if again:
            _warn(
                f"{', '.join(again)}: built on another copy of a parent's layers than its image "
                "holds (BuildKit's cache keeps two of them); building again on the image"
            )
        return again

    def _prepare(
        self, wave: tuple[str, ...], scratch: Path
    ) -> tuple[dict[str, str], dict[str, GraphToolError]]:
        """The parents ``wave`` needs from outside it, made local, and its context written
        into ``scratch``; which stage each BuildKit stage of its Dockerfile is of, and the
        stages it could not prepare with why (a parent that cannot be pulled, a fetch, a
        patch): the others build."""
        # startup: fetching and patching only for a stage that builds
        from rocmgraph.building import context

        run, engine = self.run, self.engine
        images: dict[str, str] = {}
        missing: dict[str, GraphToolError] = {}  # a parent from outside, each made local once
        parents = tuple(
            dict.fromkeys(p for n in wave for p in run.graph[n].parents if p not in wave)
        )
        tried = pull_side_by_side(run, engine, self.outside, self.session, parents)
        for parent in parents:
            try:
                ensure_local(run, engine, self.outside, self.session, parent, where=self.where,
                             pull=parent not in tried)  # fmt: skip
            except GraphToolError as exc:
                missing[parent] = exc
            images[parent] = run.ref(parent)
        failed: dict[str, GraphToolError] = {}
        for name in wave:
            cause = next((p for p in run.graph[name].parents if p in missing), None)
            if cause is not None:
                failed[name] = missing[cause]
        # Rendered without them and what needs them: a squashed stage asks the engine for
        # the configuration of its parent, which is not there.
        ready = tuple(
            name
            for name in wave
            if name not in failed and not run.graph.ancestors(name) & failed.keys()
        )
        for name in wave:
            _sweep_contexts(run, name, scratch.name)
        recipe, owners = solve_recipe(run, engine, ready, images) if ready else ("", {})
        self.scratch.update(name for name in _SCRATCH.findall(recipe) if name in wave)
        failed |= context.prepare_many(run, self.outside, ready, scratch, recipe=recipe)
        return owners, failed

    def _record(self, tagged: list[str]) -> None:
        """The records of the stages ``tagged``, once the solve's secrets are gone (a kill
        between a tag and its record, the tag being the truth, leaves no secret behind), and
        their pushes."""
        if tagged:
            failpoints.reached("tagged")
        run = self.run
        for name in tagged:
            key = run.keys[name]
            records.save(run.records_dir, name, key.key, key.inputs, seconds=self._seconds[name])
            if self.session.answers(run.cache):
                _push_soon(run, self.engine, self.session, name)
            elif run.cache:
                self.session.ledger.shared(name, False)  # the cache stopped answering: kept here
            self.tell(name, None)

    def _built(self, name: str, seconds: float, logs: _StageLogs, image: str) -> None:
        key = self.run.keys[name]
        self._seconds[name] = seconds
        compiled = compilecache.from_log(logs.text(name))
        network = "off" if self.run.sealed(name) else "on"
        entry = Entry(
            Status.BUILT, seconds, self.where, str(compiled or ""), key=key.short,
            network=network, image=image,
        )  # fmt: skip
        self.session.ledger.record(name, entry)
        self.built.add(name)

    def _failed(
        self, name: str, step: str, errors: dict[str, GraphToolError], logs: _StageLogs,
        seconds: float,
    ) -> None:  # fmt: skip
        """Stage ``name``'s build failed: at a step of stage ``step`` (its own, or one before
        it in the solve: said as that stage's failure, with the lines of that stage's log,
        wherever the step ran), or because a stage before it in the solve did."""
        cause = self._cause(name, errors)
        if cause is not None:
            self._fail(name, errors[cause])
            return
        error = errors[name]
        if isinstance(error, BuildFailed):
            step = step if step in logs.stages else name
            fix = _store_fixes(self.outside, logs.text(step))
            error = errors[name] = BuildFailed(
                step, error.returncode, logs.last(step), logs.path(step), fix
            )
        key = self.run.keys[name].short
        self.session.ledger.record(name, Entry(Status.FAILED, seconds, self.where, key=key))
        self._fail(name, error)

    def _left(self, wave: tuple[str, ...], failed: Mapping[str, GraphToolError]) -> tuple[str, ...]:
        """``wave`` less the stages of ``failed`` and those that need one, each told why."""
        for name in wave:
            cause = name if name in failed else self._cause(name, failed)
            if cause is not None and name not in self.failed:
                self._fail(name, failed[cause])
        return tuple(name for name in wave if name not in self.failed)

    def _cause(self, name: str, failed: Mapping[str, GraphToolError]) -> str | None:
        """The first stage ``name`` needs that failed, if any."""
        ancestors = self.run.graph.ancestors(name)
        return next((a for a in self.run.graph.order if a in ancestors and a in failed), None)

    def _fail(self, name: str, error: GraphToolError) -> None:
        self.failed[name] = error
        self.tell(name, error)


def solve_recipe(
    run: Run, engine: Engine, wave: Sequence[str], images: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    """The Dockerfile of one solve of ``wave`` (a parent built before enters as its image,
    ``images``), and which stage each of its BuildKit stages is of."""
    # startup: rendering a solve is for a build that has stages to build
    from rocmgraph.building import dockerfiles

    configs = {}
    for name in wave:
        stage = run.graph[name]
        if stage.squash:  # FROM scratch: the configuration of the image it squashes
            config = engine.config(run.ref(stage.parents[0]))
            configs[name] = imageconfig.lines(config, dropped_env(stage, run.pins))
    sealed = [name for name in wave if run.sealed(name)]
    parts = dockerfiles.stage_texts(
        run, wave, images=images, squash=True, configs=configs, sealed=sealed
    )
    header = f"# One solve of {', '.join(wave)}, as rocmgraph renders it for this build.\n"
    return "\n".join([header, *parts.values()]), dockerfiles.owners(parts)


_SCRATCH = re.compile(r"^FROM scratch AS (\S+)$", re.MULTILINE)


def _run_all(
    engine: Engine, jobs: Mapping[str, BuildJob]
) -> Iterator[tuple[str, GraphToolError | None, str]]:
    """Start every build at once (BuildKit merges what they share); each as it ends, with
    its error, or the digest of the image it made."""
    ends: queue.SimpleQueue[tuple[str, GraphToolError | None, str]] = queue.SimpleQueue()

    def one(name: str, job: BuildJob) -> None:
        try:
            image = engine.build(job)
        except GraphToolError as exc:
            ends.put((name, exc, ""))
        except BaseException as exc:
            ends.put((name, EngineError(f"stage {name}: {exc}"), ""))
        else:
            ends.put((name, None, image))

    for name, job in jobs.items():
        threading.Thread(target=one, args=(name, job), name=f"build-{name}", daemon=True).start()
    for _ in jobs:
        yield ends.get()


def _store_fixes(outside: Outside, log: str) -> tuple[str, ...]:
    """What to do about each file of the store that pip refused for its hash in ``log``,
    each checked again (one that lost its hash is removed, for the next run to fetch)."""
    fixes = []
    for mismatch in failure.hash_mismatches(log.splitlines()):
        stored = outside.store.recheck(mismatch.expected)
        if stored is not None:
            fixes.append(failure.store_fix(mismatch, stored.path, stored.sha256))
    return tuple(fixes)


def _shares(engine: Engine, parent: str, child: str) -> bool:
    """Whether image ``child`` is built on the layers of image ``parent``."""
    below = engine.layers(parent)
    return engine.layers(child)[: len(below)] == below


_DONE = re.compile(r"^#\d+ DONE (\d+(?:\.\d+)?)s$")


class _StageLogs:
    """The log of each stage of a solve, which its Router tells the stage's lines (and the
    console, through the ledger); the last lines of each, for an error."""

    def __init__(self, folder: Path, run: Run, wave: Sequence[str], session: Session) -> None:
        # startup: only a failed build reads its log
        from rocmgraph.outside.docker import TAIL, log_file

        self.session = session
        self.stages = tuple(wave)
        self._paths = {name: log_file(folder, name, run.keys[name].key) for name in wave}
        self._files = {name: path.open("w", encoding="utf-8") for name, path in self._paths.items()}
        self._tails: dict[str, deque[str]] = {name: deque(maxlen=TAIL) for name in wave}
        self._seconds = dict.fromkeys(wave, 0.0)
        self._lock = threading.Lock()

    def __enter__(self) -> _StageLogs:
        return self

    def __exit__(self, *exc: object) -> None:
        for file in self._files.values():
            file.close()

    def tell(self, stage: str, line: str) -> None:
        done = _DONE.match(line)
        with self._lock:
            self._files[stage].write(line + "\n")
            self._files[stage].flush()
            self._tails[stage].append(line)
            if done:
                self._seconds[stage] += float(done.group(1))
        self.session.ledger.saw(stage, line)

    def seconds(self, stage: str) -> float:
        """The time of the stage's own steps, wherever they ran: the builds of one solve end
        in any order (a stage's image may be exported after that of a stage built on it)."""
        with self._lock:
            return self._seconds[stage]

    def text(self, stage: str) -> str:
        return self._paths[stage].read_text(encoding="utf-8", errors="replace")

    def last(self, stage: str) -> list[str]:
        with self._lock:
            return list(self._tails[stage])

    def path(self, stage: str) -> Path:
        return self._paths[stage]


def _context_folder(run: Run, stage: str, held: contextlib.ExitStack) -> tuple[Path, bool]:
    """Where a solve that ends with ``stage`` writes its context, and whether the folder
    stays once the build succeeds. The stage's own folder, kept: BuildKit sends only what
    changed since it last read the same path (by size, mode and mtime), so a patch edit
    sends the patched files, not vLLM's 77 MB again (benchmarks/context.py). A run that
    finds it in use (another key of the stage building at once) takes a folder named by
    its key instead, gone once its build succeeds."""
    me = turns.Holder.me(",".join(run.archs), f"prepares {stage}")
    try:
        held.enter_context(turns.held(run.state_dir / "turns" / f"context-{stage}", me, wait=0))
    except turns.Busy:
        return run.state_dir / "contexts" / f"{stage}-{run.keys[stage].short}", False
    return run.state_dir / "contexts" / stage, True


def _sweep_contexts(run: Run, name: str, keep: str) -> None:
    """A failed build keeps its context, to look at, until its stage builds again: then
    the contexts of the stage's other keys go, but not one another run builds from now."""
    folder = run.state_dir / "contexts"
    me = turns.Holder.me(",".join(run.archs), f"sweeps {name}")
    for old in sorted(folder.glob(f"{name}-*")) if folder.is_dir() else []:
        if old.name == keep or not re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{12}}", old.name):
            continue
        turn = run.state_dir / "turns" / old.name
        with contextlib.suppress(turns.Busy), turns.held(turn, me, wait=0):
            shutil.rmtree(old, ignore_errors=True)


def last_seconds(run: Run, name: str) -> float | None:
    """How long the last build of stage ``name`` here took (any key), if it is recorded."""
    record = records.load(run.records_dir, name)
    return record.seconds if record is not None and record.seconds else None


def secret_texts(
    run: Run, index: str, *, report: bool = False, sealed: bool = False
) -> dict[str, str]:
    """The BuildKit secrets of a build, id -> text: pip's configuration (``index``, its login
    included; ``report``: each install prints its JSON report; ``sealed``: no index, only
    the closure's files) and, with a shared compile cache, ccache's (local hits are shared
    too)."""
    pip = f"[global]\nindex-url = {index}\n"
    if report:  # verbose: the reports of the pips that install isolated builds' requirements
        # `pip wheel` (a source stage's compile, which fetches nothing) stays quiet: an hour of
        # compiler lines would pass the 2 MiB of a step's output BuildKit keeps, cutting the
        # reports. Here, not in the recipe, where it would move every source stage's key.
        pip += "verbose = 1\n[install]\nreport = -\n[wheel]\nverbose = 0\n"
    if sealed:
        pip = f"[global]\nno-index = true\nfind-links = {CLOSURE_LINKS}\n"
    texts = {PIP_SECRET: pip}
    if run.compile_cache:
        remote = kinds.for_ccache(run.compile_cache)
        texts[CCACHE_SECRET] = f"remote_storage = {remote}\nreshare = true\n"
    return texts


@contextlib.contextmanager
def _secrets(
    run: Run, *, report: bool = False, sealed: bool = False
) -> Iterator[tuple[dict[str, Path], tuple[str, ...]]]:
    """The secrets of a build in private files while the block runs, and the URLs whose
    passwords its output must not show."""
    index = credentials.with_login(run.pins.python.index, credentials.netrc_path())
    texts = secret_texts(run, index, report=report, sealed=sealed)
    with private_files(texts, run.state_dir / "secrets") as secrets:
        yield secrets, (index, run.compile_cache)


def _job(
    run: Run,
    wave: Sequence[str],
    name: str,
    context_dir: Path,
    *,
    secrets: Mapping[str, Path],
    hide: tuple[str, ...],
) -> BuildJob:
    """The build of stage ``name`` in the solve of ``wave``, from ``context_dir``."""
    before = [other for other in wave if other in run.graph.ancestors(name)]
    return BuildJob(
        stage=name,
        ref=run.ref(name),
        context=context_dir,
        # the variables of the stages this build makes (others would be "not consumed")
        build_args={
            BUILD_ARGS[variable]: run.variables[variable]
            for stage in (*before, name)
            for variable, _ in run.graph[stage].variables
        },
        labels=labels(run, name),
        secrets=secrets,
        hide=hide,  # their passwords, should a tool ever print them
        target=name,
        network="none" if run.sealed(name) else "",  # hermetic: only its closure comes in
        on_line=lambda line: None,
    )


def rebuild(
    run: Run,
    engine: Engine,
    outside: Outside,
    session: Session,
    name: str,
    *,
    tag: str,
    report: bool = False,
) -> list[str]:
    """Build stage ``name`` again, every step run anew, tagged ``tag`` (its parents as they
    are): what `doit verify stage=` compares with the image of its key. ``report``: pip
    prints a report of each install (what `doit lock closures=1` reads); the build's output
    lines are returned."""
    # startup: fetching and patching only for a stage that builds
    from rocmgraph.building import context

    images = {}
    for parent in run.graph[name].parents:
        ensure_local(run, engine, outside, session, parent)
        images[parent] = run.ref(parent)
    recipe, _ = solve_recipe(run, engine, (name,), images)
    # this run's own folder: two verifications of one stage at once must not share one
    scratch = run.state_dir / "contexts" / owned(f"verify-{name}-{run.keys[name].short}")
    lines: list[str] = []
    try:
        context.prepare_whole(run, outside, (name,), scratch, recipe=recipe)
        with _secrets(run, report=report, sealed=run.sealed(name) is not None) as (
            secrets,
            hide,
        ):
            job = _job(run, (name,), name, scratch, secrets=secrets, hide=hide)
            engine.build(dataclasses.replace(job, ref=tag, no_cache=True, on_line=lines.append))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return lines


@contextlib.contextmanager
def private_files(texts: Mapping[str, str], folder: Path) -> Iterator[dict[str, Path]]:
    """Each of ``texts`` (name -> text) in a private file under ``folder`` (outside any
    build context), for one build only. A run killed before it could remove its files
    leaves them behind: each new one first removes those of runs that are gone (by the
    pid in the folder's name), never a live run's."""
    folder.mkdir(parents=True, exist_ok=True)
    leftovers.sweep(folder)  # each build: a handful of entries, and a sweep is idempotent
    with tempfile.TemporaryDirectory(prefix=owned("secrets"), dir=folder) as scratch:
        files = {}
        for name, text in texts.items():
            path = files[name] = Path(scratch) / name
            with disk.writing(path):
                path.touch(mode=0o600)  # private before a login is written to it
                path.write_text(text)
        yield files


def labels(run: Run, name: str) -> dict[str, str]:
    """Every stage: its name, key, and whether it built with the network off (from its
    closure). The final image: OCI labels and every stage's key."""
    found = {
        "org.verl-rocm-graph.stage": name,
        KEY_LABEL: run.keys[name].key,
        HERMETIC_LABEL: "true" if run.sealed(name) else "false",
    }
    if name == run.graph.final:
        pins = run.pins
        found.update(
            {
                "org.opencontainers.image.created": datetime.now(UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                "org.opencontainers.image.source": pins.image.source,
                "org.opencontainers.image.version": pins.image.version,
                "org.opencontainers.image.revision": pins.sources["verl"].commit
                if "verl" in pins.sources
                else "",
                "org.verl-rocm-graph.arch": ",".join(run.archs),
                **{f"org.verl-rocm-graph.key.{s}": k.key for s, k in run.keys.items()},
            }
        )
    return found


SBOM = "sbom.cdx.json"  # the image's SBOM, in its manifest folder (rocmgraph/inimage/sbom.py)


def keep_sbom(run: Run, outside: Outside, image: str) -> Path | None:
    """The SBOM ``image`` holds, copied beside the run's record (.build/sbom.cdx.json), for
    a scanner that reads files; None when the image has none (built before it had one)."""
    try:
        text = outside.docker.read(image, f"{run.pins.manifest}/{SBOM}")
    except GraphToolError:
        return None
    path = run.state_dir / SBOM
    atomic_write_text(path, text)
    return path


PROVENANCE = "provenance.intoto.json"  # the run's SLSA provenance, beside its record


def keep_provenance(
    run: Run, engine: Engine, session: Session, image: str, pushed: str = ""
) -> Path:
    """The SLSA provenance of ``image`` (by its id; and ``pushed``, ``<ref>@sha256:...``,
    the copy a registry holds) as this run built it, beside the run's record
    (.build/provenance.intoto.json): every locked input, the stage keys, and the stages
    this run built, with their builders and times."""
    # startup: provenance only for a run that tags an image
    from rocmgraph.building import slsa
    from rocmgraph.common.fsutil import sha256_file

    now, clock = datetime.now(UTC), time.monotonic()

    def wall(moment: float) -> datetime:  # the ledger's monotonic times, on the clock
        return now - timedelta(seconds=clock - moment)

    built = [
        slsa.StageRun(name, run.keys[name].key, entry.builder or "", wall(entry.started),
                      wall(entry.ended or clock), str(entry.status), entry.image)
        for name, entry in session.ledger.entries().items()
        if entry.status is Status.BUILT and entry.started
    ]  # fmt: skip
    document = slsa.statement(
        run, image, engine.image_id(image) or "", built,
        pins_sha256=sha256_file(Path(run.options.pins)), invocation=str(uuid.uuid4()),
    )  # fmt: skip
    if pushed:
        name, _, digest = pushed.partition("@sha256:")
        subjects = cast(list[dict[str, object]], document["subject"])  # as slsa makes it
        subjects.append({"name": name, "digest": {"sha256": digest}})
    path = run.state_dir / PROVENANCE
    slsa.write(path, document)
    return path


def attach(run: Run, outside: Outside, pushed: str, documents: Mapping[str, Path]) -> list[str]:
    """The image's SBOM and provenance beside ``pushed`` (``<ref>@sha256:...``) in its
    registry, under the tags cosign's convention gives them (``sha256-<hex>.sbom``,
    ``.att``); the refs they were pushed to."""
    ref, _, digest = pushed.partition("@sha256:")
    repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    refs = []
    for suffix, path in documents.items():
        target = f"{repository}:sha256-{digest}.{suffix}"
        outside.cache_registry.attach(
            target, _MEDIA[suffix], path.read_bytes(),
            {"org.opencontainers.image.ref.name": pushed},
        )  # fmt: skip
        refs.append(target)
    return refs


_MEDIA = {"sbom": "application/vnd.cyclonedx+json", "att": "application/vnd.in-toto+json"}


def tag_final(run: Run, engine: Engine, outside: Outside, session: Session) -> str:
    """Tag the final stage's image with the image's friendly name (pulled from the shared
    cache first, if only the cache has it); that name."""
    ensure_local(run, engine, outside, session, run.graph.final)
    pushes_done(run, session)  # what the run built is shared before it says the image is done
    alias = run.friendly_tag()
    engine.tag(run.ref(run.graph.final), alias)
    if run.options.push and run.cache:
        shared = f"{run.cache}/{alias}"
        engine.tag(alias, shared)
        engine.push(shared)  # asked for: a failure fails the run
        session.console.say(f"pushed {alias} to {shared}")
    return alias
