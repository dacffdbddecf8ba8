"""causal_conv1d: causal-conv1d built from its pinned source into wheels for the target archs."""

from rocmgraph.graph.dag import source_stage

STAGE = source_stage(
    "causal_conv1d", "causal-conv1d from source at its pin, patched, built for the target archs"
)
