"""assemble: verl's image, the ROCm trees pruned for the target archs, and the built
wheels of every source stage installed over them.

The pruned trees (the prune stage's /kept) are copied over verl as one layer.

The wheels are bind-mounted from the stage images, never copied, so they do
not ship in a layer; a stage the base image provides has none. The tree of a
source with a `workspace` is copied to <workdir>/<workspace>, where verl's
recipe leaves its clones (/workspace/vllm, /workspace/sglang). The pinned links are
set here; the runtime environment in the manifest stage.
"""

from rocmgraph.graph.dag import Stage

# The source stages whose wheels it installs, and the sources each is built from.
ARTIFACTS = {
    "aiter": ("aiter",),
    "causal_conv1d": ("causal_conv1d",),
    "flash_attention": ("flash_attention",),
    "sglang": ("sglang", "torch_memory_saver"),
    # after SGLang: its patched sgl-kernel/ goes over SGLang's tree in the workspace
    "sgl_kernel": ("sgl_kernel",),
    "transformer_engine": ("transformer_engine",),
    "vllm": ("triton_kernels", "vllm"),  # triton_kernels: its Python files are in vLLM's wheel
}
# What it reads of each of their sources (not the trees: those are the stages' own).
SOURCE_KNOBS = ("install_deps", "uninstall", "workspace")

STAGE = Stage(
    name="assemble",
    doc="verl, the pruned ROCm trees, the built vLLM, SGLang and kernels installed",
    parents=("verl", "prune", *ARTIFACTS),
    reads=(
        *(
            ("sources", source, knob)
            for sources in ARTIFACTS.values()
            for source in sources
            for knob in SOURCE_KNOBS
        ),
        ("python", "vllm"),
        ("python", "sglang"),
        ("python", "stack"),  # installed once more after vLLM, as verl's recipe does
        ("python", "install"),
        ("sources", "verl", "dist"),  # verl's requirements likewise
        ("sources", "verl", "install_deps"),
        ("links",),
        ("cleanup",),
        ("base", "workdir"),
        ("base", "provides"),
    ),
    recipe="assemble.Dockerfile.j2",
    files=("rocmgraph/inimage/requires.py",),
    arch_dependent=True,
)
