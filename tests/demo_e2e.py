"""The end-to-end tests' shared demo: one build of profile=demo, and how to look at images.

The tests of test_e2e.py run in order on one copy of the demo's pins and share
its build; others start from a fresh copy of the same pins (``Demo.copy``), in
the same image namespace (verl-e2e), so that every stage whose inputs they do
not change is the one already built. The namespace is emptied first, so the
first build is cold whatever the machine built before.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import edit_toml, need_docker, run_doit

from rocmgraph.common.engine import ImageStore
from rocmgraph.demo.machine import second_engine
from rocmgraph.demo.profile import pins_path

DOCKER = "/usr/bin/docker"
SITE = "/opt/venv/lib/python3.11/site-packages"


@dataclass
class E2E:
    pins: Path
    profile: str = "demo"
    hermetic: bool = False  # True: as users build, each stage from its locked closure or refused

    @property
    def where(self) -> tuple[str, ...]:
        """The variables of every doit command on these pins: the profile, the pins, and
        hermetic=0 where a test is of something else (it locks no closures: their builds
        cost a minute each, and test_verify_hermetic.py has them)."""
        return (
            f"profile={self.profile}",
            f"pins={self.pins}",
            *([] if self.hermetic else ["hermetic=0"]),
        )

    def edit(self, path: list[str], value: object) -> None:
        self.pins.write_text(edit_toml(self.pins.read_text(), path, value))

    def build(
        self,
        arch: str = "gfx942",
        *doit: str,
        target: str = "build:image",
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run_doit(*doit, target, *self.where, f"arch={arch}", env=env)

    def plan(
        self,
        arch: str = "gfx942",
        env: dict[str, str] | None = None,
        variables: tuple[str, ...] = (),
    ) -> dict[str, dict[str, object]]:
        result = run_doit(
            "plan", *self.where, f"arch={arch}", "format=json",
            *variables, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return {stage["name"]: stage for stage in json.loads(result.stdout)["stages"]}

    def image(self, stage: str, arch: str = "gfx942") -> str:
        """The image of one stage, as these pins key it."""
        return str(self.plan(arch)[stage]["image"])

    def log(self, stage: str) -> Path:
        return self.pins.parent / ".build" / "logs" / f"{stage}.log"


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout


def built(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The stages this run built (its `built <stage> <key> in <time>` lines)."""
    return set(re.findall(r"^built (\w+) [0-9a-f]{12} in ", result.stdout, re.MULTILINE))


def nothing_to_build(
    result: subprocess.CompletedProcess[str], tag: str = "verl-e2e:gfx942"
) -> bool:
    """Whether a run was a no-op, and said so in one line, as a no-op does."""
    return (
        result.returncode == 0
        and re.fullmatch(rf"nothing to build: {tag} is [0-9a-f]{{12}}\n", result.stdout) is not None
    )


MASKS = [
    (re.compile(r"\b[0-9a-f]{64}\b"), "<key>"),
    (re.compile(r"\b[0-9a-f]{12}\b"), "<key12>"),
    (re.compile(r"\b\d+(\.\d+)? (s|min \d+ s)\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? (B|kB|MB|GB)\b"), "<size>"),
    (re.compile(r" \(ccache .*\)$"), ""),  # there when BuildKit's cache did not skip the compile
    (re.compile(r"this run: \S+/run\.json"), "this run: <state>/run.json"),
]


def masked(text: str) -> list[str]:
    """``text``'s lines with what changes from run to run (keys, times, sizes, ccache's
    figures, paths) masked, and the spaces that align a table (by their widths) as one."""
    lines = []
    for line in text.splitlines():
        shown = line
        for pattern, mask in MASKS:
            shown = pattern.sub(mask, shown)
        lines.append(" ".join(shown.split()))
    return lines


def image_ids(namespace: str = "verl-e2e") -> dict[str, str]:
    """Stage -> image id, for the stage images of a namespace."""
    out = docker("image", "ls", "--no-trunc", "--format", "{{.Repository}} {{.Tag}} {{.ID}}")
    ids = {}
    for line in out.splitlines():
        repo, tag, image = line.split()
        if repo.startswith(f"{namespace}/"):
            ids[f"{repo.removeprefix(f'{namespace}/')}:{tag}"] = image
    return ids


def empty_namespace(namespace: str) -> None:
    """Remove every image of ``namespace``: what is built next is built cold."""
    stale = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", f"{namespace}/*").split()
    stale += docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", namespace).split()
    if stale:
        docker("image", "rm", "--force", *stale)


def run_in(image: str, code: str) -> str:
    """``code`` run by the image's Python, from / (so that a folder named like a package
    in the working directory is not what it imports)."""
    return docker(
        "run", "--rm", "--network=none", "--workdir=/", image, "python", "-c", code
    ).strip()


def shell(image: str, script: str) -> list[str]:
    return docker("run", "--rm", "--network=none", image, "sh", "-c", script).split()


def files(image: str, folder: str) -> dict[str, bytes]:
    """The files under ``folder`` of an image that may have no shell (a stage that keeps
    only what the next one takes): name -> content, read from a container never started."""
    container = docker("create", image, "none").strip()
    try:
        tar = subprocess.run([DOCKER, "export", container], capture_output=True, check=True)
    finally:
        docker("rm", container)
    found = {}
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        for member in archive.getmembers():
            name = member.name.lstrip("/")
            if member.isfile() and name.startswith(folder.strip("/") + "/"):
                extracted = archive.extractfile(member)
                assert extracted is not None
                found[name[len(folder.strip("/")) + 1 :]] = extracted.read()
    return found


def wheels(image: str) -> list[str]:
    """The wheels a source stage built (its image holds them alone, under /dist)."""
    return sorted(files(image, "/dist"))


def wheel_member(image: str, wheel: str, member: str) -> str:
    """One file of a wheel a source stage built."""
    data = files(image, "/dist")[Path(wheel).name]
    return zipfile.ZipFile(io.BytesIO(data)).read(member).decode()


def labels(image: str) -> dict[str, str]:
    return dict(
        json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", image))
    )


def size(image: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", image))


def layers(image: str) -> list[str]:
    """The diff ids of ``image``'s layers, bottom first."""
    return list(
        json.loads(docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", image))
    )


def manifest_file(image: str, name: str) -> str:
    return docker("run", "--rm", "--network=none", image, "cat", f"/workspace/.manifest/{name}")


def log_lines(path: Path) -> list[str]:
    """A stage log's lines without BuildKit's step and time prefix (``#9 0.488 ``)."""
    text = path.read_text()
    return [re.sub(r"^#\d+ \d+\.\d+ ", "", line).strip() for line in text.splitlines()]


def copy_of_demo(tmp: Path, profile: str = "demo", name: str = "verl-e2e") -> E2E:
    """A fresh copy of a demo profile's generated (locked) pins, its images named ``name``."""
    tmp.mkdir(parents=True, exist_ok=True)
    world = E2E(tmp / "pins.toml", profile)
    world.pins.write_text(pins_path(profile).read_text())
    world.edit(["image", "name"], name)
    return world


_MAX_JOBS = itertools.count(3)  # the demo's pins say 2


def unbuilt_max_jobs() -> int:
    """A [build].max_jobs no build of this session had: an input of every source stage, so
    they build again, from steps not in BuildKit's cache (the session starts with neither an
    image of its namespace nor a cached step: ``e2e``). A value another test built would
    find its stages built."""
    return next(_MAX_JOBS)


def prepare(profile: str) -> None:
    """Fixtures, base image, locked pins of a profile: what every build of it starts from."""
    need_docker()
    prepared = run_doit("demo", f"profile={profile}")
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr


@pytest.fixture(scope="session")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> E2E:
    """The shared demo of test_e2e.py: its pins, in an empty namespace and an empty BuildKit
    cache. The cold build is cold: an earlier run's rebuilds without cache (`doit verify
    stage=`) leave BuildKit two results of one step, which the cold build would build past
    (a stage again on its parent's image, test_verify.py), not as the suite expects."""
    need_docker()
    empty_namespace("verl-e2e")
    docker("builder", "prune", "--all", "--force")
    prepare("demo")
    return copy_of_demo(tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="session")
def containerd_engine() -> Iterator[dict[str, str]]:
    """A second engine that keeps its images in containerd's store (Docker 29's default):
    the environment that points the docker CLI at it."""
    need_docker()
    with second_engine(ImageStore.CONTAINERD) as env:
        yield env


@pytest.fixture(params=list(ImageStore), ids=[store.value for store in ImageStore])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ImageStore:
    """Each image store in turn: the test's docker and doit commands go to the default
    engine (classic), then to ``containerd_engine``."""
    if request.param is ImageStore.CONTAINERD:
        env = request.getfixturevalue("containerd_engine")
        monkeypatch.setenv("DOCKER_HOST", env["DOCKER_HOST"])
    return ImageStore(request.param)
