"""The other package managers' command lines: which words of an install are packages, and
whether each names one version.

``apt-get install -y -o Dpkg::Options::=--force-confnew rocm=6.4.1-83 ./x.deb``
installs one package of a registry, pinned: option values and local files are
not packages. Each manager is a row of one table (``MANAGERS``): the commands
that run it, the subcommands that install, the options that take a value, and
how a pin is written (``name=version``, ``name@version``, dnf's
``name-version-release``, cargo's ``--version``). ``apt-get upgrade`` and
``dnf update`` with no package move every installed package to the newest.
pipx takes pip's requirements, and is judged as pip is (rocmgraph.dockerfile.pipargs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmgraph.dockerfile.pipargs import Judged, Verdict, names, written_range
from rocmgraph.dockerfile.pipargs import judge as judge_requirement

_SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
_COMMIT = r"[0-9a-f]{40}"
_PIP = re.compile("(?!)")  # pip's requirements are read by pip's rules, not a pattern


@dataclass(frozen=True)
class Manager:
    name: str  # as findings name it: a Kind of rocmgraph.dockerfile.audit
    commands: frozenset[str]  # the commands that run it
    verbs: frozenset[str]  # its subcommands that install what they are given
    takes_value: frozenset[str]  # options whose value is the next word, unless --opt=value
    # a package as written: its name, then (group "version") the version it asks for
    spec: re.Pattern[str]
    exact: re.Pattern[str]  # a package written with one version
    # a file or folder, not a package of a registry, whatever variables it holds
    local: re.Pattern[str]
    written: str  # how a version is written, for "unpinned: no ..."
    requirements: bool = False  # the packages are pip's requirements (pipx)
    version_options: frozenset[str] = frozenset()  # options whose value pins every package
    source_options: frozenset[str] = frozenset()  # options whose value is what is installed
    local_options: frozenset[str] = frozenset()  # options that install a folder of the build
    # with no package named, these subcommands move every installed package to the newest
    everything: frozenset[str] = frozenset()
    leading: frozenset[str] = frozenset()  # words before the subcommand (yarn's global)
    into: frozenset[str] = frozenset()  # subcommands whose first word is what they add to


def _spec(separator: str) -> re.Pattern[str]:
    """``name<separator>version``: a scoped npm name (``@scope/x``) keeps its first ``@``."""
    return re.compile(rf"(?P<name>@?[^{separator}\s]+)(?:[{separator}](?P<version>.*))?", re.S)


# What an npm registry's clients write: name@version, a commit of a git URL, a tarball.
_NPM_EXACT = re.compile(rf"@?[^@\s]+@[=v]?{_SEMVER}|.*#{_COMMIT}", re.S)
_NPM_LOCAL = re.compile(r"[./~].*|file:.*|.*\.(?:tgz|tar\.gz)", re.S)
# dnf's [epoch:]version-release (the release starts with a digit: 4.el8, 1.fc39): a name
# ends where it starts, gcc-toolset-12 is a name
_RPM_VERSION = r"(?:\d+:)?\d[^-\s]*-\d[^-\s]*"


MANAGERS = (
    Manager(
        "apt",
        names("apt apt-get"),
        names("install reinstall upgrade dist-upgrade full-upgrade"),
        names("-o --option -t --target-release --default-release -c --config-file"),
        _spec("=/"),  # name=version, or name/release (a release, not a version)
        re.compile(r"[^=/]+=[^*?\[\]]+", re.S),
        re.compile(r"[./~].*|.*\.deb", re.S),
        "=version",
        everything=names("upgrade dist-upgrade full-upgrade"),
    ),
    Manager(
        "dnf",
        names("dnf yum microdnf tdnf"),
        names("install reinstall downgrade upgrade update distro-sync"),
        names(
            "-c --config --installroot --releasever --setopt -x --exclude --repo --repoid "
            "--enablerepo --disablerepo -d --debuglevel -e --errorlevel --forcearch "
            "--downloaddir --destdir --comment"
        ),
        re.compile(rf"(?P<name>.+?)(?:-(?P<version>{_RPM_VERSION}))?", re.S),
        re.compile(rf".+-{_RPM_VERSION}", re.S),
        re.compile(r".*\.rpm", re.S),  # a provide (/usr/bin/x, pkgconfig(z)) is a package
        "-version-release",
        everything=names("upgrade update distro-sync"),
    ),
    Manager(
        "apk",
        names("apk"),
        names("add upgrade"),
        names(
            "-t --virtual -X --repository --repositories-file -p --root --arch --keys-dir "
            "--cache-dir --cache-max-age --timeout"
        ),
        # name=version, or a constraint kept whole: name~1.2, name>=1.2
        re.compile(r"(?P<name>[^=~<>\s]+)(?:(?:=(?=[^~<>])|(?=[~<>]))(?P<version>.+))?", re.S),
        re.compile(r"[^=~<>\s]+=[^=~<>*\s]+", re.S),
        re.compile(r"[./~].*|.*\.apk", re.S),
        "=version",
        everything=names("upgrade"),
    ),
    Manager(
        "pipx",
        names("pipx"),
        names("install inject"),
        names("--python --suffix --pip-args --index-url -i --preinstall --backend --spec"),
        _PIP,
        _PIP,
        re.compile(r"[./~].*", re.S),
        "==version",
        requirements=True,
        into=names("inject"),  # pipx inject <app> x: x goes into the app's environment
    ),
    Manager(
        "conda",
        names("conda mamba micromamba"),
        names("install create"),
        names(
            "-c --channel -n --name -p --prefix --file -f -r --root-prefix --solver "
            "--repodata-fn --platform --subdir"
        ),
        # [channel::]name, then =version, ==version, or a range (>=1.2, 1.2.*)
        re.compile(r"(?:[^:\s]+::)?(?P<name>[^=<>!~\s\[]+)=?=?(?P<version>.+)?", re.S),
        re.compile(r"(?:[^:\s]+::)?[^=<>!~\s\[]+==?[^=*,|<>!~\s]+(?:=[^=*,|\s]+)?", re.S),
        re.compile(r"[./~].*|.*\.(?:tar\.bz2|conda)", re.S),
        "=version",
    ),
    Manager(
        "npm",
        names("npm"),
        names("install i in add"),
        names(
            "--prefix --registry --cache --tag --userconfig --globalconfig --omit --include "
            "--install-strategy --workspace -w --loglevel --before --cafile --proxy "
            "--https-proxy --location"
        ),
        _spec("@"),
        _NPM_EXACT,
        _NPM_LOCAL,
        "@version",
    ),
    Manager(
        "yarn",
        names("yarn"),
        names("add"),
        names("--cwd --registry --modules-folder --cache-folder --global-folder --prefix"),
        _spec("@"),
        _NPM_EXACT,
        _NPM_LOCAL,
        "@version",
        leading=names("global"),
    ),
    Manager(
        "pnpm",
        names("pnpm"),
        names("add"),
        names("-C --dir --filter -F --store-dir --registry --global-dir --config"),
        _spec("@"),
        _NPM_EXACT,
        _NPM_LOCAL,
        "@version",
    ),
    Manager(
        "cargo",
        names("cargo"),
        names("install"),
        names(
            "--version --vers --git --branch --tag --rev --path --root --index --registry "
            "-j --jobs --target --target-dir --features -F --profile --bin --example "
            "--config -Z --color"
        ),
        _spec("@"),
        re.compile(rf"[^@\s]+@(?:=?{_SEMVER}|{_COMMIT})", re.S),
        re.compile(r"[./~].*", re.S),
        "@version, --version or --rev",
        version_options=names("--version --vers --rev --tag --branch"),
        source_options=names("--git"),
        local_options=names("--path"),
    ),
    Manager(
        "go",
        names("go"),
        names("install"),
        names(
            "-C -ldflags -gcflags -asmflags -gccgoflags -tags -mod -modfile -overlay -pkgdir "
            "-p -toolexec -buildmode -compiler -installsuffix -pgo -o"
        ),
        _spec("@"),
        re.compile(rf"[^@\s]+@(?:v{_SEMVER}(?:\+incompatible)?|{_COMMIT})", re.S),
        # without @version: the go.mod of the folder it runs in pins it
        re.compile(r"[^@$`]*", re.S),
        "@version",
    ),
)
BY_COMMAND = {command: manager for manager in MANAGERS for command in manager.commands}


@dataclass(frozen=True)
class Install:
    """The words of an install that name what it installs."""

    packages: tuple[int, ...]  # the indexes of the words that are packages
    version: int | None = None  # of the word an option gives as every package's version
    everything: int | None = None  # of its subcommand, when it moves every installed package


def install_arguments(manager: Manager, args: list[str]) -> Install | None:
    """For the arguments after the command's name: what it installs; None unless it installs.

    An option's value is no package (``-o Dpkg::Options::=--force-confold``); cargo's
    ``--git <url>`` is the package, ``--path`` a folder of the build (nothing installed
    from a registry).
    """
    positional: list[int] = []
    source = version = None
    at = 0
    while at < len(args):
        word = args[at]
        option = word.partition("=")[0]
        valued = word in manager.takes_value and at + 1 < len(args)
        if word == "--":
            positional += range(at + 1, len(args))
            break
        if option in manager.local_options:
            return Install(()) if positional[:1] and args[positional[0]] in manager.verbs else None
        if option in manager.source_options:
            source = at + 1 if valued else at  # --git=<url>: the value is in the word
        elif option in manager.version_options:
            version = at + 1 if valued else at
        elif not word.startswith("-"):
            positional.append(at)
        at += 2 if valued else 1
    while positional[1:] and args[positional[0]] in manager.leading:
        positional.pop(0)  # yarn global add x: add is the subcommand
    if not positional or (verb := args[positional[0]]) not in manager.verbs:
        return None
    if source is not None:
        return Install((source,), version)
    packages = tuple(positional[1 + (verb in manager.into) :])
    if not packages and verb in manager.everything:
        return Install((), everything=positional[0])
    return Install(packages, version)


def loose(manager: Manager, spec: str) -> str:
    """Why a package with variables names no one version whatever they hold: its version is
    written without them and is not one (``$TOOL@latest``); "" when they may pin it."""
    if manager.requirements:
        return written_range(spec)
    match = manager.spec.fullmatch(spec)
    version = match.group("version") if match else None
    if not version or "$" in version or "`" in version or manager.exact.fullmatch(spec):
        return ""
    return f"pinned to {version} whatever its variables hold, not one version"


def judge(manager: Manager, spec: str) -> Judged:
    """Whether one package, as written, names one version (or is a file of the build)."""
    if manager.local.fullmatch(spec):
        return Judged(Verdict.LOCAL)
    if manager.requirements:
        return judge_requirement(spec)
    if manager.exact.fullmatch(spec):
        return Judged(Verdict.PINNED)
    match = manager.spec.fullmatch(spec)
    version = match.group("version") if match else None
    if not version:
        return Judged(Verdict.UNPINNED, f"unpinned: no {manager.written}")
    return Judged(Verdict.UNPINNED, f"pinned to {version}, not one version")
