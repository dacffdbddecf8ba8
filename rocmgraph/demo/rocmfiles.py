"""ROCm's files in the demo, in the two layouts verl's images find them in.

- /opt/rocm, from apt (verl's ROCm 7.0.2 recipe): one package each for the
  libraries, with the same relative paths below /opt/rocm;
- TheRock's rocm-sdk Python packages in the venv's site-packages (rocm/primus
  v26.4, which has no /opt/rocm): ``_rocm_sdk_core`` (the runtime, amd_smi),
  ``_rocm_sdk_libraries`` (the math libraries and their kernels).

Kernel files are blobs per arch, named as rocBLAS, hipBLASLt, hipSPARSELt and
MIOpen name theirs, a few MB each so that pruning is measurable; their bytes
are random (incompressible) and the same on every machine.
"""

from __future__ import annotations

import random

ARCHS = ("gfx90a", "gfx942", "gfx950")  # the demo ROCm ships kernels for these
LIBRARIES = ("rocblas", "hipblaslt", "hipsparselt", "miopen-hip")  # packages with kernels

# amd_smi's Python package, as ROCm ships it under share/amd_smi: vLLM finds ROCm by
# `import amdsmi` (verl's 7.0.2 recipe pip-installs the folder, the 7.14 one links it).
AMD_SMI = {
    "share/amd_smi/pyproject.toml": (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "amdsmi"\nversion = "26.2.0"\n\n'
        '[tool.setuptools]\npackages = ["amdsmi"]\n'
    ),
    "share/amd_smi/amdsmi/__init__.py": (
        '"""amdsmi (demo): the AMD SMI library ROCm ships."""\n\n\n'
        "def amdsmi_init() -> None:\n"
        '    """There is no GPU to manage in the demo."""\n'
    ),
}


def kernel_files() -> dict[str, dict[str, int]]:
    """Package -> its files below the ROCm root and sizes: kernels per arch, archless files."""
    kib = 1024
    per_arch = {
        "rocblas": [
            ("lib/rocblas/library/TensileLibrary_lazy_{a}.dat", 256 * kib),
            ("lib/rocblas/library/Kernels.so-000-{a}.hsaco", 1024 * kib),
            ("lib/rocblas/library/TensileLibrary_Type_HH_Contraction_{a}.co", 768 * kib),
        ],
        "hipblaslt": [
            ("lib/hipblaslt/library/TensileLibrary_lazy_{a}.dat.zlib", 128 * kib),
            ("lib/hipblaslt/library/TensileLiteLibrary_lazy_{a}_Mapping.dat", 128 * kib),
            ("lib/hipblaslt/library/{a}/Kernels_{a}.co", 768 * kib),
        ],
        "hipsparselt": [("lib/hipsparselt/library/Kernels.so-000-{a}.hsaco", 512 * kib)],
        "miopen-hip": [
            ("share/miopen/db/{a}.kdb", 512 * kib),
            ("share/miopen/db/{a}{cu}.HIP.fdb.txt", 256 * kib),
            ("share/miopen/db/{a}_68.HIP.model", 64 * kib),
            ("lib/libMIOpenCKGroupedConv_{a}.so", 512 * kib),
        ],
    }
    compute_units = {"gfx90a": "6e", "gfx942": "130", "gfx950": "100"}
    files: dict[str, dict[str, int]] = {
        "rocm-core": {".info/version": 0, "lib/libamdhip64.so": 64 * kib},
        "rocblas": {
            "lib/librocblas.so.4": 256 * kib,
            "lib/rocblas/library/TensileManifest.txt": 4 * kib,
        },
        "hipblaslt": {"lib/libhipblaslt.so.0": 256 * kib},
        "hipsparselt": {"lib/libhipsparselt.so.0": 128 * kib},
        "miopen-hip": {"lib/libMIOpen.so.1": 256 * kib, "share/miopen/db/README": 1 * kib},
    }
    for package, patterns in per_arch.items():
        for pattern, size in patterns:
            for arch in ARCHS:
                files[package][pattern.format(a=arch, cu=compute_units[arch])] = size
    return files


def blob(package: str, path: str, size: int) -> bytes:
    """A file's bytes: incompressible, and the same on every machine."""
    return random.Random(f"{package}/{path}").randbytes(size)


def sdk_files(version: str) -> dict[str, dict[str, str | bytes]]:
    """TheRock's rocm-sdk distributions -> their files in site-packages: the libraries'
    kernels below ``_rocm_sdk_libraries``, the runtime and amd_smi below ``_rocm_sdk_core``."""
    kernels = kernel_files()
    libraries: dict[str, str | bytes] = {
        f"_rocm_sdk_libraries/{path}": blob(package, path, size)
        for package in LIBRARIES
        for path, size in kernels[package].items()
    }
    core: dict[str, str | bytes] = {
        "_rocm_sdk_core/lib/libamdhip64.so": blob("rocm-core", "lib/libamdhip64.so", 64 * 1024),
        "_rocm_sdk_core/share/rocm/version": f"{version}\n",
        **{f"_rocm_sdk_core/{path}": text for path, text in AMD_SMI.items()},
    }
    return {"rocm-sdk-core": core, "rocm-sdk-libraries": libraries}
