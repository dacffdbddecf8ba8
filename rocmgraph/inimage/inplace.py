"""Put what a build generated back into its source tree, as an editable install has it.

verl's recipe installs vLLM with ``setup.py develop``: its compiled extensions (vllm/_C.so),
the version file setuptools_scm writes and what CMake installs (vllm/third_party/) land in
/workspace/vllm, so ``python -m vllm...`` run from that folder imports a working tree. A
tree beside an installed wheel lacks them, and the folder's own package shadows the
installed one. So every file of the wheels under a package folder the tree has, and that
the tree lacks, is written into the tree. Runs inside the image with its own Python, so it
uses the standard library only.

    python inplace.py /src/vllm /dist/*.whl
"""

import sys
import zipfile
from pathlib import Path, PurePosixPath


def generated(tree: Path, members: list[str]) -> list[str]:
    """The members of a wheel under a package folder of ``tree`` that ``tree`` lacks."""
    return [
        member
        for member in members
        if not member.endswith("/")
        and len(PurePosixPath(member).parts) > 1
        and (tree / PurePosixPath(member).parts[0]).is_dir()
        and not (tree / member).exists()
    ]


def main(argv: list[str]) -> int:
    tree, wheels = Path(argv[0]), argv[1:]
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in generated(tree, archive.namelist()):
                archive.extract(member, tree)
                print(f"inplace: {member}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
