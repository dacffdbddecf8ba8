"""sglang: SGLang's Python package and torch_memory_saver, from source, patched.

Its kernels are the sgl_kernel stage's, keyed by their folder alone, so a change to
SGLang's Python rebuilds this stage and not the kernels.
"""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "sglang",
    "SGLang and torch_memory_saver from source, patched",
    sources=("sglang", "torch_memory_saver"),
)
