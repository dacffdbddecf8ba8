"""wheels: the prebuilt torch stack from repo.radeon.com, pinned by file name and sha256.

The wheel files come in through the build context and a bind mount, so a
multi-GB torch wheel never lands in a layer. From a base that already carries
the stack (rocm/primus) the stage only checks the pinned versions.
"""

from rocmgraph.graph.dag import Fetch, Stage

STAGE = Stage(
    name="wheels",
    doc="prebuilt torch, triton, torchvision, torchaudio, apex wheels, by sha256",
    parents=("rocm",),
    reads=(("wheels",), ("base", "provides")),
    recipe="wheels.Dockerfile.j2",
    files=("rocmgraph/inimage/verify_dists.py",),
    fetches=(Fetch.WHEELS,),
)
