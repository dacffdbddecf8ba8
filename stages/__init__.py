"""The stages of the verl ROCm image, one module each.

Each module declares one ``STAGE``: its parents, the pins it reads, its
recipe and whether the arch set is one of its inputs. ``graph()`` checks them
and puts them in build order.
"""

from __future__ import annotations

import functools

from rocmgraph.graph.dag import Graph, make_graph
from stages import (
    aiter,
    assemble,
    base,
    causal_conv1d,
    flash_attention,
    manifest,
    prune,
    rocm,
    sgl_kernel,
    sglang,
    slim,
    transformer_engine,
    verl,
    vllm,
    wheels,
)

MODULES = (
    base, rocm, wheels,
    flash_attention, transformer_engine, aiter, causal_conv1d, vllm, sgl_kernel, sglang, verl,
    slim, prune, assemble, manifest,
)  # fmt: skip


@functools.cache
def graph() -> Graph:
    return make_graph(module.STAGE for module in MODULES)
