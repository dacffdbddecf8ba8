"""rocm: ROCm from the repo.radeon.com apt repository, at the pinned release.

From a plain OS base it adds the signed apt sources, the origin pin and the
ROCm packages at their pinned versions. From a base that already carries ROCm
(rocm/primus) it only checks that the release is the pinned one.
"""

from rocmgraph.graph.dag import Fetch, Stage

STAGE = Stage(
    name="rocm",
    doc="ROCm apt repository (signed-by key), origin pin, rocm packages at the pinned version",
    parents=("base",),
    reads=(("rocm",), ("base", "provides"), ("base", "apt_recommends")),
    recipe="rocm.Dockerfile.j2",
    files=("docker/apt.j2", "rocmgraph/inimage/verify_rocm.py"),
    fetches=(Fetch.ROCM_KEY,),
)
