"""verl: verl and mbridge at their pins, with verl's Python stack at exact versions.

Nothing here depends on the GPU arch, so switching arch reuses this stage. It
builds on slim (the ROCm trees come back in assemble): installing Python
packages needs their metadata, not the kernels.
Patches to installed packages (megatron-core) are applied to site-packages
with ``git apply``, which fails the build when they do not apply.
"""

from rocmgraph.graph.dag import Stage

STAGE = Stage(
    name="verl",
    doc="verl and mbridge from source, Megatron and the rest of the Python stack",
    parents=("slim",),  # the stack without the ROCm trees: pip needs none of them
    reads=(
        ("sources", "verl"),
        ("sources", "mbridge"),
        ("python", "stack"),
        ("python", "install"),
        ("python", "patches"),
        ("base", "workdir"),
    ),
    recipe="verl.Dockerfile.j2",
)
