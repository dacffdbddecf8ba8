"""An OCI registry through its distribution API: image digests (for `doit lock` and
bump:base), and whether a stage image is there whole (the stage cache), without a pull."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmgraph.common.errors import FetchError
from rocmgraph.config.kinds import is_loopback
from rocmgraph.outside.http import Http

_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_EMPTY = "application/vnd.oci.empty.v1+json"  # an artifact's configuration: "{}"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Reference:
    registry: str  # host[:port]
    repository: str
    tag: str

    @classmethod
    def parse(cls, image: str) -> Reference:
        name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            registry, repository = first, rest
        else:
            registry, repository = "docker.io", name
        if registry == "docker.io":
            registry = "registry-1.docker.io"
            if "/" not in repository:
                repository = f"library/{repository}"
        return cls(registry, repository, tag or "latest")

    @property
    def base_url(self) -> str:
        host = self.registry.rsplit(":", 1)[0]
        scheme = "http" if is_loopback(host) else "https"
        return f"{scheme}://{self.registry}/v2/{self.repository}"


def digest(image: str, http: Http) -> str:
    """The digest ``image`` (``registry/name:tag``) points to now: ``sha256:<64 hex>``."""
    return Client(http).digest(image)


def _token(challenge: str, http: Http, login: tuple[str, str] | None = None) -> str:
    fields = dict(_CHALLENGE.findall(challenge))
    if "realm" not in fields:
        raise FetchError(f"registry asked for credentials this tool cannot give: {challenge}")
    query = "&".join(f"{k}={v}" for k, v in fields.items() if k in ("service", "scope"))
    data = http.get(f"{fields['realm']}?{query}", auth=login).json()
    return str(data.get("token") or data.get("access_token") or "")


def login(registry: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """The user and password ``docker login`` kept for ``registry`` in the docker config
    (``auths``), or None. Read here, sent to the registry only: never written anywhere."""
    folder = Path(environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    try:
        auths = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("auths", {})
    except (OSError, ValueError, AttributeError):
        return None
    for name in (registry, f"https://{registry}", f"http://{registry}"):
        encoded = (auths.get(name) or {}).get("auth", "") if isinstance(auths, dict) else ""
        if encoded:
            user, _, password = base64.b64decode(encoded).decode(errors="replace").partition(":")
            return user, password
    return None


class Client:
    """The distribution API of registries, with the login each one asks for: anonymous,
    docker login's basic credentials, or a bearer token per repository (negotiated once)."""

    def __init__(self, http: Http, environ: Mapping[str, str] = os.environ) -> None:
        self.http = http
        self.environ = environ
        self._auth: dict[tuple[str, str], str] = {}  # (registry, repository) -> Authorization

    def digest(self, image: str) -> str:
        """The digest ``image`` (``registry/name:tag``) points to now: ``sha256:<64 hex>``."""
        ref = Reference.parse(image)
        url = f"{ref.base_url}/manifests/{ref.tag}"
        response = self._get(ref, url, {"Accept": _ACCEPT})
        if response.status_code == 404:
            raise FetchError(f"image {image}: no such tag in {ref.registry}")
        if response.status_code != 200:
            raise FetchError(f"image {image}: {url} answered HTTP {response.status_code}")
        found = response.headers.get("Docker-Content-Digest", "")
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", found):
            raise FetchError(f"image {image}: {url} sent no Docker-Content-Digest header")
        return str(found)

    def _manifest(self, ref: Reference, image: str, name: str = "") -> dict[str, Any] | None:
        """The image manifest ``image`` (registry/name:tag) names, or ``name`` (a digest):
        an index's (what an engine with the containerd store, or buildx, pushes) is its
        linux/amd64 image's. None if there is no such tag, or the index holds no such image."""
        url = f"{ref.base_url}/manifests/{name or ref.tag}"
        response = self._get(ref, url, {"Accept": _ACCEPT})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise FetchError(f"image {image}: {ref.registry} answered HTTP {response.status_code}")
        found = response.json()
        if not isinstance(found, dict):
            return {}
        if "manifests" in found and not name:
            platform = {"os": "linux", "architecture": "amd64"}
            child = next(
                (entry for entry in found["manifests"]
                 if isinstance(entry, dict)
                 and {k: entry.get("platform", {}).get(k) for k in platform} == platform),
                None,
            )  # fmt: skip
            return None if child is None else self._manifest(ref, image, child["digest"])
        return found

    def engine_ids(self, image: str) -> frozenset[str]:
        """The ids an engine that pulls ``image`` (registry/name:tag) gives it: the digest of
        its configuration (the classic store's id) and the tag's own digest, an index's or
        a manifest's (the containerd store's). Empty if there is no such tag."""
        manifest = self._manifest(Reference.parse(image), image)
        config = str((manifest or {}).get("config", {}).get("digest", ""))
        return frozenset({config, self.digest(image)}) if config else frozenset()

    def has(self, image: str) -> bool:
        """Whether ``image`` (registry/name:tag) is there whole: its manifest, and every blob
        it names (a push cut short, or a collected blob, is not an image)."""
        ref = Reference.parse(image)
        manifest = self._manifest(ref, image)
        if manifest is None or "config" not in manifest:
            return False
        blobs = [manifest.get("config", {}), *manifest.get("layers", [])]
        for blob in blobs:
            url = f"{ref.base_url}/blobs/{blob.get('digest', '')}"
            if self._get(ref, url, {}, head=True).status_code != 200:
                return False
        return True

    def attach(
        self, image: str, media_type: str, content: bytes, annotations: Mapping[str, str]
    ) -> str:
        """``content`` pushed as a one-layer OCI artifact tagged ``image`` (registry/name:tag),
        as `cosign attach` stores an SBOM or an attestation beside an image; its digest. An
        empty configuration, as OCI's artifact guidance has it: the registry needs no
        referrers API (Debian's docker-registry has none)."""
        ref = Reference.parse(image)
        empty = b"{}"
        for blob in (empty, content):
            self._upload(ref, image, blob)
        manifest = {
            "schemaVersion": 2,
            "mediaType": _OCI_MANIFEST,
            "artifactType": media_type,
            "config": {"mediaType": _OCI_EMPTY, "digest": _sha256(empty), "size": len(empty)},
            "layers": [{"mediaType": media_type, "digest": _sha256(content), "size": len(content)}],
            "annotations": dict(annotations),
        }
        body = json.dumps(manifest, sort_keys=True).encode()
        url = f"{ref.base_url}/manifests/{ref.tag}"
        answer = self._ask(ref, "PUT", url, {"Content-Type": _OCI_MANIFEST}, body)
        if answer.status_code not in (200, 201):
            raise FetchError(
                f"{image}: {ref.registry} refused the manifest (HTTP {answer.status_code})"
            )
        return _sha256(body)

    def _upload(self, ref: Reference, image: str, blob: bytes) -> None:
        """One blob, unless the registry has it: a POST opens the upload, a PUT ends it."""
        digest = _sha256(blob)
        if self._get(ref, f"{ref.base_url}/blobs/{digest}", {}, head=True).status_code == 200:
            return
        opened = self._ask(ref, "POST", f"{ref.base_url}/blobs/uploads/", {})
        where = opened.headers.get("Location", "")
        if opened.status_code != 202 or not where:
            raise FetchError(
                f"{image}: {ref.registry} opened no upload (HTTP {opened.status_code})"
            )
        if where.startswith("/"):
            where = ref.base_url.split("/v2/", 1)[0] + where
        url = f"{where}{'&' if '?' in where else '?'}digest={digest}"
        headers = {"Content-Type": "application/octet-stream"}
        ended = self._ask(ref, "PUT", url, headers, blob)
        if ended.status_code != 201:
            raise FetchError(
                f"{image}: {ref.registry} refused blob {digest} (HTTP {ended.status_code})"
            )

    def _ask(
        self, ref: Reference, method: str, url: str, headers: dict[str, str], data: bytes = b""
    ) -> Any:
        """A POST or PUT with the login the registry asks for (basic, or a token whose scope
        its challenge names: push, for a push)."""
        known = self._auth.get((ref.registry, ref.repository))
        answer = self.http.send(
            method, url, {**headers, **({"Authorization": known} if known else {})}, data
        )
        if answer.status_code != 401:
            return answer
        self._negotiate(ref, answer.headers.get("WWW-Authenticate", ""))
        authorized = {**headers, "Authorization": self._auth[(ref.registry, ref.repository)]}
        return self.http.send(method, url, authorized, data)

    def _get(self, ref: Reference, url: str, headers: dict[str, str], head: bool = False) -> Any:
        ask = self.http.head if head else self.http.get
        where = (ref.registry, ref.repository)
        known = self._auth.get(where)
        response = ask(url, {**headers, "Authorization": known} if known else headers)
        if response.status_code != 401:
            return response
        self._negotiate(ref, response.headers.get("WWW-Authenticate", ""))
        return ask(url, {**headers, "Authorization": self._auth[where]})

    def _negotiate(self, ref: Reference, challenge: str) -> None:
        """The login a 401's challenge asks for, kept for the repository."""
        user = login(ref.registry, self.environ)
        if challenge.lower().startswith("basic"):
            if user is None:
                raise FetchError(
                    f"{ref.registry} asks for a login; run `docker login {ref.registry}`"
                )
            pair = base64.b64encode(":".join(user).encode()).decode()
            self._auth[(ref.registry, ref.repository)] = f"Basic {pair}"
        else:  # anonymous where no login is kept (Docker Hub's public images)
            token = _token(challenge, self.http, user)
            self._auth[(ref.registry, ref.repository)] = f"Bearer {token}"
