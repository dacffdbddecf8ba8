"""Check that installed distributions have the pinned versions.

Used when the base image already carries what a stage would install: the
stage adds nothing, but the pin is still checked. Runs inside the image with
its own Python, so it uses the standard library only.

    python verify_dists.py torch==2.12.0 triton==3.7.0 apex   (apex: any version)
"""

import sys
from importlib import metadata


def public(version: str) -> str:
    """The version as pins compare it: 2.12.0+rocm7.14.git1234 -> 2.12.0 (pins name the
    public version), and a release's trailing zeros left out, as PEP 440 compares
    releases: pip installs 1.14.0 for a pin of 1.14."""
    release = version.split("+", 1)[0]
    parts = release.split(".")
    if not all(part.isdigit() for part in parts):  # a pre-release, a post-release: as written
        return release
    while len(parts) > 1 and int(parts[-1]) == 0:
        parts.pop()
    return ".".join(str(int(part)) for part in parts)


def main(requirements: list[str]) -> int:
    wrong = []
    for requirement in requirements:
        name, _, pinned = requirement.partition("==")
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: not installed, the pins say {pinned or 'it is there'}")
            continue
        if pinned and public(found) != public(pinned):  # no version pinned: being there is all
            wrong.append(f"{name}: {found} is installed, the pins say {pinned}")
    for line in wrong:
        print(f"verify_dists: {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
