"""The graph as the shape verl ships: one FROM, every step after the one before, in the
order of verl's own recipe. The benchmark's third way to build (beside the graph and
the multi-stage monolith): with one stage, a change to any step rebuilds every step
after it, whatever it depends on.

It is made from the monolith's stages (the same steps and build context), reordered
and joined. It compiles as verl's recipe does, with no compile cache (the 7.14 recipe
installs no ccache): each compile starts from an empty one. The source stages write their
wheels to /dist/<stage> in the one filesystem, where assemble finds them instead of a
mount from another stage, and each stage's steps start in the base's working directory,
as they would FROM their parent.
"""

from __future__ import annotations

import re
from pathlib import Path

from rocmgraph.building.dockerfiles import HEADER, stage_texts
from rocmgraph.graph.invocation import Run

# verl's Dockerfile.rocm (tests/fixtures/upstream/, at c791da0bf): FROM rocm/primus (which
# provides ROCm, the torch stack, Flash Attention, TransformerEngine and aiter), the arch
# (ENV PYTORCH_ROCM_ARCH, line 11), causal-conv1d (21), vLLM (31), verl (52), mbridge and
# the stack (60, in the verl stage here), SGLang (79, then its sgl-kernel at 93), the
# runtime variables (112), the amdsmi link (118), the cleanup (124). The graph's own
# stages go where verl's cleanup is: prune gathers the kept kernels, slim removes the trees,
# assemble puts the kept ones back.
ORDER = (
    "base", "rocm", "wheels", "aiter", "flash_attention", "transformer_engine",
    "causal_conv1d", "vllm", "verl", "sglang", "sgl_kernel", "prune", "slim", "assemble",
    "manifest",
)  # fmt: skip

CCACHE_MOUNT = "--mount=type=cache,target=/root/.cache/ccache "
NO_CCACHE = "--mount=type=tmpfs,target=/root/.cache/ccache "  # empty at every compile
_FROM = re.compile(r"^FROM \S+ AS \w+\n", re.MULTILINE)
_MOUNT = re.compile(r"^ *--mount=type=bind,from=(\w+),source=/dist,target=/dist/\1 \\\n", re.M)
_COPY_FROM = re.compile(r"^COPY --from=(\w+) (\S+) (\S+)$", re.MULTILINE)


def _copy(match: re.Match[str]) -> str:
    """``COPY --from=<stage> <src> <dst>`` in one filesystem: ``cp -a``; a folder's content
    (``/kept/``) is copied into ``<dst>`` and the folder dropped, as no stage holds it."""
    source, dest = match.group(2), match.group(3)
    if source.endswith("/"):
        return f"RUN cp -a {source}. {dest} && rm -rf {source}"
    return f"RUN cp -a {source} {dest}"


def dockerfile(run: Run) -> str:
    """The image as one linear Dockerfile: the first stage's FROM, then every step."""
    texts = stage_texts(run)
    order = [name for name in ORDER if name in texts]
    unknown = sorted(set(texts) - set(order))
    if unknown:  # a stage nobody placed in verl's order: say so rather than guess
        raise ValueError(f"linear.ORDER does not place stage(s) {', '.join(unknown)}")
    workdir = run.pins.base.workdir
    header = HEADER.format(pins=Path(run.pins.file).name, archs=",".join(run.archs))
    parts = [header.replace("as one Dockerfile", "as one linear Dockerfile (verl's shape)")]
    for position, name in enumerate(order):
        text = texts[name]
        if position:  # one FROM: the first stage's
            text = _FROM.sub("", text, count=1)
        if position < len(order) - 1:  # the next starts where it would FROM its parent
            text += f"WORKDIR {workdir}\n"
        text = text.replace("--wheel-dir /dist ", f"--wheel-dir /dist/{name} ")
        text = text.replace("mkdir -p /dist\n", f"mkdir -p /dist/{name}\n")
        text = text.replace(" /dist/*.whl\n", f" /dist/{name}/*.whl\n")  # the in-place step
        text = text.replace(CCACHE_MOUNT, NO_CCACHE)
        text = _MOUNT.sub("", text)  # the wheels are at /dist/<stage> already
        text = _COPY_FROM.sub(_copy, text)
        parts.append(text)
    return "\n".join(parts)
