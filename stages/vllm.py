"""vllm: vLLM built from its pinned source into wheels for the target archs.

Its CMake build clones triton's triton_kernels at configure time unless it is given the
folder (TRITON_KERNELS_SRC_DIR): that folder is a pinned source of this stage, so a sealed
build has it.
"""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "vllm",
    "vLLM from source at its pin, patched, built for the target archs",
    sources=("triton_kernels", "vllm"),  # the tree it is given first, there when it builds
)
