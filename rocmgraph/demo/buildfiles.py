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
- sgl-kernel's distribution is sglang-kernel (its setup_rocm.py and pyproject_rocm.toml),
  not sgl_kernel as its folder and module are named, and its version is read from the
  pyproject.toml beside setup_rocm.py.
- aiter's setup.py looks for an installed triton only in develop mode; any other build
  runs .github/scripts/install_triton.sh, which uninstalls triton and pip-installs
  amd-triton from AMD's index.
The files here do exactly that much, in as few lines as it takes.
"""

from __future__ import annotations

import posixpath

from rocmgraph.config.archs import KNOWN_ARCHS
from rocmgraph.demo import kernels

VLLM_PYPROJECT = """# vLLM (demo): its version comes from git, through setuptools_scm (setup.py).
[build-system]
requires = ["setuptools>=77", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[tool.setuptools_scm]
# The table's presence is the whole configuration: no fallback version.
"""

VLLM_SETUP = (
    '''"""vLLM (demo): a C extension and its C++ kernels compiled through ccache, MAX_JOBS
at a time, like vLLM's CMake build, a version from setuptools_scm, like vLLM's
get_vllm_version, and triton_kernels cloned at configure time unless TRITON_KERNELS_SRC_DIR
gives the folder, like vLLM's CMake does: this script runs the FetchContent of the CMake
files beside it in miniature."""

import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import tempfile

import setuptools
from setuptools.command.build_ext import build_ext
from setuptools_scm import get_version


def triton_kernels():
    """The triton_kernels folder: given, or cloned at the tag CMakeLists.txt's include names."""
    given = os.getenv("TRITON_KERNELS_SRC_DIR")
    if given:
        return given
    with open("CMakeLists.txt") as cmake:
        included = re.search(r"include\\((\\S+triton_kernels\\.cmake)\\)", cmake.read()).group(1)
    with open(included) as declared:
        text = declared.read()
    repo = re.search(r"GIT_REPOSITORY (\\S+)", text).group(1)
    tag = re.search(r'DEFAULT_TRITON_KERNELS_TAG "(\\S+)"', text).group(1)
    subprocess.run(["git", "clone", "--depth=1", "--branch", tag, repo, ".deps/triton"], check=True)
    return ".deps/triton/python/triton_kernels/triton_kernels"


def install_triton_kernels():
    """Its Python files into vllm/third_party/triton_kernels, as vLLM's CMake installs them."""
    target = "vllm/third_party/triton_kernels"
    os.makedirs(target, exist_ok=True)
    open("vllm/third_party/__init__.py", "a").close()
    for path in glob.glob(os.path.join(triton_kernels(), "*.py")):
        shutil.copy(path, target)


def get_vllm_version() -> str:
    # An override becomes setuptools_scm's pretend version; else git must say it.
    override = os.getenv("VLLM_VERSION_OVERRIDE")
    if override:
        os.environ["SETUPTOOLS_SCM_PRETEND_VERSION"] = override
    return get_version(write_to="vllm/_version.py")
'''
    + kernels.BUILD
    + '''

class BuildKernels(build_ext):
    """The kernels first, linked into vllm._C: only when the wheel builds, not each time
    pip runs this script."""

    def run(self):
        compile_kernels("csrc/kernels", self.extensions[0])
        super().run()


# vLLM's CMake build has ccache as its compiler launcher; setuptools takes it from CC.
os.environ.setdefault("CC", "ccache gcc")
with open("requirements/rocm.txt") as listed:
    requires = [line.strip() for line in listed if line.strip() and not line.startswith("#")]
install_triton_kernels()
setuptools.setup(
    name="vllm",
    version=get_vllm_version(),
    packages=["vllm", "vllm.third_party", "vllm.third_party.triton_kernels"],
    ext_modules=[setuptools.Extension("vllm._C", ["csrc/ops_a.c", "csrc/ops_b.c"])],
    cmdclass={"build_ext": BuildKernels},
    install_requires=requires,
)
'''
)

# vLLM's CMake files in miniature: the lines that fetch triton_kernels, as upstream's read.
VLLM_CMAKELISTS = """# vLLM (demo): the lines of vLLM's CMakeLists.txt that fetch at configure time.
cmake_minimum_required(VERSION 3.26)
project(vllm_extensions LANGUAGES CXX)
include(FetchContent)
set(VLLM_GPU_LANG "HIP")

# For CUDA and HIP builds also build the triton_kernels external package.
if(VLLM_GPU_LANG STREQUAL "CUDA" OR VLLM_GPU_LANG STREQUAL "HIP")
    include(cmake/external_projects/triton_kernels.cmake)
endif()
"""


def triton_kernels_cmake(repo: str, tag: str) -> str:
    """vLLM's cmake/external_projects/triton_kernels.cmake, its fetch pointed at ``repo``."""
    return f"""# Install OpenAI triton_kernels (demo: from the demo's triton)

set(DEFAULT_TRITON_KERNELS_TAG "{tag}")

if (DEFINED ENV{{TRITON_KERNELS_SRC_DIR}})
  FetchContent_Declare(
          triton_kernels
          SOURCE_DIR $ENV{{TRITON_KERNELS_SRC_DIR}}
  )
else()
  FetchContent_Declare(
          triton_kernels
          GIT_REPOSITORY {repo}
          GIT_TAG ${{DEFAULT_TRITON_KERNELS_TAG}}
          GIT_PROGRESS TRUE
          SOURCE_SUBDIR python/triton_kernels/triton_kernels
  )
endif()

FetchContent_MakeAvailable(triton_kernels)
"""


TRITON_KERNELS = {  # the folder of triton's tree vLLM takes, and a file beside it
    "README.md": "triton (demo): only python/triton_kernels/triton_kernels/ is vLLM's.\n",
    "python/triton_kernels/triton_kernels/__init__.py": '"""triton_kernels (demo)."""\n',
    "python/triton_kernels/triton_kernels/matmul_ogs.py": (
        '"""triton_kernels\' matmul (demo)."""\n\nBLOCK = 128\n'
    ),
}

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
real patch touches. It records the hipcc flags a real build would pass. As upstream's, it
names the distribution sglang-kernel and reads its version from the pyproject.toml beside
it: the ROCm one only once pyproject_rocm.toml is copied over it. Its C++ kernels compile
through ccache, MAX_JOBS at a time."""

import concurrent.futures
import glob
import os
import subprocess
import tempfile
from pathlib import Path

import setuptools
from setuptools.command.build_py import build_py

root = Path(__file__).parent.resolve()
arch = "x86_64"


def _get_version():
    with open(root / "pyproject.toml") as f:
        for line in f:
            if line.startswith("version"):
                return line.split("=")[1].strip().strip('"')

'''
    + kernels.BUILD
    + """

cxx_flags = ["-O3"]
""",
    """)
hipcc_flags = [
    "-DNDEBUG",
    "-O3",
""",
    """]


class BuildKernels(build_py):
    # The kernels, into the package: only when the wheel builds.
    def run(self):
        super().run()
        compile_kernels("csrc/kernels", os.path.join(self.build_lib, "sgl_kernel", "_kernels.so"))


with open("sgl_kernel/_build.py", "w") as out:
    out.write(f"HIPCC_FLAGS = {hipcc_flags!r}\\n")
setuptools.setup(
    name="sglang-kernel",
    version=_get_version(),
    packages=["sgl_kernel"],
    cmdclass={"build_py": BuildKernels},
)
""",
]


# sgl-kernel's two pyprojects, as upstream's name and version them: the distribution is
# sglang-kernel, not the folder's or the module's name.
def sgl_kernel_pyproject(requires: str, backend: str) -> str:
    return f"""[build-system]
requires = ["{requires}"]
build-backend = "{backend}"

[project]
name = "sglang-kernel"
version = "0.4.2.post2"
"""


SGL_KERNEL_PYPROJECT_ROCM = sgl_kernel_pyproject("setuptools", "setuptools.build_meta")
SGL_KERNEL_PYPROJECT_CUDA = sgl_kernel_pyproject(
    "scikit-build-core>=0.10", "scikit_build_core.build"
)

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
    return f'''"""causal-conv1d (demo): HIP_ARCHITECTURES reaches hipcc as one --offload-arch; its
C++ kernels compile through ccache, MAX_JOBS at a time."""

import concurrent.futures
import glob
import os
import subprocess
import sys
import tempfile

import setuptools
from setuptools.command.build_py import build_py
{kernels.BUILD}

class BuildKernels(build_py):
    """The kernels, into the package: only when the wheel builds."""

    def run(self):
        super().run()
        library = os.path.join(self.build_lib, "causal_conv1d", "_kernels.so")
        compile_kernels("csrc/kernels", library)


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
setuptools.setup(
    name="causal_conv1d",
    version="{version}",
    packages=["causal_conv1d"],
    cmdclass={{"build_py": BuildKernels}},
)
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


def package_inits(files: dict[str, str]) -> dict[str, str]:
    """An ``__init__.py`` for each folder of Python files in ``files`` that has none."""
    folders = {posixpath.dirname(path) for path in files if path.endswith(".py")}
    parents = {"/".join(f.split("/")[:n]) for f in folders for n in range(1, f.count("/") + 2)}
    return {f"{folder}/__init__.py": "" for folder in sorted(parents - {""})
            if f"{folder}/__init__.py" not in files}  # fmt: skip


def aiter_setup(recording: str) -> list[str]:
    """aiter's setup.py around the lines docker/patches/aiter/0001 changes (the frames of
    its one hunk), then ``recording``, the demo wheel's own build."""
    head = '''"""amd-aiter (demo): a wheel that records its archs, and aiter's triton install."""

import os
import subprocess
import sys

import setuptools

this_dir = os.path.dirname(os.path.abspath(__file__))


def is_develop_mode():
    for arg in sys.argv:
        if arg == "develop":
            return True
        # pip install -e
        elif "editable" in arg:
            return True
    return False


def _is_triton_installed():
    from importlib.metadata import version as pkg_version

    for pkg in [
        "triton",
        "pytorch-triton",
        "pytorch-triton-rocm",
        "triton-rocm",
    ]:
        try:
            return pkg, pkg_version(pkg)
        except Exception:
            pass
    return None


def _run_install_triton():
    print("[aiter] Installing amd-triton via .github/scripts/install_triton.sh")
    install_triton = os.path.join(this_dir, ".github", "scripts", "install_triton.sh")
'''
    tail = """        " recommend using .github/scripts/install_triton.sh to install triton"
    )
else:
    try:
        _run_install_triton()
    except Exception:
        print("[aiter] Skipping triton install via .github/scripts/install_triton.sh")

"""
    body = recording.split("import setuptools\n\n", 1)[1]  # after the recording's imports
    # The demo's wheel also records the triton its build ran with: what install_triton.sh
    # left in the build's environment shows in a test, as the real build's would in its step.
    opened = "as out:\n"
    records = '    out.write(f"TRITON = {_is_triton_installed()!r}\\n")\n'
    body = body.replace(opened, opened + records, 1)
    return [head, tail + body]


def aiter_install_triton(index: str) -> str:
    """aiter's .github/scripts/install_triton.sh, its index the demo's."""
    return f"""#!/bin/bash
set -e

pip uninstall -y triton pytorch-triton pytorch-triton-rocm triton-rocm amd-triton || true

TRITON_INDEX_URL="{index}"
echo "Installing amd-triton from $TRITON_INDEX_URL"
pip install --extra-index-url "$TRITON_INDEX_URL" amd-triton
"""
