"""Recipes: rendered from the pins each stage declares, and nothing else."""

from __future__ import annotations

import re

import pytest
from conftest import PINS, ROOT, delete_toml, edit_toml, run_doit

import stages
from rocmgraph.common.errors import PinsError, RenderError
from rocmgraph.config import pins
from rocmgraph.dockerfile.syntax import parse
from rocmgraph.graph.dag import Stage
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.graph.recipe import render

GRAPH = stages.graph()
REAL = pins.load(PINS)
BOTH = ("gfx942", "gfx950")


def test_a_recipe_cannot_read_a_pin_its_stage_does_not_declare() -> None:
    sneaky = Stage(name="sneaky", doc="", parents=("slim",), recipe="verl.Dockerfile.j2")
    with pytest.raises(RenderError) as caught:
        render(sneaky, REAL, BOTH)
    assert str(caught.value) == (
        "docker/verl.Dockerfile.j2: 'python' is undefined; stage 'sneaky' must declare "
        "what its recipe reads in stages/sneaky.py"
    )


def test_a_declared_pin_that_the_file_lacks_names_the_table(pins_text: str) -> None:
    without = pins.loads(pins_text.replace("[sources.mbridge]", "[sources.mbridge_old]"))
    with pytest.raises(PinsError) as caught:
        render(GRAPH["verl"], without, BOTH)
    assert str(caught.value) == (
        "pins.toml: [sources.mbridge]: is read by a stage but missing from the pins; "
        "add [sources.mbridge] (stages/ declares which pins each stage reads)"
    )


@pytest.mark.parametrize("name", GRAPH.order)
def test_no_recipe_clones_or_downloads_its_inputs(name: str) -> None:
    text = render(GRAPH[name], REAL, BOTH)
    for forbidden in ("git clone", "git checkout", "wget -", "curl -", "pip download", "https://"):
        if name == "manifest" and forbidden == "https://":
            continue  # the OCI source label names the upstream repository
        assert forbidden not in text, f"{name}: {forbidden}"


@pytest.mark.parametrize("name", [s.name for s in GRAPH if s.parents])
def test_parents_come_in_as_build_args(name: str) -> None:
    text = render(GRAPH[name], REAL, BOTH)
    for parent in GRAPH[name].parents:
        assert f"ARG {parent.upper()}_IMAGE\n" in text
    assert re.search(r"^FROM \$\{[A-Z_]+_IMAGE\}( AS \w+)?$", text, re.MULTILINE)


def test_squashed_stages_end_from_scratch_and_plain_files_remove_in_place() -> None:
    """slim squashes with BuildKit (FROM scratch, one COPY): its configuration comes from the
    engine. One plain Dockerfile has no engine to give it back, so there it removes in place
    (what it removes still ships below). prune gathers the kept kernels either way."""
    slim = render(GRAPH["slim"], REAL, BOTH)
    assert slim.startswith(
        "# slim: the torch stack less the ROCm trees (every arch's kernels) and the pinned "
        "leftovers.\nARG WHEELS_IMAGE\nFROM ${WHEELS_IMAGE} AS slim_trimmed\n"
    )
    assert slim.rstrip().endswith("FROM scratch\nCOPY --from=slim_trimmed / /")
    assert GRAPH["slim"].squash
    assert not GRAPH["slim"].arch_dependent
    plain = render(GRAPH["slim"], REAL, BOTH, squash=False)
    assert "FROM scratch" not in plain
    assert "FROM ${WHEELS_IMAGE}\n" in plain
    assert (
        "RUN rm -rf /opt/rocm/lib /opt/rocm/share/miopen "
        "/opt/venv/lib/python3.12/site-packages/_rocm_sdk_* " in plain
    )
    # prune's image, and a source stage's, is what assemble takes alone; in one Dockerfile
    # assemble takes it from the stage itself.
    prune = render(GRAPH["prune"], REAL, BOTH)
    assert "FROM ${WHEELS_IMAGE} AS pruning\n" in prune
    assert prune.rstrip().endswith("FROM scratch\nCOPY --from=pruning /kept /kept")
    assert "--report /kept/workspace/.manifest/prune.json" in prune
    assert not GRAPH["prune"].squash  # nothing runs it: no configuration to keep
    plain_prune = render(GRAPH["prune"], REAL, BOTH, squash=False)
    assert "FROM scratch" not in plain_prune
    assert "FROM ${WHEELS_IMAGE}\n" in plain_prune
    vllm = render(GRAPH["vllm"], REAL, BOTH)
    assert vllm.rstrip().endswith(
        "FROM scratch\nCOPY --from=vllm_build /dist /dist\n"
        "COPY --from=vllm_build /src/vllm /src/vllm"
    )
    assemble = render(GRAPH["assemble"], REAL, BOTH)
    assert "FROM ${PRUNE_IMAGE} AS prune\n" in assemble
    assert "FROM ${VERL_IMAGE}\n" in assemble
    assert "COPY --from=prune /kept/ /\n" in assemble


def test_source_stages_build_for_the_arch_set(pins_text: str) -> None:
    text = render(GRAPH["vllm"], REAL, BOTH)
    assert 'ENV PYTORCH_ROCM_ARCH="gfx942;gfx950"\n' in text
    assert "ENV MAX_JOBS=64\n" in text
    assert "pip install -r requirements/rocm.txt\n" in text
    assert "COPY src/vllm /src/vllm\n" in text
    assert "--mount=type=cache,target=/root/.cache/ccache" in text
    built = pins.loads(edit_toml(pins_text, ["base", "provides"], ["rocm", "wheels"]))
    # For [build].source_archs whenever they hold the image's archs, else for its own.
    flash = render(GRAPH["flash_attention"], built, ("gfx942",))
    assert 'GPU_ARCHS="gfx942;gfx950" BUILD_TARGET=rocm pip wheel' in flash
    flash = render(GRAPH["flash_attention"], built, ("gfx90a", "gfx942"))
    assert 'GPU_ARCHS="gfx90a;gfx942" BUILD_TARGET=rocm pip wheel' in flash
    own = pins.loads(delete_toml(edit_toml(pins_text, ["base", "provides"], ["rocm"]), SOURCE))
    flash = render(GRAPH["flash_attention"], own, ("gfx942",))
    assert 'GPU_ARCHS="gfx942" BUILD_TARGET=rocm pip wheel' in flash


SOURCE = ["build", "source_archs"]


def test_each_source_gets_its_version_and_its_own_arch_separator() -> None:
    vllm = render(GRAPH["vllm"], REAL, BOTH)
    assert (
        "VLLM_VERSION_OVERRIDE=0.22.1rc1.dev384 "
        "TRITON_KERNELS_SRC_DIR=/src/triton_kernels/python/triton_kernels/triton_kernels "
        "pip wheel --no-build-isolation --no-deps --wheel-dir /dist ./. \\\n"
    ) in vllm
    sglang = render(GRAPH["sglang"], REAL, BOTH)
    assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SGLANG=0.5.15 pip wheel" in sglang
    conv = render(GRAPH["causal_conv1d"], REAL, BOTH)
    assert 'HIP_ARCHITECTURES="gfx942,gfx950" CAUSAL_CONV1D_FORCE_BUILD=TRUE' in conv


def test_a_source_stage_the_base_provides_only_verifies_it() -> None:
    aiter = render(GRAPH["aiter"], REAL, BOTH)
    assert "python /tmp/verify_dists.py amd-aiter \\\n    && mkdir -p /dist\n" in aiter
    flash = render(GRAPH["flash_attention"], REAL, BOTH)
    assert "python /tmp/verify_dists.py flash_attn==2.8.3" in flash
    assert "COPY src" not in flash + aiter


def test_sgl_kernel_builds_its_folder_with_its_rocm_files_and_sglang_its_python() -> None:
    text = render(GRAPH["sgl_kernel"], REAL, BOTH)
    # its tree id, not SGLang's commit: a commit that leaves the folder alone moves nothing
    assert (
        "# sgl_kernel, the folder sgl-kernel/ alone (tree not locked), its patches applied on "
        "the host.\n"
    ) in text
    assert "0801cc05" not in text
    assert "RUN cp sgl-kernel/pyproject_rocm.toml sgl-kernel/pyproject.toml\n" in text
    assert "RUN cp sgl-kernel/setup_rocm.py sgl-kernel/setup.py\n" in text
    assert "--wheel-dir /dist ./sgl-kernel \\\n" in text
    sglang = render(GRAPH["sglang"], REAL, BOTH)
    assert "sgl-kernel" not in sglang
    assert "--wheel-dir /dist ./python \\\n" in sglang
    assert "COPY src/torch_memory_saver /src/torch_memory_saver\n" in sglang


def test_assemble_mounts_the_built_wheels_and_manifest_sets_the_runtime_environment() -> None:
    text = render(GRAPH["assemble"], REAL, ("gfx950",))
    assert "--mount=type=bind,from=vllm,source=/dist,target=/dist/vllm" in text
    assert "from=aiter" not in text  # the base provides it: nothing to install
    # One pip step in verl's order (test_assemble_installs_in_verls_order)
    assert "    pip install /dist/causal_conv1d/*.whl /dist/vllm/*.whl \\\n" in text
    assert "COPY --from=vllm /src/vllm /workspace/vllm\n" in text
    # SGLang's tree, then its patched sgl-kernel/ over it: the workspace verl's recipe leaves
    assert (
        "COPY --from=sglang /src/sglang /workspace/sglang\n"
        "COPY --from=sgl_kernel /src/sgl_kernel /workspace/sglang\n"
    ) in text
    assert ('ln -sfn "$SP/_rocm_sdk_core/share/amd_smi/amdsmi" "$SP/amdsmi" \\\n') in text
    assert "ENV " not in text  # an ENV edit does not run the install above again
    manifest = render(GRAPH["manifest"], REAL, ("gfx950",))
    assert 'ENV PYTORCH_ROCM_ARCH="gfx950"\n' in manifest
    assert 'ENV HIP_ARCHITECTURES="gfx950"\nENV MAMBA_FORCE_BUILD=TRUE\n' in manifest
    assert "ENV PYTORCH_ALLOC_CONF=expandable_segments:True\n" in manifest
    assert manifest.index("ENV PYTORCH_ROCM_ARCH=") < manifest.index("/tmp/smoke.py")  # checked


def test_the_702_profile_keeps_transformer_engines_build_variables_in_the_manifest() -> None:
    """Its keep_env: verl's 7.0.2 recipe sets them with ENV, so they stay in the image; not
    GPU_ARCHS, which it gives TransformerEngine's build line alone (build_only_env)."""
    run = Run(Options(pins=str(PINS.parent / "pins-rocm702.toml"), arch="gfx942"), GRAPH)
    manifest = render(run.graph["manifest"], run.pins, ("gfx942",))
    assert "GPU_ARCHS" not in manifest
    assert 'ENV NVTE_ROCM_ARCH="gfx942"\n' in manifest
    assert "ENV " not in render(run.graph["assemble"], run.pins, ("gfx942",))


def test_the_final_recipes_clean_up_check_and_keep_verls_layout() -> None:
    slim = render(GRAPH["slim"], REAL, BOTH)
    assert (
        "    && rm -rf /*.whl /root/.cache /root/.triton /workspace/TransformerEngine "
        "/workspace/aiter/aiter/jit/build\n"
    ) in slim
    manifest = render(GRAPH["manifest"], REAL, BOTH)
    assert "--dist=vllm==0.22.1rc1.dev384 " in manifest
    assert "--dist=sglang==0.5.15 " in manifest
    assert "--import=amdsmi " in manifest
    assert "'--env=PYTORCH_ROCM_ARCH=gfx942;gfx950'" in manifest
    assert '--version "${GIT_COMMIT_TAG}"' in manifest
    assert manifest.endswith('WORKDIR /workspace\nCMD ["/usr/bin/bash"]\n')
    verl = render(GRAPH["verl"], REAL, BOTH)
    assert "COPY src/verl /workspace/verl\n" in verl
    assert verl.index("pip install --no-build-isolation /workspace/verl") < verl.index(
        "megatron-core==0.18.0"
    )  # verl's order: verl, then its stack


def test_a_base_that_provides_rocm_and_wheels_only_verifies_them() -> None:
    rocm = render(GRAPH["rocm"], REAL, BOTH)
    assert "python /tmp/verify_rocm.py 7.14\n" in rocm
    assert "apt-get install" not in rocm
    wheels = render(GRAPH["wheels"], REAL, BOTH)
    assert (
        "python /tmp/verify_dists.py apex torch==2.12.0 torchaudio torchvision triton==3.7.0\n"
        in wheels
    )


def test_a_plain_base_installs_rocm_from_apt_and_wheels_by_hash(pins_text: str) -> None:
    plain = pins.loads(edit_toml(pins_text, ["base", "provides"], []))
    rocm = render(GRAPH["rocm"], plain, BOTH)
    assert (
        'echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] '
        'https://repo.radeon.com/rocm/apt/7.14 jammy main" > /etc/apt/sources.list.d/rocm.list'
    ) in rocm
    assert "Pin: release o=repo.radeon.com\\nPin-Priority: 600" in rocm
    assert "apt-get install -y --no-install-recommends rocm \\\n" in rocm
    assert 'mv /tmp/docker-clean "$clean"; }' in rocm  # the base keeps Debian's docker-clean
    wheels = render(GRAPH["wheels"], plain, BOTH)
    assert (
        "pip install --no-index --no-deps --require-hashes -r /tmp/wheels/requirements.txt"
        in wheels
    )


def test_a_sealed_stage_takes_pip_and_apt_packages_from_its_closure_only(pins_text: str) -> None:
    plain = pins.loads(edit_toml(pins_text, ["base", "provides"], []))
    rocm = render(GRAPH["rocm"], plain, BOTH, sealed=True)
    assert rocm != render(GRAPH["rocm"], plain, BOTH)
    assert "--mount=type=bind,source=closure/rocm,target=/mnt,rw" in rocm
    assert "echo 'deb [trusted=yes] file:/mnt/apt ./' > /tmp/closure-apt.list" in rocm
    assert "target=/var/lib/apt/lists" not in rocm  # no list from a repository with a network
    assert "apt-get install -y --no-install-recommends rocm \\\n" in rocm  # as open: same resolve
    # apt checks each file against the lock's hash, which its Packages index takes
    assert '"$sha256"; \\\n    done < /mnt/apt/SHA256SUMS > Packages' in rocm
    wheels = render(GRAPH["wheels"], plain, BOTH, sealed=True)
    pip = "--mount=type=bind,source=closure/wheels,target=/mnt"
    assert f"    --mount=type=secret,id=pip.conf {pip} --mount=type=cache" in wheels
    links = "--find-links /mnt/python/index.html"  # pip checks each file against its link's hash
    assert f"pip install --find-links /tmp/wheels {links} apex " in wheels
    parse(rocm), parse(wheels)  # BuildKit's grammar takes them


def test_doit_dockerfile_prints_the_rendered_dockerfile() -> None:
    result = run_doit("dockerfile:vllm", "arch=gfx942")
    assert result.returncode == 0, result.stderr
    assert result.stdout == render(GRAPH["vllm"], REAL, ("gfx942",))


def test_assemble_installs_in_verls_order() -> None:
    """vLLM with its requirements, tilelang out, xgrammar without dependencies, then verl's
    requirements and its stack once more (theirs win where they disagree with vLLM's, as in
    verl's recipe), SGLang and its kernels last, without dependencies."""
    lines = render(GRAPH["assemble"], REAL, BOTH).splitlines()
    steps = [
        "    pip install /dist/causal_conv1d/*.whl /dist/vllm/*.whl \\",
        "    && pip uninstall -y tilelang \\",
        "    && pip install --no-deps xgrammar==0.1.32 \\",
        "    && python /tmp/requires.py verl > /tmp/verl-requires.txt \\",
        "    && pip install -r /tmp/verl-requires.txt TransferQueue==0.1.8 accelerate==1.14.0 "
        "cupy-rocm-7-0==14.1.1 datasets==5.0.0 flash-linear-attention==0.5.1 mathruler==0.1.0 "
        "mcore_bridge==1.5.2 megatron-core==0.18.0 qwen_vl_utils==0.0.14 \\",
        "    && rm /tmp/verl-requires.txt \\",
        "    && pip install --no-deps /dist/sglang/*.whl /dist/sgl_kernel/*.whl ipython "
        "soundfile==0.13.1",
    ]
    start = lines.index(steps[0])
    assert lines[start : start + len(steps)] == steps


def test_the_702_profile_installs_as_its_recipe_does() -> None:
    """Dockerfile.rocm702: mbridge with -U, megatron-bridge without its dependencies,
    xgrammar with them."""
    run = Run(Options(pins=str(ROOT / "pins-rocm702.toml")), stages.graph())
    verl = render(run.graph["verl"], run.pins, BOTH)
    assert "    pip install -U --no-build-isolation /src/mbridge\n" in verl
    assert "    && pip install --no-deps megatron-bridge==0.5.0\n" in verl
    assemble = render(run.graph["assemble"], run.pins, BOTH)
    assert "    && pip install xgrammar==0.1.32 \\\n" in assemble
