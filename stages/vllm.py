"""vllm: vLLM built from its pinned source into wheels for the target archs."""

from rocmgraph.graph import source_stage

STAGE = source_stage("vllm", "vLLM from source at its pin, patched, built for the target archs")
