"""manifest: /workspace/.manifest (env, pip list, dpkg -l, version, build.json) and labels.

build.json is this build's provenance: every stage with its key, the pins it
read, its image id and build time, the arch set, the tool's version. It comes
in through the build context; the keys already cover everything it records.
"""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="manifest",
    doc="writes /workspace/.manifest and labels the image with its provenance",
    parents=("prune",),
    reads=(("image",), ("base", "workdir")),
    recipe="manifest.Dockerfile.j2",
    files=("rocmgraph/manifest.py",),
    arch_dependent=True,
    fetches=("provenance",),
)
