"""The docs generated from pins.toml are committed fresh: CI fails when they are stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, run_doit
from test_layers import FOLDERS

import stages
from rocmgraph.building import dockerfiles
from rocmgraph.cli.variables import Variables
from rocmgraph.commands import docs
from rocmgraph.graph.invocation import Options, Run


def real_run() -> Run:
    return Run(Options(pins=str(ROOT / "pins.toml")), stages.graph())


def test_the_key_versions_are_fresh() -> None:
    assert docs.VERSIONS.read_text() == docs.key_versions(real_run().pins), (
        "stale: run `doit render` and commit"
    )


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


def test_the_layout_names_every_floor_and_module() -> None:
    """docs/layout.md matches the tree: a row per floor of tests/test_layers.py, in which
    every module of the floor is named, and every path it names exists."""
    text = (ROOT / "docs" / "layout.md").read_text()
    rows = dict(re.findall(r"(?m)^\| `(\w+)/` \| [^|]+ \| ([^|]+) \|$", text))
    assert set(rows) == set(FOLDERS)
    for floor, cell in rows.items():
        named = set(re.findall(r"`(\w+)`", cell))
        modules = {p.stem for p in (ROOT / "rocmgraph" / floor).glob("*.py")} - {"__init__"}
        assert named == modules, floor
    wheels = {p.stem for p in (ROOT / "wheelfiles").glob("*.py")} - {"__init__"}
    assert wheels <= set(re.findall(r"`(\w+)`", text))
    for name in re.findall(r"`([\w./-]*/[\w./-]*|[\w./-]+\.(?:py|toml))`", text):
        places = (ROOT / name, ROOT / "rocmgraph" / name)  # a floor is named as common/
        assert any(place.exists() for place in places), f"docs/layout.md names {name}"


README = ROOT / "README.md"
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]


def test_the_readme_is_short_and_links_every_doc() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 100
    linked = set(re.findall(r"\]\(([^)#]+)\)", text))
    assert {str(path.relative_to(ROOT)) for path in DOCS} <= linked


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda path: path.name)
def test_every_link_leads_somewhere(path: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links {target}"


def test_the_commands_doc_names_every_command() -> None:
    """Every command doit lists is in the README's table and in docs/commands.md's: a task
    of a group (build:vllm, bump:all) by its group, since a group's tasks are one per stage
    or source."""
    listed = {task.split(":")[0] for task in run_doit("list", "-q").stdout.split()}
    for path in (README, ROOT / "docs" / "commands.md"):
        named = set(re.findall(r"(?m)^\| `doit (\w+)", path.read_text()))
        assert sorted(listed - named) == [], path.name


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
