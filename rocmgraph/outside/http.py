"""The one module that talks HTTP: timeouts, bounded retries with backoff, streamed downloads."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rocmgraph.common.errors import FetchError

if TYPE_CHECKING:  # requests is imported when first used: a no-op build needs no HTTP
    # startup: requests (about 0.1 s) only for a run that fetches
    import requests

T = TypeVar("T")


@dataclass
class Http:
    """HTTP with a connect/read timeout and a few retries for what retrying can fix."""

    timeout: float = 30.0  # seconds to connect, and between two reads
    attempts: int = 3
    backoff: float = 1.0  # seconds before the second attempt, doubled after
    sleep: Callable[[float], None] = time.sleep
    _session: requests.Session | None = field(default=None, repr=False)

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            # startup: requests (about 0.1 s) only for a run that fetches
            import requests

            self._session = requests.Session()
        return self._session

    def get_text(self, url: str) -> str:
        return self._with_retries(url, lambda: self._get(url).text)

    def get(
        self, url: str, headers: dict[str, str] | None = None, auth: tuple[str, str] | None = None
    ) -> requests.Response:
        """A whole response (4xx included, for callers that negotiate, like registries)."""

        def once() -> requests.Response:
            response = self.session.get(url, timeout=self.timeout, headers=headers, auth=auth)
            if response.status_code >= 500:
                raise _Status(response.status_code)
            return response

        return self._with_retries(url, once)

    def head(self, url: str, headers: dict[str, str] | None = None) -> requests.Response:
        """A HEAD request's response (4xx included)."""

        def once() -> requests.Response:
            response = self.session.head(url, timeout=self.timeout, headers=headers)
            if response.status_code >= 500:
                raise _Status(response.status_code)
            return response

        return self._with_retries(url, once)

    def send(
        self, method: str, url: str, headers: dict[str, str], data: bytes = b""
    ) -> requests.Response:
        """A POST or PUT's whole response (4xx included): what a registry push sends."""

        def once() -> requests.Response:
            response = self.session.request(
                method, url, headers=headers, data=data, timeout=self.timeout
            )
            if response.status_code >= 500:
                raise _Status(response.status_code)
            return response

        return self._with_retries(url, once, method)

    def download(self, url: str, dest: Path) -> str:
        """Stream ``url`` into ``dest``; return the sha256 of what arrived."""

        def once() -> str:
            digest = hashlib.sha256()
            with self._get(url, stream=True) as response, dest.open("wb") as out:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            return digest.hexdigest()

        return self._with_retries(url, once)

    def _get(self, url: str, stream: bool = False) -> requests.Response:
        response = self.session.get(url, timeout=self.timeout, stream=stream)
        if response.status_code >= 400:
            response.close()
            raise _Status(response.status_code)
        return response

    def _with_retries(self, url: str, once: Callable[[], T], method: str = "GET") -> T:
        # startup: requests (about 0.1 s) only for a run that fetches
        import requests

        for attempt in range(1, self.attempts + 1):
            try:
                return once()
            except _Status as status:
                if status.code < 500 or attempt == self.attempts:
                    raise FetchError(f"{method} {url}: HTTP {status.code}") from None
                problem = f"HTTP {status.code}"
            except requests.Timeout:
                problem = f"no answer within {self.timeout:g} s"
            except requests.RequestException as exc:
                problem = _describe(exc)
            if attempt == self.attempts:
                raise FetchError(f"{method} {url}: {problem} ({self.attempts} attempts)")
            self.sleep(self.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")


class _Status(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _describe(exc: Exception) -> str:
    # startup: requests (about 0.1 s) only for a run that fetches
    import requests

    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return "the connection was dropped during the transfer"
    if isinstance(exc, requests.ConnectionError):
        return "cannot connect"
    return type(exc).__name__
