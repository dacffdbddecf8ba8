"""The demo's upstream repositories: what each source holds, commit by commit.

Each is a small buildable package. Where a real patch applies, the files it
touches are made from the patch itself (its pre-image: its context and the
lines it removes, nothing else of upstream), so the real patches apply to the
demo exactly as they do to the pinned upstream commits. Two files get a frame
of demo lines between the hunks so they also build: SGLang's pyproject and
sgl-kernel's ROCm setup script.

Commits are made at a fixed time by a fixed author, so their ids are the same
on every machine and demo/pins.toml can pin them.
"""

from __future__ import annotations

from rocmgraph import patches

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
}
MEGATRON_PATCH = "docker/patches/megatron-core/0001-attention-backend-env-warns.patch"


def preimages(source: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for name in PATCHES.get(source, ()):
        files.update(patches.preimage(patches.read_patch(name)))
    return files


def framed(patch: str, file: str, frame: list[str]) -> str:
    """``frame[0]``, hunk 1, ``frame[1]``, hunk 2, ...: a file the patch applies to, that runs."""
    found = patches.hunks(patches.read_patch(patch))[file]
    assert len(frame) == len(found) + 1, f"{file}: {len(found)} hunks need {len(found) + 1} frames"
    return frame[0] + "".join(hunk.text + text for hunk, text in zip(found, frame[1:], strict=True))


# source -> (distribution, version, the variable its build takes the archs from)
RECORDING = {
    "mbridge": ("mbridge", "0.15.1", "PYTORCH_ROCM_ARCH"),
    "torch_memory_saver": ("torch_memory_saver", "0.0.9", "PYTORCH_ROCM_ARCH"),
    "causal_conv1d": ("causal_conv1d", "1.5.2", "HIP_ARCHITECTURES"),
    "flash_attention": ("flash_attn", "2.8.3", "GPU_ARCHS"),
    "transformer_engine": ("transformer_engine", "2.14.0", "NVTE_ROCM_ARCH"),
    "aiter": ("aiter", "0.1.5", "GPU_ARCHS"),
}


def recording_package(dist: str, version: str, arch_env: str) -> dict[str, str]:
    """A package whose wheel records the arch list its build was given in ``arch_env``."""
    package = dist
    return {
        "setup.py": (
            f'"""{dist} (demo): a wheel that records the archs it was built for."""\n\n'
            "import os\n\nimport setuptools\n\n"
            f'os.makedirs("{package}", exist_ok=True)\n'
            f'with open("{package}/_build.py", "w") as out:\n'
            f"    out.write(f\"ARCHS = {{os.environ.get('{arch_env}', '')!r}}\\n\")\n"
            f'setuptools.setup(name="{dist}", version="{version}", packages=["{package}"])\n'
        ),
        f"{package}/__init__.py": f'"""{dist} (demo)."""\n\nfrom {package}._build import ARCHS\n',
    }


VLLM_SETUP = '''"""vLLM (demo): a C extension compiled through ccache, like vLLM's CMake build."""

import os

import setuptools

# vLLM's CMake build has ccache as its compiler launcher; setuptools takes it from CC.
os.environ.setdefault("CC", "ccache gcc")
with open("requirements/rocm.txt") as listed:
    requires = [line.strip() for line in listed if line.strip() and not line.startswith("#")]
setuptools.setup(
    name="vllm",
    version="0.22.1rc1",
    packages=["vllm"],
    ext_modules=[setuptools.Extension("vllm._C", ["csrc/ops_a.c", "csrc/ops_b.c"])],
    install_requires=requires,
)
'''

OPS_A = """#define PY_SSIZE_T_CLEAN
#include <Python.h>

long demo_scale(long value);

static PyObject *add(PyObject *self, PyObject *args) {
  long a, b;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) {
    return NULL;
  }
  return PyLong_FromLong(demo_scale(a + b));
}

static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""


def ops_b(body: str) -> str:
    return f"long demo_scale(long value) {{ {body} }}\n"


SGLANG_PYPROJECT = [
    """# SGLang (demo): a pyproject in miniature around the lines the real patch touches.
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "0.5.15"

[tool.setuptools]
packages = ["sglang"]

[tool.demo-versioning]
""",
    "",
]

SETUP_ROCM = [
    '''"""sgl-kernel (demo): the ROCm setup script in miniature, around the lines the
real patch touches. It records the hipcc flags a real build would pass."""

import os

import setuptools

arch = "x86_64"
cxx_flags = ["-O3"]
''',
    """)
hipcc_flags = [
    "-DNDEBUG",
    "-O3",
""",
    """]

with open("sgl_kernel/_build.py", "w") as out:
    out.write(f"HIPCC_FLAGS = {hipcc_flags!r}\\n")
setuptools.setup(name="sgl-kernel", version="0.3.0", packages=["sgl_kernel"])
""",
]

SGL_KERNEL_INIT = '''"""sgl-kernel (demo)."""

from sgl_kernel._build import HIPCC_FLAGS

ARCHS = [flag.split("=", 1)[1] for flag in HIPCC_FLAGS if flag.startswith("--offload-arch=")]
'''

VERL_SETUP = '''"""verl (demo)."""

import setuptools

setuptools.setup(
    name="verl",
    version="0.7.0",
    packages=["verl"],
    package_data={"verl": ["trainer/config/rollout/*.yaml"]},
)
'''


def histories() -> dict[str, History]:
    """Every demo source, oldest commit first (the first is the one the demo pins)."""
    vllm_pre = preimages("vllm")
    sglang_pre = preimages("sglang")
    setup_rocm = framed(PATCHES["sglang"][2], "sgl-kernel/setup_rocm.py", SETUP_ROCM)
    pyproject = framed(PATCHES["sglang"][1], "python/pyproject.toml", SGLANG_PYPROJECT)
    merged = patches.postimage(patches.read_patch(PATCHES["vllm"][0]))
    return {
        "vllm": [
            (
                "vLLM 0.22.1rc1 (demo)",
                {
                    **vllm_pre,
                    "setup.py": VLLM_SETUP,
                    "requirements/rocm.txt": "demo-tilelang==0.1.0\n",
                    "vllm/__init__.py": '"""vLLM (demo)."""\n\nfrom vllm._C import add\n',
                    "csrc/ops_a.c": OPS_A,
                    "csrc/ops_b.c": ops_b("return value;"),
                },
            ),
            (
                "[Perf] Scale without a branch (#44980)",
                {"csrc/ops_b.c": ops_b("return value * 1;")},
            ),
            ("[ROCm] Zero freshly mapped VRAM in create_and_map (#44972)", merged),
        ],
        "sglang": [
            (
                "SGLang 0.5.15 (demo)",
                {
                    **sglang_pre,
                    "python/pyproject.toml": pyproject,
                    "python/sglang/__init__.py": '"""SGLang (demo)."""\n\nVARIANT = "first"\n',
                    "sgl-kernel/setup_rocm.py": setup_rocm,
                    "sgl-kernel/pyproject_rocm.toml": (
                        '[build-system]\nrequires = ["setuptools"]\n'
                        'build-backend = "setuptools.build_meta"\n'
                    ),
                    "sgl-kernel/setup.py": 'raise SystemExit("CUDA build: use setup_rocm.py")\n',
                    "sgl-kernel/sgl_kernel/__init__.py": SGL_KERNEL_INIT,
                },
            ),
            (
                "[Router] Prefer the least loaded worker (#33001)",
                {"python/sglang/__init__.py": '"""SGLang (demo)."""\n\nVARIANT = "second"\n'},
            ),
        ],
        "verl": [
            (
                "verl 0.7.0 (demo)",
                {
                    **preimages("verl"),
                    "setup.py": VERL_SETUP,
                    "verl/__init__.py": '"""verl (demo)."""\n',
                },
            )
        ],
        **{
            source: [(f"{dist} {version} (demo)", recording_package(dist, version, arch_env))]
            for source, (dist, version, arch_env) in RECORDING.items()
        },
    }


def megatron_files() -> dict[str, str]:
    """megatron-core's wheel (demo): the file its patch touches, and a package to import."""
    return {
        "megatron/__init__.py": '"""megatron-core (demo)."""\n',
        **patches.preimage(patches.read_patch(MEGATRON_PATCH)),
    }
