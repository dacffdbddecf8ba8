"""doit patches: every target has its rows; what cannot be fetched is unknown, never a crash."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from conftest import run_doit
from servers import Route, closed_url, commit
from world import MEGATRON_JSON, World, kernel_as_submodule, zipped

from rocmgraph.demo import patchimages
from rocmgraph.trees import patches

MEGATRON = "docker/patches/megatron-core/0001-attention-backend-env-warns.patch"
MODULE = "megatron/core/models/common/language_module/language_module.py"
VLLM = [
    "docker/patches/vllm/0001-cumem-zero-mapped-vram-on-rocm.patch",
    "docker/patches/vllm/0002-moe-pad-weight-in-place.patch",
    "docker/patches/vllm/0003-moe-oracle-keep-weight-storage.patch",
]
SGLANG = [
    "docker/patches/sglang/0001-layernorm-in-place-fused-add-rms-norm.patch",
    "docker/patches/sglang/0002-pyproject-no-rust-grpc-extension.patch",
    "docker/patches/sglang/0003-sgl-kernel-build-for-every-target-arch.patch",
    "docker/patches/sglang/0004-sgl-kernel-fp8-type-by-compiled-arch.patch",
]
MIRROR_ADVICE = "check the network, or set a mirror"


def patches_of(world: World, *args: str) -> tuple[int, dict[str, dict[str, str]], str]:
    result = run_doit("patches", f"pins={world.pins}", "format=json", *args, env=world.env)
    rows = {row["patch"]: row for row in json.loads(result.stdout)["patches"]}
    return result.returncode, rows, result.stderr


# ---------------------------------------------------------------- one unreachable, others shown


def test_what_cannot_be_fetched_is_unknown_and_the_rest_is_checked(world: World) -> None:
    closed = closed_url()
    world.pins.write_text(
        world.pins_text().replace(f"file://{world.repos['vllm']}", f"{closed}/vllm.git")
    )
    world.server.routes[MEGATRON_JSON].status = 404
    result = run_doit("patches", f"pins={world.pins}", env=world.env)
    assert result.returncode == 2
    assert result.stderr == ("error: 4 patches could not be checked; see the rows marked unknown\n")
    lines = result.stdout.splitlines()
    vllm = (
        f"source vllm: cannot fetch {closed}/vllm.git (connection refused); {MIRROR_ADVICE} "
        "([sources.vllm].mirror, [mirrors], or $VERL_GRAPH_MIRRORS)"
    )
    for name in VLLM:
        assert [line.split(None, 2) for line in lines if line.startswith(name)] == [
            [name, "unknown", vllm]
        ]
    [megatron] = [line.split(None, 2) for line in lines if line.startswith(MEGATRON)]
    assert megatron == [
        MEGATRON, "unknown", f"megatron-core==0.18.0: {world.server.url}/pypi answered HTTP 404"
    ]  # fmt: skip
    assert lines[-1] == "5 applies, 0 obsolete, 0 conflicts, 4 unknown"


def test_a_conflict_wins_over_what_cannot_be_checked(world: World) -> None:
    world.server.routes[MEGATRON_JSON].status = 404
    repo = world.repos["verl"]
    rollout = "verl/trainer/config/rollout/rollout.yaml"
    moved = commit(repo, {rollout: "engine_kwargs: {}\n"}, "rework the rollout config")
    world.pins.write_text(world.pins_text().replace(world.commits["verl"], moved))
    code, rows, err = patches_of(world)
    assert (code, err) == (1, "error: 1 patches conflict with their pinned tree\n")
    assert rows[MEGATRON]["status"] == "unknown"
    assert rows["docker/patches/verl/0001-rollout-rocm-engine-defaults.patch"]["status"] == (
        "conflicts"
    )


# ---------------------------------------------------------------- submodules


def test_a_patch_check_fetches_only_the_submodules_the_patches_touch(
    world: World, tmp_path: Path
) -> None:
    kernel_as_submodule(world, tmp_path, f"file://{tmp_path / 'sgl-kernel'}")
    code, rows, err = patches_of(world)
    assert (code, err) == (0, "")
    assert [rows[name]["status"] for name in SGLANG] == ["applies"] * 4
    cache = Path(world.env["VERL_GRAPH_CACHE"])
    assert not (cache / "git").exists()  # no complete tree: flashinfer was never asked for


def test_a_submodule_that_cannot_be_fetched_is_named_with_its_url(
    world: World, tmp_path: Path
) -> None:
    closed = closed_url()
    kernel_as_submodule(world, tmp_path, f"{closed}/sgl-kernel.git")
    code, rows, err = patches_of(world)
    assert (code, err) == (
        2,
        "error: 2 patches could not be checked; see the rows marked unknown\n",
    )
    # SGLang's own patches touch its Python only: no submodule to fetch for them
    assert [rows[name]["status"] for name in SGLANG[:2]] == ["applies"] * 2
    assert {rows[name]["detail"] for name in SGLANG[2:]} == {
        f"source sgl_kernel: cannot fetch submodule sgl-kernel from {closed}/sgl-kernel.git "
        f"(connection refused); {MIRROR_ADVICE} ([mirrors] or $VERL_GRAPH_MIRRORS)"
    }
    assert [rows[name]["status"] for name in VLLM] == ["applies"] * 3


# ---------------------------------------------------------------- PyPI: which file is read


def tarred(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def good() -> dict[str, str]:
    return patchimages.preimage(patches.read_patch(MEGATRON))


def bad() -> dict[str, str]:  # another version of the module: the patch would conflict
    return {MODULE: "# not the file the patch was written for\n"}


def publish(
    world: World, files: dict[str, bytes], wrong_hash: str = "", relative: bool = False
) -> None:
    """megatron-core 0.18.0 on the world's PyPI as exactly ``files``."""
    urls = []
    for name, body in files.items():
        world.server.routes[f"/files/{name}"] = Route(body)
        sha256 = hashlib.sha256(body).hexdigest() if name != wrong_hash else "0" * 64
        url = f"../../files/{name}" if relative else f"{world.server.url}/files/{name}"
        urls.append({"filename": name, "url": url, "digests": {"sha256": sha256}})
    world.server.routes[MEGATRON_JSON] = Route(json.dumps({"releases": {"0.18.0": urls}}).encode())


CP = "megatron_core-0.18.0-{}-{}-{}.whl"
LINUX = "manylinux_2_17_x86_64.manylinux2014_x86_64"
SDIST = "megatron_core-0.18.0.tar.gz"


@pytest.mark.parametrize(
    "files",
    [
        # as megatron-core publishes 0.18.0: CPython wheels per version, and an sdist
        {CP.format("cp311", "cp311", LINUX): bad(), CP.format("cp312", "cp312", LINUX): good(),
         CP.format("cp313", "cp313", LINUX): bad(), SDIST: bad()},
        {CP.format("cp312", "cp312", "manylinux_2_28_aarch64"): bad(),
         CP.format("cp312", "cp312", "musllinux_1_2_x86_64"): bad(),
         CP.format("cp312", "cp312", "macosx_11_0_arm64"): bad(),
         CP.format("cp312", "cp312", "linux_x86_64"): good()},
        {CP.format("cp39", "abi3", "manylinux_2_28_x86_64"): good(), SDIST: bad()},
        {CP.format("py3", "none", "any"): good(), CP.format("cp312", "cp312", LINUX): bad()},
        {"megatron_core-0.18.0-cp312-cp312-not-a-valid-name": bad(),
         CP.format("cp312", "cp312", LINUX): good()},
    ],
    ids=["cp312-of-three", "linux-x86_64-only", "abi3", "pure-first", "bad-name-skipped"],
)  # fmt: skip
def test_the_wheel_that_fits_the_image_is_the_one_checked(
    world: World, files: dict[str, dict[str, str]]
) -> None:
    publish(world, {name: zipped(content) for name, content in files.items()})
    code, rows, err = patches_of(world)
    assert (code, err) == (0, "")
    assert rows[MEGATRON]["status"] == "applies"


@pytest.mark.parametrize("layout", ["megatron_core-0.18.0/", "megatron_core-0.18.0/src/"])
def test_without_a_fitting_wheel_the_sdist_is_checked(world: World, layout: str) -> None:
    sdist = {f"{layout}{name}": text for name, text in good().items()}
    sdist["megatron_core-0.18.0/PKG-INFO"] = "Name: megatron-core\n"
    publish(world, {CP.format("cp311", "cp311", LINUX): zipped(bad()), SDIST: tarred(sdist)})
    code, rows, err = patches_of(world)
    assert (code, err) == (0, "")
    assert rows[MEGATRON]["status"] == "applies"


def test_a_file_that_does_not_hash_to_what_pypi_publishes_is_unknown(world: World) -> None:
    wheel = CP.format("cp312", "cp312", LINUX)
    body = zipped(good())  # once: a zip carries the time it was made
    actual = hashlib.sha256(body).hexdigest()
    publish(world, {wheel: body}, wrong_hash=wheel)
    code, rows, err = patches_of(world)
    assert code == 2, err
    assert rows[MEGATRON]["status"] == "unknown"
    assert rows[MEGATRON]["detail"] == (
        f"megatron-core==0.18.0: {world.server.url}/files/{wheel} has sha256 {actual}, PyPI "
        f"publishes {'0' * 64}; nothing was kept. Check the index (VERL_GRAPH_PYPI or pypi.org) "
        "and retry"
    )
    assert [rows[name]["status"] for name in VLLM] == ["applies"] * 3


def test_a_release_with_nothing_that_fits_is_unknown(world: World) -> None:
    publish(world, {CP.format("cp311", "cp311", LINUX): zipped(good())})
    code, rows, _ = patches_of(world)
    assert code == 2
    assert rows[MEGATRON]["detail"] == (
        "megatron-core==0.18.0: PyPI has no wheel for CPython 3.12 on linux x86_64 and no sdist "
        "to check patches against"
    )


def test_a_mirror_that_links_its_files_relatively_is_followed(world: World) -> None:
    publish(world, {CP.format("cp312", "cp312", LINUX): zipped(good())}, relative=True)
    code, rows, err = patches_of(world)
    assert (code, err, rows[MEGATRON]["status"]) == (0, "", "applies")
