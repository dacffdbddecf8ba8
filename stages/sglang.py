"""sglang: SGLang, its sgl-kernel and torch_memory_saver, built for the target archs.

sgl-kernel builds with SGLang's ROCm pyproject and setup script, patched to
compile for every target arch rather than the one it detects.
"""

from rocmgraph.graph import source_stage

STAGE = source_stage(
    "sglang",
    "SGLang, sgl-kernel and torch_memory_saver from source, patched, for the target archs",
    sources=("sglang", "torch_memory_saver"),
)
