"""flash_attention: Flash Attention (ROCm fork, CK backend), built for the target archs."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="flash_attention",
    doc="Flash Attention (ROCm fork, CK backend) from source at its pin, for the target archs",
    parents=("wheels",),
    reads=(("sources", "flash_attention"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
