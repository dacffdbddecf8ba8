"""End to end on a real Docker engine: the demo graph, built, rebuilt, switched, broken, resumed.

The tests run in order and share one build of profile=demo (a rocm/primus-like
base, as verl's 7.14 recipe has): cold, no-op, .doit.db gone, one pin changed,
arch switched, a stage made to fail and then fixed. Their images live in their
own namespace (verl-e2e), emptied first, so the cold build is cold whatever the
machine built before (demo_e2e.py).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tarfile
import termios
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, STARTED_AT, delete_toml, run_doit
from demo_e2e import (
    E2E,
    SITE,
    built,
    docker,
    empty_namespace,
    files,
    image_ids,
    labels,
    layers,
    manifest_file,
    masked,
    nothing_to_build,
    run_in,
    shell,
    size,
    unbuilt_max_jobs,
)

import rocmgraph
import stages
from rocmgraph.config import pins
from rocmgraph.demo.profile import DEMO_ROOT, Demo
from rocmgraph.inimage import prune

pytestmark = pytest.mark.docker
GRAPH = stages.graph()
EMPTY_LAYER = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"
ARCH_INDEPENDENT = {s.name for s in GRAPH if not s.arch_dependent}
SDK = f"{SITE}/_rocm_sdk_*"  # where the base keeps ROCm, as rocm/primus v26.4 does


def cold_lines(order: list[str]) -> list[str]:
    """The lines after the events of a cold build that began the stages in ``order``, masked."""
    return [
        "tagged verl-e2e:gfx942 = verl-e2e/manifest:<key>",
        "stage status time size builder",
        *(f"{stage} built <time> <size> -" for stage in order),
        "image verl-e2e:gfx942 (<size>) = verl-e2e/manifest:<key>",
        "its manifest: /workspace/.manifest in the image; this run: <state>/run.json",
    ]


def assert_events(events: list[str]) -> None:
    """A line as each stage begins and one as it is built, each stage once. The builds of
    one solve end in any order: a source stage's small image may be tagged before the big
    image it was built on is exported."""
    begun = [f"building {stage} <key12>" for stage in GRAPH.order]
    ended = [f"built {stage} <key12> in <time>" for stage in GRAPH.order]
    assert sorted(events) == sorted(begun + ended), "\n".join(events)
    at = {line: i for i, line in enumerate(events)}
    for stage in GRAPH.order:
        assert at[f"building {stage} <key12>"] < at[f"built {stage} <key12> in <time>"], stage


def test_cold_build_makes_an_image_that_holds_what_every_stage_put_there(e2e: E2E) -> None:
    result = e2e.build()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == set(GRAPH.order)
    # What a pipe gets (progress=auto without a terminal): a line per event, the stages
    # begun parents first (one solve of the stages below the squash, one of the rest), then
    # the summary in that order.
    order = re.findall(r"^building (\w+) ", result.stdout, re.MULTILINE)
    assert sorted(order) == sorted(GRAPH.order)
    assert all(
        parent in order[:i] for i, stage in enumerate(order) for parent in GRAPH[stage].parents
    )
    lines = masked(result.stdout)  # no line of doit's own for the demo's setup before them
    assert_events(lines[: 2 * len(order)])
    assert lines[2 * len(order) :] == cold_lines(order), "\n".join(lines)
    image = "verl-e2e:gfx942"
    facts = run_in(
        image,
        "import vllm, sglang, verl, torch, causal_conv1d, sgl_kernel, os;"
        "print(vllm.add(2, 3), vllm.__version__, sglang.VARIANT, sglang.__version__,"
        " torch.__version__, causal_conv1d.ARCHS, sgl_kernel.ARCHS,"
        " os.environ['PYTORCH_ROCM_ARCH'])",
    )
    # vLLM and SGLang say their pinned versions, given to builds of trees without .git.
    assert facts == (
        "5 0.22.1rc1 first 0.5.15 2.12.0+rocm7.14.0.lw.git1a2b3c4d gfx942 ['gfx942'] gfx942"
    )
    rollout = f"{SITE}/verl/trainer/config/rollout/rollout.yaml"
    megatron = f"{SITE}/megatron/core/models/common/language_module/language_module.py"
    found = shell(
        image,
        f"cat {SITE}/_rocm_sdk_core/share/rocm/version; ls /workspace/.manifest;"
        f"grep -c 'disable_custom_all_reduce: True' {rollout};"
        f"grep -c warnings.warn {megatron};"
        "pip list 2>/dev/null | grep -c demo-tilelang || true",
    )
    assert found == [
        "7.14.0",
        "base", "build.json", "dpkg-list.txt", "env.txt", "prune.json", "requirements.txt",
        "sbom.cdx.json", "training_docker_version",
        "2", "1", "0",
    ]  # fmt: skip
    assert labels(image)["org.verl-rocm-graph.stage"] == "manifest"
    assert "ccache" in e2e.log("vllm").read_text().lower()
    # The base carries ROCm, the torch stack, FA, TE and aiter: those stages only verify
    # (their step lines are logged, cached or not). The manifest stage built: the smoke
    # check passed.
    assert "python /tmp/verify_rocm.py 7.14" in e2e.log("rocm").read_text()
    assert "python /tmp/verify_dists.py flash_attn==2.8.3" in e2e.log("flash_attention").read_text()


def kernel_archs(image: str, where: str = SDK) -> set[str | None]:
    found = shell(image, f"find {where} -name '*gfx*'")
    return {prune.arch_of(path) for path in found}


def test_the_pruned_image_keeps_its_arch_only_and_really_shrank(e2e: E2E) -> None:
    assert kernel_archs("verl-e2e:gfx942") == {"gfx942"}
    report = json.loads(manifest_file("verl-e2e:gfx942", "prune.json"))
    # Per arch: 11 kernel files of the libraries, and 3 of them hardlinked in the devel
    # tree again: every name goes, the bytes count once.
    assert report["removed_by_arch"] == {
        "gfx90a": {"files": 14, "bytes": 4928 * 1024},
        "gfx950": {"files": 14, "bytes": 4928 * 1024},
    }
    keys = labels("verl-e2e:gfx942")
    # The torch stack's image holds every arch's kernels. slim is that image less the trees,
    # squashed into one layer, so no byte of them ships below; verl builds on it; the kept
    # kernels come back in one layer of their own over verl's, in assemble.
    wheels = f"verl-e2e/wheels:{keys['org.verl-rocm-graph.key.wheels']}"
    slim = f"verl-e2e/slim:{keys['org.verl-rocm-graph.key.slim']}"
    verl = f"verl-e2e/verl:{keys['org.verl-rocm-graph.key.verl']}"
    pruned = f"verl-e2e/prune:{keys['org.verl-rocm-graph.key.prune']}"
    assert size(wheels) - size(slim) >= 0.95 * report["removed_bytes"], report
    assert len(set(layers(slim)) - {EMPTY_LAYER}) == 1  # (WORKDIR adds an empty one)
    assert layers(verl)[: len(layers(slim))] == layers(slim)
    final = layers("verl-e2e:gfx942")
    assert final[: len(layers(verl))] == layers(verl)
    # prune's image is the kept trees alone, under /kept, in one layer: what a machine that
    # builds assemble pulls.
    assert len(layers(pruned)) == 1
    kept = files(pruned, "/kept/opt/venv/lib/python3.11/site-packages")
    assert {name.split("/")[0] for name in kept} == {
        "_rocm_sdk_core", "_rocm_sdk_devel", "_rocm_sdk_libraries",
    }  # fmt: skip
    assert size(pruned) < 0.2 * size(wheels)


def test_the_image_is_verl_s_7_14_image_on_its_primus_like_base(e2e: E2E) -> None:
    image = "verl-e2e:gfx942"
    # vLLM finds ROCm by `import amdsmi`: linked from where rocm/primus keeps it.
    assert run_in(image, "import amdsmi; print(amdsmi.__file__)") == f"{SITE}/amdsmi/__init__.py"
    assert shell(image, "ls /workspace") == ["aiter", "sglang", "verl", "vllm"]
    # /workspace/vllm runs as verl's editable install does: from there, its own tree is
    # imported, with what its build generated in place (the extension, triton_kernels).
    assert shell(
        image,
        "cd /workspace/vllm && python -c 'import vllm, vllm.third_party.triton_kernels.matmul_ogs "
        "as m; print(vllm.__file__); print(vllm.add(1, 2), m.BLOCK)'",
    ) == ["/workspace/vllm/vllm/__init__.py", "3", "128"]
    # SGLang's tree as verl's recipe leaves it: its sgl-kernel/ patched, its ROCm setup
    # script copied over the CUDA one (the sgl_kernel stage's folder, over SGLang's tree)
    kernel = "/workspace/sglang/sgl-kernel"
    assert shell(
        image,
        f"ls /workspace/sglang/python/sglang/__init__.py; cmp {kernel}/setup.py "
        f"{kernel}/setup_rocm.py && echo same; "
        f"grep -c 'Unsupported GPU' {kernel}/setup_rocm.py; true",
    ) == ["/workspace/sglang/python/sglang/__init__.py", "same", "0"]
    leftovers = ("/*.whl", "/root/.cache", "/root/.triton", "/workspace/aiter/aiter/jit/build",
                 "/workspace/TransformerEngine")  # fmt: skip
    there = "for path in " + " ".join(leftovers) + '; do [ -e "$path" ] && echo "$path"; done'
    keys = labels(image)
    wheels = f"verl-e2e/wheels:{keys['org.verl-rocm-graph.key.wheels']}"
    assert shell(wheels, there + "; true") == [
        "/transformer_engine-2.14.0-py3-none-any.whl",
        *leftovers[1:],
    ]
    assert shell(image, there + "; true") == []
    # The devel tree's hard links went with the files they share; the kept ones still share.
    kept, gone = "Kernels.so-000-gfx942.hsaco", "Kernels.so-000-gfx950.hsaco"
    trees = [f"{SITE}/_rocm_sdk_{tree}/lib/rocblas/library" for tree in ("libraries", "devel")]
    inode, links, other_inode, other_links = shell(
        image, f"stat -c '%i %h' {trees[0]}/{kept} {trees[1]}/{kept}"
    )
    assert (links, other_links) == ("2", "2")
    assert inode == other_inode
    assert shell(image, f"ls {trees[0]}/{gone} {trees[1]}/{gone} 2>/dev/null; true") == []
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image))
    assert config["Cmd"] == ["/usr/bin/bash"]
    assert config["WorkingDir"] == "/workspace"
    env = dict(entry.split("=", 1) for entry in config["Env"])
    # causal-conv1d's build variables stay, as verl's recipe keeps them; build-only ones go.
    assert {name: env.get(name) for name in KEPT} == {
        "HIP_ARCHITECTURES": "gfx942",
        "CAUSAL_CONV1D_FORCE_BUILD": "TRUE",
        "MAMBA_FORCE_BUILD": "TRUE",
    }
    # DEBIAN_FRONTEND is the base's own (rocm/primus sets it): kept, as in verl's image.
    assert set(env) & set(stages.slim.BUILD_ONLY_ENV) == {"DEBIAN_FRONTEND"}
    assert env["DEBIAN_FRONTEND"] == "noninteractive"


KEPT = ("HIP_ARCHITECTURES", "CAUSAL_CONV1D_FORCE_BUILD", "MAMBA_FORCE_BUILD")


def test_the_manifest_and_labels_record_how_the_image_was_built(e2e: E2E) -> None:
    image = "verl-e2e:gfx942"
    build = json.loads(manifest_file(image, "build.json"))
    keys = labels(image)
    assert [stage["name"] for stage in build["stages"]] == list(GRAPH.order)
    for stage in build["stages"]:
        assert stage["key"] == keys[f"org.verl-rocm-graph.key.{stage['name']}"]
        assert stage["image"] == f"verl-e2e/{stage['name']}:{stage['key']}"
    sglang = next(stage for stage in build["stages"] if stage["name"] == "sglang")
    assert "[sources.sglang].commit" in sglang["pins"]
    assert sglang["arch"] == ["gfx942"]
    assert build["tool"] == {"name": "verl-rocm-graph", "version": rocmgraph.__version__}
    assert build["prune"]["kept_archs"] == ["gfx942"]
    verl_commit = pins.load(e2e.pins).sources["verl"].commit
    assert keys["org.opencontainers.image.revision"] == verl_commit
    assert keys["org.opencontainers.image.source"] == "https://github.com/verl-project/verl"
    assert keys["org.opencontainers.image.version"] == "demo_rocm7.14_torch2.12"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", keys["org.opencontainers.image.created"]
    )
    env = manifest_file(image, "env.txt").splitlines()
    assert "PYTORCH_ROCM_ARCH=gfx942" in env
    # verl's recipe: training_docker_version is the GIT_COMMIT_TAG build argument (commit_tag=),
    # DEV by default; the pinned version is this project's label.
    assert manifest_file(image, "training_docker_version") == "DEV\n"
    # The base's own, as rocm/primus sets it ([base].keeps_env); the graph's build-only
    # variables are dropped where slim squashes.
    assert "DEBIAN_FRONTEND=noninteractive" in env
    assert not any(line.startswith("CCACHE_") for line in env)


def test_a_secret_package_index_never_reaches_a_layer(e2e: E2E, tmp_path: Path) -> None:
    # The pins name the index; its login is in the user's netrc, as pip and curl keep it.
    token = "s3cr3t-t0ken-4242"
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login demo password {token}\n")
    netrc.chmod(0o600)
    secret = E2E(tmp_path / "pins.toml")
    secret.pins.write_text(e2e.pins.read_text())
    secret.edit(["image", "name"], "verl-secret")
    empty_namespace("verl-secret")
    result = run_doit("build:base", *secret.where, env={"NETRC": str(netrc)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert token not in result.stdout + result.stderr
    (image,) = docker(
        "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "verl-secret/base"
    ).split()
    archive = tmp_path / "image.tar"
    docker("save", "--output", str(archive), image)
    with tarfile.open(archive) as saved:
        members = [m for m in saved.getmembers() if m.isfile()]
        listed = saved.extractfile("manifest.json")
        assert listed is not None
        # <id>/layer.tar (docker 20.10's save) or blobs/sha256/<hex> (25's on, OCI's layout)
        layers = set(json.load(listed)[0]["Layers"])
        assert layers <= {m.name for m in members}
        for member in members:  # every layer, the config, the manifest
            data = saved.extractfile(member)
            assert data is not None
            blob = data.read()
            if member.name in layers:
                with tarfile.open(fileobj=io.BytesIO(blob)) as layer:
                    for entry in layer.getmembers():
                        content = layer.extractfile(entry) if entry.isfile() else None
                        assert content is None or token.encode() not in content.read(), entry.name
            assert token.encode() not in blob, member.name
    assert token not in docker("history", "--no-trunc", image)
    assert token not in (tmp_path / ".build" / "logs" / "base.log").read_text()


def test_a_second_run_builds_nothing(e2e: E2E) -> None:
    before = image_ids()
    since = f"{time.time():.3f}"  # to the millisecond: not the last test's events
    result = e2e.build()
    assert result.returncode == 0, result.stderr
    assert built(result) == set()
    assert image_ids() == before
    # The engine's own record: a build ends by naming (tagging) its image. Only this
    # namespace's names are this run's: another run on the machine may tag its own meanwhile.
    until = str(int(time.time()) + 1)
    tagged = docker(
        "events", "--since", since, "--until", until, "--filter", "type=image",
        "--filter", "event=tag", "--format", "{{.Actor.Attributes.name}}",
    ).split()  # fmt: skip
    assert [name for name in tagged if re.match(r"(docker\.io/)?verl-e2e[/:]", name)] == []


def test_losing_the_doit_database_rebuilds_nothing(e2e: E2E) -> None:
    for path in ROOT.glob(".doit.db*"):
        path.unlink()
    result = e2e.build()
    assert result.returncode == 0, result.stderr
    assert built(result) == set()


def test_one_pin_changed_rebuilds_exactly_its_stage_and_descendants(e2e: E2E) -> None:
    demo = Demo(stages.graph())
    second = _commits(demo, "sglang")[1]
    kept_before = {k: v for k, v in image_ids().items() if k.startswith(("vllm:", "sgl_kernel:"))}
    assert {ref.split(":")[0] for ref in kept_before} == {"vllm", "sgl_kernel"}
    first = pins.load(e2e.pins).sources["sglang"].commit
    e2e.edit(["sources", "sglang", "commit"], second)
    # sgl-kernel/ moves with SGLang (as `doit bump:sglang` moves it), and upstream's second
    # commit leaves the folder alone: its tree id, all its key covers, stays
    e2e.edit(["sources", "sgl_kernel", "commit"], second)
    plan = e2e.plan()  # before building: what will build, and why
    assert plan["vllm"]["status"] == plan["sgl_kernel"]["status"] == "built"
    assert plan["sglang"]["status"] == "not built"
    assert plan["sglang"]["reasons"] == [
        f"pin [sources.sglang].commit changed: {first[:12]} -> {second[:12]}"
    ]
    assert plan["assemble"]["reasons"] == ["parent sglang changed"]
    result = e2e.build()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert built(result) == {"sglang", "assemble", "manifest"}  # pruning needs no source
    assert {
        k: v for k, v in image_ids().items() if k.startswith(("vllm:", "sgl_kernel:"))
    } == kept_before
    assert run_in("verl-e2e:gfx942", "import sglang; print(sglang.VARIANT)") == "second"


def test_switching_arch_reuses_every_arch_independent_stage(e2e: E2E) -> None:
    result = e2e.build("gfx950")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    # What the base provides only verifies, for any arch set.
    assert built(result) == {
        "causal_conv1d", "sgl_kernel", "sglang", "vllm", "prune", "assemble", "manifest",
    }  # fmt: skip
    assert ARCH_INDEPENDENT.isdisjoint(built(result))
    # The two images share slim's one layer and verl's (all but the ROCm trees and the source
    # builds) and differ from the pruned trees up.
    mi300, mi350 = layers("verl-e2e:gfx942"), layers("verl-e2e:gfx950")
    keys = labels("verl-e2e:gfx950")
    shared = layers(f"verl-e2e/verl:{keys['org.verl-rocm-graph.key.verl']}")
    assert mi300[: len(shared)] == mi350[: len(shared)] == shared
    assert mi300[len(shared)] != mi350[len(shared)]
    facts = run_in(
        "verl-e2e:gfx950",
        "import causal_conv1d, sgl_kernel; print(causal_conv1d.ARCHS, sgl_kernel.ARCHS)",
    )
    assert facts == "gfx950 ['gfx950']"
    back = e2e.build("gfx942")  # and back: every stage of gfx942 is still there
    assert built(back) == set()
    both = e2e.build("gfx942,gfx950", "-n", "2")  # independent stages build at once
    assert both.returncode == 0, both.stdout[-3000:] + both.stderr
    assert ARCH_INDEPENDENT.isdisjoint(built(both))
    assert kernel_archs("verl-e2e:gfx942-gfx950") == {"gfx942", "gfx950"}
    # causal-conv1d's one --offload-arch flag takes the list comma-separated.
    assert run_in("verl-e2e:gfx942-gfx950", "import causal_conv1d; print(causal_conv1d.ARCHS)") == (
        "gfx942,gfx950"
    )
    # With [build].source_archs, a gfx950 image takes the source builds of both archs: it
    # builds what installs them (its pruned trees are built already) and compiles nothing.
    e2e.edit(["build", "source_archs"], ["gfx942", "gfx950"])
    try:
        reused = e2e.build("gfx950")
        assert reused.returncode == 0, reused.stdout[-3000:] + reused.stderr
        assert built(reused) == {"assemble", "manifest"}
        assert kernel_archs("verl-e2e:gfx950") == {"gfx950"}
        assert run_in(
            "verl-e2e:gfx950",
            "import os, causal_conv1d; print(causal_conv1d.ARCHS, os.environ['PYTORCH_ROCM_ARCH'])",
        ) == ("gfx942,gfx950 gfx950")
    finally:
        e2e.pins.write_text(delete_toml(e2e.pins.read_text(), ["build", "source_archs"]))


def test_a_failing_stage_leaves_no_tag_and_the_rerun_resumes_there(e2e: E2E) -> None:
    e2e.edit(["sources", "causal_conv1d", "env", "MAMBA_FORCE_BUILD"], "FALSE")
    e2e.edit(["sources", "causal_conv1d", "subdirs"], ["no-such-dir"])
    before = image_ids()
    failed = e2e.build()
    assert failed.returncode == 1
    log = e2e.pins.parent / ".build" / "logs" / "causal_conv1d.log"
    lines = failed.stderr.splitlines()
    assert lines[0] == "error: stage causal_conv1d: docker build failed (exit 1); its last lines:"
    assert lines[-1] == f"full log: {log.resolve()}"  # the stage key's own log, linked
    assert "no-such-dir" in failed.stderr
    assert built(failed) == set()
    assert re.search(r"^failed causal_conv1d [0-9a-f]{12} after ", failed.stdout, re.MULTILINE)
    assert image_ids() == before  # nothing tagged: the failed stage left no image
    e2e.edit(["sources", "causal_conv1d", "subdirs"], ["."])
    resumed = e2e.build()
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert built(resumed) == {"causal_conv1d", "assemble", "manifest"}


@pytest.mark.parametrize(
    ("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")]
)
def test_ctrl_c_or_sigterm_stops_the_builds_in_one_line_and_tags_nothing_unfinished(
    e2e: E2E, signum: signal.Signals, word: str
) -> None:
    # Every source stage builds again, from steps no earlier run left in BuildKit's cache.
    e2e.edit(["build", "max_jobs"], unbuilt_max_jobs())
    before = image_ids()
    process = subprocess.Popen(
        [sys.executable, "-m", "doit", "-n", "2", "build:image", *e2e.where, "arch=gfx942",
         "progress=plain"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # SIGINT to doit alone (a terminal's Ctrl-C reaches its group)
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:  # a build step of a source stage is running
        if re.match(r"\[(vllm|sglang|causal_conv1d)\] #\d+ \[", line):
            process.send_signal(signum)  # SIGTERM: what CI runners and `timeout` send
            break
    out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err
    # The table says which builds were stopped: interrupted once begun, else not started.
    shown = out.splitlines()
    header = next(i for i, line in enumerate(shown) if re.match(r"stage +status +time ", line))
    status = slice(shown[header].index("status"), shown[header].index("time"))
    rows = {line[: status.start].strip(): line[status].strip() for line in shown[header + 1 :]}
    said = set(rows.values())
    assert "interrupted" in said, out
    assert said <= {"reused", "built", "pulled", "interrupted", "not started"}, out
    assert re.fullmatch(
        rf"{word}: stopped while building [a-z0-9_, ]+; only a build that finished is "
        r"tagged\n",
        err,
    ), err
    # Everything the run started or wrote for itself is gone: the demo's servers, the
    # secrets' folders (pip.conf), the context folders of its keys.
    assert demo_registries() == []
    mine = f"{process.pid}-"
    assert not list(e2e.pins.parent.rglob(f"{mine}*")), "a folder of the run stayed"
    contexts = e2e.pins.parent / ".build" / "contexts"  # each stage's own folder stays
    keyed = [p.name for p in contexts.glob("*") if re.search(r"-[0-9a-f]{12}$", p.name)]
    assert keyed == [], keyed
    # A stage whose build finished before the interrupt took effect is tagged, whole (its key
    # label is its tag); the rest are not.
    new = {tag: image for tag, image in image_ids().items() if tag not in before}
    for tag in new:
        key = labels(f"verl-e2e/{tag}")["org.verl-rocm-graph.key"]
        assert tag.endswith(f":{key}")
    assert not [p for p in psutil_like("docker build") if str(e2e.pins.parent) in p]
    plan = e2e.plan()
    expected = {name for name, stage in plan.items() if stage["status"] == "not built"}
    # What the table said was stopped is not built. A stage of the same solve that finished
    # first is (a quick child may end before a parent's export, on a busy machine).
    stopped = {name for name, word in rows.items() if word in ("interrupted", "not started")}
    assert stopped <= expected, out
    resumed = e2e.build()
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert built(resumed) == expected


def test_two_runs_at_once_take_turns_and_both_end_well(e2e: E2E) -> None:
    e2e.edit(["build", "max_jobs"], unbuilt_max_jobs())  # the source stages build
    argv = [sys.executable, "-m", "doit", "build:image", *e2e.where, "arch=gfx942"]
    first = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    building, lines = threading.Event(), []

    def read() -> None:  # all of it: a pipe left full would stop the first run
        assert first.stdout is not None
        for line in first.stdout:
            lines.append(line)
            if line.startswith("building "):  # it serves the demo and builds
                building.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert building.wait(120), "".join(lines)
        holds = (
            rf"the build started at {STARTED_AT} by pid {first.pid} \(arch gfx942\): it serves "
            f"the demo from {re.escape(str(ROOT / '.build' / 'demo'))}"
        )
        refused = e2e.build("gfx950", "wait=0")
        assert refused.returncode == 1
        assert re.fullmatch(
            rf"error: not waiting \(wait=0\) for {holds}; rerun when it ends, or without wait= "
            r"to wait as long as it takes\n",
            refused.stderr,
        ), refused.stderr
        second = e2e.build()  # waits, then finds every stage built by the first
    finally:  # a failure here must not leave the first run building under the next test
        reader.join(300)
        err = first.communicate(timeout=300)[1]
    assert first.returncode == 0, "".join(lines)[-3000:] + err
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert re.search(rf"^waiting for {holds}$", second.stderr, re.MULTILINE), second.stderr
    assert not re.search(r"^built ", second.stdout, re.MULTILINE), second.stdout
    assert nothing_to_build(e2e.build())  # a no-op now


def psutil_like(needle: str) -> list[str]:
    """The command lines of running processes that contain ``needle``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in text:
            found.append(text)
    return found


def demo_registries() -> list[str]:
    """The command lines of this checkout's demo registries that run, known by their config
    file: another checkout's demo may serve on the port meanwhile, and is not this test's."""
    return psutil_like(f"docker-registry serve {DEMO_ROOT / 'registry' / 'config.yml'}")


def _commits(demo: Demo, source: str) -> list[str]:
    return list(json.loads((demo.root / "fixtures" / "built.json").read_text())["commits"][source])


def in_terminal(argv: list[str], columns: int = 120) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal, as a person's shell would; its exit code and all
    it wrote there (escape sequences and all)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    process = subprocess.Popen(argv, cwd=ROOT, stdin=follower, stdout=follower, stderr=follower,
                               env=env)  # fmt: skip
    os.close(follower)
    written = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every process holding the terminal is gone
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    return process.wait(60), written.decode("utf-8", "replace")


def test_a_terminal_gets_a_live_view_then_the_summary(e2e: E2E) -> None:
    code, screen = in_terminal(
        [sys.executable, "-m", "doit", "build:image", *e2e.where, "arch=gfx942",
         f"commit_tag=live-{time.time_ns()}"]
    )  # fmt: skip
    assert code == 0, screen[-3000:]
    assert ".  demo" not in screen  # doit's own line for the demo's setup: the view says all
    frames = screen.split("\x1b[2K")  # the view redraws by clearing its lines
    stages = len(GRAPH.order)
    # While the manifest builds: the header, a line per finished stage, one for the running.
    assert any(f"[{stages - 1}/{stages}] stages, 1 running" in frame for frame in frames)
    assert re.search(r"… manifest +\d+\.\d s +\[\d/\d\] RUN python3 /tmp/smoke\.py", screen)
    assert re.search(r"(✓ vllm +built +\d+\.\d s|= vllm +reused)\r\n", screen)
    # Then the view is gone, and the summary stays on the screen, a line each.
    after = screen.rsplit("\x1b[?25h", 1)[1]  # the cursor shown again: the view ended
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", after).replace("\r", "")  # the erasures
    lines = [line for line in masked(text) if line]
    assert lines[0] == "stage status time size builder", lines
    assert "manifest built <time> <size> -" in lines
    assert lines[-2] == "image verl-e2e:gfx942 (<size>) = verl-e2e/manifest:<key>"
