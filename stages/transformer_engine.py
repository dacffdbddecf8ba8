"""transformer_engine: TransformerEngine (ROCm fork), built for the target archs."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="transformer_engine",
    doc="TransformerEngine (ROCm fork) from source at its pin, patched, built for the target archs",
    parents=("wheels",),
    reads=(("sources", "transformer_engine"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
