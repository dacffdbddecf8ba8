"""The requirements of installed distributions, as a requirements file for pip.

verl's recipe installs verl after vLLM, so where the two disagree pip resolves verl's
requirements against what vLLM brought, and verl's win. The graph installs verl in a stage
of its own, before vLLM's wheel: the assemble stage then has pip resolve verl's requirements
once more, from this file, in verl's place in the order. Requirements behind an extra are
left out (pip installs none of them for a plain ``pip install .``); other markers stay for
pip to evaluate. Runs inside the image with its own Python, so it uses the standard library
only.

    python requires.py verl > /tmp/verl.txt && pip install -r /tmp/verl.txt
"""

import re
import sys
from importlib import metadata

_EXTRA = re.compile(r"\bextra\s*==")


def requirements(dist: str) -> list[str]:
    """What installing ``dist`` asks of pip, extras left out."""
    return [
        requirement
        for requirement in metadata.requires(dist) or []
        if not _EXTRA.search(requirement.partition(";")[2])
    ]


def main(dists: list[str]) -> int:
    for dist in dists:
        for requirement in requirements(dist):
            print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
