"""examples/ci/: the GitHub Actions workflows a user copies are workflows GitHub takes (its
schema, as check-jsonschema vendors it: no network), run only doit commands the docs
document with variables doit knows, the build as docs/sharing.md's fleet recipe, and pin
every action by a commit."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_doit
from ruamel.yaml import YAML

from rocmgraph.cli.variables import VARIABLES, Variables

CI = ROOT / "examples" / "ci"
WORKFLOWS = sorted(CI.glob("*.yml"))
SHARING = ROOT / "docs" / "sharing.md"
# A proxy that never answers: a check that reached for the network would fail here.
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
OFFLINE = dict.fromkeys(PROXIES, "http://127.0.0.1:9") | {"NO_PROXY": "", "no_proxy": ""}
# doit's own options the docs show: `doit -n 2 build:image ...` (docs/sharing.md).
OPTIONS = {"-n"}
OPERATOR = re.compile(r"[();<>|&]+")


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         *map(str, paths)],
        env={**os.environ, **OFFLINE},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )  # fmt: skip


def workflow(path: Path) -> Any:
    # ruamel (YAML 1.2, check-jsonschema's own reader) keeps `on:` a key; YAML 1.1 reads True.
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def steps(path: Path) -> list[dict[str, Any]]:
    return [step for job in workflow(path)["jobs"].values() for step in job.get("steps", [])]


def doit_commands(script: str) -> list[list[str]]:
    """Each ``doit ...`` of a shell script: its words after ``doit``, up to a pipe, ``&&``,
    ``;`` or a redirection."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        for at, word in enumerate(words):
            if word == "doit":
                rest = words[at + 1 :]
                end = next((i for i, w in enumerate(rest) if OPERATOR.fullmatch(w)), len(rest))
                found.append(rest[:end])
    return found


def split(command: list[str]) -> tuple[list[str], str, dict[str, str]]:
    """doit's words as its options, its one task and its variables (name -> value)."""
    options: list[str] = []
    tasks: list[str] = []
    variables: dict[str, str] = {}
    words = iter(command)
    for word in words:
        if word.startswith("-"):
            assert word in OPTIONS, f"doit {' '.join(command)}: {word} is no option the docs show"
            options += [word, next(words)]
        elif "=" in word:
            name, value = word.split("=", 1)
            variables[name] = value
        else:
            tasks.append(word)
    assert len(tasks) == 1, f"doit {' '.join(command)}: one task per command"
    return options, tasks[0], variables


def commands(path: Path) -> list[list[str]]:
    found = []
    for step in steps(path):
        if "run" in step:
            # Values reach a script through env:, never pasted into it (script injection).
            assert "${{" not in step["run"], f"{path.name}: an expression in a run: script"
            found += doit_commands(step["run"])
    return found


def test_the_workflows_are_valid_offline() -> None:
    assert [path.name for path in WORKFLOWS] == ["build.yml", "bump.yml"]
    result = check_jsonschema(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


@pytest.mark.parametrize(
    ("line", "broken", "error"),
    [
        ("    runs-on: [self-hosted, linux, x64, rocm-build]\n", "", "'runs-on' is a required"),
        ("\non:\n", "\nno:\n", "'on' is a required property"),
    ],
    ids=["runs-on missing", "on: misspelt"],
)
def test_a_broken_workflow_is_refused(tmp_path: Path, line: str, broken: str, error: str) -> None:
    text = (CI / "build.yml").read_text(encoding="utf-8")
    assert text.count(line) == 1
    copy = tmp_path / "build.yml"
    copy.write_text(text.replace(line, broken), encoding="utf-8")
    result = check_jsonschema(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert error in result.stdout, result.stdout


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_every_action_is_pinned_by_a_commit(path: Path) -> None:
    used = [step["uses"] for step in steps(path) if "uses" in step]
    assert used, path.name
    lines = re.findall(r"(?m)^\s*(?:- )?uses: (\S+) # v\d+\.\d+\.\d+$", path.read_text())
    assert lines == used, f"{path.name}: each uses: on its own line, with a # vX.Y.Z comment"
    for action in used:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", action), action


def test_every_doit_command_is_documented() -> None:
    """Each doit command of the workflows: a task doit lists, of a command the README's or
    docs/commands.md's table documents, with variables doit knows (and, where the value is
    written out, takes)."""
    listed = set(run_doit("list", "--all", "-q").stdout.split())
    documented = {
        group
        for doc in (ROOT / "README.md", ROOT / "docs" / "commands.md")
        for group in re.findall(r"(?m)^\| `doit (\w+)", doc.read_text())
    }
    assert re.search(r"doit -n \d", SHARING.read_text())  # the one option OPTIONS allows
    tasks = []
    for path in WORKFLOWS:
        for command in commands(path):
            _, task, variables = split(command)
            assert task in listed, f"{path.name}: doit {task} is no task"
            assert task.split(":")[0] in documented, f"{path.name}: doit {task} is undocumented"
            assert set(variables) <= set(VARIABLES), f"{path.name}: doit {' '.join(command)}"
            Variables.checked({k: v for k, v in variables.items() if "$" not in v})
            tasks.append(task)
    assert sorted(tasks) == ["audit", "build:image", "bump:all", "bump:all", "plan"]


def test_the_build_is_the_fleet_recipe() -> None:
    """build.yml runs docs/sharing.md's fleet command: its options and variables, the same
    flags; the registry, compile cache and arch come from the repository's settings."""
    block = re.search(r"\*\*A fleet in CI\.\*\*.*?```sh\n(.*?)```", SHARING.read_text(), re.S)
    assert block is not None
    [recipe] = doit_commands(block.group(1))
    [build] = [c for c in commands(CI / "build.yml") if split(c)[1] == "build:image"]
    options, task, variables = split(build)
    recipe_options, recipe_task, recipe_variables = split(recipe)
    # the compile cache, a secret with its password, comes as $VERL_GRAPH_COMPILE_CACHE
    assert (
        "VERL_GRAPH_COMPILE_CACHE: ${{ secrets.COMPILE_CACHE }}" in (CI / "build.yml").read_text()
    )
    given = {*variables, "compile_cache"}
    assert (options, task, given) == (recipe_options, recipe_task, set(recipe_variables))
    written = {name: value for name, value in variables.items() if "$" not in value}
    assert written == {"cache_required": "1", "push": "1"}
    assert written.items() <= recipe_variables.items()
