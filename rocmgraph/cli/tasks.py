"""The doit tasks, as dicts: dodo.py only wires them to doit's variables.

Creators must stay cheap: doit calls every one of them on every run (``doit
list`` included). The one thing they refuse is a wrong command line: every
variable is checked (``variables.Variables.checked``) before any task is made, so
``archs=gfx942`` or ``force=maybe`` stops the run with exit 3 before anything
is looked at. Everything else that can fail happens in an action, where the
reporter turns it into one line.

``Tasks`` holds what one invocation shares: the stage graph dodo.py hands in,
one Run per set of options (the pins read once), the outside world its
commands reach (made here, passed down), and the demo profiles it serves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The report commands (audit, bump, compare, dockerfile_audit, docs, estimate, graphview,
# lock, patch_status, plan; graphviz) are imported by the action that runs them: doit imports
# this module on every invocation, and a no-op build should not pay for what it never runs.
from rocmgraph.building import execute, progress
from rocmgraph.building.ledger import Entry, Final, Status
from rocmgraph.building.session import Session
from rocmgraph.cli import doitdb
from rocmgraph.cli.reporter import Reporter, guarded
from rocmgraph.cli.variables import (
    COMPILE_CACHE_ENV,
    GRAPH_FORMATS,
    REDIS_PASSWORD_ENV,
    check_format,
)
from rocmgraph.common.engine import Engine
from rocmgraph.common.errors import (
    Answer,
    GraphToolError,
    StaleError,
    VariableError,
)
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.common.layout import ROOT, default_cache
from rocmgraph.config.pins import load as load_pins
from rocmgraph.demo import profile as demo_profile
from rocmgraph.fetch.world import Outside
from rocmgraph.graph import recipe
from rocmgraph.graph.dag import Graph, Stage
from rocmgraph.graph.invocation import Options, Run, check_closures
from rocmgraph.outside import proc

if TYPE_CHECKING:
    from concurrent.futures import Future

    from rocmgraph.commands.plan import Plan

Task = dict[str, Any]


def resolve(options: Options, environ: Mapping[str, str] = os.environ) -> Options:
    """Fill what a profile implies: ``profile=demo`` brings its generated pins file (written
    when first read, not here: making tasks writes nothing) and host networking; and the
    compile cache ``$VERL_GRAPH_COMPILE_CACHE`` names, where the command line names none, and
    the password ``$REDISCLI_AUTH`` gives a redis one."""
    compile_cache = options.compile_cache or environ.get(COMPILE_CACHE_ENV, "")
    password = environ.get(REDIS_PASSWORD_ENV, "")
    options = dataclasses.replace(
        options, compile_cache=compile_cache, compile_cache_password=password
    )
    if options.profile:
        pins = options.pins or str(demo_profile.pins_path(options.profile))
        return dataclasses.replace(options, pins=pins, network=options.network or "host")
    return dataclasses.replace(options, pins=options.pins or "pins.toml")


def _check_format(fmt: str) -> None:
    """For report tasks made without the command line's check (the variables are checked
    before any task is made)."""
    check_format("format", fmt)


def _report(doc: str, action: Any) -> Task:
    """A task that prints a report: always runs, and keeps stdout for the report alone."""
    return {
        "doc": doc,
        "actions": [guarded(action)],
        "uptodate": [False],
        "meta": {"quiet": True},
        "verbosity": 2,
    }


def _show(answer: Answer) -> None:
    """Print what a command has to say, then fail with its error (for the exit code)."""
    print("\n".join(answer.lines))
    if answer.error is not None:
        raise answer.error


def _from_here(path: Path) -> str:
    """``path`` as a user names it: from the working directory when it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _read_dockerfile(name: str) -> str:
    """The text of ``dockerfile=<name>``; a usage error when there is no such file."""
    path = Path(name)
    if path.is_dir():
        raise VariableError(f"dockerfile={name}: is a directory; name the Dockerfile in it")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise VariableError(f"dockerfile={name}: no such file") from None
    except OSError as exc:
        raise VariableError(f"dockerfile={name}: cannot be read ({exc.strerror})") from None
    # Bytes that are not UTF-8 pass through as they are, as BuildKit reads bytes.
    return data.decode("utf-8", "surrogateescape")


class Tasks:
    """The tasks of one invocation over ``graph``, and what they share."""

    def __init__(self, graph: Graph, doit_db: Path = Path(doitdb.DOIT_DB)) -> None:
        self.graph = graph
        self.session = Session()  # this run's ledger, console, silent caches and pushes
        self._solve: dict[str, Future[bool]] | None = None  # the run's solve, once begun
        self._solve_lock = threading.Lock()
        self._lock_lock = threading.Lock()  # one demo's closures locked at a time
        self.interrupted = False
        self._doit_db = doitdb.hold(doit_db)  # before doit opens it; held while this runs
        # Every key renders every recipe: compiled once here, not once per invocation.
        recipe.keep_compiled(default_cache() / "templates")
        self._runs: dict[Options, Run] = {}
        self._outside: dict[Options, Outside] = {}
        self._demos: dict[str, demo_profile.Demo] = {}
        self._asked: set[Options] = set()  # runs whose images the engine was asked of at once

    def doit_config(self) -> dict[str, Any]:
        """dodo.py's DOIT_CONFIG: the reporter ends this run's console."""
        return {
            "default_tasks": ["plan"],
            "reporter": Reporter(sys.stdout, {"failure_verbosity": 0}, self.session),
            "par_type": "thread",  # stages build in docker; threads only wait on it
            "verbosity": 2,  # stream build logs as they come
            "subtasks": True,  # `doit list` shows build:<stage> and dockerfile:<stage> too
            "backend": doitdb.BACKEND,
            "dep_file": self._doit_db.dep_file,
        }

    # ------------------------------------------------------------ shared state

    def run(self, options: Options) -> Run:
        """The Run of ``options``: made once, its pins read when first needed."""
        if options not in self._runs:
            load = self.demo(options.profile).load_pins if options.profile else load_pins
            self._runs[options] = Run(options, self.graph, load, default_cache() / "keys")
        return self._runs[options]

    def forget(self, options: Options) -> None:
        """The pins of ``options`` were rewritten (the demo locked them): read them again."""
        self._runs.pop(options, None)

    def outside(self, options: Options) -> Outside:
        """What the commands of ``options`` reach beyond this process."""
        if options not in self._outside:
            logs = self.run(options).state_dir / "logs"
            self._outside[options] = Outside(
                logs=logs,
                network=options.network or None,
                builders=options.builders,
                builder=options.builder,
            )
        return self._outside[options]

    def demo(self, profile: str) -> demo_profile.Demo:
        """The demo of a profile, one per invocation: its servers run while its builds do."""
        if profile not in self._demos:
            self._demos[profile] = demo_profile.Demo(self.graph, profile)
        return self._demos[profile]

    # ------------------------------------------------------------ reports

    def _plan(self, options: Options, builders: int) -> Plan:
        """The plan of ``options``, priced on ``builders`` builders (plan and graph show it)."""
        run = self.run(options)
        # startup: a command's modules load when it runs, not for every task
        from rocmgraph.commands import plan
        from rocmgraph.graph import estimate

        # The demo's stages are miniatures: the real image's hours would mislead there.
        references = {} if options.profile else estimate.load_references()
        outside = self.outside(options)

        def cached(stage: str) -> bool:
            return execute.is_cached(run, outside, self.session, stage)

        return plan.make_plan(run, outside.engine, references, builders, cached)

    def plan_task(self, options: Options, fmt: str, builders: int = 2) -> Task:
        def show() -> None:
            _check_format(fmt)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import plan

            run, made = self.run(options), self._plan(options, builders)
            print(plan.as_json(run, made) if fmt == "json" else plan.as_text(run, made))
            plan.verdict(made)

        return _report(
            "show every stage: key, arch-dependent, built or not, why it would build, and what "
            "building costs",
            show,
        )

    def graph_task(self, options: Options, fmt: str, out: str, builders: int = 2) -> Task:
        def draw() -> None:
            check_format("format", fmt, GRAPH_FORMATS)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import graphview, plan

            run, made = self.run(options), self._plan(options, builders)
            caption = graphview.caption(run, made)
            text = (graphview.as_mermaid if fmt == "mermaid" else graphview.as_dot)(made, caption)
            if fmt == "svg":
                # startup, as above: only an SVG runs Graphviz
                from rocmgraph.outside import graphviz

                text = graphviz.svg(text)
            if out or fmt == "svg":
                path = Path(out) if out else run.state_dir / "graph.svg"
                atomic_write_text(path, text)
                print(f"wrote {out or _from_here(path)}")
            else:
                print(text, end="")
            plan.verdict(made)

        return _report(
            "draw the stage graph: SVG through Graphviz (format=svg, into .build/graph.svg), "
            "Mermaid or DOT text; each stage's status, key, cost, and why it would build",
            draw,
        )

    def lock_task(self, options: Options, closures: bool) -> Task:
        def run_lock() -> None:
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import lock

            run, outside = self.run(options), self.outside(options)
            locking = lock.lock_closures(run, outside, self.session) if closures else None
            _show(locking or lock.run_lock(run, outside))

        task: Task = {
            "doc": "record what only the network knows: wheel files and sha256, full commits, "
            "digests; closures=1: what each stage fetches as it builds, file by file",
            "actions": [guarded(run_lock)],
            "uptodate": [False],
            "verbosity": 2,
        }
        # Its builds fetch from the demo's upstreams: served meanwhile.
        return {**task, "setup": ["demo"]} if options.profile and closures else task

    def patches_task(self, options: Options, fmt: str) -> Task:
        def show() -> None:
            _check_format(fmt)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import patch_status

            rows = patch_status.table(self.run(options), self.outside(options))
            print(patch_status.as_json(rows) if fmt == "json" else patch_status.as_text(rows))
            patch_status.verdict(rows)

        return _report(
            "check every patch against its pinned tree: applies, obsolete or conflicts", show
        )

    def preflight_task(self, options: Options, fmt: str) -> Task:
        def show() -> None:
            _check_format(fmt)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.trees import preflight

            _show(preflight.run_preflight(self.run(options), self.outside(options), fmt))

        return _report(
            "check what each pinned tree's build does (its dist, fetches, archs) against the pins",
            show,
        )

    def bump_tasks(self, options: Options, to: str, force: bool, dry: bool) -> Iterator[Task]:
        """bump:<source> for every pinned source a stage reads, bump:base, bump:all."""
        names = sorted({source for stage in self.graph for source in stage.sources})
        yield {"basename": "bump", "name": None, "doc": "move pins to upstream's newest"}

        def run_bump(name: str) -> None:
            run = self.run(options)
            # all: the sources this profile pins (pins-rocm702.toml pins no SGLang), known
            # only once its pins are read.
            targets = [*sorted(run.pins.sources), "base"] if name == "all" else [name]
            if to and len(targets) > 1:
                raise VariableError("to=... moves one source; name it: doit bump:<source> to=...")
            outside = self.outside(options)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import bump

            _show(bump.run_bump(run, outside, targets, to, force=force, dry=dry))

        for name in [*names, "base", "all"]:
            doc = {
                "base": "move the base image's digest to what its tag points to now",
                "all": "bump every source and the base image",
            }.get(
                name,
                f"move {name} to upstream's newest commit (or to=<commit|tag>), patches checked",
            )
            yield {
                "basename": "bump",
                "name": name,
                "doc": doc,
                "actions": [guarded(run_bump, name)],
                "uptodate": [False],
                "meta": {"quiet": True},
                "verbosity": 2,
            }

    def audit_task(self, options: Options, fmt: str, dockerfile: str, image: str = "") -> Task:
        def show() -> None:
            _check_format(fmt)
            if image:
                # startup: a command's modules load when it runs, not for every task
                from rocmgraph.commands import imageaudit

                traced = imageaudit.audit_image(self.run(options), self.outside(options), image)
                print(imageaudit.as_text(image, traced))
                imageaudit.verdict(image, traced)
                return
            if dockerfile:
                # startup: a command's modules load when it runs, not for every task
                from rocmgraph.dockerfile import audit as recipe

                report = recipe.audit(_read_dockerfile(dockerfile), dockerfile)
                text = recipe.as_json(report) if fmt == "json" else None
                print(text or recipe.as_text(report))
                recipe.verdict(report)
                return
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import audit

            rows = audit.audit_pins(self.run(options), self.outside(options))
            print(audit.as_json(rows) if fmt == "json" else audit.as_text(rows))
            audit.verdict(rows)

        task = _report(
            "audit every pin (or dockerfile=<path>): full, upstream, reachable, behind, hashed; "
            "image=<ref>: every package it holds, traced to a hash or named",
            show,
        )
        # The base image of a demo profile is in the demo's registry: served meanwhile.
        return {**task, "setup": ["demo"]} if options.profile and image else task

    def compare_task(self, options: Options, fmt: str, dockerfile: str, recipe: str) -> Task:
        def show() -> None:
            if not dockerfile:
                raise VariableError(
                    "compare needs dockerfile=<path>: an upstream recipe to set beside the graph"
                )
            text = _read_dockerfile(dockerfile)
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import compare

            run = self.run(options)
            comparison = compare.compare(text, dockerfile, run, compare.DIFFERENCES, recipe)
            shown = compare.as_json(comparison) if fmt == "json" else compare.as_text(comparison)
            print(shown)
            compare.verdict(comparison)

        return _report(
            "set an upstream recipe (dockerfile=<path>) beside the graph: every pin, variable, "
            "install, patch, link and cleanup, same or explained",
            show,
        )

    def verify_task(self, options: Options, image: str, stage: str) -> Task:
        def show() -> None:
            if bool(image) == bool(stage):
                raise VariableError(
                    "verify checks image=<ref> against the pins (e.g. image=verl-rocm:gfx942), "
                    "or stage=<name> by a rebuild without cache (e.g. stage=vllm, or stage=all): "
                    "name one"
                )
            # startup: a command's modules load when it runs, not for every task
            from rocmgraph.commands import verify

            run = self.run(options)
            if stage:
                names = run.graph.order if stage == "all" else (_in_profile(run, stage).name,)
                checks = verify.check_stages(run, self.outside(options), self.session, names)
                for name, checked in checks.items():
                    print(verify.stage_text(name, checked))
                verify.stages_verdict(checks)
                return
            rows = verify.check(run, self.outside(options), image)
            print(verify.as_text(image, run, rows))
            verify.verdict(image, rows)

        task = _report(
            "check an image (image=<ref>) against the pins: its stage keys, its content, the "
            "versions its manifest lists; or a stage (stage=<name>, stage=all) by a rebuild "
            "without cache",
            show,
        )
        # A rebuild of a demo stage fetches from the demo's upstreams: served meanwhile.
        return {**task, "setup": ["demo"]} if options.profile and stage else task

    def render_task(self, check: bool) -> Task:
        def write() -> None:
            # the docs are of pins.toml, whatever the variables
            from rocmgraph.commands import docs

            run = Run(Options(pins=str(docs.PINS)), self.graph)
            stale = [str(path.relative_to(ROOT)) for path in docs.write(run, check=check)]
            if check and stale:
                raise StaleError(f"stale generated docs: {', '.join(stale)}; run `doit render`")
            print("\n".join(f"wrote {path}" for path in stale) or "docs are fresh")

        return {
            "doc": "write what is generated: docs/versions.md, the differences in "
            "docs/following-verl.md, docker/Dockerfile.rocm",
            "actions": [guarded(write)],
            "uptodate": [False],
            "verbosity": 2,
        }

    def dockerfile_tasks(self, options: Options) -> Iterator[Task]:
        yield {"basename": "dockerfile", "name": None, "doc": "print a stage's rendered Dockerfile"}
        for stage in self.graph:

            def show(name: str = stage.name) -> None:
                run = self.run(options)
                print(recipe.render(_in_profile(run, name), run.pins, run.archs), end="")

            yield {
                "basename": "dockerfile",
                "name": stage.name,
                "doc": f"print the Dockerfile of stage {stage.name}",
                "actions": [guarded(show)],
                "uptodate": [False],
                "meta": {"quiet": True},
                "verbosity": 2,
            }

    # ------------------------------------------------------------ builds

    def demo_task(self, options: Options) -> Task:
        """Serves the demo's upstreams while builds of ``profile=demo`` need them."""
        prepared = self.demo(options.profile or "demo")

        def start() -> None:
            prepared.start(self.outside(options), options.arch, options.wait)
            self.forget(options)  # its pins were just locked: builds read them afresh
            if "demo" in sys.argv[1:]:  # asked for: said; a build's setup: its view says
                profile = options.profile or "demo"
                print(
                    f"prepared the {profile} profile: {self.run(options).options.pins}; "
                    f"build it with `doit build:image profile={profile} arch=gfx942`"
                )

        return {
            "doc": "prepare an offline demo profile: upstreams, base image, pins "
            "(profile=demo builds use it)",
            "actions": [guarded(start)],
            "teardown": [prepared.stop],
            "uptodate": [False],
            "meta": {"quiet": True},  # no doit line of its own before a build's view
            "verbosity": 2,
        }

    def build_tasks(self, options: Options) -> Iterator[Task]:
        setup = ["demo"] if options.profile else []
        final = self.graph.final
        yield {"basename": "build", "name": None, "doc": "build a stage and what it needs"}
        for stage in self.graph:  # every stage: which are this profile's is read from its pins
            yield {
                "basename": "build",
                "name": stage.name,
                "doc": stage.doc,
                "actions": [guarded(self._build, options, stage.name)],
                "task_dep": [f"build:{parent}" for parent in stage.parents],
                "setup": setup,
                "uptodate": [self._uptodate(options, stage.name)],
                "meta": {"quiet": True},  # the console says what becomes of it
            }
        yield {
            "basename": "build",
            "name": "image",
            "doc": "build the whole image for arch=... and tag it with its friendly name",
            "actions": [guarded(self._tag_final, options)],
            "task_dep": [f"build:{final}"],
            "setup": setup,
            "uptodate": [self._uptodate(options, final, tagged=True)],
            "meta": {"quiet": True},
        }

    def _uptodate(self, options: Options, stage: str, tagged: bool = False) -> Any:
        def uptodate() -> bool:
            run, engine = self.run(options), self.outside(options).engine
            try:
                if stage not in run.graph.stages:
                    return True  # a stage the profile leaves out has nothing to build
                if self._unlocked(run, stage):
                    return False  # its action refuses it, with what to do
                if self._solve is not None and stage in self._solve:
                    return False  # its task says how the run's solve built it
                if options not in self._asked:  # every stage's image, asked together
                    self._asked.add(options)
                    with contextlib.suppress(GraphToolError):  # then asked one by one
                        refs = [run.ref(name) for name in run.graph.order]
                        engine.image_ids([*refs, run.friendly_tag()])
                if tagged:
                    # push=1: the cache's copy of the friendly tag is not asked of the
                    # engine, and a run whose push failed had tagged it here already
                    done = execute.is_tagged(run, engine) and not (options.push and run.cache)
                    if done:
                        self.session.ledger.final = _final(run)
                    return done
                done = execute.is_done(run, engine, self.outside(options), self.session, stage)
                if done:
                    here = execute.is_built(run, engine, stage)
                    self.session.ledger.record(
                        stage, Entry(Status.REUSED if here else Status.CACHED)
                    )
                return done
            except GraphToolError:
                return False  # the action runs and reports the error in one line

        return uptodate

    @staticmethod
    def _unlocked(run: Run, stage: str) -> list[str]:
        """Hermetic (the default) or locked=1: the stages this command needs, built or not,
        that have no closure locked (one built without could only have had the network).
        Asked of the targets on the command line too, so that a run refuses before any
        build. With every closure locked (or hermetic=0) it costs nothing more."""
        if not (run.options.hermetic or run.options.locked) or not run.unlocked:
            return []
        targets = [stage, *requested(sys.argv[1:], run.graph)]
        needed = {name for target in targets for name in (target, *run.graph.ancestors(target))}
        return [name for name in run.graph.order if name in needed and name in run.unlocked]

    def _build(self, options: Options, stage: str) -> None:
        run, outside = self.run(options), self.outside(options)
        if stage not in run.graph.stages or self.interrupted:
            return
        missing = self._unlocked(run, stage)
        if missing and options.profile and not options.locked:
            run = self._lock_demo(options, stage)
            missing = self._unlocked(run, stage)
        if missing:
            check_closures(run, missing)
        self._watch(run, outside)
        started = time.monotonic()
        builder = ""
        try:
            if run.options.builders:
                with self._engine_for(run, outside, stage) as (engine, builder):
                    built = execute.build_stage(
                        run, engine, outside, self.session, stage, where=builder
                    )
            else:
                built = self._solved(run, outside, stage)
        except GraphToolError:
            known = self.session.ledger.entries().get(stage)
            if known is None or known.status is not Status.FAILED:  # failed before its build
                seconds, key = time.monotonic() - started, run.keys[stage].short
                self.session.ledger.record(stage, Entry(Status.FAILED, seconds, builder, key=key))
            if self.interrupted:  # the interrupt stopped it: said already, in one line
                return
            raise
        if not built:
            self.session.ledger.record(stage, Entry(Status.REUSED, key=run.keys[stage].short))

    def _lock_demo(self, options: Options, stage: str) -> Run:
        """A demo profile's inputs are all made here, so what its stages fetch can be locked
        here too: the first build to meet a stage with no closure locks them all (as
        ``doit lock closures=1`` does), once per invocation; the run, read again."""
        with self._lock_lock:
            run = self.run(options)
            missing = self._unlocked(run, stage)  # none: another stage's build locked them
            if missing:
                # startup: a command's modules load when it runs, not for every task
                from rocmgraph.commands import lock

                count = f"{len(missing)} stage" + ("s have" if len(missing) > 1 else " has")
                self.session.console.say(
                    f"{options.profile}: {count} no closure locked; locking them first, as "
                    f"`doit lock closures=1 profile={options.profile}` does"
                )
                answer = lock.lock_closures(run, self.outside(options), self.session)
                if answer.error is not None:
                    raise answer.error
                self.forget(options)
            return self.run(options)

    def _solved(self, run: Run, outside: Outside, stage: str) -> bool:
        """Whether stage ``stage`` was built, in the run's solve: the first stage doit must
        build starts one (execute.build_stages) of every stage the command's targets need,
        and each stage's task waits for its own. A stage outside it builds alone."""
        with self._solve_lock:
            if self._solve is None:
                self._solve = self._start_solve(run, outside, stage)
            future = self._solve.get(stage)
        if future is None:
            return execute.build_stage(run, outside.engine, outside, self.session, stage)
        return future.result()

    def _start_solve(self, run: Run, outside: Outside, stage: str) -> dict[str, Future[bool]]:
        from concurrent.futures import Future  # a build's: a no-op does not import it

        engine = outside.engine
        targets = [
            target
            for target in requested(sys.argv[1:], run.graph)
            if not execute.is_done(run, engine, outside, self.session, target)
        ]
        todo = execute.to_build(run, engine, outside, self.session, [stage, *targets])
        futures: dict[str, Future[bool]] = {name: Future() for name in todo}

        def done(name: str, error: GraphToolError | None) -> None:
            future = futures.get(name)
            if future is None or future.done():
                return
            if error is None:
                future.set_result(True)
            else:
                future.set_exception(error)

        def solve() -> None:
            try:
                execute.build_stages(run, engine, outside, self.session, todo, done=done)
            except BaseException as exc:  # each stage's task raises it
                for name, future in futures.items():
                    if future.done():
                        continue
                    if _built_meanwhile(run, engine, name):
                        future.set_result(False)  # another run built it: not this run's failure
                    else:
                        future.set_exception(exc)
            for future in futures.values():
                if not future.done():
                    future.set_result(False)  # another run built it meanwhile

        threading.Thread(target=solve, name="solve", daemon=True).start()
        return futures

    def _watch(self, run: Run, outside: Outside) -> None:
        """Open the console's view at the first build (a no-op opens none)."""
        if self.session.console.view is not None:
            return
        engine = outside.engine
        expected = {}
        for name in run.graph.order:
            seconds = execute.last_seconds(run, name)
            if seconds and not execute.is_built(run, engine, name):
                expected[name] = seconds
        self.session.ledger.know({name: run.graph[name].parents for name in run.graph.order})
        self.session.trace = Path(run.options.trace or run.state_dir / "trace.json")
        self.session.title = f"doit {' '.join(sys.argv[1:])}".strip()
        refs = {name: run.ref(name) for name in run.graph.order}
        self.session.console.begin(
            run.options.progress, expected, refs, _sizes(outside, refs.values())
        )

    @contextlib.contextmanager
    def _engine_for(self, run: Run, outside: Outside, stage: str) -> Iterator[tuple[Engine, str]]:
        """The engine that builds ``stage``, and its name if it is a builder (builders=): the
        local one, or the builder the pool picks."""
        if not run.options.builders:
            yield outside.engine, ""
            return
        if not run.cache:
            raise VariableError(
                f"builders= passes stages between the builders through a stage cache, and "
                f"{run.options.pins} names none: add cache=<registry>/<path>, or set "
                "[cache].registry"
            )
        parents = [run.ref(parent) for parent in run.graph[stage].parents]
        with outside.pool.builder_for(parents) as builder:
            yield builder.engine, builder.name

    def on_interrupt(self) -> None:
        """Ctrl-C (SIGINT), or SIGTERM (what CI runners and `timeout` send), stops the
        running builds and ends the run with one line and exit 128 + the signal, instead of
        doit's traceback or a death that skips every cleanup (the demo's servers, the
        secrets' folder, a context folder). Nothing half-built is tagged: docker tags a build
        only when it succeeds, and a record is written only after its tag. For doit runs
        only (dodo.py): a handler is the main thread's to set."""

        def interrupted(signum: int, frame: object) -> None:
            if self.interrupted:  # one ending: a second signal waits for the first's cleanup
                return
            self.interrupted = True
            entries = self.session.ledger.entries().items()
            stages = sorted(name for name, entry in entries if entry.status is Status.BUILDING)
            self.session.ledger.interrupt()  # the table says which were stopped, not failed
            self.session.console.stop()  # the terminal is the shell's again
            proc.interrupt_all()
            what = (
                f"stopped while building {', '.join(stages)}; only a build that finished is tagged"
                if stages
                else "nothing was building"
            )
            word = "interrupted" if signum == signal.SIGINT else "terminated"
            sys.stderr.write(f"{word}: {what}\n")
            sys.stderr.flush()
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGINT, interrupted)
        signal.signal(signal.SIGTERM, interrupted)

    def _tag_final(self, options: Options) -> None:
        run = self.run(options)
        outside = self.outside(options)
        self._watch(run, outside)
        alias = execute.tag_final(run, outside.engine, outside, self.session)
        self.session.console.say(f"tagged {alias} = {run.ref(run.graph.final)}")
        sbom = execute.keep_sbom(run, outside, alias)
        if options.push and run.cache:  # beside the image the registry holds, as cosign has it
            shared = f"{run.cache}/{alias}"
            pushed = f"{shared}@{outside.cache_registry.digest(shared)}"
            provenance = execute.keep_provenance(run, outside.engine, self.session, alias, pushed)
            documents = {"att": provenance, **({"sbom": sbom} if sbom else {})}
            for ref in execute.attach(run, outside, pushed, documents):
                self.session.console.say(f"pushed {ref}")
        else:
            execute.keep_provenance(run, outside.engine, self.session, alias)
        self.session.ledger.final = _final(run)
        sealed = all(run.sealed(name) is not None for name in run.graph.order)
        self.session.ledger.write(run.state_dir / "run.json", run.cache, sealed)


def _built_meanwhile(run: Run, engine: Engine, name: str) -> bool:
    with contextlib.suppress(GraphToolError):  # an engine that stopped answering: not known
        return execute.is_built(run, engine, name)
    return False


def requested(argv: list[str], graph: Graph) -> list[str]:
    """The stages a doit command line asks to build: ``build`` and ``build:image`` the
    final one, ``build:<stage>`` that stage."""
    found = []
    for arg in argv:
        name = arg.partition(":")[2] if arg.startswith("build:") else ""
        if arg == "build" or name == "image":
            found.append(graph.final)
        elif name in graph.stages:
            found.append(name)
    return found


def _final(run: Run) -> Final:
    final = run.graph.final
    return Final(
        alias=run.friendly_tag(),
        ref=run.ref(final),
        key=run.keys[final].key,
        manifest=run.pins.manifest,
        report=str(run.state_dir / "run.json"),
    )


def _sizes(outside: Outside, refs: Collection[str]) -> progress.Sizes:
    """An image's size on the local engine, or None (not there, or no engine answers). The
    first question asks about every stage's image at once: the summary shows them all."""
    asked = False

    def size(ref: str) -> int | None:
        nonlocal asked
        try:
            if not asked:
                asked = True
                outside.engine.image_ids([*refs, ref])
            return outside.docker.size(ref) if outside.engine.image_exists(ref) else None
        except GraphToolError:
            return None

    return size


def _in_profile(run: Run, name: str) -> Stage:
    if name not in run.graph.stages:
        sources = ", ".join(f"[sources.{s}]" for s in run.stages[name].sources)
        raise VariableError(f"stage {name} is not part of {run.options.pins}: it pins no {sources}")
    return run.graph[name]
