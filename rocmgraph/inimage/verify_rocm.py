"""Check that the base image carries the pinned ROCm release.

ROCm lives in /opt/rocm when it comes from apt, or in site-packages as the
rocm-sdk Python packages (TheRock's; rocm/primus v26 keeps it there only).
Runs inside the image with its own Python, so it uses the standard library only.

    python verify_rocm.py 7.14
"""

import sys
from importlib import metadata
from pathlib import Path

INFO = Path("/opt/rocm/.info/version")
DISTS = ("rocm-sdk-core", "rocm")  # TheRock's runtime, or the meta package


def found() -> tuple[str, str] | None:
    """(where, version) of the ROCm the image carries, or None."""
    if INFO.is_file():
        return str(INFO), INFO.read_text().strip()
    for dist in DISTS:
        try:
            return f"the {dist} package", metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def main(pinned: str) -> int:
    carried = found()
    if carried is None:
        looked = ", ".join([str(INFO), *(f"the {dist} package" for dist in DISTS)])
        print(f"verify_rocm: the base image has no ROCm ({looked}); the pins say {pinned}",
              file=sys.stderr)  # fmt: skip
        return 1
    where, version = carried
    # 7.14.0-70140, 7.14.0a20260608: the release is what comes before a third part.
    if not (version == pinned or version.startswith((f"{pinned}.", f"{pinned}-"))):
        print(f"verify_rocm: {where} says ROCm {version}, the pins say {pinned}", file=sys.stderr)
        return 1
    print(f"verify_rocm: ROCm {version} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
