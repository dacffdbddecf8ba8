"""manifest: the smoke check, /workspace/.manifest (env, pip list, dpkg -l, version,
build.json) and labels.

The smoke check (rocmgraph/inimage/smoke.py) fails the build unless every package the
pins name is installed at its pinned version and imports, and the runtime
environment holds the pinned values. build.json is this build's provenance:
every stage with its key, the pins it read, its image id and build time, the
arch set, the tool's version. It comes in through the build context; the keys
already cover everything it records. training_docker_version is the
commit_tag= variable (verl's GIT_COMMIT_TAG build argument, default DEV).
"""

from rocmgraph.graph import Fetch, Stage

# Every source a profile may pin: the smoke check reads what each installs (a profile that
# leaves an optional source out drops its reads with its stage).
SOURCES = (
    "aiter", "causal_conv1d", "flash_attention", "mbridge", "sgl_kernel", "sglang",
    "torch_memory_saver", "transformer_engine", "verl", "vllm",
)  # fmt: skip

STAGE = Stage(
    name="manifest",
    doc="checks the image against the pins, writes /workspace/.manifest, labels the image",
    parents=("assemble",),
    reads=(
        ("image",),
        ("base", "workdir"),
        *(("sources", source, knob) for source in SOURCES for knob in ("version", "dist")),
        ("wheels",),
        ("python", "stack"),
        ("python", "vllm"),
        ("python", "sglang"),
        ("env",),
        ("links",),
    ),
    recipe="manifest.Dockerfile.j2",
    files=("rocmgraph/inimage/manifest.py", "rocmgraph/inimage/smoke.py"),
    arch_dependent=True,
    fetches=(Fetch.PROVENANCE,),
    variables=(("commit_tag", "DEV"),),
)
