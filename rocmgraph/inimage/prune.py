"""Which GPU kernel files belong to which arch, and removing those of other archs.

ROCm libraries ship a kernel file per arch they support: rocBLAS's
``Kernels.so-000-gfx942.hsaco``, hipBLASLt's ``TensileLibrary_lazy_gfx950.dat``,
MIOpen's ``gfx942130.HIP.fdb.txt`` (the arch, then the CU count in hex),
per-arch folders ``library/gfx942/``. A path's arch is the longest known arch
that starts a ``gfx`` token of it, so gfx942130 reads as gfx942 and gfx1151 as
gfx1151, never gfx115. A path whose arch cannot be read is never deleted.

The arch is read from the path below the prune directory only: under
/opt/rocm-gfx942/lib, the folder's own name says nothing about its files.
Symbolic links are removed as links, never followed: a link named for a
removed arch goes, whatever it points to, and what it points to stays.

Some files named for an arch are not kernels and never go: Python modules (aiter
imports ``flash_attn_func_gfx1201`` at module level whatever the GPU), package
metadata (``*.dist-info``), headers (``include/``) and kpack manifests (``*.kpm``).

A prune directory may be a pattern (rocm/primus keeps ROCm in site-packages:
``/opt/venv/lib/python3.12/site-packages/_rocm_sdk_*``). ROCm's devel tree
hardlinks the runtime's files: bytes are counted once per file, however many
names it has.

This file runs inside the image too (the prune stage copies it in), so it uses
the standard library only.

    python3 prune.py --keep gfx942,gfx950 --report prune.json /opt/rocm/lib ...
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

KNOWN_ARCHS: tuple[str, ...] = (
    "gfx900", "gfx906", "gfx908", "gfx90a", "gfx90c",
    "gfx940", "gfx941", "gfx942", "gfx950",
    "gfx1010", "gfx1013", "gfx1030", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
    "gfx1100", "gfx1101", "gfx1102",
    "gfx1150", "gfx1151", "gfx1152", "gfx1153",
    "gfx1200", "gfx1201", "gfx1250",
)  # fmt: skip
# Named for an arch, yet no kernel: imported, read, or listed whatever the GPU.
_NEVER = (".py", ".pyc", ".pyi", ".kpm")

_TOKEN = re.compile(r"gfx[0-9a-fA-F]+")
_LONGEST_FIRST = sorted(KNOWN_ARCHS, key=len, reverse=True)


def arch_of_token(token: str) -> str | None:
    """``gfx942130`` -> ``gfx942``; ``gfx9`` (no known arch starts it) -> None."""
    return next((arch for arch in _LONGEST_FIRST if token.lower().startswith(arch)), None)


def arch_of(path: str) -> str | None:
    """The arch a file belongs to, by its name first, then by its folders; None if unknown.

    ``path`` is relative to the prune directory (``library/gfx942/Kernels.co``).
    Every gfx token of the part that has any must agree; one that names no
    known arch, or two that disagree, leave the file unknown (kept).
    """
    for part in reversed(path.split("/")):
        tokens = _TOKEN.findall(part)
        if not tokens:
            continue
        archs = {arch_of_token(token) for token in tokens}
        return archs.pop() if len(archs) == 1 else None
    return None


def to_remove(paths: Iterable[str], keep: Iterable[str]) -> list[str]:
    """The paths of a known arch outside ``keep``, in the order given (never a protected one)."""
    kept = set(keep)
    return [
        path
        for path in paths
        if (arch := arch_of(path)) is not None and arch not in kept and not protected(path)
    ]


def protected(path: str) -> bool:
    """Code, metadata and headers named for an arch: not kernel files, never removed."""
    parts = path.split("/")
    return path.endswith(_NEVER) or any(
        part == "include" or part.endswith(".dist-info") for part in parts
    )


def prune(roots: list[str], keep: list[str]) -> dict[str, object]:
    """Delete the files of other archs under ``roots``; what was removed, by arch."""
    removed: dict[str, dict[str, int]] = {}
    counted: set[tuple[int, int]] = set()  # (device, inode): a hardlinked file counts once
    seen = 0
    for root in roots:
        entries, folders = _walk(root)
        seen += len(entries)
        for path in to_remove(entries, keep):
            target = Path(root, path)
            stat = target.lstat()
            target.unlink()  # a link goes as a link: what it points to is not ours to judge
            tally = removed.setdefault(str(arch_of(path)), {"files": 0, "bytes": 0})
            tally["files"] += 1
            if (stat.st_dev, stat.st_ino) not in counted:
                counted.add((stat.st_dev, stat.st_ino))
                tally["bytes"] += stat.st_size
        for folder in reversed(to_remove(folders, keep)):  # per-arch folders, emptied
            target = Path(root, folder)
            if not any(target.iterdir()):
                target.rmdir()
    return {
        "kept_archs": sorted(keep),
        "roots": roots,
        "files_seen": seen,
        "removed_files": sum(t["files"] for t in removed.values()),
        "removed_bytes": sum(t["bytes"] for t in removed.values()),
        "removed_by_arch": removed,
    }


def _walk(root: str) -> tuple[list[str], list[str]]:
    """What lies under ``root``, as paths relative to it: entries to delete one by one
    (files and links, links to folders included) and real folders, each sorted."""
    entries: list[str] = []
    folders: list[str] = []
    for folder, dirs, names in os.walk(root):  # never descends into a linked folder
        below = Path(folder).relative_to(root)
        entries += [str(below / name) for name in names]
        for name in dirs:
            linked = Path(folder, name).is_symlink()
            (entries if linked else folders).append(str(below / name))
    return sorted(entries), sorted(folders)


def main(argv: list[str]) -> int:
    import argparse  # here: every run of the graph imports KNOWN_ARCHS, none this command line

    parser = argparse.ArgumentParser(description="Remove GPU kernel files of other archs.")
    parser.add_argument("--keep", required=True, help="archs to keep, e.g. gfx942,gfx950")
    parser.add_argument("--report", help="write what was removed here, as JSON")
    parser.add_argument("roots", nargs="+")
    args = parser.parse_args(argv)
    keep = [arch for arch in re.split(r"[,;]", args.keep) if arch]
    unknown = [arch for arch in keep if arch not in KNOWN_ARCHS]
    if unknown:
        parser.error(f"unknown arch {unknown[0]!r}")
    roots = [found for root in args.roots for found in sorted(glob.glob(root))]  # noqa: PTH207 (absolute patterns)
    report = prune([root for root in roots if Path(root).is_dir()], keep)
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(json.dumps(report, indent=1, sort_keys=True))
    print(
        f"prune: removed {report['removed_files']} files, {report['removed_bytes']} bytes "
        f"of archs outside {','.join(keep)} ({report['files_seen']} files seen)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
