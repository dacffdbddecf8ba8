"""The other package managers' command lines: which words are packages, and their verdicts."""

from __future__ import annotations

import pytest

from rocmgraph.dockerfile.audit import Kind
from rocmgraph.dockerfile.managers import BY_COMMAND, MANAGERS, install_arguments, judge
from rocmgraph.dockerfile.pipargs import Judged, Verdict


def test_every_manager_is_a_kind_of_finding_and_no_command_runs_two() -> None:
    assert {manager.name for manager in MANAGERS} <= set(Kind)
    assert sum(len(manager.commands) for manager in MANAGERS) == len(BY_COMMAND)


@pytest.mark.parametrize(
    ("command", "packages"),
    [
        ("apt-get -y -o Dpkg::Options::=--force-confold install -t jammy a b=1", ["a", "b=1"]),
        ("apt-get update", None),
        ("apt-get install -y", []),
        ("conda install -c conda-forge -n base --file r.txt x -- -y", ["x", "-y"]),
        ("conda env create -f e.yml", None),
        ("npm i --prefix /p -g x@1.0.0", ["x@1.0.0"]),
        ("go install -ldflags=-s -tags netgo x@v1.2.3", ["x@v1.2.3"]),
        ("cargo install --locked --root /r x y", ["x", "y"]),
        ("cargo install --git https://h/r --rev abc x", ["https://h/r"]),
        ("cargo install --path .", []),
        ("pipx install --suffix 2 --python python3.12 x", ["x"]),
        ("pipx inject --pip-args=-q app x y", ["x", "y"]),  # app: what x and y go into
        ("dnf install -y --setopt=a=b --enablerepo crb -x kernel x", ["x"]),
        ("microdnf remove x", None),
        ("apk add --no-cache --virtual .deps -X https://h/r x", ["x"]),
        ("apk del .deps", None),
        ("yarn global add --prefix /usr x@1.0.0", ["x@1.0.0"]),
        ("yarn install --frozen-lockfile", None),
        ("pnpm add -g --store-dir /s x", ["x"]),
        ("apt-get -y upgrade", []),  # every package: one finding, no package
    ],
)
def test_option_values_and_other_subcommands_are_no_packages(
    command: str, packages: list[str] | None
) -> None:
    name, *args = command.split()
    found = install_arguments(BY_COMMAND[name], args)
    assert (None if found is None else [args[i] for i in found.packages]) == packages


@pytest.mark.parametrize(
    ("command", "everything"),
    [("apt-get -y dist-upgrade", 1), ("yum update", 0), ("apk upgrade -a", 0),
     ("dnf update -y x", None), ("apt-get install -y", None)],
)  # fmt: skip
def test_an_upgrade_that_names_no_package_moves_every_package(
    command: str, everything: int | None
) -> None:
    name, *args = command.split()
    found = install_arguments(BY_COMMAND[name], args)
    assert found is not None
    assert found.everything == everything


def test_a_version_option_is_every_packages_version() -> None:
    args = ["install", "x", "--version", "1.2.3"]
    found = install_arguments(BY_COMMAND["cargo"], args)
    assert found is not None
    assert (found.packages, found.version) == ((1,), 3)


@pytest.mark.parametrize(
    ("command", "spec", "judged"),
    [
        ("apt", "x:amd64=1.0-1", Judged(Verdict.PINNED)),
        ("apt", "./x.deb", Judged(Verdict.LOCAL)),
        ("apt", "$DEB.deb", Judged(Verdict.LOCAL)),  # a file, whatever it is called
        ("conda", "conda-forge::x=1.0=h1", Judged(Verdict.PINNED)),
        ("conda", "x=1.*", Judged(Verdict.UNPINNED, "pinned to 1.*, not one version")),
        ("npm", "x@1.2.3-rc.1", Judged(Verdict.PINNED)),
        ("npm", "github:a/b#" + "a" * 40, Judged(Verdict.PINNED)),
        ("npm", "x.tgz", Judged(Verdict.LOCAL)),
        ("go", "example.com/x", Judged(Verdict.LOCAL)),  # the go.mod where it runs pins it
        ("go", "x@" + "a" * 40, Judged(Verdict.PINNED)),
        ("go", "x@v1", Judged(Verdict.UNPINNED, "pinned to v1, not one version")),
        ("cargo", "x@=1.2.3", Judged(Verdict.PINNED)),
        ("cargo", "x@1.2", Judged(Verdict.UNPINNED, "pinned to 1.2, not one version")),
        ("pipx", "x>=1", Judged(Verdict.UNPINNED, "pinned to a range (>=1), not one version")),
        ("dnf", "x-1:2.0-3.el9.noarch", Judged(Verdict.PINNED)),
        ("dnf", "x-2.0", Judged(Verdict.UNPINNED, "unpinned: no -version-release")),
        ("dnf", "gcc-toolset-12-gcc", Judged(Verdict.UNPINNED, "unpinned: no -version-release")),
        ("dnf", "@development", Judged(Verdict.UNPINNED, "unpinned: no -version-release")),
        ("dnf", "./x-1.0-1.rpm", Judged(Verdict.LOCAL)),
        ("apk", "x=1.0-r0", Judged(Verdict.PINNED)),
        ("apk", "x=1.*", Judged(Verdict.UNPINNED, "pinned to 1.*, not one version")),
        ("apk", "x<2", Judged(Verdict.UNPINNED, "pinned to <2, not one version")),
        ("apk", "/tmp/x.apk", Judged(Verdict.LOCAL)),
        ("yarn", "@scope/x@1.2.3", Judged(Verdict.PINNED)),
        ("pnpm", "x@latest", Judged(Verdict.UNPINNED, "pinned to latest, not one version")),
    ],
)
def test_pins_are_judged_as_each_manager_writes_them(
    command: str, spec: str, judged: Judged
) -> None:
    assert judge(BY_COMMAND[command], spec) == judged
