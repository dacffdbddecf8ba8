"""Write /workspace/.manifest: what the image holds and how it was built, as verl does.

    env.txt                  the environment (secret-looking values redacted)
    requirements.txt         pip list
    dpkg-list.txt            dpkg -l
    training_docker_version  the image version
    build.json               every stage: key, pins read, image id; archs, tool version
                             (and what pruning removed, from prune.json)

Runs inside the image with its own Python (the manifest stage copies it in), so it
uses the standard library only. The engine redacts its logs with the same rule.

    python3 manifest.py --dir /workspace/.manifest --version V --build-json build.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# A variable whose name says it holds a secret: its value never reaches a file.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY($|_)|API_?KEY", re.I)
REDACTED = "<redacted>"


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values that must not be shown: those of secret-looking names (long enough to matter)."""
    return sorted({v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= 4}, key=len)


def redact(environ: Mapping[str, str]) -> list[str]:
    """``NAME=value`` lines, sorted, with the values of secret-looking names replaced."""
    return [
        f"{name}={REDACTED if SECRET_NAME.search(name) else value}"
        for name, value in sorted(environ.items())
    ]


def main(argv: list[str]) -> int:
    import argparse  # here: the engine module imports this one for its names, every run

    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--build-json", required=True)
    # a variable of the build's steps, not of the image (an ARG of the stage it builds on)
    parser.add_argument("--build-only", action="append", default=[])
    args = parser.parse_args(argv)
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in args.build_only}
    (out / "env.txt").write_text("\n".join(redact(environ)) + "\n")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "list"], capture_output=True, text=True, check=True
    )
    (out / "requirements.txt").write_text(pip.stdout)
    if shutil.which("dpkg"):
        dpkg = subprocess.run(["dpkg", "-l"], capture_output=True, text=True, check=True)
        (out / "dpkg-list.txt").write_text(dpkg.stdout)
    (out / "training_docker_version").write_text(args.version + "\n")
    build = json.loads(Path(args.build_json).read_text())
    prune = out / "prune.json"
    if prune.is_file():
        build["prune"] = json.loads(prune.read_text())
    (out / "build.json").write_text(json.dumps(build, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
