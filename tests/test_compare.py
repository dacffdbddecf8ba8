"""`doit compare`: an upstream recipe beside the graph, fact by fact, every difference explained.

verl's own recipes are read as verl has them: tests/fixtures/upstream/ holds its
docker/rocm/Dockerfile.rocm and Dockerfile.rocm702 at c791da0bf (SOURCES.toml), under their
file names, which docker/differences.toml's explanations name.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import ROOT, edit_toml, run_doit

import stages
from rocmgraph.commands import compare, docs
from rocmgraph.commands.compare import Fact, Status
from rocmgraph.common.errors import CompareError
from rocmgraph.graph.invocation import Options, Run

FIXTURES = ROOT / "tests" / "fixtures" / "upstream" / "verl-project" / "verl" / "docker" / "rocm"


def run_of(pins: str = "pins.toml") -> Run:
    return Run(Options(pins=str(ROOT / pins)), stages.graph())


@pytest.fixture(scope="module")
def real() -> Run:
    return run_of()


def rows(text: str, run: Run, differences: Path) -> list[tuple[str, str, str, str]]:
    """(fact, key, value, status) of each row of the recipe's own facts (not what the graph
    adds beside them, how pip takes each package or the order: test_how_pip_takes_each_package,
    test_upgrading_or_not_is_a_fact_of_each_package,
    test_the_install_order_...), for a recipe named Dockerfile.test."""
    comparison = compare.compare(text, "Dockerfile.test", run, differences)
    return [
        (r.stated.fact, r.stated.key, r.stated.value, r.status)
        for r in comparison.rows
        if r.status is not Status.ADDED
        and r.stated.fact not in (Fact.DEPS, Fact.UPGRADE, Fact.ORDER, Fact.APT_RECOMMENDS)
    ]


def rows_of(fact: Fact, text: str, run: Run, differences: Path) -> list[tuple[str, ...]]:
    """(key, value, status, what the graph does) of each row of ``fact``."""
    comparison = compare.compare(text, "Dockerfile.test", run, differences)
    return [(r.stated.key, r.stated.value, r.status, r.graph) for r in comparison.rows
            if r.stated.fact is fact]  # fmt: skip


@pytest.fixture
def nothing_explained(tmp_path: Path) -> Path:
    path = tmp_path / "differences.toml"
    path.write_text("")
    return path


# ---------------------------------------------------------------- verl's recipes, end to end


REAL = "tests/fixtures/upstream/verl-project/verl/docker/rocm"  # verl's files at c791da0bf
EDITABLE_WHY = compare.read_differences()[0].why


@pytest.mark.parametrize(
    ("recipe", "pins", "summary"),
    [
        (
            f"{REAL}/Dockerfile.rocm",
            "pins.toml",
            "108 same, 0 differs, 0 missing, 0 added, 17 explained",
        ),
        (
            f"{REAL}/Dockerfile.rocm702",
            "pins-rocm702.toml",
            "115 same, 0 differs, 0 missing, 0 added, 36 explained",
        ),
    ],
)
def test_verls_recipes_are_followed_or_the_difference_is_explained(
    recipe: str, pins: str, summary: str
) -> None:
    done = run_doit("compare", f"dockerfile={recipe}", f"pins={pins}")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == f"{recipe}: {summary}"
    assert not [line for line in lines if ": differs: " in line or ": missing: " in line]


def test_each_build_of_one_repository_is_its_own_source_with_its_install_flags() -> None:
    done = run_doit("compare", f"dockerfile={REAL}/Dockerfile.rocm")
    builds = [line.split(": ", 1)[1] for line in done.stdout.splitlines() if ": build " in line]
    assert builds[-2:] == [
        "build sgl-project/sglang pip install -e --no-build-isolation --no-deps python: "
        "explained: stage sglang builds a wheel of python with --no-build-isolation, installed "
        f"without its dependencies, its tree at sglang ({EDITABLE_WHY})",
        "build sgl-project/sglang setup.py install sgl-kernel: same: stage sgl_kernel builds a "
        "wheel of sgl-kernel with --no-build-isolation, installed without its dependencies, its "
        "tree at sglang",
    ]


def test_a_moved_pin_and_a_new_sed_fail_with_what_to_follow(tmp_path: Path) -> None:
    recipe = tmp_path / "Dockerfile.rocm"
    text = (FIXTURES / "Dockerfile.rocm").read_text()
    text = text.replace("18d87a87dc39c1a50f452b218fdcc3aeec48d18e", "0" * 40)
    text = text.replace("pip install --no-cache-dir -r requirements/rocm.txt",
                        "sed -i s/a/b/ setup.py && pip install --no-cache-dir -r "
                        "requirements/rocm.txt")  # fmt: skip
    recipe.write_text(text)
    done = run_doit("compare", f"dockerfile={recipe}")
    assert done.returncode == 1
    assert (
        f"{recipe}:33: source vllm-project/vllm {'0' * 40}: differs: [sources.vllm] commit "
        "18d87a87dc39c1a50f452b218fdcc3aeec48d18e, tag -"
    ) in done.stdout.splitlines()
    assert (
        f"{recipe}:45: patch vllm-project/vllm:setup.py sed -i: missing: no patch touches it"
    ) in done.stdout.splitlines()
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: compare {recipe}: 2 differences are not explained; follow the recipe, "
        "or say why not in docker/differences.toml"
    )


def test_an_explanation_nothing_needs_any_more_fails(tmp_path: Path) -> None:
    recipe = tmp_path / "Dockerfile.rocm"
    text = (FIXTURES / "Dockerfile.rocm").read_text()
    text = text.replace("-e ./python", "./python")  # SGLang, not in develop mode
    recipe.write_text(text.replace("setup.py develop --no-deps", "setup.py bdist_wheel"))
    done = run_doit("compare", f"dockerfile={recipe}")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-3:-1] == [
        "docker/differences.toml: stale: build sgl-project/sglang",
        "docker/differences.toml: stale: build vllm-project/vllm",
    ]
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: compare {recipe}: 2 explanations match nothing any more; follow the recipe, "
        "or say why not in docker/differences.toml"
    )


def _without_path(stdout: str, path: object) -> list[str]:
    """compare's lines with the recipe's path left out: what a copy must say as its original."""
    return [line.removeprefix(f"{path}") for line in stdout.splitlines()]


@pytest.mark.parametrize("named", [(), ("recipe=Dockerfile.rocm",)], ids=["content", "key"])
def test_a_renamed_copy_is_explained_as_its_original(
    tmp_path: Path, named: tuple[str, ...]
) -> None:
    original = run_doit("compare", f"dockerfile={REAL}/Dockerfile.rocm")
    copy = tmp_path / "Dockerfile"
    copy.write_text((FIXTURES / "Dockerfile.rocm").read_text())
    done = run_doit("compare", f"dockerfile={copy}", *named)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = _without_path(done.stdout, copy)
    assert lines.pop(-2) == (
        ": explained by the entries for Dockerfile.rocm in docker/differences.toml"
    )
    assert lines == _without_path(original.stdout, f"{REAL}/Dockerfile.rocm")


def test_a_copy_that_matches_no_recipe_says_how_to_name_it(tmp_path: Path) -> None:
    copy = tmp_path / "Dockerfile"
    text = (FIXTURES / "Dockerfile.rocm").read_text()
    copy.write_text(text.replace("-e ./python", "./python"))  # an explanation goes stale
    done = run_doit("compare", f"dockerfile={copy}")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: compare {copy}: 16 differences are not explained; follow the recipe, or say "
        "why not in docker/differences.toml, which has entries for Dockerfile.rocm, "
        "Dockerfile.rocm702 only (for a copy of one, name it: recipe=Dockerfile.rocm or "
        "recipe=Dockerfile.rocm702)"
    )


def test_a_recipe_the_differences_have_no_entries_for_is_one_line(tmp_path: Path) -> None:
    done = run_doit("compare", f"dockerfile={REAL}/Dockerfile.rocm", "recipe=Dockerfile.rcom")
    assert done.returncode == 3
    assert done.stderr == (
        "error: recipe=Dockerfile.rcom: docker/differences.toml has no entries for it; name a "
        "recipe it has entries for (recipe=Dockerfile.rocm or recipe=Dockerfile.rocm702), or "
        "add its entries there\n"
    )


def test_json_has_every_row_and_the_stale_list() -> None:
    done = run_doit("compare", f"dockerfile={REAL}/Dockerfile.rocm", "format=json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["stale"] == []
    assert len(document["rows"]) == 125
    first = document["rows"][0]
    assert first == {
        "fact": "base", "key": "image", "value": "rocm/primus:v26.4", "line": 3,
        "status": "same", "graph": "[base].image = docker.io/rocm/primus:v26.4", "why": "",
    }  # fmt: skip
    added = next(row for row in document["rows"] if row["fact"] == "prune")
    assert (added["status"], added["line"]) == ("explained", 0)  # the graph's, not the recipe's


def test_submodules_the_recipe_checks_out_are_fetched_or_it_differs(
    real: Run, nothing_explained: Path, tmp_path: Path
) -> None:
    text = (
        "FROM rocm/primus:v26.4\n"
        "RUN git clone https://github.com/verl-project/verl /v && cd /v && "
        "git checkout 7b19203c52503760f92e0368067c7eb744236274 && "
        "git submodule update --init --recursive\n"
    )
    assert ("submodules", "verl-project/verl", "--init --recursive", Status.SAME) in rows(
        text, real, nothing_explained
    )
    off = tmp_path / "pins.toml"
    off.write_text(edit_toml((ROOT / "pins.toml").read_text(), ["sources", "verl", "submodules"],
                             False))  # fmt: skip
    run = Run(Options(pins=str(off)), stages.graph())
    comparison = compare.compare(text, "Dockerfile.test", run, nothing_explained)
    (row,) = [r for r in comparison.rows if r.stated.fact is Fact.SUBMODULES]
    assert (row.status, row.graph) == (Status.DIFFERS, "[sources.verl].submodules = false")


def test_how_pip_takes_each_package(tmp_path: Path, nothing_explained: Path) -> None:
    """--no-deps or not, beside the package's group and [python.install]: verl's 7.0.2
    recipe installs megatron-bridge without its dependencies and xgrammar with them."""
    text = (
        "FROM ubuntu:22.04\n"
        "RUN pip install --no-deps megatron-bridge==0.5.0 && pip install xgrammar==0.1.32\n"
    )
    pins_702 = (ROOT / "pins-rocm702.toml").read_text()
    plain = tmp_path / "pins.toml"
    plain.write_text(pins_702.replace('megatron-bridge = "no-deps"', "").replace(
        'xgrammar = "deps"', ""))  # fmt: skip
    for pins, status in ((ROOT / "pins-rocm702.toml", Status.SAME), (plain, Status.DIFFERS)):
        run = Run(Options(pins=str(pins)), stages.graph())
        comparison = compare.compare(text, "Dockerfile.test", run, nothing_explained)
        deps = [(r.stated.key, r.stated.value, r.status, r.graph) for r in comparison.rows
                if r.stated.fact is Fact.DEPS]  # fmt: skip
        assert [row[:3] for row in deps] == [
            ("megatron-bridge", "no-deps", status),
            ("xgrammar", "deps", status),
        ]
    assert deps[0][3] == "[python.stack] installs it with its dependencies"


def test_a_source_pip_takes_from_git_is_taken_with_its_dependencies_or_not(
    real: Run, nothing_explained: Path
) -> None:
    """verl installs torch_memory_saver from git with --no-deps, as SGLang's companion."""
    url = "git+https://github.com/fzyzcjy/torch_memory_saver.git"
    for flag, status in (("--no-deps ", Status.SAME), ("", Status.DIFFERS)):
        text = f"FROM rocm/primus:v26.4\nRUN pip install {flag}{url}\n"
        assert rows_of(Fact.DEPS, text, real, nothing_explained) == [(
            "fzyzcjy/torch_memory_saver", "no-deps" if flag else "deps", status,
            "[sources.torch_memory_saver].install_deps = false",
        )]  # fmt: skip


def test_upgrading_or_not_is_a_fact_of_each_package(nothing_explained: Path) -> None:
    """-U added where the graph installs a pin as it is, or dropped where it upgrades (verl's
    7.0.2 recipe: mbridge from git with -U): a difference either way."""
    run = run_of("pins-rocm702.toml")
    mbridge = "git+https://github.com/ISEEKYAN/mbridge.git@v0.15.1"
    text = f"FROM ubuntu:22.04\nRUN pip install -U xgrammar==0.1.32 && pip install {mbridge}\n"
    assert rows_of(Fact.UPGRADE, text, run, nothing_explained) == [
        ("xgrammar", "-U", Status.DIFFERS, "[python.vllm] installs it without -U"),
        ("iseekyan/mbridge", "no -U", Status.DIFFERS, "[sources.mbridge].upgrade = true"),
    ]
    text = f"FROM ubuntu:22.04\nRUN pip install xgrammar==0.1.32 && pip install -U {mbridge}\n"
    assert [row[2] for row in rows_of(Fact.UPGRADE, text, run, nothing_explained)] == [
        Status.SAME,
        Status.SAME,
    ]


def test_a_recipe_that_adds_or_drops_upgrade_fails_until_explained(tmp_path: Path) -> None:
    added = tmp_path / "Dockerfile.rocm"
    text = (FIXTURES / "Dockerfile.rocm").read_text()
    added.write_text(text.replace("--no-deps xgrammar==0.1.32", "--no-deps -U xgrammar==0.1.32"))
    done = run_doit("compare", f"dockerfile={added}")
    assert done.returncode == 1
    assert (
        f"{added}:47: upgrade xgrammar -U: differs: [python.vllm] installs it without -U"
    ) in done.stdout.splitlines()
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: compare {added}: 1 differences are not explained; follow the recipe, or say "
        "why not in docker/differences.toml"
    )
    dropped = tmp_path / "Dockerfile.rocm702"
    text = (FIXTURES / "Dockerfile.rocm702").read_text()
    dropped.write_text(
        text.replace("pip install transformers --upgrade", "pip install transformers")
    )
    done = run_doit("compare", f"dockerfile={dropped}", "pins=pins-rocm702.toml")
    assert done.returncode == 1
    assert "docker/differences.toml: stale: upgrade transformers" in done.stdout.splitlines()
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: compare {dropped}: 1 explanations match nothing any more; follow the recipe, "
        "or say why not in docker/differences.toml"
    )


VLLM_BUILD = (
    "RUN git clone https://github.com/vllm-project/vllm.git /workspace/vllm && cd /workspace/vllm "
    "&& git checkout 18d87a87d && pip install -r requirements/rocm.txt && "
    "MAX_JOBS={jobs} python3 setup.py develop --no-deps\n"
)


def test_the_install_order_is_a_fact_and_what_goes_in_later_wins(
    real: Run, nothing_explained: Path
) -> None:
    """The graph installs vLLM's wheel, removes tilelang, then puts xgrammar in without its
    dependencies (so that vLLM's requirements cannot move it): a recipe that installs
    xgrammar first differs."""
    removed = "RUN pip uninstall -y tilelang && pip install --no-deps xgrammar==0.1.32\n"
    followed = "FROM rocm/primus:v26.4\n" + VLLM_BUILD.format(jobs=64) + removed
    assert rows_of(Fact.ORDER, followed, real, nothing_explained) == [
        ("vllm, tilelang (removed)", "before", Status.SAME,
         "stage assemble installs vllm before tilelang (removed)"),
        ("tilelang (removed), xgrammar", "before", Status.SAME,
         "stage assemble installs tilelang (removed) before xgrammar"),
    ]  # fmt: skip
    early = "FROM rocm/primus:v26.4\n" + removed + VLLM_BUILD.format(jobs=64)
    assert rows_of(Fact.ORDER, early, real, nothing_explained)[-1] == (
        "xgrammar, vllm",
        "before",
        Status.DIFFERS,
        "stage assemble installs xgrammar after vllm",
    )


def test_a_build_s_flags_and_variables_are_facts(real: Run, nothing_explained: Path) -> None:
    """pip's isolated build environment or the image's, -U, and MAX_JOBS=8 before a build."""
    text = (
        "FROM rocm/primus:v26.4\n"
        + VLLM_BUILD.format(jobs=8)
        + (
            "RUN git clone https://github.com/verl-project/verl.git /workspace/verl && "
            "cd /workspace/verl && git checkout 7b19203c5 && pip install .\n"
        )
    )
    assert rows_of(Fact.BUILD_ENV, text, real, nothing_explained) == [
        ("vllm-project/vllm MAX_JOBS", "8", Status.DIFFERS, "[build].max_jobs = 64")
    ]
    verl = rows_of(Fact.BUILD, text, real, nothing_explained)[-1]
    assert verl == ("verl-project/verl", "pip install .", Status.DIFFERS,
                    "stage verl builds a wheel of . with --no-build-isolation, installed with "
                    "its dependencies, its tree at verl")  # fmt: skip
    same = text.replace("pip install .", "pip install --no-build-isolation .")
    assert rows_of(Fact.BUILD, same, real, nothing_explained)[-1][2] is Status.SAME


def test_compare_needs_a_recipe() -> None:
    done = run_doit("compare")
    assert done.returncode == 3
    assert done.stderr.strip().splitlines()[-1] == (
        "error: compare needs dockerfile=<path>: an upstream recipe to set beside the graph"
    )


# ---------------------------------------------------------------- one kind of fact at a time


def test_packages_a_pin_inside_the_recipes_range_follows_it(
    real: Run, nothing_explained: Path
) -> None:
    text = (
        "FROM rocm/primus:v26.4\n"
        'RUN pip install "setuptools-scm>=8" setuptools-scm==9.0 xgrammar==0.1.32 nosuch\n'
        "RUN pip install /opt/rocm/share/amd_smi\n"
    )
    assert rows(text, real, nothing_explained)[1:] == [
        ("pip", "setuptools-scm", ">=8", Status.SAME),
        ("pip", "setuptools-scm", "==9.0", Status.DIFFERS),
        ("pip", "xgrammar", "==0.1.32", Status.SAME),
        ("pip", "nosuch", "", Status.MISSING),
        ("pip", "/opt/rocm/share/amd_smi", "", Status.MISSING),
        ("workdir", "WORKDIR", "/", Status.DIFFERS),
    ]


def test_wheels_by_url_are_compared_by_file_name() -> None:
    run = run_of("pins-rocm702.toml")
    base = "https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/"
    text = (
        "FROM ubuntu:22.04\n"
        f"RUN pip install {base}triton-3.5.1%2Brocm7.0.2.gita272dfa8-cp312-cp312-linux_x86_64.whl"
        f" {base}triton-3.5.0%2Brocm7.0.2.gitffffffff-cp312-cp312-linux_x86_64.whl\n"
    )
    comparison = compare.compare(text, "Dockerfile.test", run, ROOT / "no-such.toml")
    own = [row for row in comparison.rows if row.status is not Status.ADDED]
    assert [(r.stated.key, r.stated.value, r.status) for r in own[1:]] == [
        ("triton", "triton-3.5.1+rocm7.0.2.gita272dfa8-cp312-cp312-linux_x86_64.whl", Status.SAME),
        ("triton", "triton-3.5.0+rocm7.0.2.gitffffffff-cp312-cp312-linux_x86_64.whl",
         Status.DIFFERS),
        ("WORKDIR", "/", Status.DIFFERS),
    ]  # fmt: skip


def test_sources_builds_patches_and_requirements_are_read_in_their_clone(
    real: Run, nothing_explained: Path
) -> None:
    text = (
        "FROM rocm/primus:v26.4\n"
        "WORKDIR /src\n"
        "RUN git clone https://github.com/vllm-project/vllm.git v && cd v && "
        "git checkout 18d87a87d\n"
        "RUN cd v && pip install -r requirements/rocm.txt -r requirements/cuda.txt && "
        "sed -i s/a/b/ csrc/cumem_allocator.cpp && pip install -e . && pip uninstall -y tilelang\n"
        "RUN pip install git+https://github.com/verl-project/verl@v0.1\n"
        "RUN git clone https://example.org/x /x\n"
    )
    assert rows(text, real, nothing_explained)[1:] == [
        ("source", "verl-project/verl", "v0.1", Status.DIFFERS),  # pip's git+ installs first
        ("source", "vllm-project/vllm", "18d87a87d", Status.SAME),
        ("source", "https://example.org/x", "", Status.MISSING),
        ("requirements", "vllm-project/vllm:requirements/rocm.txt", "pip install -r", Status.SAME),
        ("requirements", "vllm-project/vllm:requirements/cuda.txt", "pip install -r",
         Status.MISSING),
        ("patch", "vllm-project/vllm:csrc/cumem_allocator.cpp", "sed -i", Status.SAME),
        ("build", "vllm-project/vllm", "pip install -e .", Status.DIFFERS),
        ("uninstall", "tilelang", "", Status.SAME),
        ("workdir", "WORKDIR", "/src", Status.DIFFERS),
    ]  # fmt: skip


def test_a_named_git_requirement_is_its_commit_without_the_subdirectory(
    real: Run, nothing_explained: Path
) -> None:
    commit = real.pins.sources["sglang"].commit
    text = (
        "FROM rocm/primus:v26.4\n"
        "RUN pip install "
        f'"sglang @ git+https://github.com/sgl-project/sglang@{commit}#subdirectory=python"\n'
    )
    assert ("source", "sgl-project/sglang", commit, Status.SAME) in rows(
        text, real, nothing_explained
    )


def test_no_fact_is_invented_from_a_builder_an_apt_option_or_a_relative_path(
    real: Run, nothing_explained: Path
) -> None:
    """A builder stage's ENV is not the image's; `-o Dpkg::Options::=...` is no package;
    `rm -rf TransformerEngine` in /workspace is [cleanup]'s /workspace/TransformerEngine."""
    text = (
        "FROM rocm/primus:v26.4 AS builder\n"
        "ENV MAX_JOBS=64\n"
        "FROM rocm/primus:v26.4\n"
        "WORKDIR /workspace\n"
        "RUN apt-get install -y -o Dpkg::Options::=--force-confold vim\n"
        "RUN rm -rf TransformerEngine\n"
    )
    assert rows(text, real, nothing_explained)[2:] == [
        ("apt", "vim", "", Status.SAME),
        ("cleanup", "/workspace/TransformerEngine", "rm -rf", Status.SAME),
        ("workdir", "WORKDIR", "/workspace", Status.SAME),
    ]


def test_a_choice_that_is_not_a_table_is_named_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "differences.toml"
    path.write_text('choice = ["x"]\n')
    with pytest.raises(CompareError) as raised:
        compare.read_choices(path)
    assert str(raised.value) == f"{path}: choice 1: give exactly what and why, as strings"


def test_the_environment_is_the_final_images(real: Run, nothing_explained: Path) -> None:
    text = (
        "FROM rocm/primus:v26.4\n"
        "ARG GPU_ARCH=gfx942;gfx950\n"
        "ENV PYTORCH_ROCM_ARCH=${GPU_ARCH} NCCL_DEBUG=INFO CCACHE_DIR=/root/.cache/ccache\n"
        "ENV NCCL_DEBUG=ERROR\n"
    )
    assert rows(text, real, nothing_explained)[1:4] == [
        ("env", "PYTORCH_ROCM_ARCH", "gfx942;gfx950", Status.SAME),
        ("env", "CCACHE_DIR", "/root/.cache/ccache", Status.MISSING),  # build-only: dropped
        ("env", "NCCL_DEBUG", "ERROR", Status.SAME),  # the last value counts
    ]


def test_os_packages_links_cleanup_and_pruning() -> None:
    run = run_of("pins-rocm702.toml")
    text = (
        "FROM ubuntu:22.04\n"
        "RUN apt-get install -y --no-install-recommends vim emacs && "
        'echo "deb [arch=amd64] https://repo.radeon.com/rocm/apt/7.0.2/ jammy main" > /x.list\n'
        "RUN ln -sf /opt/rocm/lib/libamdhip64.so /usr/lib/libamdhip64.so && "
        "ln -s /elsewhere /usr/bin/python3-config\n"
        "RUN rm -rf /var/lib/apt/lists/* /root/.cache && "
        "find /opt/rocm/lib/rocblas/library /usr/lib -name '*gfx*' -delete\n"
        'CMD ["/bin/sh"]\n'
    )
    comparison = compare.compare(text, "Dockerfile.test", run, ROOT / "no-such.toml")
    own = [row for row in comparison.rows if row.status is not Status.ADDED]
    assert [(r.stated.fact, r.stated.key, r.status) for r in own[1:]] == [
        (Fact.APT_RECOMMENDS, "apt install", Status.DIFFERS),  # verl's 7.0.2 apt takes them
        (Fact.APT, "vim", Status.SAME),
        (Fact.APT, "emacs", Status.MISSING),
        (Fact.APT_REPO, "https://repo.radeon.com/rocm/apt/7.0.2", Status.SAME),
        (Fact.LINK, "/usr/lib/libamdhip64.so", Status.SAME),
        (Fact.LINK, "/usr/bin/python3-config", Status.DIFFERS),
        (Fact.CLEANUP, "/var/lib/apt/lists/*", Status.SAME),
        (Fact.CLEANUP, "/root/.cache", Status.MISSING),
        (Fact.PRUNE, "/opt/rocm/lib/rocblas/library", Status.SAME),
        (Fact.PRUNE, "/usr/lib", Status.MISSING),
        (Fact.CMD, "CMD", Status.DIFFERS),
        (Fact.WORKDIR, "WORKDIR", Status.DIFFERS),
    ]


def test_an_explanation_turns_a_difference_into_explained(real: Run, tmp_path: Path) -> None:
    path = tmp_path / "differences.toml"
    path.write_text(
        '[[difference]]\nrecipe = "Dockerfile.test"\nfact = ["apt emacs", "apt vim"]\n'
        'why = """Editors are\\n   a matter of taste."""\n'
    )
    text = (
        "FROM rocm/primus:v26.4\nWORKDIR /workspace\n"
        "RUN apt-get install --no-install-recommends emacs\n"
    )
    comparison = compare.compare(text, "Dockerfile.test", real, path)
    (emacs,) = [row for row in comparison.rows if row.stated.key == "emacs"]
    assert (emacs.status, emacs.why) == (Status.EXPLAINED, "Editors are a matter of taste.")
    assert comparison.stale == ("apt vim",)  # vim is in [base].apt: nothing to explain
    own = [row for row in comparison.rows if row.status is not Status.ADDED]
    with pytest.raises(CompareError) as raised:
        compare.verdict(dataclasses.replace(comparison, rows=tuple(own)))
    assert str(raised.value) == (
        f"compare Dockerfile.test: 1 explanations match nothing any more; follow the recipe, "
        f"or say why not in {path}"
    )


# ---------------------------------------------------------------- docker/differences.toml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[difference]\n", "not TOML (Expected ']]' at the end of an array declaration "
                             "(at line 1, column 13)); fix the file"),
        ('x = 1\n', "holds only [[difference]] and [[choice]] tables; move the rest out"),
        ('[[choice]]\nwhat = "w"\n', "choice 1: give exactly what and why, as strings"),
        ('[[difference]]\nrecipe = "D"\nfact = "apt x"\n',
         "difference 1 has keys ['fact', 'recipe']; give exactly recipe, fact and why"),
        ('[[difference]]\nrecipe = "a/D"\nfact = "apt x"\nwhy = "w"\n',
         "difference 1: recipe = 'a/D'; give the recipe's file name, such as \"Dockerfile.rocm\""),
        ('[[difference]]\nrecipe = "D"\nfact = "apt x"\nwhy = " "\n',
         "difference 1: why is empty; say why the graph differs"),
        ('[[difference]]\nrecipe = "D"\nfact = []\nwhy = "w"\n',
         "difference 1: fact must be a string or a list of strings"),
        ('[[difference]]\nrecipe = "D"\nfact = "deb x"\nwhy = "w"\n',
         "difference 1: fact 'deb x' is not <kind> <key> with a kind of base, source, pip, "
         "wheel, apt, apt-recommends, apt-repo, env, build, requirements, patch, link, cleanup, "
         "prune, uninstall, submodules, deps, upgrade, build-env, order, cmd, workdir; copy it "
         "from `doit compare`'s output"),
    ],
)  # fmt: skip
def test_a_wrong_entry_is_named_with_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "differences.toml"
    path.write_text(text)
    read = compare.read_choices if text.startswith("[[choice]]") else compare.read_differences
    with pytest.raises(CompareError) as raised:
        read(path)
    assert str(raised.value).startswith(f"{path}: {message}")


def test_the_docs_list_every_difference_made_on_purpose() -> None:
    table = docs.differences_table()
    assert table in docs.FOLLOWING.read_text(), "stale: run `doit render` and commit"
    for difference in compare.read_differences():
        for fact, key in difference.facts:
            assert f"`{fact} {key}`" in table
    choices = compare.read_choices()
    assert "| both | ROCm fixes are unified diffs (docker/patches/), not sed | " in table
    assert all(f"| both | {choice.what} |" in table for choice in choices)
