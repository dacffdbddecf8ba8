"""pip's command line: which words of an install are requirements, and their verdicts."""

from __future__ import annotations

import pytest

from rocmgraph.dockerfile.pipargs import Judged, Verdict, install_arguments, judge, requirement_of

UNHASHED = "installs a URL whose content no hash checks"


def test_only_requirements_are_requirements() -> None:
    args = ["--no-cache-dir", "install", "--trusted-host", "h", "--timeout", "60", "-r", "r.txt",
            "-c", "c.txt", "-U", "x", "-e", "git+https://h/r", "--no-binary", ":all:", "y==1",
            "--", "--z"]  # fmt: skip
    install = install_arguments(args)
    assert install is not None
    assert [args[i] for i in install.requirements] == ["x", "git+https://h/r", "y==1", "--z"]
    assert [args[i] for i in sorted(install.editable)] == ["git+https://h/r"]
    assert install.hashes is False


@pytest.mark.parametrize(
    ("args", "requirements"),
    [
        (["install", "-Ur", "requirements.txt", "torch"], ["torch"]),  # -U, -r and its value
        (["install", "-qr", "r.txt"], []),
        (["install", "-rr.txt", "x"], ["x"]),  # the value in the word itself
        (["install", "-qU", "x"], ["x"]),
        (["install", "--allow-insecure-host", "localhost:8080", "y"], ["y"]),
    ],
)
def test_short_options_grouped_in_one_word_take_their_value(
    args: list[str], requirements: list[str]
) -> None:
    install = install_arguments(args)
    assert install is not None
    assert [args[i] for i in install.requirements] == requirements


@pytest.mark.parametrize(
    ("args", "upgrade"),
    [
        (["install", "-U", "x"], True),
        (["install", "x", "--upgrade"], True),
        (["install", "-qU", "x"], True),
        (["install", "-Ur", "r.txt", "x"], True),
        (["install", "-rU", "x"], False),  # -r's file is named U
        (["install", "--upgrade-strategy", "eager", "x"], False),
        (["install", "x"], False),
    ],
)
def test_upgrade_is_read_however_it_is_spelt(args: list[str], upgrade: bool) -> None:
    install = install_arguments(args)
    assert install is not None
    assert install.upgrade is upgrade


@pytest.mark.parametrize(
    ("args", "requirement"),
    [
        (["install", "-e", "python"], "python"),
        (["install", "--editable", "python[all]"], "python[all]"),
        (["install", "--editable=python"], "python"),
        (["install", "-epython"], "python"),
    ],
)
def test_an_editable_is_a_project_folder(args: list[str], requirement: str) -> None:
    """pip takes a folder or a VCS URL after -e: a bare word is a folder, not a package."""
    install = install_arguments(args)
    assert install is not None
    assert install.editable == set(install.requirements)
    (at,) = install.requirements
    assert requirement_of(args[at], editable=True) == requirement
    assert judge(requirement, editable=True) == Judged(Verdict.LOCAL)
    assert judge(requirement) != Judged(Verdict.LOCAL)


def test_an_editable_vcs_url_is_judged_as_a_url() -> None:
    assert judge("git+https://h/r@" + "0" * 40, editable=True) == Judged(Verdict.PINNED)
    assert judge("git+https://h/r", editable=True).verdict is Verdict.UNPINNED


@pytest.mark.parametrize("args", [["download", "x"], ["uninstall", "x"], ["--version"], []])
def test_only_installs_are_read(args: list[str]) -> None:
    assert install_arguments(args) is None


@pytest.mark.parametrize(
    ("requirement", "judged"),
    [
        ("torch==2.1", Judged(Verdict.PINNED)),
        ("torch[cuda]==2.1; python_version>'3'", Judged(Verdict.PINNED)),
        ("torch===2.1", Judged(Verdict.PINNED)),
        ("torch", Judged(Verdict.UNPINNED, "unpinned: no ==version")),
        ("torch>=2,<3", Judged(Verdict.UNPINNED, "pinned to a range (<3,>=2), not one version")),
        ("a" * 40 + "==1", Judged(Verdict.PINNED)),
        (".", Judged(Verdict.LOCAL)),
        ("./python[dev]", Judged(Verdict.LOCAL)),
        ("/tmp/x.whl", Judged(Verdict.LOCAL)),
        ("x-1.0-py3-none-any.whl", Judged(Verdict.LOCAL)),
        ("file:///src", Judged(Verdict.LOCAL)),
        ("https://h/x.tar.gz#sha256=ab", Judged(Verdict.PINNED)),
        ("https://h/x.tar.gz", Judged(Verdict.UNPINNED, UNHASHED)),
        ("x @ https://h/x.tar.gz", Judged(Verdict.UNPINNED, UNHASHED)),
        ("git+ssh://git@h/r@" + "0" * 40, Judged(Verdict.PINNED)),
        ("x==", Judged(Verdict.UNPINNED, "cannot read 'x==' as a requirement")),
    ],
)  # fmt: skip
def test_verdicts(requirement: str, judged: Judged) -> None:
    assert judge(requirement) == judged


def test_require_hashes_makes_a_url_hashed() -> None:
    assert judge("https://h/x.whl", hashes=True) == Judged(Verdict.PINNED)
