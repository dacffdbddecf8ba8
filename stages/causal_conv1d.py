"""causal_conv1d: causal-conv1d built from its pinned source into wheels for the target archs."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="causal_conv1d",
    doc="causal-conv1d from source at its pin, patched, built for the target archs",
    parents=("wheels",),
    reads=(("sources", "causal_conv1d"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
