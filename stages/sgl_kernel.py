"""sgl_kernel: SGLang's sgl-kernel folder alone, built for the target archs.

It is SGLang's hour of kernel compiles (docker/durations.toml), so it is a stage of its
own. Its source pins the folder (`subtree`) and the folder's git tree id (`tree`), which
its key covers in place of SGLang's commit: an SGLang bump that leaves sgl-kernel/ alone,
or a patch to SGLang's Python, rebuilds none of it. sgl-kernel builds with its ROCm
pyproject and setup script, patched to compile for every target arch rather than the one
it detects.
"""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "sgl_kernel",
    "SGLang's sgl-kernel from source, patched, for the target archs; keyed by its folder",
)
