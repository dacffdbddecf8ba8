"""Image digests from an OCI registry (the distribution API), for `doit lock` and bump:base."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmgraph.errors import FetchError
from rocmgraph.kinds import is_loopback
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
    ref = Reference.parse(image)
    url = f"{ref.base_url}/manifests/{ref.tag}"
    headers = {"Accept": _ACCEPT}
    response = http.get(url, headers)
    if response.status_code == 401:  # anonymous pull token, as Docker Hub asks
        challenge = response.headers.get("WWW-Authenticate", "")
        headers["Authorization"] = f"Bearer {_token(challenge, http)}"
        response = http.get(url, headers)
    if response.status_code == 404:
        raise FetchError(f"image {image}: no such tag in {ref.registry}")
    if response.status_code != 200:
        raise FetchError(f"image {image}: {url} answered HTTP {response.status_code}")
    found = response.headers.get("Docker-Content-Digest", "")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", found):
        raise FetchError(f"image {image}: {url} sent no Docker-Content-Digest header")
    return found


def _token(challenge: str, http: Http) -> str:
    fields = dict(_CHALLENGE.findall(challenge))
    if "realm" not in fields:
        raise FetchError(f"registry asked for credentials this tool cannot give: {challenge}")
    query = "&".join(f"{k}={v}" for k, v in fields.items() if k in ("service", "scope"))
    data = http.get(f"{fields['realm']}?{query}").json()
    return str(data.get("token") or data.get("access_token") or "")
