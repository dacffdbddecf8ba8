"""prune: removes GPU kernel files of archs outside the target set, so the image shrinks.

Files deleted in a later layer still ship in the layer that added them, so the
pruned image is flattened into one layer, keeping its environment, workdir and
command. The classifier (rocmgraph/prune.py) runs inside the image and reports
the files and bytes removed, in /workspace/.manifest/prune.json.
"""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="prune",
    doc="removes kernel files of non-target archs, flattened so the image really shrinks",
    parents=("assemble",),
    reads=(("prune",), ("base", "workdir")),
    recipe="prune.Dockerfile.j2",
    files=("rocmgraph/prune.py",),
    arch_dependent=True,
    flatten=True,
)
