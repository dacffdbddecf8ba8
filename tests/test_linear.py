"""The linear recipe (verl's shape): one FROM, every step in verl's order, no stage but one."""

from __future__ import annotations

import re

import linear
import pytest

import stages
from rocmgraph.building import dockerfiles
from rocmgraph.graph.invocation import Options, Run


@pytest.fixture(scope="module")
def text() -> str:
    return linear.dockerfile(Run(Options(pins="pins.toml", arch="gfx942"), stages.graph()))


def test_one_from_and_the_stages_in_verls_order(text: str) -> None:
    assert len(re.findall(r"^FROM ", text, re.MULTILINE)) == 1
    assert re.search(r"^FROM docker\.io/rocm/primus:v26\.4\S* AS base$", text, re.MULTILINE)
    names = set(stages.graph().order)
    heads = [h for h in re.findall(r"^# (\w+): ", text, re.MULTILINE) if h in names]
    assert heads == [s for s in linear.ORDER if s in heads]
    # verl's order: SGLang's Python package, then its sgl-kernel
    assert (
        heads.index("vllm")
        < heads.index("verl")
        < heads.index("sglang")
        < heads.index("sgl_kernel")
    )
    assert set(heads) == set(stages.graph().order)


def test_wheels_meet_in_one_filesystem(text: str) -> None:
    assert "from=" not in text  # no other stage to mount or copy from
    assert "--wheel-dir /dist/vllm ./. \\\n" in text
    assert "--wheel-dir /dist/sglang ./python \\\n" in text
    assert "--wheel-dir /dist/sgl_kernel ./sgl-kernel \\\n" in text
    assert "    pip install /dist/causal_conv1d/*.whl /dist/vllm/*.whl \\\n" in text
    assert "RUN cp -a /src/vllm /workspace/vllm\n" in text
    assert "    python /tmp/inplace.py ./. /dist/vllm/*.whl\n" in text
    assert text.rstrip().endswith('CMD ["/usr/bin/bash"]')  # manifest's WORKDIR and CMD last


def test_the_same_steps_as_the_monolith(text: str) -> None:
    run = Run(Options(pins="pins.toml", arch="gfx942"), stages.graph())
    steps = {
        line for part in dockerfiles.stage_texts(run).values() for line in part.splitlines()
        if line.startswith(("RUN ", "ENV ", "    && "))
    }  # fmt: skip
    mine = {line for line in text.splitlines() if line.startswith(("RUN ", "ENV ", "    && "))}
    assert steps - mine == {
        line for line in steps
        if "mkdir -p /dist" in line or "--wheel-dir /dist " in line or linear.CCACHE_MOUNT in line
    }  # fmt: skip
    # Only where the wheels go differs (the in-place step's line starts with spaces), and the
    # compile cache: verl's recipe has none.


def test_every_compile_starts_from_an_empty_compile_cache(text: str) -> None:
    assert linear.CCACHE_MOUNT not in text
    # causal-conv1d, vLLM, SGLang's python/, torch_memory_saver, sgl-kernel
    assert text.count("ccache --show-log-stats") == text.count(linear.NO_CCACHE) == 5
