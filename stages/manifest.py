"""manifest: the runtime environment, the smoke check, /workspace/.manifest (env, pip
list, dpkg -l, version, build.json) and labels.

The runtime environment (PYTORCH_ROCM_ARCH from the arch set, the pinned variables, the
build variables a source keeps) is set here, with the rest of the image's configuration,
so that an edit of it rebuilds this stage alone.

The smoke check (rocmgraph/inimage/smoke.py) fails the build unless every package the
pins name is installed at its pinned version with its modules in place (found and
read, not imported: the build host has no GPU), and the runtime environment holds
the pinned values. build.json is this build's provenance:
every stage with its key, the pins it read, its image id and build time, the
arch set, the tool's version. It comes in through the build context; the keys
already cover everything it records. training_docker_version is the
commit_tag= variable (verl's GIT_COMMIT_TAG build argument, default DEV).
"""

from rocmgraph.graph.dag import Fetch, Stage

# Every source a profile may pin: the smoke check reads what each installs (a profile that
# leaves an optional source out drops its reads with its stage).
SOURCES = (
    "aiter", "causal_conv1d", "flash_attention", "mbridge", "sgl_kernel", "sglang",
    "torch_memory_saver", "transformer_engine", "triton_kernels", "verl", "vllm",
)  # fmt: skip

# What it reads of each: what the smoke check finds, and the variables a source keeps.
SOURCE_KNOBS = (
    "version", "dist", "subdirs", "keep_env", "build_only_env", "env", "arch_env",
    "arch_separator",
)  # fmt: skip

STAGE = Stage(
    name="manifest",
    doc="the runtime env; checks the image against the pins, writes the manifest, labels",
    parents=("assemble",),
    reads=(
        ("image",),
        ("base", "workdir"),
        *(("sources", source, knob) for source in SOURCES for knob in SOURCE_KNOBS),
        ("wheels",),
        ("python", "stack"),
        ("python", "vllm"),
        ("python", "sglang"),
        ("env",),
        ("links",),
    ),
    recipe="manifest.Dockerfile.j2",
    files=(
        "rocmgraph/inimage/manifest.py",
        "rocmgraph/inimage/smoke.py",
        "rocmgraph/inimage/sbom.py",
    ),
    arch_dependent=True,
    fetches=(Fetch.PROVENANCE, Fetch.SBOM),
    variables=(("commit_tag", "DEV"),),
)
