"""sbom-facts.json: what the graph knows of the packages an image may hold, for the SBOM the
manifest stage writes (rocmgraph/inimage/sbom.py) from what the image really holds.

Every fact comes from a locked input, so the SBOM says where each package's bytes came from
by the same hashes the keys are made of:

- a pinned wheel: its file, index and sha256;
- a source built here: its repository, full commit and the patches applied, by sha256;
- a wheel or source the base image provides: what the pins name, whose version is checked;
- a file a stage's closure fetched (hermetic builds): its URL and sha256, and the stage;
- the base image: its reference and digest (what it holds is listed inside the image, by
  the base stage, before anything is installed).

The facts are a function of the manifest stage's key: every pin they read is an input of
one of its ancestors, and each closure is in its stage's key by its sha256.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import rocmgraph
from rocmgraph.common import sbomlib
from rocmgraph.common.fsutil import sha256_file
from rocmgraph.common.layout import ROOT
from rocmgraph.graph.invocation import Run
from rocmgraph.graph.keys import Json

FACTS = "sbom-facts.json"
LIBRARY_DIR = "sbomlib"


def normal(name: str) -> str:
    """A Python distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def facts(run: Run) -> dict[str, Json]:
    """What the SBOM of ``run``'s image says of each package the pins and closures name."""
    pins = run.pins
    # What the base image provides is only checked by version: its bytes are the base's.
    provided = set(pins.base.provides)
    wheels: dict[str, Json] = {
        normal(name): {
            "version": w.version,
            "file": w.file,
            "sha256": w.sha256,
            "index": w.index,
            "provided": "wheels" in provided,
        }
        for name, w in sorted(pins.wheels.items())
        if w.sha256  # locked: an unlocked wheel is no fact yet (`doit lock` pins it)
    }
    sources: dict[str, Json] = {
        normal(source.dist or name): {
            "source": name,
            "repo": source.repo,
            "commit": source.commit,
            "patches": [_patch(path) for path in source.patches],
            "provided": name in provided,
        }
        for name, source in sorted(pins.sources.items())
    }
    fetched: dict[str, Json] = {}
    for stage in run.graph.order:
        sealed = run.sealed(stage)
        for item in sealed.files if sealed is not None else ():
            name = normal(item.name) if item.kind == "python" else item.name
            fetched.setdefault(
                f"{item.kind}:{name}=={item.version}",
                {"file": item.file, "url": item.url, "sha256": item.sha256, "stage": stage},
            )
    base = pins.base.image + (f"@{pins.base.digest}" if pins.base.digest else "")
    return {
        "tool": {"name": "verl-rocm-graph", "version": rocmgraph.__version__},
        "image": {
            "name": pins.image.name,
            "version": pins.image.version,
            "arch": list(run.archs),
        },
        "base": base,
        "wheels": wheels,
        "sources": sources,
        "fetched": dict(sorted(fetched.items())),
    }


def _patch(path: str) -> Json:
    return {"file": path, "sha256": sha256_file(ROOT / path)}


def write(run: Run, dest: Path) -> None:
    """The facts, and the library that writes the SBOM from them (its files, as this tool's
    environment has them), into the context ``dest`` of the manifest stage."""
    sbomlib.check_installed()
    (dest / FACTS).write_text(json.dumps(facts(run), indent=1, sort_keys=True) + "\n")
    folder = dest / LIBRARY_DIR
    for name in sbomlib.PINNED:
        for file in metadata.files(name) or ():
            if (
                ".dist-info" in file.parts[0]
                or "__pycache__" in file.parts
                or file.suffix == ".pyc"
            ):
                continue
            target = folder / file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(Path(str(file.locate())).read_bytes())
