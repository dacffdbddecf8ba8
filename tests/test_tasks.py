"""doit's task list and the build entry points."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PINS, ROOT, run_doit
from doit import doit_cmd
from hypothesis import given
from hypothesis import strategies as st
from test_plan import SetEngine

import stages
from rocmgraph.building import execute
from rocmgraph.building.session import Session
from rocmgraph.cli import tasks, variables
from rocmgraph.common.errors import GraphToolError, VariableError, cut
from rocmgraph.config import kinds
from rocmgraph.fetch.world import Outside
from rocmgraph.graph.invocation import Options, Run


def test_doit_list_shows_every_task_with_a_one_line_doc() -> None:
    result = run_doit("list")
    assert result.returncode == 0, result.stderr
    docs = dict(line.split(None, 1) for line in result.stdout.splitlines())
    expected = {
        "plan",
        "graph",
        "lock",
        "patches",
        "preflight",
        "demo",
        "render",
        "audit",
        "compare",
        "build",
        "dockerfile",
        "bump",
        "verify",
    }
    expected |= {"build:image", "bump:base", "bump:all"}
    for stage in stages.graph():
        expected |= {f"build:{stage.name}", f"dockerfile:{stage.name}"}
        expected |= {f"bump:{source}" for source in stage.sources}
    assert set(docs) == expected
    assert docs["build:vllm"] == stages.graph()["vllm"].doc
    assert all(doc.strip() for doc in docs.values())


def test_no_working_docker_client_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "docker"
    result = run_doit("build:base", "hermetic=0", env={"VERL_GRAPH_DOCKER": str(missing)})
    assert result.returncode == 1
    assert result.stderr == (
        f"error: no docker client can build with buildx: {missing}: not a working docker client; "
        "install Docker 26 or later with docker-buildx (bash bootstrap.sh does)\n"
    )


def test_the_plan_still_shows_keys_without_an_engine(tmp_path: Path) -> None:
    result = run_doit("plan", env={"VERL_GRAPH_DOCKER": str(tmp_path / "docker")})
    assert result.returncode == 2, result.stderr  # the keys are right, the statuses unknown
    problem = (
        f"no docker client can build with buildx: {tmp_path / 'docker'}: "
        "not a working docker client; install Docker 26 or later with docker-buildx "
        "(bash bootstrap.sh does)"
    )
    assert result.stderr == f"error: built status unknown: {problem}\n"
    lines = result.stdout.splitlines()
    assert lines[1] == f"engine: {problem}"
    assert "unknown    -                  unknown: no engine to ask" in lines[3]
    assert lines[-2:] == [
        "15 stages: built status unknown (the engine is not reachable)",
        "network: off; a build refuses all 15 stages: no closure locked "
        "(doit lock closures=1, or hermetic=0)",  # the lock file says so, with no engine
    ]
    as_json = run_doit("plan", "format=json", env={"VERL_GRAPH_DOCKER": str(tmp_path / "d")})
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["engine"].startswith("no docker client can build")


def test_build_runs_parents_first() -> None:
    result = run_doit("info", "build:vllm")
    assert "build:wheels" in result.stdout


# ------------------------------------------------------ command-line variables

KNOWN = (
    "arch, builder, builders, cache, cache_required, check, closures, commit_tag, compile_cache, "
    "dockerfile, dry, force, format, hermetic, image, jobs, locked, network, out, pins, profile, "
    "progress, push, recipe, stage, to, trace, wait"
)
ARCHS = (
    "gfx900, gfx906, gfx908, gfx90a, gfx90c, gfx940, gfx941, gfx942, gfx950, gfx1010, gfx1013, "
    "gfx1030, gfx1033, gfx1034, gfx1035, gfx1036, gfx1100, gfx1101, gfx1102, gfx1150, gfx1151, "
    "gfx1152, gfx1153, gfx1200, gfx1201, gfx1250"
)
BAD_VARIABLES: dict[str, tuple[dict[str, str], str]] = {
    "unknown, with the close one and what it does": (
        {"archs": "gfx942"},
        "archs=gfx942: unknown variable; did you mean arch= (the archs to build for, e.g. "
        f"gfx942,gfx950; default [build].archs)? known variables: {KNOWN}",
    ),
    "unknown, nothing close": (
        {"timezone": "1"},
        f"timezone=1: unknown variable; known variables: {KNOWN}",
    ),
    "unknown, beside good ones": (
        {"arch": "gfx942", "fromat": "json"},
        "fromat=json: unknown variable; did you mean format= (text or json, for plan, "
        "patches, preflight and audit; svg, mermaid or dot for graph)? known variables: "
        f"{KNOWN}",
    ),
    "flag that is not a flag": (
        {"force": "maybe"},
        "force=maybe: not a flag; write force=1, true or yes to turn it on, "
        "force=0, false or no to leave it off",
    ),
    "empty flag": (
        {"locked": ""},
        "locked=: not a flag; write locked=1, true or yes to turn it on, "
        "locked=0, false or no to leave it off",
    ),
    "unknown arch": (
        {"arch": "gfx942;gfx943"},
        "arch=gfx942;gfx943: unknown GPU architecture 'gfx943'; did you mean 'gfx942'? "
        f"known archs: {ARCHS}",
    ),
    "arch that names none": (
        {"arch": ",;"},
        "arch=',;': names no architecture; write e.g. arch=gfx942",
    ),
    "format": (
        {"format": "yaml"},
        "format=yaml: unknown format; use format=text or format=json, or for graph "
        "format=svg, format=mermaid or format=dot",
    ),
    "cache": (
        {"cache": "Registry.example.org//verl"},
        "cache=Registry.example.org//verl: is not a docker image name (lower-case words joined "
        "by . _ -); write cache=<registry>/<path>, e.g. cache=registry.example.org/verl-rocm",
    ),
    "builders, not hosts": (
        {"builders": "unix:///run/a.sock,build-2"},
        "builders=unix:///run/a.sock,build-2: build-2 is not a Docker host; write each as "
        "DOCKER_HOST would, e.g. builders=unix:///run/a.sock,ssh://user@build-2",
    ),
    "builders, one twice": (
        {"builders": "ssh://b,ssh://b"},
        "builders=ssh://b,ssh://b: a host is named twice; name each once",
    ),
    "compile cache, not one ccache knows": (
        {"compile_cache": "memcached://host:11211"},
        "compile_cache=memcached://host:11211: is not a storage ccache knows; write "
        "redis://<host>:6379, redis+unix:///<socket> or https://<host>/<path> (a password goes "
        "in $VERL_GRAPH_COMPILE_CACHE: redis://:<password>@<host>)",
    ),
    "compile cache, its password not repeated": (
        {"compile_cache": "redis://:s3cret@cache:99999"},
        "compile_cache=redis://***@cache:99999: has no valid port; write redis://<host>:6379, "
        "redis+unix:///<socket> or https://<host>/<path> (a password goes in "
        "$VERL_GRAPH_COMPILE_CACHE: redis://:<password>@<host>)",
    ),
    "progress": (
        {"progress": "tty"},
        "progress=tty: unknown progress; use progress=auto, progress=plain or progress=quiet",
    ),
    "wait": ({"wait": "soon"}, "wait=soon: not a number of seconds; write wait=0, wait=30, ..."),
    "negative wait": (
        {"wait": "-1"},
        "wait=-1: not a number of seconds; write wait=0, wait=30, ...",
    ),
    "profile": (
        {"profile": "dmeo"},
        "profile=dmeo: unknown profile; use profile=demo, profile=demo702 or none",
    ),
    "a huge value is cut": (
        {"arch": "x" * 5_000_000},
        f"arch={'x' * 200}… (5000000 characters): unknown GPU architecture "
        f"'{'x' * 200}…' (5000000 characters); known archs: {ARCHS}",
    ),
    "a value on two lines stays on one": (
        {"format": "json\ntext"},
        "format=json\\ntext: unknown format; use format=text or format=json, or for graph "
        "format=svg, format=mermaid or format=dot",
    ),
}


def test_the_compile_cache_comes_from_the_environment_where_the_command_line_names_none() -> None:
    secret = {variables.COMPILE_CACHE_ENV: "redis://:s3cret@cache:6379"}
    assert tasks.resolve(Options(), secret).compile_cache == "redis://:s3cret@cache:6379"
    given = Options(compile_cache="redis://other:6379")
    assert tasks.resolve(given, secret).compile_cache == "redis://other:6379"  # the line wins
    assert tasks.resolve(Options(), {}).compile_cache == ""
    with pytest.raises(VariableError) as caught:
        variables.Variables.checked(
            {}, {variables.COMPILE_CACHE_ENV: "memcached://u:pw@host:11211"}
        )
    assert str(caught.value) == (
        "VERL_GRAPH_COMPILE_CACHE=memcached://***@host:11211: is not a storage ccache knows; "
        "write redis://<host>:6379, redis+unix:///<socket> or https://<host>/<path> (a password "
        "goes in $VERL_GRAPH_COMPILE_CACHE: redis://:<password>@<host>)"
    )


def test_a_redis_compile_cache_takes_its_password_from_rediscli_auth() -> None:
    """redis-cli's convention: `compile_cache=redis://host` on the command line, the password
    in $REDISCLI_AUTH; a build's ccache gets both (in its secret), `ps` neither."""
    environ = {variables.REDIS_PASSWORD_ENV: "p@ss:word"}
    options = tasks.resolve(Options(pins=str(PINS), compile_cache="redis://cache:6379"), environ)
    assert "p@ss" not in repr(options)  # an error that shows its options shows no password
    assert Run(options, stages.graph()).compile_cache == "redis://:p%40ss%3Aword@cache:6379"
    given = {variables.COMPILE_CACHE_ENV: "redis://:own@cache:6379", **environ}
    assert Run(tasks.resolve(Options(pins=str(PINS)), given), stages.graph()).compile_cache == (
        "redis://:own@cache:6379"  # the URL's own password wins
    )
    assert kinds.with_redis_password("https://cache.example.org/ccache", "pw") == (
        "https://cache.example.org/ccache"  # ccache's http storage takes no redis password
    )
    assert kinds.with_redis_password("redis://cache:6379", "") == "redis://cache:6379"


def test_ccache_gets_a_redis_password_in_the_form_it_reads() -> None:
    """ccache reads redis://:PASSWORD@host, redis-cli's form, as no password; it takes
    redis://PASSWORD@host, and decodes before it splits a user from a password at ':'."""
    assert kinds.for_ccache("redis://:s3cret@cache:6379") == "redis://s3cret@cache:6379"
    assert kinds.for_ccache("redis://:p%40ss%3Aword@cache:6379") == (
        "redis://default:p%40ss%3Aword@cache:6379"  # Redis 6's default user: ':' stays its
    )
    for kept in ("redis://s3cret@cache", "redis://alice:pw@cache", "redis://cache:6379",
                 "https://cache.example.org/ccache", ""):  # fmt: skip
        assert kinds.for_ccache(kept) == kept


@pytest.mark.parametrize("case", sorted(BAD_VARIABLES))
def test_a_wrong_variable_is_one_exact_line(case: str) -> None:
    given, message = BAD_VARIABLES[case]
    with pytest.raises(VariableError) as caught:
        variables.Variables.checked(given)
    assert str(caught.value) == message


@pytest.mark.parametrize("word", ["1", "true", "yes", "0", "false", "no"])
def test_a_flag_takes_its_six_words_in_any_case(word: str) -> None:
    on = word in ("1", "true", "yes")
    for spelling in {word, word.upper(), word.title()}:
        assert variables.Variables.checked({"force": spelling}).flag("force") is on


@given(st.text())
def test_no_other_flag_value_is_guessed(value: str) -> None:
    if value.lower() in variables.FLAG_WORDS:
        assert variables.flag("dry", value) is (value.lower() in ("1", "true", "yes"))
        return
    with pytest.raises(VariableError) as caught:
        variables.flag("dry", value)
    assert str(caught.value).startswith(f"dry={cut(value)}: not a flag; ")
    assert len(str(caught.value).splitlines()) == 1


def test_absent_flags_are_off_and_values_are_read_as_given() -> None:
    given = variables.Variables.checked({"arch": "gfx950", "to": "v1.2"})
    assert (given.flag("force"), given.flag("dry"), given.flag("locked")) == (
        False,
        False,
        False,
    )
    assert (given.text("arch"), given.text("to"), given.text("format", "text")) == (
        "gfx950",
        "v1.2",
        "text",
    )
    with pytest.raises(KeyError):
        given.text("archs")  # reading a variable the table lacks is a bug


def test_the_variables_are_the_ones_doit_read() -> None:
    argv = ["plan", "arch=gfx942", "x=a=b", "--db-file=other.db"]
    doit_cmd.reset_vars()
    try:
        assert variables.command_line(argv) == {}  # doit has read none of them yet
        assert doit_cmd.DoitMain().process_args(argv) == ["plan", "--db-file=other.db"]
        assert variables.command_line(argv) == {"arch": "gfx942", "x": "a=b"}
    finally:
        doit_cmd.reset_vars()


def test_every_variable_is_documented() -> None:
    commands = (ROOT / "docs" / "commands.md").read_text()
    assert [name for name in variables.VARIABLES if f"`{name}=" not in commands] == []


@pytest.mark.parametrize(
    ("args", "case"),
    [
        (("build:image", "archs=gfx942"), "unknown, with the close one and what it does"),
        (("list", "force=maybe", "dry=false"), "flag that is not a flag"),
        (("plan", "format=yaml"), "format"),
    ],
    ids=["unknown variable", "bad flag", "bad format"],
)
def test_a_wrong_command_stops_before_any_task_is_looked_at(
    args: tuple[str, ...], case: str, tmp_path: Path
) -> None:
    # With no docker client every stage would report it; none does: nothing was looked at.
    result = run_doit(*args, env={"VERL_GRAPH_DOCKER": str(tmp_path / "docker")})
    message = BAD_VARIABLES[case][1]
    assert (result.returncode, result.stdout, result.stderr) == (3, "", f"error: {message}\n")


def test_the_plan_needs_no_writable_cache(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run_doit(
        "plan", "arch=gfx942", env={"VERL_GRAPH_CACHE": str(tmp_path / "file" / "cache")}
    )
    assert result.returncode in (0, 2), result.stderr  # 2 where no engine answers
    assert "Traceback" not in result.stderr
    assert "stages to build" in result.stdout or "built status unknown" in result.stdout


def test_a_stage_another_run_built_is_not_failed_by_this_run_s_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gfx942 run built slim while this run waited for it; then this run's prune failed.
    slim's task says reused, prune's the error (not slim's too)."""
    run = Run(Options(pins=str(PINS), arch="gfx942"), stages.graph())
    engine = SetEngine({run.ref(name) for name in ("base", "rocm", "wheels")})
    outside = Outside(cache=tmp_path / "cache", logs=tmp_path / "logs")
    outside.__dict__["engine"] = engine  # the seam, in memory (the engine is tested for real)

    def build_stages(*args: object, done: Callable[[str, object], None], **more: object) -> None:
        engine.refs.add(run.ref("slim"))  # built by the other run, while this one waited
        error = GraphToolError("prune: no space left on device")
        done("prune", error)
        raise error

    monkeypatch.setattr(execute, "build_stages", build_stages)
    monkeypatch.setattr(sys, "argv", ["doit", "build:slim", "build:prune"])
    futures = tasks.Tasks(stages.graph(), tmp_path / ".doit.db")._start_solve(run, outside, "prune")
    assert sorted(futures) == ["prune", "slim"]
    assert futures["slim"].result(10) is False  # reused: built, not by this run
    with pytest.raises(GraphToolError, match="no space left"):
        futures["prune"].result(10)


def test_a_stage_that_cannot_be_prepared_fails_alone_and_the_others_of_its_solve_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vLLM patch that no longer applies after a bump stops vLLM and what needs it, not
    SGLang, prune or verl beside it in the one solve."""
    from rocmgraph.building import context
    from rocmgraph.common.errors import PatchError

    pins = tmp_path / "pins.toml"
    pins.write_text(PINS.read_text())
    run = Run(Options(pins=str(pins), arch="gfx942", hermetic=False), stages.graph())
    engine = SetEngine({run.ref(name) for name in ("base", "rocm", "wheels")})
    outside = Outside(cache=tmp_path / "cache", logs=tmp_path / "logs")
    conflict = PatchError("docker/patches/vllm/0002-fused-moe.patch does not apply (hunk 1)")

    def fill(run: Run, outside: Outside, name: str, dest: Path) -> None:
        if name == "vllm":
            raise conflict

    monkeypatch.setattr(context, "_fill", fill)
    told: dict[str, object] = {}
    names = ["vllm", "sglang", "prune", "slim", "verl", "assemble"]
    with pytest.raises(GraphToolError):
        execute.build_stages(run, engine, outside, Session(), names, done=told.__setitem__)
    # assemble needs vLLM's wheel; the stages assemble needs besides vLLM all build
    assert {name: error for name, error in told.items() if error} == {
        "vllm": conflict,
        "assemble": conflict,
    }
    assert {"sglang", "sgl_kernel", "prune", "slim", "verl"} <= set(told)
    assert run.ref("sglang") in engine.refs
    assert run.ref("vllm") not in engine.refs


@pytest.mark.parametrize("push", [False, True])
def test_push_1_pushes_the_friendly_tag_even_when_it_is_tagged_here(
    tmp_path: Path, push: bool
) -> None:
    """A run whose push failed had tagged the image here already: the run after it, or a
    build run again with push=1 to publish it, must still push."""
    options = Options(
        pins=str(PINS), arch="gfx942", hermetic=False, cache="registry.example.org/v", push=push
    )
    graph_tasks = tasks.Tasks(stages.graph(), tmp_path / ".doit.db")
    run = graph_tasks.run(options)
    final = run.ref(run.graph.final)

    class Tagged(SetEngine):
        def image_id(self, ref: str) -> str | None:
            return final if ref == run.friendly_tag() else super().image_id(ref)

    outside = Outside(cache=tmp_path / "cache", logs=tmp_path / "logs")
    outside.__dict__["engine"] = Tagged({run.ref(name) for name in run.graph.order})
    graph_tasks._outside[options] = outside
    image = next(task for task in graph_tasks.build_tasks(options) if task.get("name") == "image")
    assert image["uptodate"][0]() is not push


def test_two_runs_pulling_one_cached_stage_at_once_both_have_it(tmp_path: Path) -> None:
    """One CI job per arch on one runner: both pull verl from the stage cache, dockerd
    merges the pulls, and each removes the pulled tag when done: neither may fail."""
    import threading

    from rocmgraph.outside.proc import CommandFailed

    pins = tmp_path / "pins.toml"
    pins.write_text(PINS.read_text())
    run = Run(
        Options(pins=str(pins), arch="gfx942", hermetic=False, cache="127.0.0.1:5000/c"),
        stages.graph(),
    )
    key, lock, both = run.keys["verl"].key, threading.Lock(), threading.Barrier(2)
    tags: dict[str, str] = {}

    class Daemon:  # one dockerd, two clients; a tag it lacks is docker's "No such image"
        def pull(self, ref: str) -> None:
            with lock:
                tags[ref] = "sha256:verl"
            both.wait(10)  # the two pulls end together

        def image_id(self, ref: str) -> str | None:
            with lock:
                return ref if ref.startswith("sha256:") else tags.get(ref)

        def image_exists(self, ref: str) -> bool:
            return self.image_id(ref) is not None

        def refresh(self) -> None:
            pass

        def labels(self, ref: str) -> dict[str, str]:
            return {execute.KEY_LABEL: key}

        def tag(self, ref: str, alias: str) -> None:
            with lock:
                tags[alias] = ref

        def untag(self, ref: str) -> None:
            with lock:
                if tags.pop(ref, None) is None:
                    raise CommandFailed(["docker", "image", "rm", ref], 1, "No such image")

    daemon, pulled, session = Daemon(), [], Session()
    threads = [
        threading.Thread(target=lambda: pulled.append(execute._pull(run, daemon, session, "verl")))  # type: ignore[arg-type]
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert pulled == [True, True]
    assert tags == {run.ref("verl"): "sha256:verl"}  # the pulled tag gone, the stage's kept
