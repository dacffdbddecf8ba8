"""prune: the ROCm trees put back over slim, with the kernel files of other archs removed.

The classifier (rocmgraph/inimage/prune.py) runs on verl's image, removes the
kernel files of archs outside the target set from the trees [prune].dirs
names, and reports the files and bytes removed in /workspace/.manifest/prune.json;
the trees are gathered and copied over slim as one layer. Its cost grows with
the ROCm trees, not with the image, and that layer is the only one the images
of two arch sets do not share below the source builds.
"""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="prune",
    doc="puts the ROCm trees back over slim, less the kernel files of other archs",
    parents=("slim", "verl"),
    reads=(("prune", "dirs"), ("base", "workdir")),
    recipe="prune.Dockerfile.j2",
    files=("rocmgraph/inimage/prune.py",),
    arch_dependent=True,
)
