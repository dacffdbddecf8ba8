"""The one module that runs the docker CLI: client choice, BuildKit builds, tags, logs.

Client choice: the first client with buildx (``docker buildx build --load``): the
one on PATH, then /usr/bin/docker; ``VERL_GRAPH_DOCKER`` names one. A client
without buildx (docker.io 20.10's, say) is refused in one line that says what to
install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

from rocmgraph.common.engine import BuildJob, EngineFacts, ImageStore, familiar
from rocmgraph.common.errors import BuildFailed, EngineError, GraphToolError
from rocmgraph.common.fsutil import cache_write_bytes
from rocmgraph.inimage import manifest
from rocmgraph.outside import dockerapi, proc
from rocmgraph.outside.proc import CommandFailed, CommandMissing

if TYPE_CHECKING:
    from rocmgraph.common import filetree

DOCKER_ENV = "VERL_GRAPH_DOCKER"
NETWORK_ENV = "VERL_GRAPH_NETWORK"
TAIL = 30  # lines of a failed build's output its error shows
_PRINT = threading.Lock()  # stages building at once (-n 2) print whole lines
# Races in the engine's own bookkeeping between builds that run at once, not the
# Dockerfile's fault: the same build passes when run again.
ENGINE_RACES = (
    # BuildKit gives up on a step that builds sharing it ask for at the same moment on a
    # busy machine (moby/buildkit#990, #1822); seen in one of three cold builds of the demo.
    "flightcontrol: exceeded retry timeout",
    # The containerd store unpacks a new image onto a snapshot another export's collection
    # removed meanwhile (moby/buildkit#6521, open; Docker 29 too); seen in one of two runs
    # of the change-log benchmark.
    "failed to prepare extraction snapshot",
)


@dataclass(frozen=True)
class Client:
    path: str
    version: str  # the client's own: 26.1.5
    buildx: str  # its buildx plugin's: 0.13.1

    def build_argv(self, builder: str = "") -> list[str]:
        """How this client starts a BuildKit build (on buildx's ``builder``, if named)."""
        return [self.path, "buildx", "build", *(["--builder", builder] if builder else [])]


def candidates(environ: dict[str, str] | None = None) -> list[str]:
    environ = dict(os.environ) if environ is None else environ
    if environ.get(DOCKER_ENV):
        return [environ[DOCKER_ENV]]
    found: list[str] = []
    for path in (shutil.which("docker", path=environ.get("PATH")), "/usr/bin/docker"):
        if (
            path
            and os.access(path, os.X_OK)
            and os.path.realpath(path) not in map(os.path.realpath, found)
        ):
            found.append(path)
    return found


def remembered_client(paths: list[str], memo: Path) -> Client:
    """find_client, remembered in ``memo`` (a JSON file) for as long as each candidate's
    path, size and mtime stay the same: probing costs three processes (about 50 ms) a run.
    A memo that cannot be read or written is only a memo: the clients are asked again."""
    stamp = [_stamp(path) for path in paths]
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if known["candidates"] == stamp and isinstance(known["client"]["buildx"], str):
            return Client(**known["client"])  # (a memo of before buildx was required: a bool)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    client = find_client(paths)
    memo_text = json.dumps({"candidates": stamp, "client": dataclasses.asdict(client)})
    cache_write_bytes(memo, memo_text.encode())
    return client


def _stamp(path: str) -> list[object]:
    try:
        status = Path(path).stat()
    except OSError:
        return [path, None]
    return [path, os.path.realpath(path), status.st_size, status.st_mtime_ns]


def find_client(paths: list[str]) -> Client:
    """The first client with buildx; else one line naming each problem and the fix."""
    problems = []
    for path in paths:
        version = _client_version(path)
        if not version:
            problems.append(f"{path}: not a working docker client")
            continue
        buildx = _buildx_version(path)
        if buildx:
            return Client(path, version, buildx)
        problems.append(f"{path} {version} has no buildx")
    if not paths:
        problems.append("no docker client on PATH")
    raise EngineError(
        f"no docker client can build with buildx: {'; '.join(problems)}; install Docker 26 or "
        "later with docker-buildx (bash bootstrap.sh does)"
    )


def _client_version(path: str) -> str:
    """``20.10.24`` from ``docker --version``, which answers without an engine; "" if none."""
    try:
        out = proc.run([path, "--version"], timeout=30).stdout
    except (CommandFailed, CommandMissing):
        return ""
    # "Docker version 20.10.24+dfsg1, build 297e128"
    return out.split("version", 1)[-1].strip().split(",", 1)[0].split("+", 1)[0]


def _buildx_version(path: str) -> str:
    """``0.13.1`` from ``docker buildx version``; "" where the client has no buildx."""
    try:
        out = proc.run([path, "buildx", "version"], timeout=30).stdout
    except (CommandFailed, CommandMissing):
        return ""
    # "github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3", "github.com/docker/buildx v0.30.1 9e66"
    words = out.split()
    return words[1].removeprefix("v").split("+", 1)[0] if len(words) > 1 else "?"


class Redactor:
    """Hides secrets in log lines: values of secret-looking variables, passwords in URLs."""

    def __init__(self, environ: Mapping[str, str], urls: Iterable[str] = ()) -> None:
        values = manifest.secret_values(environ)
        values += [urlsplit(url).password or "" for url in urls]
        self.values = sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)

    def __call__(self, line: str) -> str:
        for value in self.values:
            line = line.replace(value, manifest.REDACTED)
        return line


class DockerEngine:
    """Builds stage images on a Docker engine and answers what exists."""

    def __init__(
        self,
        client: Client,
        log_dir: Path,
        network: str = "",
        out: TextIO | None = None,
        *,
        host: str = "",
        builder: str = "",
        store: ImageStore | None = None,
    ) -> None:
        self.client = client
        self.log_dir = log_dir
        self.network = network
        self.out = out or sys.stdout
        # The engine, as DOCKER_HOST names it ("": the client's own choice), and the buildx
        # builder its builds run on ("": the engine's own BuildKit).
        self.host = host
        self.builder = builder
        self._store = store  # where the engine keeps its images (None: asked when needed)
        # What the engine said of each image asked about, until something changes: over its
        # socket, one image at a time; or, where there is no local socket, the CLI's list.
        self._inspected: dict[str, dict[str, object] | None] = {}
        self._tags: dict[str, str] | None = None
        self._socket = dockerapi.local_socket(self._environ())

    @classmethod
    def connect(
        cls,
        log_dir: Path,
        network: str | None = None,
        memo: Path | None = None,
        host: str = "",
        builder: str = "",
    ) -> DockerEngine:
        """An engine behind the first client that can build (the choice remembered in
        ``memo``, if given); the engine itself is asked only when first needed (an engine
        that does not answer fails that call)."""
        found = candidates()
        client = remembered_client(found, memo) if memo else find_client(found)
        network = os.environ.get(NETWORK_ENV, "") if network is None else network
        if builder and (context := _context_host(client, builder)):
            host, builder = context, ""  # where its builds keep their images: ask there
        return cls(client, log_dir, network, host=host, builder=builder)

    @property
    def name(self) -> str:
        """How a person names this engine: its DOCKER_HOST, or "local"."""
        return self.host or "local"

    def facts(self) -> EngineFacts:
        """The engine's version, the client's buildx, and where the engine keeps images."""
        info = json.loads(self._docker("info", "--format", "{{json .}}"))
        status = dict(pair for pair in info.get("DriverStatus") or [] if len(pair) == 2)
        containerd = status.get("driver-type") == "io.containerd.snapshotter.v1"
        server = str(info.get("ServerVersion", "?")).split("+", 1)[0]
        return EngineFacts(
            server, self.client.buildx, ImageStore.CONTAINERD if containerd else ImageStore.CLASSIC
        )

    @property
    def store(self) -> ImageStore:
        if self._store is None:
            self._store = self.facts().store
        return self._store

    def _output(self) -> list[str]:
        """Where a build's image goes: into this engine. On the containerd store, with its
        new layers compressed by zstd at level 1: gzip, the default, made exporting a stage
        image cost more than its steps (a cold build of the demo: 87.8 s against 59.6 s).
        A builder of another driver loads it here (a tarball through the client)."""
        if not self.builder and self.store is ImageStore.CONTAINERD:
            return ["--output", "type=image,compression=zstd,compression-level=1"]
        return ["--load"]

    def _environ(self) -> dict[str, str]:
        """The environment the client runs in: pointed at this engine, if it names one."""
        return {**os.environ, **({"DOCKER_HOST": self.host} if self.host else {})}

    # ------------------------------------------------------------ queries

    def _docker(self, *args: str) -> str:
        try:
            return proc.run([self.client.path, *args], timeout=600, env=self._environ()).stdout
        except CommandFailed as exc:
            raise self._failed(exc) from None

    def _transfer(self, *args: str) -> None:
        """``docker push`` or ``docker pull``: streamed, as a build is, so that an interrupt
        stops it (Ctrl-C waited for every queued push), and with no time limit. A stage of
        the real image holds tens of GB, which take as long as the link takes: ``_docker``'s
        600 s cut such a pull, and the stage was then built again, for hours."""
        said: deque[str] = deque(maxlen=20)
        argv = [self.client.path, *args]
        returncode = proc.stream(argv, said.append, env=self._environ())
        if returncode != 0:
            raise self._failed(CommandFailed(argv, returncode, "\n".join(said)))

    def _failed(self, exc: CommandFailed) -> GraphToolError:
        """What a failed docker command says: that no engine answers, where none does."""
        if (
            "Cannot connect to the Docker daemon" in exc.stderr
            or "Is the docker daemon" in exc.stderr
        ):
            where = f" at {self.host}" if self.host else ""
            return EngineError(
                f"cannot reach the Docker engine{where} with {self.client.path} "
                f"({_last(exc.stderr)}); start it (dockerd, or systemctl start docker)"
            )
        return exc

    def _inspect(self, ref: str) -> dict[str, object] | None:
        """``docker image inspect ref`` (None: no such image) from the engine's socket, asked
        once per ref until something changes; raises NoAnswer where no socket answers."""
        known = self._inspected  # a build in another thread may start a new one meanwhile
        if ref in known:
            return known[ref]
        if self._socket is None:
            raise dockerapi.NoAnswer("no local socket")
        try:
            found = known[ref] = dockerapi.inspect(self._socket, ref)
        except dockerapi.NoAnswer:
            self._socket = None  # the CLI from now on, which says what is wrong
            raise
        return found

    def _inspected_or_cli(self, ref: str) -> dict[str, object]:
        """``docker image inspect ref``: from the socket, else the CLI (whose error names a
        missing image)."""
        with contextlib.suppress(dockerapi.NoAnswer):
            found = self._inspect(ref)
            if found is not None:
                return found
        listed = json.loads(self._docker("image", "inspect", ref))
        return listed[0] if isinstance(listed, list) and isinstance(listed[0], dict) else {}

    def _tags_listed(self) -> dict[str, str]:
        """Every tagged image, ``repo:tag`` -> image id, as the CLI lists them (one call per
        run, kept up to date): where no socket answers, one process beats one per image."""
        tags = self._tags  # a build in another thread may forget it meanwhile
        if tags is None:
            out = self._docker(
                "image", "ls", "--no-trunc", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"
            )
            tags = self._tags = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        return tags

    def image_exists(self, ref: str) -> bool:
        return self.image_id(ref) is not None

    def refresh(self) -> None:
        self._forget()

    def _forget(self) -> None:
        self._inspected, self._tags = {}, None

    def image_ids(self, refs: Sequence[str]) -> dict[str, str | None]:
        """Over the socket, the refs not asked yet side by side; else the CLI's list."""
        known = self._inspected  # answers from before a change go with it, not after it
        unknown = [ref for ref in refs if ref not in known]
        if self._socket is not None and len(unknown) > 1:
            with contextlib.suppress(dockerapi.NoAnswer):  # image_id says what is wrong
                known.update(dockerapi.inspect_many(self._socket, unknown))
        return {ref: self.image_id(ref) for ref in refs}

    def image_id(self, ref: str) -> str | None:
        if self._socket is not None:
            with contextlib.suppress(dockerapi.NoAnswer):  # it stopped answering: the CLI
                found = self._inspect(ref)
                return None if found is None else str(found["Id"])
        return self._tags_listed().get(familiar(ref))

    # ------------------------------------------------------------ changes

    def tag(self, ref: str, alias: str) -> None:
        """``docker tag``: over the socket, else the CLI (whose error words what is wrong,
        such as a missing image)."""
        try:
            if self._socket is None:
                raise dockerapi.NoAnswer("no local socket")
            dockerapi.tag(self._socket, ref, alias)
        except dockerapi.NoAnswer:
            self._docker("tag", ref, alias)
        self._forget()

    def import_rootfs(self, tarball: Path, ref: str, changes: list[str]) -> None:
        """An image from a root filesystem tarball (``docker import``), tagged ``ref``."""
        argv = ["import"]
        for change in changes:
            argv += ["--change", change]
        self._docker(*argv, str(tarball), ref)
        self._forget()

    def pull(self, ref: str) -> None:
        self._transfer("pull", "--quiet", ref)
        self._forget()

    def untag(self, ref: str) -> None:
        """Remove the tag ``ref`` (its image stays while another tag names it)."""
        self._docker("image", "rm", ref)
        self._forget()

    def labels(self, ref: str) -> dict[str, str]:
        found = self.config(ref).get("Labels")
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def push(self, ref: str) -> str:
        """Push ``ref`` to its registry; return the digest the registry knows it by."""
        self._transfer("push", ref)
        digests = self._docker("image", "inspect", "--format", "{{json .RepoDigests}}", ref)
        name = ref.rsplit(":", 1)[0]
        for entry in json.loads(digests) or []:
            if entry.startswith(f"{name}@"):
                return str(entry.split("@", 1)[1])
        raise EngineError(f"pushed {ref}, but docker knows no digest for it")

    def build(self, job: BuildJob) -> str:
        """Build ``job``; the digest of its image, as BuildKit's metadata file says it
        (an index's on the containerd store; "" where it says none)."""
        log_path = job.log or log_file(self.log_dir, job.stage, job.ref.rsplit(":", 1)[-1])
        metadata = log_path.with_name(f"{log_path.name}.metadata.json")
        metadata.unlink(missing_ok=True)
        argv = [*self.client.build_argv(self.builder), *self._output(), "--progress=plain"]
        argv += ["--metadata-file", str(metadata), "--tag", job.ref]
        if job.target:
            argv += ["--target", job.target]
        if job.no_cache:
            argv.append("--no-cache")
        network = job.network or self.network
        if network:
            argv += ["--network", network]
        for secret, path in sorted(job.secrets.items()):
            argv += ["--secret", f"id={secret},src={path}"]
        for name, value in sorted(job.build_args.items()):
            argv += ["--build-arg", f"{name}={value}"]
        for name, value in sorted(job.labels.items()):
            argv += ["--label", f"{name}={value}"]
        argv.append(str(job.context))
        tail: deque[str] = deque(maxlen=TAIL)
        redact = Redactor(os.environ, job.hide)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w", encoding="utf-8") as log:

            def on_line(line: str) -> None:
                line = redact(line)
                tail.append(line)
                log.write(line + "\n")
                if job.on_line is not None:
                    job.on_line(line)
                    return
                with _PRINT:
                    self.out.write(f"[{job.stage}] {line}\n")
                    self.out.flush()

            where = f"DOCKER_HOST={self.host} " if self.host else ""
            on_line(f"$ {where}{' '.join(argv)}")
            env = self._environ()
            returncode = proc.stream(argv, on_line, env=env)
            race = next((r for r in ENGINE_RACES for line in tail if r in line), None)
            if returncode != 0 and race is not None:
                retry = f"BuildKit lost a race between builds ({race})"
                on_line(f"retrying once: {retry}")
                print(f"warning: stage {job.stage}: {retry}; building it once more",
                      file=sys.stderr, flush=True)  # fmt: skip
                returncode = proc.stream(argv, on_line, env=env)
            self._forget()
            if returncode != 0:
                raise BuildFailed(job.stage, returncode, list(tail), log_path)
        return _digest(metadata)

    def files(self, ref: str) -> filetree.Tree:
        """Every file of the image ``ref``, as facts (``docker export`` of a container made
        from it and never started, removed after)."""
        from rocmgraph.common import (
            filetree,  # for verify and the lock: a build does not read files
        )

        container = self._docker("create", "--network=none", ref, "true").strip()
        try:
            argv = [self.client.path, "export", container]
            return proc.read(argv, filetree.read_tar, env=self._environ())
        finally:
            self._docker("rm", container)

    def read(self, ref: str, path: str) -> str:
        """The text of the file ``path`` in the image ``ref``, from a container made from it,
        never started and removed after: over the socket, else the CLI (whose error words
        what is wrong)."""
        if self._socket is not None:
            with contextlib.suppress(dockerapi.NoAnswer):
                return dockerapi.read_file(self._socket, ref, path)
        container = self._docker("create", "--network=none", ref, "true").strip()
        try:
            argv = [self.client.path, "cp", "--follow-link", f"{container}:{path}", "-"]
            text = proc.read(argv, dockerapi.archived_text, env=self._environ())
        finally:
            self._docker("rm", container)
        if text is None:
            raise EngineError(f"{path} in {ref} is a folder, not a file")
        return text

    def output(self, ref: str, *argv: str) -> str:
        """What ``argv`` prints in a container of the image ``ref`` that reaches nothing."""
        return self._docker(
            "run", "--rm", "--network=none", "--entrypoint", argv[0], ref, *argv[1:]
        )

    def size(self, ref: str) -> int:
        """The bytes of ``ref``, its parents' layers included (``docker image ls``'s SIZE)."""
        return int(str(self._inspected_or_cli(ref).get("Size") or 0))

    def layers(self, ref: str) -> list[str]:
        root = self._inspected_or_cli(ref).get("RootFS")
        found = root.get("Layers") if isinstance(root, dict) else None
        return [str(layer) for layer in found or []]

    def config(self, ref: str) -> dict[str, object]:
        """``docker image inspect``'s ``.Config`` of ``ref``."""
        found = self._inspected_or_cli(ref).get("Config")
        return found if isinstance(found, dict) else {}


def _digest(metadata: Path) -> str:
    """The image digest a build's ``--metadata-file`` names; "" where it names none."""
    try:
        found = json.loads(metadata.read_text(encoding="utf-8")).get("containerimage.digest")
    except (OSError, ValueError, AttributeError):
        return ""
    return found if isinstance(found, str) else ""


def _context_host(client: Client, builder: str) -> str:
    """The engine of the docker context ``builder`` names: buildx's builder of that name has
    the docker driver, which builds on that engine and keeps the image there. "" when no
    context has that name: a builder of another driver (docker-container, kubernetes,
    remote), whose ``--load`` brings each image to the engine this run talks to."""
    try:
        argv = [
            client.path,
            "context",
            "inspect",
            builder,
            "--format",
            "{{.Endpoints.docker.Host}}",
        ]
        return proc.run(argv, timeout=30).stdout.strip()
    except (CommandFailed, CommandMissing):
        return ""


def _last(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"


KEPT_LOGS = 3  # per stage: this build's, and the last two others (a failure, an arch)


def log_file(folder: Path, stage: str, key: str) -> Path:
    """The log of the build of ``stage`` at ``key``: one file per stage key, so runs that
    build one stage for two archs at once write apart; ``<stage>.log`` links to the one
    written last."""
    folder.mkdir(parents=True, exist_ok=True)
    path = stage_log(folder, stage, key)
    link = folder / f"{stage}.log"
    fresh = folder / f".{stage}.log.{os.getpid()}.{threading.get_ident()}"
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(path.name)
    fresh.replace(link)  # a link that is never missing, only replaced
    older = sorted(folder.glob(f"{stage}-*.log"), key=_mtime, reverse=True)
    for stale in [log for log in older if log != path][KEPT_LOGS - 1 :]:
        stale.unlink(missing_ok=True)
    return path


def stage_log(folder: Path, stage: str, key: str) -> Path:
    """The log of the build of ``stage`` at ``key``."""
    return folder / f"{stage}-{key[:12]}.log"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # another run removed it meanwhile
        return 0.0
