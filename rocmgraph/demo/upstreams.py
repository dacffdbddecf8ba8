"""The demo's upstream repositories: what each source holds, commit by commit.

Each is a small buildable package. Where a real patch applies, the files it
touches are made from the patch itself (its pre-image: its context and the
lines it removes, nothing else of upstream), so the real patches apply to the
demo exactly as they do to the pinned upstream commits. Two files get a frame
of demo lines between the hunks so they also build: SGLang's pyproject and
sgl-kernel's ROCm setup script. The build files (buildfiles.py) behave like
upstream's where a build without .git, or with the wrong arch list, breaks.

Commits are made at a fixed time by a fixed author, so their ids are the same
on every machine and demo/pins.toml can pin them.
"""

from __future__ import annotations

from rocmgraph.demo import buildfiles as b
from rocmgraph.demo import kernels, patchimages
from rocmgraph.demo.addresses import HTTP_PORT
from rocmgraph.trees import patches

History = list[tuple[str, dict[str, str]]]  # (message, files written by that commit)

PATCHES = {
    "vllm": (
        "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch",
        "docker/patches/vllm/0002-moe-pad-weight-in-place.patch",
        "docker/patches/vllm/0003-moe-oracle-keep-weight-storage.patch",
    ),
    "sglang": (
        "docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch",
        "docker/patches/sglang/0002-pyproject-no-rust-grpc-extension.patch",
        "docker/patches/sglang/0003-sgl-kernel-build-for-every-target-arch.patch",
        "docker/patches/sglang/0004-sgl-kernel-fp8-type-by-compiled-arch.patch",
    ),
    "verl": ("docker/patches/verl/0001-rollout-rocm-engine-defaults.patch",),
    "aiter": ("docker/patches/aiter/0001-wheel-build-keeps-installed-triton.patch",),
    "transformer_engine": ("docker/patches/transformer_engine/0001-accept-flash-attn-2.8.4.patch",),
}
MEGATRON_PATCH = "docker/patches/megatron-core/0001-attention-backend-env-warns.patch"


def preimages(source: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for name in PATCHES.get(source, ()):
        files.update(patchimages.preimage(patches.read_patch(name)))
    return files


def framed(patch: str, file: str, frame: list[str]) -> str:
    """``frame[0]``, hunk 1, ``frame[1]``, hunk 2, ...: a file the patch applies to, that runs."""
    found = patchimages.hunks(patches.read_patch(patch))[file]
    assert len(frame) == len(found) + 1, f"{file}: {len(found)} hunks need {len(found) + 1} frames"
    return frame[0] + "".join(hunk.text + text for hunk, text in zip(found, frame[1:], strict=True))


# The demo's triton, whose triton_kernels folder the demo vLLM's build fetches unless given.
TRITON_URL = f"http://127.0.0.1:{HTTP_PORT}/git/triton.git"
TRITON_TAG = "v3.5.1"
TAGS = {"flash_attention": "v2.8.3", "triton": TRITON_TAG}  # on each one's first commit
# Where the demo aiter's install_triton.sh looks for amd-triton (pypi.amd.com upstream).
AMD_TRITON_INDEX = f"http://127.0.0.1:{HTTP_PORT}/amd-triton/simple/"

# source -> (package, version, the variable its build takes the archs from)
RECORDING = {
    "mbridge": ("mbridge", "0.15.1", "PYTORCH_ROCM_ARCH"),
    "torch_memory_saver": ("torch_memory_saver", "0.0.9", "PYTORCH_ROCM_ARCH"),
    "flash_attention": ("flash_attn", "2.8.3", "GPU_ARCHS"),
    "transformer_engine": ("transformer_engine", "2.14.0", "NVTE_ROCM_ARCH"),
    "aiter": ("aiter", "0.1.5", "GPU_ARCHS"),
}
DISTS = {"aiter": "amd-aiter"}  # a distribution not named like its package
CAUSAL_CONV1D_VERSION = "1.5.2"


def histories() -> dict[str, History]:
    """Every demo source, oldest commit first (the first is the one the demo pins)."""
    vllm_pre = preimages("vllm")
    sglang_pre = preimages("sglang")
    setup_rocm = framed(PATCHES["sglang"][2], "sgl-kernel/setup_rocm.py", b.SETUP_ROCM)
    pyproject = framed(PATCHES["sglang"][1], "python/pyproject.toml", b.SGLANG_PYPROJECT)
    merged = patchimages.postimage(patches.read_patch(PATCHES["vllm"][0]))
    return {
        "vllm": [
            (
                "vLLM 0.22.1rc1 (demo)",
                {
                    **vllm_pre,
                    "pyproject.toml": b.VLLM_PYPROJECT,
                    "setup.py": b.VLLM_SETUP,
                    "requirements/rocm.txt": "demo-tilelang==0.1.0\n",
                    "vllm/__init__.py": b.VLLM_INIT,
                    "csrc/ops_a.c": b.OPS_A,
                    "csrc/ops_b.c": b.ops_b("return value;"),
                    **kernels.files("vllm", "vLLM"),
                    "CMakeLists.txt": b.VLLM_CMAKELISTS,
                    "cmake/external_projects/triton_kernels.cmake": b.triton_kernels_cmake(
                        TRITON_URL, TRITON_TAG
                    ),
                },
            ),
            (
                "[Perf] Scale without a branch (#44980)",
                {  # a small change: one C file and one kernel of the sixteen recompile
                    "csrc/ops_b.c": b.ops_b("return value * 1;"),
                    "csrc/kernels/k05.cpp": kernels.unit("vLLM", 5, variant=1),
                },
            ),
            ("[ROCm] Zero freshly mapped VRAM in create_and_map (#44972)", merged),
        ],
        "sglang": [
            (
                "SGLang 0.5.15 (demo)",
                {
                    **sglang_pre,
                    "python/pyproject.toml": pyproject,
                    "python/sglang/__init__.py": b.sglang_init("first"),
                    "python/sglang/srt/__init__.py": "",
                    "python/sglang/srt/entrypoints/__init__.py": "",
                    "python/sglang/srt/entrypoints/engine.py": b.SGLANG_ENGINE,
                    "sgl-kernel/setup_rocm.py": setup_rocm,
                    "sgl-kernel/pyproject_rocm.toml": b.SGL_KERNEL_PYPROJECT_ROCM,
                    "sgl-kernel/pyproject.toml": b.SGL_KERNEL_PYPROJECT_CUDA,
                    "sgl-kernel/setup.py": 'raise SystemExit("CUDA build: use setup_rocm.py")\n',
                    "sgl-kernel/sgl_kernel/__init__.py": b.SGL_KERNEL_INIT,
                    **kernels.files("sgl_kernel", "sgl-kernel"),
                },
            ),
            (
                "[Router] Prefer the least loaded worker (#33001)",
                {"python/sglang/__init__.py": b.sglang_init("second")},
            ),
        ],
        "triton": [("triton 3.5.1 (demo)", b.TRITON_KERNELS)],
        "verl": [
            (
                "verl 0.7.0 (demo)",
                {
                    **preimages("verl"),
                    "setup.py": b.VERL_SETUP,
                    "verl/__init__.py": b.VERL_INIT,
                    "verl/workers/__init__.py": "",
                    "verl/workers/sglang_engine.py": b.VERL_SGLANG,
                },
            ),
            (  # upstream moves on: what a verl bump (benchmarks/changelog.py) takes
                "[trainer] Name the engine the rollout picked (#4120)",
                {"verl/__init__.py": f'{b.VERL_INIT}\nENGINE = "sglang"\n'},
            ),
        ],
        "causal_conv1d": [
            (
                f"causal_conv1d {CAUSAL_CONV1D_VERSION} (demo)",
                {
                    "setup.py": b.causal_conv1d_setup(CAUSAL_CONV1D_VERSION),
                    "causal_conv1d/__init__.py": (
                        '"""causal_conv1d (demo)."""\n\nfrom causal_conv1d._build import ARCHS\n'
                    ),
                    **kernels.files("causal_conv1d", "causal-conv1d"),
                },
            )
        ],
        **{source: [recorded(source)] for source in RECORDING},
    }


def recorded(source: str) -> tuple[str, dict[str, str]]:
    """The one commit of a source whose wheel records the archs it was built for; aiter's
    also carries its setup.py's triton install, as the real one has it, and
    TransformerEngine the file its patch edits."""
    package, version, arch_env = RECORDING[source]
    dist = DISTS.get(source, package)
    files = b.recording_package(dist, package, version, arch_env)
    if source == "aiter":
        frames = b.aiter_setup(files["setup.py"])
        files["setup.py"] = framed(PATCHES["aiter"][0], "setup.py", frames)
        files[".github/scripts/install_triton.sh"] = b.aiter_install_triton(AMD_TRITON_INDEX)
    if source == "transformer_engine":  # the file its patch edits, in the wheel it builds
        files.update(preimages(source))
        files.update(b.package_inits(files))
        files["setup.py"] = files["setup.py"].replace(
            f'packages=["{package}"]', "packages=setuptools.find_packages()"
        )
    return f"{dist} {version} (demo)", files


def megatron_files() -> dict[str, str]:
    """megatron-core's wheel (demo): the file its patch touches, and a package to import."""
    return {
        "megatron/__init__.py": '"""megatron-core (demo)."""\n',
        **patchimages.preimage(patches.read_patch(MEGATRON_PATCH)),
    }
