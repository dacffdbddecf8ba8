"""transformer_engine: TransformerEngine (ROCm fork), built for the target archs."""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "transformer_engine",
    "TransformerEngine (ROCm fork) from source at its pin, patched, built for the target archs",
)
