"""The demo's rocm/primus: a base image that already carries what verl's 7.14 recipe builds on.

rocm/primus v26.4 keeps ROCm as TheRock's rocm-sdk packages in the venv's
site-packages (no /opt/rocm): ``_rocm_sdk_core`` (the runtime, with amd_smi,
which verl's recipe links into site-packages), ``_rocm_sdk_libraries`` (kernels
per arch) and ``_rocm_sdk_devel``, whose files are hard links to the libraries'
(pruning must remove both names, and their bytes count once). It carries the
ROCm torch stack, Flash Attention, TransformerEngine, and aiter installed
editable from /workspace/aiter; and what its own builds left behind, which
verl's recipe cleans: a wheel at /, /root/.cache, /root/.triton, aiter's JIT
build folder, /workspace/TransformerEngine.

It is built from the demo's root filesystem, offline (every wheel comes in the
build context), and rebuilt only when its own inputs change: the hash of its
Dockerfile and build context names the local image. It is pushed to the demo
registry and pinned by digest, as the real profile pins rocm/primus.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from rocmgraph.common.engine import BuildJob
from rocmgraph.demo import buildfiles, rocmfiles, upstreams
from rocmgraph.demo.published import published
from rocmgraph.demo.wheelfile import make_wheel
from rocmgraph.outside.docker import DockerEngine

SDK_VERSION = "7.14.0"  # TheRock's rocm-sdk packages, as rocm/primus v26.4 has them
BUILT_FOR = "gfx942;gfx950"  # the archs primus built its Flash Attention, TE and aiter for
LOCAL = "verl-demo/primus"
PREBUILT = ("flash_attention", "transformer_engine")  # installed from wheelfiles it built itself
KIB = 1024
# What rocm/primus's own builds leave behind (path -> size); the source trees come besides.
LEFTOVERS = {
    "root/.cache/pip/http-v2/leftover.body": 256 * KIB,
    "root/.triton/cache/leftover/kernel.hsaco": 256 * KIB,
    "workspace/aiter/aiter/jit/build/module_aiter_demo.so": 512 * KIB,
    "workspace/TransformerEngine/build/libtransformer_engine.so": 256 * KIB,
}


def write_context(dest: Path, wheels: list[Path]) -> None:
    """The build context: ``wheels`` (the torch stack, setuptools, wheel), the wheels of
    TheRock's packages and of what primus built itself, and the leftovers; nothing the
    build would download."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "wheels").mkdir(parents=True)
    for wheel in wheels:
        shutil.copy2(wheel, dest / "wheels" / wheel.name)
    for name, data in _own_wheels():
        (dest / "wheels" / name).write_bytes(data)
    _leftovers(dest / "leftovers", dest / "wheels")


def _own_wheels() -> list[tuple[str, bytes]]:
    """TheRock's rocm-sdk packages, and the Flash Attention and TE primus built."""
    found = [
        make_wheel(dist, SDK_VERSION, files, tag="py3-none-linux_x86_64")
        for dist, files in rocmfiles.sdk_files(SDK_VERSION).items()
    ]
    for source in PREBUILT:
        package, version, _ = upstreams.RECORDING[source]
        init = f"{package}/__init__.py"
        files = {
            init: buildfiles.recording_package(package, package, version, "")[init],
            f"{package}/_build.py": f"ARCHS = {BUILT_FOR!r}\n",
        }
        found.append(make_wheel(package, version, files))
    return found


def _leftovers(left: Path, wheels: Path) -> None:
    """Files at their paths below /: the source trees primus built from, and its leftovers."""
    trees = {"workspace/aiter": "aiter", "workspace/TransformerEngine": "transformer_engine"}
    for where, source in trees.items():
        for path, text in upstreams.recorded(source)[1].items():
            (left / where / path).parent.mkdir(parents=True, exist_ok=True)
            (left / where / path).write_text(text)
    for path, size in LEFTOVERS.items():
        (left / path).parent.mkdir(parents=True, exist_ok=True)
        (left / path).write_bytes(rocmfiles.blob("primus", path, size))
    te_wheel = next(wheels.glob("transformer_engine-*.whl"))
    shutil.copy2(te_wheel, left / te_wheel.name)  # the wheel rocm/primus left at /


def dockerfile(rootfs: str) -> str:
    aiter_env = f'{upstreams.RECORDING["aiter"][2]}="{BUILT_FOR}"'
    return f"""# The demo's rocm/primus v26.4 (rocmgraph/demo/primus.py).
FROM {rootfs}
ENV DEBIAN_FRONTEND=noninteractive \\
    VIRTUAL_ENV=/opt/venv \\
    PATH=/opt/venv/bin:$PATH
WORKDIR /workspace
# One RUN, so that the devel tree's hard links and the files they share sit in one layer.
# aiter's setup.py uninstalls triton in any build but `setup.py develop` (it runs in pip's
# metadata step too): the torch stack's triton goes back in after, as rocm/primus has it.
RUN --mount=type=bind,target=/tmp/primus \\
    python3 -m venv /opt/venv \\
    && pip install --no-index --no-cache-dir --disable-pip-version-check /tmp/primus/wheels/*.whl \\
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \\
    && mkdir -p "$site/_rocm_sdk_devel/lib" \\
    && cp -al "$site/_rocm_sdk_libraries/lib/rocblas" "$site/_rocm_sdk_devel/lib/rocblas" \\
    && cd /tmp/primus/leftovers && find . -type f -exec install -D -m 644 {{}} /{{}} ';' \\
    && cd /workspace && {aiter_env} pip install --no-index --no-cache-dir \\
        --disable-pip-version-check --no-build-isolation --use-pep517 --no-deps \\
        --editable /workspace/aiter \\
    && pip install --no-index --no-cache-dir --disable-pip-version-check --no-deps \\
        --force-reinstall /tmp/primus/wheels/triton-*.whl
CMD ["/bin/bash"]
"""


def inputs_key(context: Path, text: str) -> str:
    """The hash of the Dockerfile and every file of the context, by path and content (the
    Dockerfile written into the context is ``text`` itself)."""
    digest = hashlib.sha256(text.encode())
    written = context / "Dockerfile"
    for path in sorted(p for p in context.rglob("*") if p.is_file() and p != written):
        digest.update(f"\0{path.relative_to(context)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def ensure(
    engine: DockerEngine, ref: str, context: Path, rootfs: str, make_rootfs: Callable[[], str]
) -> str:
    """``ref`` (registry/name:tag) holds the demo's primus, built on ``rootfs`` (made by
    ``make_rootfs`` when needed) from ``context``, unless published already; its digest."""
    text = dockerfile(rootfs)
    key = inputs_key(context, text)
    local = f"{LOCAL}:{key}"

    def make() -> str:
        if not engine.image_exists(local):
            make_rootfs()
            (context / "Dockerfile").write_text(text)
            engine.build(BuildJob(stage="demo-primus", ref=local, context=context))
        return local

    return published(engine, ref, key, make)
