"""prune: the ROCm trees, with the kernel files of other archs removed, gathered for assemble.

The classifier (rocmgraph/inimage/prune.py) runs on the torch stack's image,
removes the kernel files of archs outside the target set from the trees
[prune].dirs names, and reports the files and bytes removed in
/workspace/.manifest/prune.json. What is left is gathered under /kept, which
assemble copies over verl as one layer: its cost grows with the ROCm trees, not
with the image, and that layer is the only one below the source builds' that
the images of two arch sets do not share. The stage's image is /kept alone
(``FROM scratch``): a machine that builds assemble from a shared cache pulls the
kept kernels, not the torch stack with every arch's trees.
"""

from rocmgraph.graph.dag import Stage

STAGE = Stage(
    name="prune",
    doc="the ROCm trees less the kernel files of other archs, gathered under /kept",
    parents=("wheels",),
    reads=(("prune", "dirs"), ("base", "workdir")),
    recipe="prune.Dockerfile.j2",
    files=("rocmgraph/inimage/prune.py",),
    arch_dependent=True,
)
