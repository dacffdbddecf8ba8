"""Image digests from a real registry (Debian's docker-registry on 127.0.0.1)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
import requests
from conftest import need
from servers import Registry

from rocmgraph.common.errors import FetchError
from rocmgraph.outside import registry
from rocmgraph.outside.http import Http


def test_the_digest_a_tag_points_to_now(tmp_path: Path) -> None:
    need("docker-registry")
    with Registry(tmp_path / "registry") as reg:
        first = reg.push("rocm/primus", "v26.4", b'{"architecture":"amd64","os":"linux"}')
        assert registry.digest(f"{reg.host}/rocm/primus:v26.4", Http()) == first
        moved = reg.push("rocm/primus", "v26.4", b'{"architecture":"amd64","os":"linux","x":1}')
        assert moved != first
        assert registry.digest(f"{reg.host}/rocm/primus:v26.4", Http()) == moved
        with pytest.raises(FetchError) as caught:
            registry.digest(f"{reg.host}/rocm/primus:v99", Http())
        assert str(caught.value) == f"image {reg.host}/rocm/primus:v99: no such tag in {reg.host}"


def test_references_name_their_registry() -> None:
    assert registry.Reference.parse("docker.io/rocm/primus:v26.4") == registry.Reference(
        "registry-1.docker.io", "rocm/primus", "v26.4"
    )
    assert registry.Reference.parse("ubuntu:22.04") == registry.Reference(
        "registry-1.docker.io", "library/ubuntu", "22.04"
    )
    local = registry.Reference.parse("127.0.0.1:5000/demo/base:1")
    assert local == registry.Reference("127.0.0.1:5000", "demo/base", "1")
    assert local.base_url == "http://127.0.0.1:5000/v2/demo/base"


def test_an_image_is_cached_only_when_its_manifest_and_every_blob_are_there(
    tmp_path: Path,
) -> None:
    need("docker-registry")
    stored = registry.Client(Http(attempts=1))
    with Registry(tmp_path / "registry") as reg:
        reg.push("verl-e2e/vllm", "k1", b'{"architecture":"amd64","os":"linux"}')
        assert stored.has(f"{reg.host}/verl-e2e/vllm:k1")
        assert not stored.has(f"{reg.host}/verl-e2e/vllm:k2")
        assert not stored.has(f"{reg.host}/verl-e2e/sglang:k1")
        config = hashlib.sha256(b'{"architecture":"amd64","os":"linux"}').hexdigest()
        gone = requests.delete(f"http://{reg.host}/v2/verl-e2e/vllm/blobs/sha256:{config}",
                               timeout=10)  # fmt: skip
        assert gone.status_code == 202
        assert not stored.has(f"{reg.host}/verl-e2e/vllm:k1")  # a tag is not an image


def test_the_ids_an_engine_gives_the_image_are_its_config_s_and_the_tag_s_digests(
    tmp_path: Path,
) -> None:
    need("docker-registry")
    stored = registry.Client(Http(attempts=1))
    config = b'{"architecture":"amd64","os":"linux"}'
    with Registry(tmp_path / "registry") as reg:
        manifest = reg.push("verl-e2e/manifest", "k1", config)
        found = stored.engine_ids(f"{reg.host}/verl-e2e/manifest:k1")
        assert found == {f"sha256:{hashlib.sha256(config).hexdigest()}", manifest}
        assert stored.engine_ids(f"{reg.host}/verl-e2e/manifest:k2") == frozenset()


def test_an_image_pushed_as_an_index_is_its_linux_amd64_image(tmp_path: Path) -> None:
    """An engine with the containerd image store (or buildx, with attestations) pushes an
    OCI index: the cache holds the stage when the index's linux/amd64 image is whole."""
    need("docker-registry")
    stored = registry.Client(Http(attempts=1))
    config = b'{"architecture":"amd64","os":"linux"}'
    with Registry(tmp_path / "registry") as reg:
        image = reg.push("verl-e2e/vllm", "image", config)
        attestation = reg.push("verl-e2e/vllm", "attestation", b'{"attests":1}')
        amd64 = {"os": "linux", "architecture": "amd64"}
        unknown = {"os": "unknown", "architecture": "unknown"}
        reg.push_index("verl-e2e/vllm", "k1", {image: amd64, attestation: unknown})
        reg.push_index("verl-e2e/vllm", "arm", {attestation: unknown})
        assert stored.has(f"{reg.host}/verl-e2e/vllm:k1")
        index = stored.digest(f"{reg.host}/verl-e2e/vllm:k1")
        assert stored.engine_ids(f"{reg.host}/verl-e2e/vllm:k1") == {
            f"sha256:{hashlib.sha256(config).hexdigest()}",
            index,
        }
        assert not stored.has(f"{reg.host}/verl-e2e/vllm:arm")


def test_the_login_is_docker_login_s_and_none_without_one(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auths": {
        "registry.example.org": {"auth": base64.b64encode(b"ci:s3cret").decode()},
    }}))  # fmt: skip
    environ = {"DOCKER_CONFIG": str(tmp_path)}
    assert registry.login("registry.example.org", environ) == ("ci", "s3cret")
    assert registry.login("other.example.org", environ) is None
    assert registry.login("registry.example.org", {"DOCKER_CONFIG": str(tmp_path / "no")}) is None


def test_a_document_is_attached_as_an_artifact_the_registry_keeps(tmp_path: Path) -> None:
    need("docker-registry")
    client = registry.Client(Http(attempts=1))
    sbom = b'{"bomFormat": "CycloneDX", "specVersion": "1.6"}'
    with Registry(tmp_path / "registry") as reg:
        target = f"{reg.host}/verl-demo:sha256-{'ab' * 32}.sbom"
        named = {"org.opencontainers.image.ref.name": "verl-demo:gfx942"}
        digest = client.attach(target, "application/vnd.cyclonedx+json", sbom, named)
        assert client.digest(target) == digest  # the tag names the manifest pushed
        manifest = requests.get(
            f"http://{reg.host}/v2/verl-demo/manifests/sha256-{'ab' * 32}.sbom",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"}, timeout=10,
        ).json()  # fmt: skip
        assert manifest["artifactType"] == "application/vnd.cyclonedx+json"
        assert manifest["annotations"] == named
        (layer,) = manifest["layers"]
        assert layer["digest"] == "sha256:" + hashlib.sha256(sbom).hexdigest()
        blob = requests.get(f"http://{reg.host}/v2/verl-demo/blobs/{layer['digest']}", timeout=10)
        assert blob.content == sbom
        # Again: the blobs are there already, and the tag moves to the same manifest.
        again = client.attach(target, "application/vnd.cyclonedx+json", sbom, named)
        assert again == digest
