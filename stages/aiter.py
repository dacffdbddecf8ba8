"""aiter: AMD's kernel library, built from its pinned source for the target archs."""

from rocmgraph.graph import Stage

STAGE = Stage(
    name="aiter",
    doc="aiter, AMD's kernel library, from source at its pin, for the target archs",
    parents=("wheels",),
    reads=(("sources", "aiter"), ("build", "max_jobs")),
    recipe="source-wheel.Dockerfile.j2",
    arch_dependent=True,
)
