"""The docs generated from pins.toml are committed fresh: CI fails when they are stale."""

from __future__ import annotations

import re

from conftest import ROOT, run_doit

import stages
from rocmgraph.build import dockerfiles
from rocmgraph.cli.tasks import Variables
from rocmgraph.commands import docs
from rocmgraph.graph.invocation import Options, Run


def real_run() -> Run:
    return Run(Options(pins=str(ROOT / "pins.toml")), stages.graph())


def test_the_readme_key_versions_are_fresh() -> None:
    readme = docs.README.read_text()
    assert docs.readme(readme, real_run().pins) == readme, "stale: run `doit render` and commit"


def test_the_single_file_dockerfile_is_fresh() -> None:
    assert docs.DOCKERFILE.read_text() == dockerfiles.dockerfile(real_run()), (
        "stale: run `doit render` and commit"
    )


def test_the_release_line_names_the_pins() -> None:
    assert docs.release_line(real_run().pins) == (
        "2026/07/20: ROCm 7.14 software stack: torch==2.12.0, triton==3.7.0, vLLM @18d87a87d, "
        "SGLang @0801cc05e, Flash Attention (CK) @v2.8.3, TransformerEngine @e6ede467, "
        "aiter @b5e03ed19, megatron-core==0.18.0; targets gfx942/gfx950."
    )


def test_the_single_file_names_each_stage_and_its_parent() -> None:
    text = docs.DOCKERFILE.read_text()
    for stage in stages.graph():
        assert f" AS {stage.name}\n" in text
    assert "FROM wheels AS vllm\n" in text
    assert "--mount=type=bind,from=vllm,source=/dist,target=/dist/vllm" in text
    # No stage image is left as an argument (the manifest's GIT_COMMIT_TAG is one of verl's own).
    assert not re.search(r"\$\{[A-Z_]+_IMAGE\}", text)


def test_doit_render_check_says_whether_the_docs_are_fresh() -> None:
    result = run_doit("render", "check=1")
    assert result.returncode == 0, result.stderr
    assert "docs are fresh" in result.stdout


def test_the_readme_layout_names_every_module() -> None:
    """The Layout section of the README matches the tree: every module of the packages is
    named there, and every path it names exists."""
    text = docs.README.read_text()
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([^`\s]+)`", layout))
    for package in ("rocmgraph", "rocmgraph/outside", "rocmgraph/inimage", "wheels"):
        for path in sorted((ROOT / package).glob("*.py")):
            if path.stem != "__init__":
                assert path.stem in named, f"README's Layout does not name {path}"
    for name in named:
        if "/" in name or name.endswith((".py", ".toml")):
            assert (ROOT / name.rstrip("/")).exists(), f"README's Layout names {name}"


def test_the_real_profile_guide_runs_only_tasks_and_variables_doit_has() -> None:
    """docs/real-profile.md's commands name tasks doit lists and variables it accepts (a
    renamed task or variable fails here, not in a user's hands)."""
    listed = set(run_doit("list", "--all", "-q").stdout.split())
    commands = re.findall(r"`doit ([^`]+)`", (ROOT / "docs" / "real-profile.md").read_text())
    assert {command.split()[0] for command in commands} == {
        "lock", "preflight", "plan", "build:image", "verify", "audit"
    }  # fmt: skip
    for command in commands:
        task, *variables = command.split()
        assert task in listed, command
        Variables.checked(dict(variable.split("=", 1) for variable in variables))
