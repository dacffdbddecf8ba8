"""sglang: SGLang, its sgl-kernel and torch_memory_saver, built for the target archs.

sgl-kernel builds with SGLang's ROCm pyproject and setup script, patched to
compile for every target arch rather than the one it detects.
"""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="sglang",
    doc="SGLang, sgl-kernel and torch_memory_saver from source, patched, for the target archs",
    parents=("wheels",),
    reads=(("sources", "sglang"), ("sources", "torch_memory_saver"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
