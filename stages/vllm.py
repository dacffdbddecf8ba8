"""vllm: vLLM built from its pinned source into wheels for the target archs."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="vllm",
    doc="vLLM from source at its pin, patched, built for the target archs",
    parents=("wheels",),
    reads=(("sources", "vllm"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
