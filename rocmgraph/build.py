"""Build one stage: skip it when its image exists, else render and hand it to an engine.

Every function takes the engine it builds on: the task layer chooses it (one run
may well use several)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmgraph import failpoints, records, statelock
from rocmgraph.engine import BuildJob, Engine
from rocmgraph.errors import CacheError, GraphToolError
from rocmgraph.fsutil import owned
from rocmgraph.ledger import LEDGER, Entry, Status
from rocmgraph.outside import Outside, credentials, leftovers
from rocmgraph.progress import CONSOLE
from rocmgraph.recipe import CCACHE_SECRET, PIP_SECRET, parent_arg
from rocmgraph.run import Run

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

# The build argument of each command-line variable a stage takes (as verl's recipe names it).
BUILD_ARGS = {"commit_tag": "GIT_COMMIT_TAG"}
KEY_LABEL = "org.verl-rocm-graph.key"  # every stage image says its key; a pull is checked by it

# Shared caches that did not answer in this run: said once, then built past.
_SILENT: set[str] = set()
_SILENT_LOCK = threading.Lock()
# Pushes to the shared cache run in one background thread while later stages build; by the
# cached ref they push, so a builder that needs one as a parent waits for it.
_PUSHES: dict[str, Future[None]] = {}
_PUSHES_LOCK = threading.Lock()


def is_built(run: Run, engine: Engine, stage: str) -> bool:
    return engine.image_exists(run.ref(stage))


def is_tagged(run: Run, engine: Engine) -> bool:
    """The friendly tag names the final stage's image already."""
    image = engine.image_id(run.ref(run.graph.final))
    return image is not None and engine.image_id(run.friendly_tag()) == image


def is_cached(run: Run, outside: Outside, name: str) -> bool:
    """Whether the shared cache holds the image of stage ``name`` whole; False without a
    cache, or when it does not answer (said once: the build goes on here)."""
    if not _cache_answers(run):
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
        if _silence(run):
            _warn(f"the stage cache {run.cache} does not answer ({exc}); building here")
        return False


def _silence(run: Run) -> bool:
    """Ask the shared cache nothing more in this run; True the first time (to say why)."""
    with _SILENT_LOCK:
        said = run.cache in _SILENT
        _SILENT.add(run.cache)
    return not said


def is_done(run: Run, engine: Engine, outside: Outside, name: str) -> bool:
    """Whether stage ``name`` needs nothing from this run: built here, and with a shared
    cache, in the cache (pulled only when a build needs it; a stage built here and not
    shared yet is pushed)."""
    if run.cache:
        cached = is_cached(run, outside, name)
        if _cache_answers(run):
            return cached
    return is_built(run, engine, name)


def _cache_answers(run: Run) -> bool:
    """Whether ``run`` has a shared cache that has not failed to answer in this run."""
    return bool(run.cache) and run.cache not in _SILENT


def ensure_local(run: Run, engine: Engine, outside: Outside, name: str, where: str = "") -> None:
    """The image of stage ``name`` in ``engine``: there already, pulled from the shared
    cache, or built (its parents made local the same way)."""
    if is_built(run, engine, name):
        return
    _pushed(run, name)  # built by another builder of this run: shared once its push ends
    if is_cached(run, outside, name) and _pull(run, engine, name):
        return
    build_stage(run, engine, outside, name, where)


def _pull(run: Run, engine: Engine, name: str) -> bool:
    """Pull stage ``name`` from the cache and tag it as built here; False (said) when the
    pull fails or the image's key label is not the key its tag claims."""
    cached, key = run.cached_ref(name), run.keys[name].key
    try:
        engine.pull(cached)
    except GraphToolError as exc:
        _warn(f"could not pull {cached} ({exc}); building it here")
        return False
    label = engine.labels(cached).get(KEY_LABEL, "")
    if label == key:
        engine.tag(cached, run.ref(name))
        LEDGER.record(name, Entry(Status.PULLED, key=run.keys[name].short))
    engine.untag(cached)  # the stage's own tag keeps the image
    if label != key:
        _warn(
            f"refused {cached}: its key label is {label[:12] or 'missing'}, not the key its "
            "tag claims; building it here"
        )
    return label == key


def _push_soon(run: Run, engine: Engine, name: str) -> None:
    """Push stage ``name`` in the background, one push at a time: the stages after it build
    meanwhile (``pushes_done`` waits for them all)."""
    with _PUSHES_LOCK:
        _PUSHES[run.cached_ref(name)] = _pusher().submit(_push, run, engine, name)


def _pushed(run: Run, name: str) -> None:
    """Wait for this run's push of stage ``name``, if one was begun."""
    with _PUSHES_LOCK:
        push = _PUSHES.get(run.cached_ref(name)) if run.cache else None
    if push is not None:
        push.result()


@functools.cache
def _pusher() -> ThreadPoolExecutor:
    """The push thread, made at the first push: a run without a cache never imports it."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="push")


def pushes_done(run: Run) -> None:
    """Wait for every push begun so far (the image is shared once its run ends)."""
    with _PUSHES_LOCK:
        pending = list(_PUSHES.values())
        _PUSHES.clear()
    for push in pending:
        push.result()  # _push says its own failures: none is raised
    if run.cache and LEDGER.not_shared():
        CONSOLE.say(f"not shared through {run.cache}: {', '.join(LEDGER.not_shared())}")


def _push(run: Run, engine: Engine, name: str) -> None:
    """Share what was built; a push that fails fails nothing: it is said once, and the
    cache is not asked again in this run (the next build of the key elsewhere builds it)."""
    cached = run.cached_ref(name)
    if not _cache_answers(run):
        LEDGER.shared(name, False)  # the cache stopped answering after this push was begun
        return
    try:
        engine.tag(run.ref(name), cached)
        engine.push(cached)
        CONSOLE.say(f"pushed {name} {run.keys[name].short} to {run.cache}")
        LEDGER.shared(name, True)
    except GraphToolError as exc:
        LEDGER.shared(name, False)
        if _silence(run):
            _warn(f"stage {name} was built but not pushed to {run.cache} ({exc}); pushing "
                  "nothing more in this run")  # fmt: skip
    finally:
        with contextlib.suppress(GraphToolError):
            engine.untag(cached)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def build_stage(run: Run, engine: Engine, outside: Outside, name: str, where: str = "") -> bool:
    """Build stage ``name`` on ``engine`` (the builder named ``where``, if one of several)
    unless its image exists there (its inputs fetched through ``outside``); True when it
    built."""
    # Imported here, not above: what only a build needs (fetching, patching, locking: a
    # third of the import time) is not paid by a run that finds everything built.
    from rocmgraph.lock import check_locked

    if run.options.locked:
        check_locked(run.pins)
    if is_built(run, engine, name):
        if _cache_answers(run) and not is_cached(run, outside, name):
            _push_soon(run, engine, name)  # built before the cache was set, or a push failed
        return False
    key = run.keys[name]
    # One build of a stage key at a time, among all runs that share this state directory
    # (its context folder is named by the key): a second run waits, then finds it built.
    lock = run.state_dir / "locks" / f"{name}-{key.short}"
    doing = f"builds {name} {key.short}"
    me = statelock.Holder.me(",".join(run.archs), doing)
    with statelock.held(lock, me, run.options.wait):
        engine.refresh()  # another run may have built it since this one looked
        if is_built(run, engine, name):
            return False
        _sweep_contexts(run, name, lock.name, me)
        _build(run, engine, outside, name, where)
    if _cache_answers(run):
        _push_soon(run, engine, name)
    elif run.cache:
        LEDGER.shared(name, False)  # the cache stopped answering: built, and kept here
    return True


def _sweep_contexts(run: Run, name: str, keep: str, me: statelock.Holder) -> None:
    """A failed build keeps its context, to look at, until its stage builds again: then
    the contexts of the stage's other keys go, but not one another run builds from now."""
    folder = run.state_dir / "contexts"
    for old in sorted(folder.glob(f"{name}-*")) if folder.is_dir() else []:
        if old.name == keep or not re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{12}}", old.name):
            continue
        lock = run.state_dir / "locks" / old.name
        with contextlib.suppress(statelock.Busy), statelock.held(lock, me, wait=0):
            shutil.rmtree(old, ignore_errors=True)


def _build(run: Run, engine: Engine, outside: Outside, name: str, where: str) -> None:
    from rocmgraph import context

    key = run.keys[name]
    _parents_local(run, engine, outside, name, where)
    LEDGER.start(name, key.short, last_seconds(run, name), where)
    scratch = run.state_dir / "contexts" / f"{name}-{key.short}"
    context_dir = context.prepare(run, engine, outside, name, scratch)
    failpoints.reached("context")
    records.begin(run.records_dir, name, key.key, key.inputs)  # before its tag can exist
    started = time.time()
    with _job(run, name, context_dir) as job:
        engine.build(job)
    failpoints.reached("tagged")
    records.save(run.records_dir, name, key.key, key.inputs, seconds=time.time() - started)
    shutil.rmtree(context_dir, ignore_errors=True)  # kept when the build fails, to look at


def _parents_local(run: Run, engine: Engine, outside: Outside, name: str, where: str) -> None:
    """The parents of stage ``name`` on ``engine``: built by this run, or pulled (only those a
    build needs)."""
    for parent in run.graph[name].parents:
        ensure_local(run, engine, outside, parent, where)


def last_seconds(run: Run, name: str) -> float | None:
    """How long the last build of stage ``name`` here took (any key), if it is recorded."""
    record = records.load(run.records_dir, name)
    return record.seconds if record is not None and record.seconds else None


def secret_texts(run: Run, index: str) -> dict[str, str]:
    """The BuildKit secrets of a build, id -> text: pip's configuration (``index``, its login
    included) and, with a shared compile cache, ccache's (local hits are shared too)."""
    texts = {PIP_SECRET: f"[global]\nindex-url = {index}\n"}
    if run.compile_cache:
        texts[CCACHE_SECRET] = f"remote_storage = {run.compile_cache}\nreshare = true\n"
    return texts


@contextlib.contextmanager
def _job(run: Run, name: str, context_dir: Path, **more: Any) -> Iterator[BuildJob]:
    """The build of stage ``name`` from ``context_dir`` (``more``: BuildJob's other fields),
    its secrets in private files while the block runs."""
    stage = run.graph[name]
    index = credentials.with_login(run.pins.python.index, credentials.netrc_path())
    with private_files(secret_texts(run, index), run.state_dir / "secrets") as secrets:
        job = BuildJob(
            stage=name,
            ref=run.ref(name),
            context=context_dir,
            build_args={
                **{parent_arg(parent): run.ref(parent) for parent in stage.parents},
                **{BUILD_ARGS[name]: run.variables[name] for name, _ in stage.variables},
            },
            labels=labels(run, name),
            secrets=secrets,
            hide=(index, run.compile_cache),  # their passwords, should a tool ever print them
            config_from=run.ref(stage.parents[0]) if stage.squash else "",
            drop_env=stage.drop_env,
            on_line=functools.partial(LEDGER.saw, name),
        )
        yield dataclasses.replace(job, **more)


def rebuild(run: Run, engine: Engine, outside: Outside, name: str, tag: str) -> None:
    """Build stage ``name`` again, every step run anew, tagged ``tag`` (its parents as they
    are): what `doit verify stage=` compares with the image of its key."""
    from rocmgraph import context

    _parents_local(run, engine, outside, name, "")
    scratch = run.state_dir / "contexts" / f"verify-{name}-{run.keys[name].short}"
    context_dir = context.prepare(run, engine, outside, name, scratch)
    with _job(run, name, context_dir, ref=tag, no_cache=True, on_line=lambda line: None) as job:
        engine.build(job)
    shutil.rmtree(context_dir, ignore_errors=True)


@contextlib.contextmanager
def private_files(texts: Mapping[str, str], folder: Path) -> Iterator[dict[str, Path]]:
    """Each of ``texts`` (name -> text) in a private file under ``folder`` (outside any
    build context), for one build only. A run killed before it could remove its files
    leaves them behind: each new one first removes those of runs that are gone (by the
    pid in the folder's name), never a live run's."""
    folder = leftovers.scratch(folder)
    with tempfile.TemporaryDirectory(prefix=owned("secrets"), dir=folder) as scratch:
        files = {}
        for name, text in texts.items():
            path = files[name] = Path(scratch) / name
            path.touch(mode=0o600)  # private before a login is written to it
            path.write_text(text)
        yield files


def labels(run: Run, name: str) -> dict[str, str]:
    """Every stage: its name and key. The final image: OCI labels and every stage's key."""
    found = {"org.verl-rocm-graph.stage": name, KEY_LABEL: run.keys[name].key}
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


def tag_final(run: Run, engine: Engine, outside: Outside) -> str:
    """Tag the final stage's image with the image's friendly name (pulled from the shared
    cache first, if only the cache has it); that name."""
    ensure_local(run, engine, outside, run.graph.final)
    pushes_done(run)  # what the run built is shared before it says the image is done
    alias = run.friendly_tag()
    engine.tag(run.ref(run.graph.final), alias)
    if run.options.push and run.cache:
        shared = f"{run.cache}/{alias}"
        engine.tag(alias, shared)
        engine.push(shared)  # asked for: a failure fails the run
        CONSOLE.say(f"pushed {alias} to {shared}")
    return alias
