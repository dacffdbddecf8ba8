"""The image's SBOM: the facts the graph gives (sbomfacts) and the CycloneDX document the
manifest stage writes from them and the image's lists (rocmgraph/inimage/sbom.py), checked
by the CycloneDX library's own validator. (The SBOM of a real build: test_verify_hermetic.)"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import ROOT, edit_toml
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

import stages
from rocmgraph.building import execute, sbomfacts
from rocmgraph.commands import imageaudit
from rocmgraph.common import sbomlib
from rocmgraph.common.fsutil import sha256_file
from rocmgraph.graph.invocation import Options, Run
from rocmgraph.inimage import sbom

WHEEL_SHA = "a" * 64
DEB_SHA = "b" * 64


def test_the_facts_are_the_locked_inputs(write_pins: Callable[..., Path], pins_text: str) -> None:
    text = edit_toml(pins_text, ["wheels", "torch", "sha256"], WHEEL_SHA)
    wheel = "torch-2.12.0+rocm7.14-cp312-cp312-linux_x86_64.whl"
    text = edit_toml(text, ["wheels", "torch", "file"], wheel)
    run = Run(Options(pins=str(write_pins(text)), arch="gfx942"), stages.graph())
    facts: dict[str, Any] = sbomfacts.facts(run)
    assert facts["wheels"] == {  # the only wheel locked; the others are no fact yet
        "torch": {"version": "2.12.0", "file": wheel,
                  "sha256": WHEEL_SHA, "index": run.pins.wheels["torch"].index,
                  "provided": True},  # rocm/primus holds the torch stack: checked only
    }  # fmt: skip
    sglang = facts["sources"]["sglang"]
    assert sglang["commit"] == "0801cc05ed202544e2e5c67d6b0a1d454de54fca"
    assert sglang["patches"] == [
        {"file": path, "sha256": sha256_file(ROOT / path)}
        for path in run.pins.sources["sglang"].patches
    ]
    assert "sglang-kernel" in facts["sources"]  # sgl_kernel's distribution, by its dist
    assert not sglang["provided"]
    assert facts["sources"]["amd-aiter"]["provided"]  # aiter: the base's, its version checked
    assert facts["base"] == run.pins.base.image + (
        f"@{run.pins.base.digest}" if run.pins.base.digest else ""
    )
    assert facts["fetched"] == {}  # no closure locked beside these pins


def facts() -> dict[str, Any]:
    return {
        "tool": {"name": "verl-rocm-graph", "version": "0.1.0"},
        "image": {"name": "verl-rocm", "version": "7.14", "arch": ["gfx942"]},
        "base": "rocm/primus:v26.4@sha256:" + "c" * 64,
        "wheels": {"torch": {"version": "2.12.0", "file": "torch-2.12.0.whl", "provided": False,
                             "sha256": WHEEL_SHA, "index": "https://repo.radeon.com/whl/"},
                   "triton": {"version": "3.7.0", "file": "triton-3.7.0.whl", "provided": True,
                              "sha256": "f" * 64, "index": "https://repo.radeon.com/whl/"}},
        "sources": {"vllm": {"source": "vllm", "repo": "https://github.com/vllm-project/vllm",
                             "commit": "18d87a87dc39c1a50f452b218fdcc3aeec48d18e",
                             "provided": False,
                             "patches": [{"file": "docker/patches/vllm/0001.patch",
                                          "sha256": "d" * 64}]},
                    "amd-aiter": {"source": "aiter", "repo": "https://github.com/ROCm/aiter",
                                  "commit": "c" * 40, "provided": True, "patches": []}},
        "fetched": {
            "python:megatron-core==0.18.0": {"file": "megatron_core-0.18.0.whl", "stage": "verl",
                                             "url": "https://files.example/m.whl",
                                             "sha256": "e" * 64},
            "apt:ccache==4.8-1": {"file": "ccache_4.8-1_amd64.deb", "stage": "base",
                                  "url": "https://deb.example/ccache.deb", "sha256": DEB_SHA},
        },
    }  # fmt: skip


def manifest_folder(folder: Path) -> Path:
    """The lists the manifest and base stages write, as pip and dpkg print them."""
    (folder / "base").mkdir(parents=True)
    (folder / "requirements.txt").write_text(
        "Package        Version\n-------------- ------------------\n"
        "torch          2.12.0+rocm7.14\nvllm           0.22.1rc1.dev384\n"
        "triton         3.7.0\namd-aiter      0.1.5\n"
        "megatron-core  0.18.0\nnumpy          2.1.0\nleftover       1.0\n"
    )
    dpkg = (
        "Desired=Unknown/Install/Remove/Purge/Hold\n||/ Name  Version  Architecture  Description\n"
        "+++-=====-========-=============-===========\n"
        "ii  ccache  4.8-1  amd64  compiler cache\nii  libc6:amd64  2.36-9  amd64  GNU C\n"
        "rc  gone  1.0  amd64  removed, its configuration left\n"
    )
    (folder / "dpkg-list.txt").write_text(dpkg)
    (folder / "base" / "requirements.txt").write_text("Package Version\n------- -------\n"
                                                      "numpy   2.1.0\n")  # fmt: skip
    (folder / "base" / "dpkg-list.txt").write_text("ii  libc6:amd64  2.36-9  amd64  GNU C\n")
    return folder


def test_each_component_says_where_its_bytes_came_from(tmp_path: Path) -> None:
    made = sbom.bom(manifest_folder(tmp_path), facts(), 'ID=ubuntu\nVERSION_ID="24.04"\n')
    text = JsonV1Dot6(made).output_as_string(indent=1)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None  # valid 1.6
    document = json.loads(text)
    found = {c["bom-ref"]: c for c in document["components"]}
    origin = {ref: next(p["value"] for p in c["properties"] if p["name"] == sbom.ORIGIN)
              for ref, c in found.items()}  # fmt: skip
    assert origin == {
        "pypi:torch@2.12.0+rocm7.14": "wheel",
        "pypi:vllm@0.22.1rc1.dev384": "source",
        "pypi:megatron-core@0.18.0": "closure of verl",
        "pypi:numpy@2.1.0": "base image rocm/primus:v26.4@sha256:" + "c" * 64,
        "pypi:leftover@1.0": "untraced",
        "pypi:triton@3.7.0": "base image rocm/primus:v26.4@sha256:" + "c" * 64,  # provided
        "pypi:amd-aiter@0.1.5": "base image rocm/primus:v26.4@sha256:" + "c" * 64,
        "deb:ccache@4.8-1": "closure of base",
        "deb:libc6@2.36-9": "base image rocm/primus:v26.4@sha256:" + "c" * 64,
    }  # one each, as pip and dpkg list them: the removed package is not held
    torch = found["pypi:torch@2.12.0+rocm7.14"]
    assert torch["purl"] == "pkg:pypi/torch@2.12.0%2Brocm7.14"
    assert torch["hashes"] == [{"alg": "SHA-256", "content": WHEEL_SHA}]
    assert torch["externalReferences"] == [
        {"type": "distribution", "url": "https://repo.radeon.com/whl/torch-2.12.0.whl"}
    ]
    vllm = found["pypi:vllm@0.22.1rc1.dev384"]
    assert vllm["externalReferences"] == [{
        "type": "vcs",
        "url": "git+https://github.com/vllm-project/vllm@18d87a87dc39c1a50f452b218fdcc3aeec48d18e",
    }]  # fmt: skip
    assert vllm["pedigree"]["commits"] == [
        {"uid": "18d87a87dc39c1a50f452b218fdcc3aeec48d18e",
         "url": "https://github.com/vllm-project/vllm"}
    ]  # fmt: skip
    assert vllm["pedigree"]["patches"] == [
        {"type": "unofficial", "diff": {"url": "docker/patches/vllm/0001.patch"}}
    ]
    pinned = {p["name"]: p["value"] for p in found["pypi:amd-aiter@0.1.5"]["properties"]}
    assert pinned["verl-rocm-graph:pinned"] == f"git+https://github.com/ROCm/aiter@{'c' * 40}"
    assert "hashes" not in found["pypi:triton@3.7.0"]  # the base's bytes, not the pinned file's
    assert found["deb:ccache@4.8-1"]["purl"] == "pkg:deb/ubuntu/ccache@4.8-1?arch=amd64"
    assert found["deb:ccache@4.8-1"]["hashes"] == [{"alg": "SHA-256", "content": DEB_SHA}]
    assert document["metadata"]["component"]["name"] == "verl-rocm"


def test_the_sbom_is_the_same_bytes_when_it_holds_the_same(tmp_path: Path) -> None:
    folder = manifest_folder(tmp_path)
    first = JsonV1Dot6(sbom.bom(folder, facts(), "ID=debian\n")).output_as_string(indent=1)
    again = JsonV1Dot6(sbom.bom(folder, facts(), "ID=debian\n")).output_as_string(indent=1)
    assert first == again  # a rebuild of the stage writes the same file (doit verify stage=)
    other = facts()
    other["sources"]["vllm"]["commit"] = "0" * 40
    moved = JsonV1Dot6(sbom.bom(folder, other, "ID=debian\n")).output_as_string(indent=1)
    assert json.loads(moved)["serialNumber"] != json.loads(first)["serialNumber"]


def test_the_library_goes_into_the_context_as_this_environment_has_it(
    tmp_path: Path, write_pins: Callable[..., Path], pins_text: str
) -> None:
    run = Run(Options(pins=str(write_pins(pins_text)), arch="gfx942"), stages.graph())
    sbomfacts.write(run, tmp_path)
    library = tmp_path / sbomfacts.LIBRARY_DIR
    assert sorted(p.name for p in library.iterdir()) == [
        "boolean", "cyclonedx", "defusedxml", "license_expression", "packageurl",
        "py_serializable", "sortedcontainers", "typing_extensions.py",
    ]  # fmt: skip
    assert not list(library.rglob("__pycache__"))
    assert json.loads((tmp_path / sbomfacts.FACTS).read_text()) == sbomfacts.facts(run)


def test_audit_reads_the_origins_the_sbom_gives(tmp_path: Path) -> None:
    made = sbom.bom(manifest_folder(tmp_path), facts(), "ID=debian\n")
    document = json.loads(JsonV1Dot6(made).output_as_string())
    traced = imageaudit.from_sbom(document)
    assert (traced.by_base, traced.by_closure, traced.by_pin) == (4, 2, 2)
    assert traced.untraced == (imageaudit.Package("python", "leftover", "1.0"),)
    # The names the host reads the image's SBOM by are the ones the image writes it with.
    assert (imageaudit.SBOM, imageaudit.ORIGIN, execute.SBOM) == (sbom.SBOM, sbom.ORIGIN, sbom.SBOM)


def test_the_library_is_pinned_where_the_key_reads_it_and_where_pip_installs_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = dict(line.split("==", 1) for line in project if "==" in line)
    assert {name: pinned[name] for name in sbomlib.PINNED} == sbomlib.PINNED
    sbomlib.check_installed()  # this environment is the pinned one: nothing raised
