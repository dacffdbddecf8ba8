"""base: the pinned base image, OS packages, a Python venv, ccache and build tools."""

from rocmgraph.graph.dag import Fetch, Stage

STAGE = Stage(
    name="base",
    doc="base image by digest, OS packages, Python venv, ccache, build tools",
    reads=(
        ("base", "image"),
        ("base", "digest"),
        ("base", "apt"),
        ("base", "apt_recommends"),
        ("base", "repos"),
        ("base", "workdir"),
        ("python", "version"),
        ("python", "venv"),
        ("python", "tools"),
        ("build", "ccache_maxsize"),
    ),
    recipe="base.Dockerfile.j2",
    files=("docker/apt.j2",),
    fetches=(Fetch.BASE_KEYS,),
)
