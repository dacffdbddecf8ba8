"""Deterministic wheels: the same name, version and files give the same bytes (and sha256)."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from collections.abc import Mapping

from packaging.utils import canonicalize_name

_WHEN = (2026, 1, 1, 0, 0, 0)


def make_wheel(
    name: str,
    version: str,
    files: Mapping[str, str | bytes],
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
) -> tuple[str, bytes]:
    """A wheel of ``files``: its file name and its bytes (stored, fixed times, sorted)."""
    dist = canonicalize_name(name).replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = {
        path: data if isinstance(data, bytes) else data.encode() for path, data in files.items()
    }
    members[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {req}\n" for req in requires)
    ).encode()
    purelib = "true" if tag.endswith("-none-any") else "false"
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: verl-rocm-graph demo\nRoot-Is-Purelib: {purelib}\n"
        f"Tag: {tag}\n"
    ).encode()
    record = [f"{path},sha256={_b64(data)},{len(data)}" for path, data in sorted(members.items())]
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(members):
            entry = zipfile.ZipInfo(path, date_time=_WHEN)
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, members[path])
    return f"{dist}-{version}-{tag}.whl", buffer.getvalue()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
