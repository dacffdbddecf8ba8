"""The manifest writer (it runs inside the image): secrets never reach env.txt."""

from __future__ import annotations

from rocmgraph.inimage import manifest
from rocmgraph.outside.docker import Redactor


def test_secret_looking_values_are_redacted_in_env_txt() -> None:
    lines = manifest.redact(
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


def test_build_logs_are_redacted_with_the_same_rule() -> None:
    redactor = Redactor(
        {"HF_TOKEN": "hf_abcdef", "PATH": "/usr/bin"}, urls=["http://me:pw1234@127.0.0.1/simple"]
    )
    assert redactor("using hf_abcdef and /usr/bin") == "using <redacted> and /usr/bin"
    assert redactor("Looking in http://me:pw1234@127.0.0.1/simple") == (
        "Looking in http://me:<redacted>@127.0.0.1/simple"
    )
