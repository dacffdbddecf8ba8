"""The manifest writer (it runs inside the image): secrets never reach env.txt."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from conftest import ROOT


def writer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "write_manifest", ROOT / "docker/files/write_manifest.py"
    )
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_secret_looking_values_are_redacted_in_env_txt() -> None:
    lines = writer().redact(
        {
            "HF_TOKEN": "hf_abc",
            "AWS_SECRET_ACCESS_KEY": "s3",
            "PIP_INDEX_PASSWORD": "pw",
            "GITHUB_API_KEY": "gh",
            "SSH_KEY": "k",
            "DB_CREDENTIALS": "c",
            "PATH": "/usr/bin",
            "PYTORCH_ROCM_ARCH": "gfx942",
            "KEYBOARD": "us",
        }
    )
    assert lines == [
        "AWS_SECRET_ACCESS_KEY=<redacted>",
        "DB_CREDENTIALS=<redacted>",
        "GITHUB_API_KEY=<redacted>",
        "HF_TOKEN=<redacted>",
        "KEYBOARD=us",
        "PATH=/usr/bin",
        "PIP_INDEX_PASSWORD=<redacted>",
        "PYTORCH_ROCM_ARCH=gfx942",
        "SSH_KEY=<redacted>",
    ]
