"""prune: removes GPU kernel files of archs outside the target set."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="prune",
    doc="removes kernel files of non-target archs from the ROCm libraries",
    parents=("assemble",),
    recipe="prune.Dockerfile.j2",
    arch_dependent=True,
)
