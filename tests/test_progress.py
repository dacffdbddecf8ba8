"""The console's views, fed by a ledger: the lines a pipe gets, the heartbeat, the summary.
(The live view under a real terminal, and these lines from real builds, are in
test_e2e.)"""

from __future__ import annotations

import io
import time

from rocmgraph.building.ledger import Entry, Final, Ledger, Status, step_of
from rocmgraph.building.progress import Console, Lines, Live, built_stages, left, summary


def test_a_buildkit_step_is_shortened_to_what_it_runs() -> None:
    line = (
        "#9 [vllm_build 5/7] RUN --mount=type=cache,target=/root/.cache/ccache "
        "--mount=type=secret,id=pip.conf     pip wheel --no-build-isolation --no-deps "
        "--wheel-dir /dist ./."
    )
    assert step_of(line) == "[5/7] RUN pip wheel --no-build-isolation --no-deps --wheel-dir /d…"
    assert step_of("#4 [2/3] COPY src/vllm /src/vllm") == "[2/3] COPY src/vllm /src/vllm"
    assert step_of("#9 12.3 building 'vllm._C' extension") is None
    assert step_of("#5 [internal] load build context") is None
    assert step_of("#10 exporting to image") == "exporting to image"  # each stage's own
    assert step_of("#10 exporting layers done") is None


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_a_pipe_gets_one_whole_line_per_event() -> None:
    ledger, out = Ledger(), io.StringIO()
    view = Lines(ledger, out, echo=False, heartbeat=3600)
    ledger.watch(view)
    ledger.start("vllm", "1a2b3c4d5e6f", expected=75.0, builder="ssh://b")
    ledger.saw("vllm", "#9 [vllm_build 5/7] RUN pip wheel ./.")
    ledger.record("vllm", Entry(Status.BUILT, 3.25, compiled="ccache 1 hit, 1 miss"))
    ledger.record("wheels", Entry(Status.PULLED, key="6e238cc0e8d3"))
    ledger.record("base", Entry(Status.REUSED, key="7cc4f68c1d5b"))
    ledger.start("sglang", "a49104987a5d", expected=0.4)
    ledger.record("sglang", Entry(Status.FAILED, 61.0))
    view.close()
    assert lines(out) == [
        "building vllm 1a2b3c4d5e6f on ssh://b (~1 min 15 s, as last time)",
        "built vllm 1a2b3c4d5e6f in 3.2 s on ssh://b (ccache 1 hit, 1 miss)",
        "pulled wheels 6e238cc0e8d3",
        "building sglang a49104987a5d",
        "failed sglang a49104987a5d after 1 min 01 s",
    ]


def test_plain_streams_each_build_line_tagged_with_its_stage() -> None:
    ledger, out = Ledger(), io.StringIO()
    view = Lines(ledger, out, echo=True, heartbeat=3600)
    ledger.watch(view)
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    ledger.saw("vllm", "#9 [vllm_build 5/7] RUN pip wheel ./.")
    view.close()
    assert lines(out)[1:] == ["[vllm] #9 [vllm_build 5/7] RUN pip wheel ./."]


def test_a_stage_that_builds_long_has_a_heartbeat_with_its_step() -> None:
    ledger, out = Ledger(), io.StringIO()
    view = Lines(ledger, out, echo=False, heartbeat=0.2)
    ledger.watch(view)
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    ledger.saw("vllm", "#9 [vllm_build 5/7] RUN pip wheel ./.")
    time.sleep(0.7)
    ledger.record("vllm", Entry(Status.BUILT, 0.7))
    time.sleep(0.4)  # none after it was built
    view.close()
    beats = [line for line in lines(out) if line.startswith("still ")]
    assert 2 <= len(beats) <= 4, lines(out)
    for beat in beats:
        assert beat.startswith("still building vllm 1a2b3c4d5e6f: 0.")
        assert beat.endswith(" s, at [5/7] RUN pip wheel ./.")
    assert lines(out)[-1] == "built vllm 1a2b3c4d5e6f in 0.7 s"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_view_shows_a_step_that_ends_before_its_next_tick() -> None:
    ledger, out = Ledger(), Terminal()
    ledger.know({"assemble": (), "manifest": ("assemble",)})
    ledger.record("assemble", Entry(Status.REUSED))
    view = Live(ledger, out, expected={})
    ledger.watch(view)
    ledger.start("manifest", "1a2b3c4d5e6f", expected=None)
    ledger.saw("manifest", "#5 [2/3] RUN python3 /tmp/smoke.py")
    ledger.saw("manifest", "#5 0.21 every pin holds")
    ledger.saw("manifest", "#6 [3/3] RUN python3 /tmp/manifest.py")
    ledger.unwatch(view)
    view.close()
    screen = out.getvalue()
    assert "[1/2] stages, 1 running" in screen
    assert "[2/3] RUN python3 /tmp/smoke.py" in screen
    assert "[3/3] RUN python3 /tmp/manifest.py" in screen
    assert "every pin holds" not in screen  # a step's output is the log's


def test_a_stage_waiting_for_its_parents_is_not_shown_running() -> None:
    ledger, out = Ledger(), Terminal()
    ledger.know({"vllm": (), "sglang": (), "assemble": ("vllm", "sglang")})
    view = Live(ledger, out, expected={})
    ledger.watch(view)
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    ledger.start("sglang", "a49104987a5d", expected=None)
    ledger.start("assemble", "9024cb54b5aa", expected=None)
    ledger.saw("vllm", "#5 [2/3] RUN pip wheel ./.")
    assert ledger.waiting_for("assemble") == ("vllm", "sglang")
    ledger.record("sglang", Entry(Status.BUILT, 1.0))
    assert ledger.waiting_for("assemble") == ("vllm",)
    ledger.saw("vllm", "#6 [3/3] RUN python3 -c pass")
    ledger.unwatch(view)
    view.close()
    screen = out.getvalue()
    assert "[0/3] stages, 2 running, 1 waiting" in screen  # sglang waits for no parent
    assert "[1/3] stages, 1 running, 1 waiting" in screen
    assert "… assemble             waiting for vllm, sglang" in screen
    assert "… assemble             waiting for vllm\n" in screen
    ledger.saw("assemble", "#7 [2/2] COPY --from=vllm /dist /dist")
    assert ledger.waiting_for("assemble") == ()  # its own step began: it runs


def test_the_time_left_is_the_longest_chain_of_what_remains() -> None:
    ledger = Ledger()
    ledger.know({"a": (), "b": ("a",), "c": ()})
    expected = {"a": 10.0, "b": 20.0, "c": 25.0}
    now = time.monotonic()
    assert left(ledger, expected, now) == 30.0  # a then b; c beside them, not after
    ledger.start("a", "1a2b3c4d5e6f", expected=10.0)
    ledger.start("c", "a49104987a5d", expected=25.0)
    ledger.saw("a", "#5 [2/3] RUN make")
    began = ledger.entries()["a"].began
    assert left(ledger, expected, began + 4.0) == 26.0  # 6 of a left, then b
    ledger.record("a", Entry(Status.BUILT, 10.0))
    ledger.start("b", "9024cb54b5aa", expected=20.0)
    assert left(ledger, expected, now) == 25.0  # c waits for nothing, and b has not begun
    ledger.saw("b", "#5 [2/3] RUN make")
    ledger.saw("c", "#5 [2/3] RUN make")
    assert left(ledger, expected, ledger.entries()["b"].began + 40.0) is None  # both overdue
    ledger.start("d", "0123456789ab", expected=None)
    assert left(ledger, {**expected, "e": 5.0}, now) is None  # d has no record: no forecast


def test_after_an_interrupt_the_table_says_interrupted_and_not_started() -> None:
    ledger = Ledger()
    ledger.know({"vllm": (), "sglang": (), "assemble": ("vllm", "sglang")})
    ledger.record("base", Entry(Status.REUSED, key="7cc4f68c1d5b"))
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    ledger.start("sglang", "a49104987a5d", expected=None)  # on BuildKit's own steps still
    ledger.start("assemble", "9024cb54b5aa", expected=None)
    ledger.saw("vllm", "#5 [2/3] RUN pip wheel ./.")
    ledger.interrupt()
    for stage in ("vllm", "sglang", "assemble"):  # the stopped builds end, failed
        ledger.record(stage, Entry(Status.FAILED, 61.0))
    assert summary(ledger, {}, lambda ref: None) == [
        "stage     status       time        size  builder",
        "base      reused       -           -     -",
        "vllm      interrupted  1 min 01 s  -     -",
        "sglang    interrupted  1 min 01 s  -     -",
        "assemble  not started  -           -     -",
    ]


def test_the_summary_is_a_table_then_the_image() -> None:
    ledger = Ledger()
    ledger.record("base", Entry(Status.REUSED, key="7cc4f68c1d5b"))
    ledger.record("vllm", Entry(Status.BUILT, 212.4, "ssh://b", key="1a2b3c4d5e6f"))
    ledger.record("manifest", Entry(Status.FAILED, 1.5, key="9024cb54b5aa"))
    ledger.final = Final("verl:gfx942", "verl/manifest:9024", "9024", "/workspace/.manifest",
                         ".build/run.json")  # fmt: skip
    sizes = {"verl/base:x": 545_000_000, "verl/vllm:x": 66_000, "verl:gfx942": 533_400_000}
    refs = {"base": "verl/base:x", "vllm": "verl/vllm:x", "manifest": "verl/manifest:x"}
    assert summary(ledger, refs, sizes.get) == [
        "stage     status  time        size    builder",
        "base      reused  -           545 MB  -",
        "vllm      built   3 min 32 s  66 kB   ssh://b",
        "manifest  failed  1.5 s       -       -",
        "image verl:gfx942 (533 MB) = verl/manifest:9024",
        "its manifest: /workspace/.manifest in the image; this run: .build/run.json",
    ]


def test_a_run_with_nothing_to_do_says_so_in_one_line() -> None:
    ledger, out = Ledger(), io.StringIO()
    ledger.record("base", Entry(Status.REUSED))
    ledger.final = Final("verl:gfx942", "verl/manifest:" + "9" * 64, "9" * 64)
    Console(ledger, out).end()
    assert out.getvalue() == "nothing to build: verl:gfx942 is 999999999999\n"


def test_quiet_says_only_the_summary() -> None:
    ledger, out = Ledger(), io.StringIO()
    console = Console(ledger, out)
    console.begin("quiet", {}, {}, lambda ref: None)
    ledger.start("vllm", "1a2b3c4d5e6f", expected=None)
    console.say("pushed vllm 1a2b3c4d5e6f to registry.example.org/verl")
    ledger.record("vllm", Entry(Status.BUILT, 2.0))
    console.end()
    assert lines(out) == ["stage  status  time   size  builder", "vllm   built   2.0 s  -     -"]


def test_the_stages_a_run_built_are_read_from_its_lines() -> None:
    text = (
        "building vllm 1a2b3c4d5e6f\nbuilt vllm 1a2b3c4d5e6f in 3.2 s on ssh://b\n"
        "built sglang a49104987a5d in 61.0 s\npulled wheels 6e238cc0e8d3\n"
    )
    assert built_stages(text) == {"vllm", "sglang"}
