"""slim: the torch stack's image without the ROCm trees and the leftovers, in one layer.

The kernel files of every arch sit in the ROCm trees ([prune].dirs) that the
base image and the wheels bring, and files deleted in a later layer still ship
in the layer that added them. So this stage removes those trees whole, and the
pinned cleanup (leftovers of the base image), and squashes the rest into one
layer with BuildKit (``FROM scratch``, ``COPY --from``), keeping the image's
configuration but for the build-only variables the base stage sets (for apt and
ccache): they never reach the runtime image.

It sits below verl, not above it: the squash copies the whole image (the cost of
a rewrite grows with what it rewrites), so it runs when the base, ROCm or the
torch stack change, never for a verl bump. It depends on no arch: the images of
every arch set share this layer and verl's above it. The prune stage brings the
trees back, pruned, in assemble.
"""

from rocmgraph.graph.dag import Stage

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
    doc="the torch stack less the ROCm trees and leftovers, squashed: shared by every arch set",
    parents=("wheels",),
    reads=(("prune", "dirs"), ("cleanup",), ("base", "keeps_env")),
    recipe="slim.Dockerfile.j2",
    squash=True,
    drop_env=BUILD_ONLY_ENV,
)
