"""Docs generated from the pins: the key versions and release line (docs/versions.md), the
table of the differences from verl's recipes made on purpose (docker/differences.toml, in
docs/following-verl.md), and docker/Dockerfile.rocm, the graph as one file for people who
only run `docker build`.

`doit render` writes them; a test fails when the committed ones are stale.
"""

from __future__ import annotations

from pathlib import Path

from rocmgraph.building import dockerfiles
from rocmgraph.commands import compare
from rocmgraph.common.fsutil import atomic_write_text
from rocmgraph.common.layout import ROOT
from rocmgraph.config.pins import Pins
from rocmgraph.graph.invocation import Run

GENERATED = "<!-- written by `doit render` from pins.toml: edit the pins, not this file -->"
DIFFERENCES_BEGIN = "<!-- differences: written by `doit render` from docker/differences.toml -->"
DIFFERENCES_END = "<!-- end of differences -->"
PINS = ROOT / "pins.toml"  # what the docs are made from
VERSIONS = ROOT / "docs" / "versions.md"
FOLLOWING = ROOT / "docs" / "following-verl.md"
DOCKERFILE = ROOT / "docker" / "Dockerfile.rocm"

TITLES = {  # how verl's README names its sources
    "vllm": "vLLM",
    "sglang": "SGLang",
    "sgl_kernel": "sgl-kernel (SGLang's folder)",
    "verl": "verl",
    "flash_attention": "Flash Attention (CK)",
    "transformer_engine": "TransformerEngine",
    "aiter": "aiter",
    "causal_conv1d": "causal-conv1d",
    "mbridge": "mbridge",
    "torch_memory_saver": "torch_memory_saver",
}
RELEASE_LINE = ("vllm", "sglang", "flash_attention", "transformer_engine", "aiter")


def _at(commit: str, tag: str) -> str:
    return f"@{commit[:9]}" if commit else f"@{tag}" if tag else "(unpinned)"


def _patches(count: int) -> str:
    return f", {count} patch{'es' if count > 1 else ''}" if count else ""


def release_line(pins: Pins) -> str:
    wheels = [
        f"{n}=={w.version}"
        for n, w in pins.wheels.items()
        if n in ("torch", "triton") and w.version
    ]
    sources = [f"{TITLES.get(n, n)} {_at(pins.sources[n].commit, pins.sources[n].tag)}"
               for n in RELEASE_LINE if n in pins.sources]  # fmt: skip
    stack = [f"megatron-core=={v}" for n, v in pins.python.stack.items() if n == "megatron-core"]
    archs = "/".join(pins.build.archs)
    return (
        f"{pins.image.released.replace('-', '/')}: ROCm {pins.rocm.version} software stack: "
        f"{', '.join([*wheels, *sources, *stack])}; targets {archs}."
    )


def key_versions(pins: Pins) -> str:
    rows = [
        ("base image", pins.base.image, pins.base.digest or "digest not locked yet"),
        ("ROCm", pins.rocm.version, ", ".join(repo.url for repo in pins.rocm.repos.values())),
        ("Python", pins.python.version, pins.python.venv),
    ]
    # A base that provides the wheels is checked for their versions: no file is locked.
    unlocked = "in the base image" if "wheels" in pins.base.provides else "file not locked yet"
    rows += [
        (name, w.version or "not pinned", w.file or unlocked) for name, w in pins.wheels.items()
    ]
    for name, source in pins.sources.items():
        at = _at(source.commit, source.tag) + _patches(len(source.patches))
        rows.append((TITLES.get(name, name), source.version or "-", at))
    for group in (pins.python.stack, pins.python.vllm, pins.python.sglang):
        for name, version in group.items():
            patched = _patches(len(pins.python.patches.get(name, ())))
            rows.append((name, version or "not pinned", f"PyPI{patched}"))
    lines = [
        "# Key versions",
        "",
        GENERATED,
        "",
        f"Release: {release_line(pins)}",
        "",
        "| component | version | pinned |",
        "| --- | --- | --- |",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
    ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """``text`` as one cell of a Markdown table."""
    return text.replace("|", "&#124;").replace("<", "&lt;")


def differences_table() -> str:
    """The table of the differences from upstream recipes made on purpose."""
    rows = [
        f"| {d.recipe} | {'<br>'.join(f'`{kind} {key}`' for kind, key in d.facts)} | "
        f"{_cell(d.why)} |"
        for d in compare.read_differences()
    ]
    rows += [f"| both | {_cell(c.what)} | {_cell(c.why)} |" for c in compare.read_choices()]
    return "\n".join(
        [
            DIFFERENCES_BEGIN,
            "",
            "| verl's recipe | facts (as `doit compare` names them) | why |",
            "| --- | --- | --- |",
            *rows,
            "",
            DIFFERENCES_END,
        ]
    )


def following(current: str) -> str:
    """docs/following-verl.md, ``current``, with its table of differences rewritten (added
    at the end if absent)."""
    table = differences_table()
    if DIFFERENCES_BEGIN in current and DIFFERENCES_END in current:
        head, rest = current.split(DIFFERENCES_BEGIN, 1)
        return head + table + rest.split(DIFFERENCES_END, 1)[1]
    return f"{current.rstrip()}\n\n## Differences from verl's recipes, on purpose\n\n{table}\n"


def write(run: Run, *, check: bool = False) -> list[Path]:
    """Write the generated docs (or, with ``check``, only compare); the files that differ."""
    stale = []
    for path, text in (
        (VERSIONS, key_versions(run.pins)),
        (FOLLOWING, following(FOLLOWING.read_text())),
        (DOCKERFILE, dockerfiles.dockerfile(run)),
    ):
        if not path.is_file() or path.read_text() != text:
            if not check:
                atomic_write_text(path, text)
            stale.append(path)
    return stale
