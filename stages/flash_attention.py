"""flash_attention: Flash Attention (ROCm fork, CK backend), built for the target archs."""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "flash_attention",
    "Flash Attention (ROCm fork, CK backend) from source at its pin, for the target archs",
)
