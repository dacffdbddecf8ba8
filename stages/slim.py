"""slim: verl's image without the ROCm trees and the leftovers, squashed into one layer.

The kernel files of every arch sit in the ROCm trees ([prune].dirs), and files
deleted in a later layer still ship in the layer that added them. So this
stage removes those trees whole, and the pinned cleanup (leftovers of the base
image), and squashes the rest into one layer with BuildKit (``FROM scratch``,
``COPY --from``), keeping the image's configuration but for the build-only
variables the base stage sets (for apt and ccache): they never reach the
runtime image. It depends on no arch: every arch set's image shares this
layer, and an arch switch never rebuilds it. The prune stage puts the trees
back, pruned.
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
    name="slim",
    doc="verl's image less the ROCm trees and leftovers, squashed: shared by every arch set",
    parents=("verl",),
    reads=(("prune", "dirs"), ("cleanup",)),
    recipe="slim.Dockerfile.j2",
    squash=True,
    drop_env=BUILD_ONLY_ENV,
)
