"""aiter: AMD's kernel library, built from its pinned source for the target archs."""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "aiter", "aiter, AMD's kernel library, from source at its pin, for the target archs"
)
