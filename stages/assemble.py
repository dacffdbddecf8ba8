"""assemble: the built wheels of every source stage installed over verl's stack.

The wheels are bind-mounted from the stage images, never copied, so they do
not ship in a layer. The runtime environment (PYTORCH_ROCM_ARCH from the
arch set, and the pinned variables) is set here.
"""

from rocmgraph.graph import Stage

ARTIFACTS = ("aiter", "causal_conv1d", "flash_attention", "sglang", "transformer_engine", "vllm")

STAGE = Stage(
    name="assemble",
    doc="installs the built vLLM, SGLang, kernels over verl; sets the runtime environment",
    parents=("verl", *ARTIFACTS),
    reads=(
        *(("sources", name, "install_deps") for name in ARTIFACTS),
        ("sources", "vllm", "uninstall"),
        ("python", "vllm"),
        ("python", "sglang"),
        ("env",),
    ),
    recipe="assemble.Dockerfile.j2",
    arch_dependent=True,
)
