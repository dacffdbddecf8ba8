"""manifest: /workspace/.manifest (env, pip list, dpkg -l, version) and the image labels."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="manifest",
    doc="writes /workspace/.manifest and labels the image with its provenance",
    parents=("prune",),
    reads=(("image",), ("base", "workdir")),
    recipe="manifest.Dockerfile.j2",
    arch_dependent=True,
)
