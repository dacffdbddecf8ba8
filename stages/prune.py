"""prune: removes GPU kernel files of archs outside the target set, so the image shrinks.

Files deleted in a later layer still ship in the layer that added them, so the
pruned image is flattened into one layer, keeping its configuration; the
build-only variables the base stage sets (for apt and ccache) are left out
there, so they never reach the runtime image. The pinned cleanup (leftovers of
the base image) happens here too, for the same reason. The classifier
(rocmgraph/inimage/prune.py) runs inside the image and reports the files and bytes
removed, in /workspace/.manifest/prune.json.
"""

from rocmgraph.graph import Stage

# Set by docker/base.Dockerfile.j2 for the builds; not the image's business at run time.
BUILD_ONLY_ENV = (
    "DEBIAN_FRONTEND",
    "CCACHE_DIR",
    "CCACHE_MAXSIZE",
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
    "CMAKE_HIP_COMPILER_LAUNCHER",
)

STAGE = Stage(
    name="prune",
    doc="removes kernel files of non-target archs, flattened so the image really shrinks",
    parents=("assemble",),
    reads=(("prune",), ("cleanup",), ("base", "workdir")),
    recipe="prune.Dockerfile.j2",
    files=("rocmgraph/inimage/prune.py",),
    arch_dependent=True,
    flatten=True,
    drop_env=BUILD_ONLY_ENV,
)
