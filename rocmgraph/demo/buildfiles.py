"""The demo sources' build files: packaging in miniature, like each upstream's where builds break.

Trees enter builds without .git, and three upstreams behave differently then:
- vLLM's setup.py takes its version from setuptools_scm with no fallback: a tree
  without .git fails with setuptools_scm's LookupError unless VLLM_VERSION_OVERRIDE
  (vLLM's get_vllm_version) gives it one;
- SGLang's python/pyproject.toml takes a dynamic version from setuptools_scm with
  ``fallback_version = "0.0.0.dev0"``, so without .git it builds, as 0.0.0.dev0,
  and verl, which picks its SGLang code path by SGLang's version, takes the path
  for an SGLang older than 0.5.7, which imports what the pinned SGLang lacks;
- causal-conv1d's setup.py hands HIP_ARCHITECTURES to the compiler as one
  ``--offload-arch=`` flag, which takes one arch or several joined by commas.
The files here do exactly that much, in as few lines as it takes.
"""

from __future__ import annotations

from rocmgraph.archs import KNOWN_ARCHS

VLLM_PYPROJECT = """# vLLM (demo): its version comes from git, through setuptools_scm (setup.py).
[build-system]
requires = ["setuptools>=77", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[tool.setuptools_scm]
# The table's presence is the whole configuration: no fallback version.
"""

VLLM_SETUP = '''"""vLLM (demo): a C extension compiled through ccache, like vLLM's CMake build,
and a version from setuptools_scm, like vLLM's get_vllm_version."""

import os

import setuptools
from setuptools_scm import get_version


def get_vllm_version() -> str:
    # An override becomes setuptools_scm's pretend version; else git must say it.
    override = os.getenv("VLLM_VERSION_OVERRIDE")
    if override:
        os.environ["SETUPTOOLS_SCM_PRETEND_VERSION"] = override
    return get_version(write_to="vllm/_version.py")


# vLLM's CMake build has ccache as its compiler launcher; setuptools takes it from CC.
os.environ.setdefault("CC", "ccache gcc")
with open("requirements/rocm.txt") as listed:
    requires = [line.strip() for line in listed if line.strip() and not line.startswith("#")]
setuptools.setup(
    name="vllm",
    version=get_vllm_version(),
    packages=["vllm"],
    ext_modules=[setuptools.Extension("vllm._C", ["csrc/ops_a.c", "csrc/ops_b.c"])],
    install_requires=requires,
)
'''

VLLM_INIT = '''"""vLLM (demo)."""

from vllm._C import add
from vllm._version import __version__
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


# Frames around the hunk of SGLang's pyproject patch: the hunk starts in the
# [tool.setuptools_scm] table, at its fallback_version.
SGLANG_PYPROJECT = [
    """# SGLang (demo): a pyproject in miniature around the lines the real patch touches.
[build-system]
requires = ["setuptools>=61", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
dynamic = ["version"]

[tool.setuptools]
packages = ["sglang", "sglang.srt", "sglang.srt.entrypoints"]

[tool.setuptools_scm]
root = ".."
version_file = "sglang/_version.py"
""",
    "",
]


def sglang_init(variant: str) -> str:
    """SGLang's package: its version is the one setuptools_scm wrote at build time."""
    return (
        '"""SGLang (demo)."""\n\nfrom sglang._version import __version__\n\n'
        f'VARIANT = "{variant}"\n'
    )


SGLANG_ENGINE = '''"""SGLang's offline engine (demo)."""


class Engine:
    """What verl drives its rollouts with, since SGLang 0.5.7."""
'''

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
    packages=["verl", "verl.workers"],
    package_data={"verl": ["trainer/config/rollout/*.yaml"]},
    install_requires=["packaging"],
)
'''

VERL_INIT = '''"""verl (demo)."""

from verl.workers.sglang_engine import Engine
'''

VERL_SGLANG = '''"""verl's SGLang engine (demo): SGLang's version picks the path, as in verl."""

from importlib.util import find_spec

from packaging.version import Version

if find_spec("sglang") is None:  # an image without SGLang (verl's ROCm 7.0.2 recipe)
    Engine = None
else:
    import sglang

    if Version(sglang.__version__) >= Version("0.5.7"):
        from sglang.srt.entrypoints.engine import Engine
    else:  # before 0.5.7, verl drove SGLang through its own engine module
        from sglang.srt.entrypoints.verl_engine import VerlEngine as Engine
'''


def causal_conv1d_setup(version: str) -> str:
    """causal-conv1d's setup.py: HIP_ARCHITECTURES goes to the compiler as one flag. The
    demo's compiler is a check, as clang's is, that each arch of the flag is one it knows."""
    known = " ".join(KNOWN_ARCHS)
    return f'''"""causal-conv1d (demo): HIP_ARCHITECTURES reaches hipcc as one --offload-arch."""

import os
import sys

import setuptools

HIP_ARCHITECTURES = os.getenv("HIP_ARCHITECTURES", "native")
hipcc_flags = ["-O3", "-std=c++17", f"--offload-arch={{HIP_ARCHITECTURES}}"]


def hipcc(flags):
    """The demo's compiler: --offload-arch takes one arch, or several joined by commas."""
    known = "native {known}".split()
    for flag in flags:
        if flag.startswith("--offload-arch="):
            for arch in flag.split("=", 1)[1].split(","):
                if arch not in known:
                    sys.exit(f"hipcc (demo): error: invalid offload arch '{{arch}}' in {{flag}}")


hipcc(hipcc_flags)
os.makedirs("causal_conv1d", exist_ok=True)
with open("causal_conv1d/_build.py", "w") as out:
    out.write(f"ARCHS = {{HIP_ARCHITECTURES!r}}\\n")
setuptools.setup(name="causal_conv1d", version="{version}", packages=["causal_conv1d"])
'''


def recording_package(dist: str, package: str, version: str, arch_env: str) -> dict[str, str]:
    """A package whose wheel records the arch list its build was given in ``arch_env``."""
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
