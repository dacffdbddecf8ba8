"""Commits spread over a fork's first-parent history from a pin to its branch head, for
benchmarks that replay real upstream bumps (benchmarks/ccache_history.py).

One commit per ISO week (the week's last by committer date, the pin first); a history of
fewer weeks than wanted gives that many commits spread evenly instead. The choice is written
to benchmarks/history.toml, which the benchmarks read back.

    python3 benchmarks/history.py [--vllm-git DIR] [--sglang-git DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import tomli

from rocmgraph.outside import git as git_module
from rocmgraph.outside.proc import CommandFailed

HERE = Path(__file__).resolve().parent
HISTORY = HERE / "history.toml"
MIRRORS = Path("/work/.mirror")  # where the `fetch` of a fork puts its bare repository
WEEKLY, EVEN = "weekly", "even"


@dataclass(frozen=True)
class Fork:
    """A public fork that holds an upstream pin and the history after it."""

    name: str
    repo: str
    pin: str
    branch: str
    at_least: int  # commits wanted, the pin among them


FORKS = (
    Fork("vllm", "rasmith/vllm", "18d87a87dc39c1a50f452b218fdcc3aeec48d18e", "main", 20),
    Fork("sglang", "bytedance-iaas/sglang", "0801cc05ed202544e2e5c67d6b0a1d454de54fca", "main", 10),
)


@dataclass(frozen=True)
class Commit:
    sha: str
    date: datetime  # the committer date


@dataclass(frozen=True)
class Choice:
    """The commits picked on one fork, oldest first (the pin first)."""

    name: str
    repo: str
    branch: str
    pin: str
    head: str
    rule: str  # WEEKLY or EVEN
    commits: tuple[str, ...]


class HistoryError(Exception):
    """A fork's history does not give what the benchmark needs; the message says the fix."""


def week(commit: Commit) -> tuple[int, int]:
    # In UTC, so a week does not depend on where each committer sat.
    year, number, _ = commit.date.astimezone(UTC).isocalendar()
    return year, number


def weekly(history: Sequence[Commit]) -> list[Commit]:
    """The pin (``history[0]``), then each ISO week's last commit, in history's order."""
    weeks: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, commit in enumerate(history[1:], start=1):
        weeks[week(commit)].append(index)
    # The week's last by date; of two at the same second, the later in history.
    last = (max(indices, key=lambda i: (history[i].date, i)) for indices in weeks.values())
    return [history[0], *(history[index] for index in sorted(last))]


def evenly(history: Sequence[Commit], count: int) -> list[Commit]:
    """``count`` commits at even steps along ``history``, its first and last among them."""
    if len(history) <= count:
        return list(history)
    step = (len(history) - 1) / max(count - 1, 1)  # over 1: no two land on one commit
    return [history[index] for index in sorted({round(n * step) for n in range(count)})]


def pick(history: Sequence[Commit], at_least: int) -> tuple[str, list[Commit]]:
    """Weekly commits, or ``at_least`` spread evenly when the history has fewer weeks."""
    chosen = weekly(history)
    if len(chosen) >= at_least:
        return WEEKLY, chosen
    return EVEN, evenly(history, at_least)


def git(git_dir: Path, *args: str) -> str:
    return git_module.git("--git-dir", str(git_dir), *args)


def mirror(repo: str) -> Path:
    """The bare repository `fetch github:<repo>` left under /work/.mirror."""
    found = sorted((MIRRORS / repo.replace("/", "+")).glob("*/HEAD"))
    if not found:
        raise HistoryError(f"no mirror of {repo} under {MIRRORS}: fetch github:{repo} first")
    return found[0].parent


def head(git_dir: Path, fork: Fork) -> str:
    """The branch's head, checked to descend from the pin."""
    sha = git(git_dir, "rev-parse", f"refs/heads/{fork.branch}").strip()
    try:
        git(git_dir, "merge-base", "--is-ancestor", fork.pin, sha)
    except CommandFailed as exc:
        if exc.returncode != 1:  # 1 is git's "no"; anything else, no such commit
            raise HistoryError(f"{fork.repo}: the mirror lacks the pin {fork.pin}") from exc
        raise HistoryError(
            f"{fork.repo}: {fork.branch} ({sha[:10]}) does not descend from the pin "
            f"{fork.pin[:10]}: name another branch of the fork in history.FORKS"
        ) from exc
    return sha


def first_parent(git_dir: Path, pin: str, tip: str) -> list[Commit]:
    """The pin, then each first-parent commit up to ``tip``, oldest first."""
    text = git(git_dir, "log", "--first-parent", "--reverse", "--format=%H %cI", f"{pin}..{tip}")
    pinned = git(git_dir, "log", "-1", "--format=%H %cI", pin)
    return [parse_line(line) for line in (pinned + text).splitlines() if line]


def parse_line(line: str) -> Commit:
    sha, date = line.split()
    return Commit(sha, datetime.fromisoformat(date))


def dates(git_dir: Path, shas: Iterable[str]) -> dict[str, datetime]:
    """Each commit's committer date in UTC, read in one git process."""
    text = git(git_dir, "log", "--no-walk=unsorted", "--format=%H %cI", *shas)
    return {c.sha: c.date.astimezone(UTC) for c in map(parse_line, text.splitlines())}


def choose(fork: Fork, git_dir: Path) -> tuple[Choice, list[Commit]]:
    tip = head(git_dir, fork)
    history = first_parent(git_dir, fork.pin, tip)
    rule, chosen = pick(history, fork.at_least)
    shas = tuple(commit.sha for commit in chosen)
    return Choice(fork.name, fork.repo, fork.branch, fork.pin, tip, rule, shas), history


def rule_comment(choice: Choice, history: Sequence[Commit], at_least: int) -> str:
    weeks = len(weekly(history)) - 1
    if choice.rule == WEEKLY:
        return f"# The history after the pin spans {weeks} ISO weeks: each week's last commit."
    return (
        f"# The history after the pin spans only {weeks} ISO weeks, fewer than the {at_least}\n"
        f"# commits wanted: {len(choice.commits)} commits spread evenly over its "
        f"{len(history)} first-parent commits instead."
    )


def section(choice: Choice, when: Mapping[str, datetime], comment: str) -> str:
    lines = [f"[{choice.name}]", comment]
    for key in ("repo", "branch", "pin", "head", "rule"):
        lines.append(f'{key} = "{getattr(choice, key)}"')
    lines.append("commits = [")
    for sha in choice.commits:
        lines.append(f'    "{sha}",  # {when[sha].astimezone(UTC):%Y-%m-%d %H:%M} UTC')
    return "\n".join([*lines, "]", ""])


HEADER = (
    "# Written by `python3 benchmarks/history.py`: commits of each fork's first-parent\n"
    "# history from the pin to the branch head, the pin first, oldest first.\n"
)


def load(path: Path = HISTORY) -> dict[str, Choice]:
    with path.open("rb") as stream:
        data = tomli.load(stream)
    return {
        name: Choice(name=name, **{**table, "commits": tuple(table["commits"])})
        for name, table in data.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for fork in FORKS:
        parser.add_argument(f"--{fork.name}-git", type=Path, help=f"bare repository of {fork.repo}")
    parser.add_argument("--out", type=Path, default=HISTORY)
    args = parser.parse_args()
    parts = [HEADER]
    for fork in FORKS:
        git_dir = getattr(args, f"{fork.name}_git") or mirror(fork.repo)
        choice, history = choose(fork, git_dir)
        when = {commit.sha: commit.date for commit in history}
        parts.append(section(choice, when, rule_comment(choice, history, fork.at_least)))
        print(f"{fork.name}: {len(choice.commits)} commits ({choice.rule}) of {len(history)}")
    args.out.write_text("\n".join(parts))


if __name__ == "__main__":
    main()
