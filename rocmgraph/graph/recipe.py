"""Render a stage's Dockerfile from its template and the pins it declares.

The template sees only the pins under the stage's ``reads`` (and the arch set
when the stage depends on it): reading anything else is an error, so a recipe
cannot depend on a pin its key does not cover.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmgraph.common.errors import PinsError, RenderError
from rocmgraph.common.fsutil import cache_write_bytes
from rocmgraph.common.layout import DOCKER
from rocmgraph.config.archs import KNOWN_ARCHS
from rocmgraph.config.kinds import SEPARATORS
from rocmgraph.config.pins import PinPath, Pins, format_table
from rocmgraph.graph.closure import LINKS, SUMS
from rocmgraph.graph.dag import Stage

if TYPE_CHECKING:
    # startup: jinja2 only when a recipe renders, not when keys come from the cache
    import jinja2

    # startup: jinja2 only when a recipe renders, not when keys come from the cache
    import jinja2.bccache
    import jinja2.runtime

PIP_SECRET = "pip.conf"
# Where a sealed stage's closure is mounted: a folder every base image has, since BuildKit
# (before 0.10) leaves a mount point it had to make in the image, which an open build lacks.
CLOSURE = "/mnt"
CLOSURE_LINKS = f"{CLOSURE}/{LINKS}"  # where a sealed stage's pip finds its closure, by hash
CLOSURE_SUMS = f"{CLOSURE}/{SUMS}"  # and its apt, the locked hashes of its Debian files
CCACHE_SECRET = "ccache.conf"
SOURCE_DATE_EPOCH = 315532800  # 1980-01-01: what a rebuild stamps on what it makes


def parent_arg(parent: str) -> str:
    """The build arg that carries a parent's image reference: ``wheels`` -> ``WHEELS_IMAGE``.

    Parents come in as build args, so the rendered text (and the key) does
    not depend on the namespace images are tagged in.
    """
    return f"{parent.upper()}_IMAGE"


def _compiled_templates(folder: Path) -> jinja2.BytecodeCache:
    """Compiled templates kept in a folder, by template name and source checksum (Jinja
    checks both), best effort: a folder that cannot be read or written only costs the
    compile (about 50 ms a process), so rendering, and every key, needs no writable disk."""
    # startup: jinja2 only when a recipe renders, not when keys come from the cache
    import jinja2.bccache

    class CompiledTemplates(jinja2.BytecodeCache):
        def _path(self, bucket: jinja2.bccache.Bucket) -> Path:
            return folder / f"{bucket.key}.cache"

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                with self._path(bucket).open("rb") as cached:
                    bucket.load_bytecode(cached)
            except (OSError, ValueError, EOFError):
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            cache_write_bytes(self._path(bucket), bucket.bytecode_to_string())

    return CompiledTemplates()


class _Templates:
    """The Jinja environment the recipes render in, made at the first render: a run whose
    keys are remembered (keycache.py) renders nothing, and does not import Jinja (about
    20 ms of a no-op)."""

    def __init__(self) -> None:
        self.folder: Path | None = None  # where compiled templates are kept (keep_compiled)
        self._environment: jinja2.Environment | None = None

    def keep_compiled(self, folder: Path | None) -> None:
        self.folder = folder
        if self._environment is not None:
            self._environment.bytecode_cache = _compiled_templates(folder) if folder else None

    def fresh(self) -> None:
        """As in a new process (for tests): nothing compiled in memory, no folder named."""
        self.folder = self._environment = None

    def environment(self) -> jinja2.Environment:
        if self._environment is None:
            self._environment = _environment()
            self.keep_compiled(self.folder)
        return self._environment


_TEMPLATES = _Templates()


def keep_compiled(folder: Path | None) -> None:
    """Keep the compiled templates in ``folder`` from now on (the task layer names it);
    None: compile in memory only."""
    _TEMPLATES.keep_compiled(folder)


def _environment() -> jinja2.Environment:
    # startup: jinja2 only when a recipe renders, not when keys come from the cache
    import jinja2

    # No bytecode cache unless the task layer names a folder (keep_compiled).
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(DOCKER),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Dockerfiles, not HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # pip's configuration (its index, perhaps with a login) comes in as a BuildKit secret,
    # mounted for each RUN that runs pip: it never lands in a layer or the history. pip finds
    # it by PIP_CONFIG_FILE (an ARG: set while building, never in the image), which it reads
    # after /etc/pip.conf, so a base image's own configuration is not hidden.
    env.globals["pip"] = f"--mount=type=secret,id={PIP_SECRET}"
    env.globals["pip_secret"] = PIP_SECRET
    env.globals["closure"] = CLOSURE
    env.globals["closure_links"] = CLOSURE_LINKS
    env.globals["closure_sums"] = CLOSURE_SUMS
    # SOURCE_DATE_EPOCH (an ARG too: for the build only) makes what pip installs the same
    # bytes in a rebuild: bytecode checked by hash, not stamped with the time of the install,
    # and wheels (zips) dated 1980-01-01, the first time a zip can say.
    env.globals["pip_config"] = (
        f"ARG PIP_CONFIG_FILE=/run/secrets/{PIP_SECRET}\nARG SOURCE_DATE_EPOCH={SOURCE_DATE_EPOCH}"
    )
    # Those ARGs reach the steps of a stage built on that stage in the same Dockerfile (one
    # solve), not of one built on its image: what records the environment leaves them out.
    env.globals["pip_args"] = ("PIP_CONFIG_FILE", "SOURCE_DATE_EPOCH")
    # A shared compile cache (ccache's remote storage) is a location, perhaps with a password:
    # it too comes in as a secret, as ccache's system-wide configuration, for the RUNs that
    # compile. Absent (no compile cache), the mount is skipped and ccache uses its own.
    env.globals["ccache"] = f"--mount=type=secret,id={CCACHE_SECRET},target=/etc/ccache.conf"
    env.globals["smoke_args"] = jinja2.pass_context(_smoke_args)
    env.filters.update(
        ref=lambda variable: "${" + variable + "}",
        requirements=_requirements,
        apt_packages=lambda packages: " ".join(
            f"{name}={version}" if version else name for name, version in packages.items()
        ),
        wheel_versions=lambda wheels: {name: wheel.version for name, wheel in wheels.items()},
        build_env=_build_env,
        kept_env=_kept_env,
        dists=_dists,
        site_path=lambda path: f'"$SP/{path[5:]}"' if path.startswith("site:") else path,
        tojson=json.dumps,
        with_deps=lambda sources: [name for name, src in sources.items() if src.install_deps],
        wheel_globs=lambda stages: [f"/dist/{name}/*.whl" for name in stages],
        pip_install=_pip_install,
        installed=_installed,
    )
    return env


def _requirements(packages: Mapping[str, str]) -> str:
    """``{"a": "1.0", "b": ""}`` -> ``a==1.0 b`` (an unpinned name stays visible as such)."""
    return " ".join(f"{name}=={version}" if version else name for name, version in packages.items())


def _build_env(source: Any, archs: list[str]) -> str:
    """``VAR=value `` prefixes for a source build: its arch variables (the archs joined as its
    build reads a list), the variables that get its pinned version, the trees it is given in
    place of fetching them (their folders in the context), then its own."""
    return "".join(f"{variable}={value} " for variable, value in _source_env(source, archs))


def _source_env(source: Any, archs: list[str]) -> list[tuple[str, str]]:
    pairs = _arch_env(source, archs)
    pairs += [(variable, source.version) for variable in source.version_env if source.version]
    pairs += [(variable, f"/src/{path}") for variable, path in source.inputs.items()]
    pairs += list(source.env.items())
    return pairs


def _arch_env(source: Any, archs: list[str]) -> list[tuple[str, str]]:
    joined = SEPARATORS[source.arch_separator].join(archs)
    return [(variable, f'"{joined}"') for variable in source.arch_env]


def _dists(sources: Mapping[str, Any], names: list[str]) -> list[str]:
    """``dist==version`` (or ``dist``, no version pinned) of each source that builds one (a
    folder given to another's build, triton_kernels, builds none): what it installs."""
    return [
        (sources[name].dist or name)
        + (f"=={sources[name].version}" if sources[name].version else "")
        for name in names
        if sources[name].subdirs
    ]


def _smoke_args(context: jinja2.runtime.Context) -> list[str]:
    """The smoke check's arguments: each pinned distribution (at its version where pinned),
    the modules the pinned site-packages links name, the pinned runtime environment."""
    sources, wheels, python = context["sources"], context["wheels"], context["python"]
    env, links, archs = context["env"], context["links"], context["arch"]
    dists = _dists(sources, list(sources))
    dists += [
        f"{name}=={wheel.version}" if wheel.version else name for name, wheel in wheels.items()
    ]
    for group in (python.stack, python.vllm, python.sglang):
        dists += [f"{name}=={version}" if version else name for name, version in group.items()]
    args = [f"--dist={dist}" for dist in dists]
    args += [
        f"--import={link.removeprefix('site:').rsplit('/', 1)[-1]}"
        for link in links
        if link.startswith("site:")
    ]
    args += [f"--env=PYTORCH_ROCM_ARCH={';'.join(archs)}"]
    args += [f"--env={name}={value}" for name, value in env.items()]
    return [shlex.quote(arg) for arg in args]


def _kept_env(sources: Mapping[str, Any], archs: list[str]) -> list[tuple[str, str]]:
    """The build variables (arch and own) of the sources whose `keep_env` keeps them in the
    image, as verl's recipe keeps causal-conv1d's."""
    found: dict[str, str] = {}
    for source in sources.values():
        if source.keep_env:
            kept = [*_arch_env(source, archs), *source.env.items()]
            found.update(pair for pair in kept if pair[0] not in source.build_only_env)
    return sorted(found.items())


def _installed(
    packages: Mapping[str, str], install: Mapping[str, str], mode: str, default: str
) -> dict[str, str]:
    """The packages of a group that go in as ``mode`` ("deps" or "no-deps"): ``default``, the
    group's way, unless [python.install] names another for them."""
    return {name: v for name, v in packages.items() if install.get(name, default) == mode}


def _pip_install(args: list[str], flags: str = "") -> str:
    """A pip install command, or ``true`` when there is nothing to install."""
    return " ".join(["pip install", *([flags] if flags else []), *args]) if args else "true"


def context(stage: Stage, pins: Pins, archs: tuple[str, ...]) -> dict[str, object]:
    """What the template may use: the declared pins, the stage itself, the arch set."""
    view: dict[str, Any] = {}
    for read in stage.reads:
        _place(view, pins, read, pins, read)
    view["stage"] = {
        "name": stage.name,
        "parents": {parent: parent_arg(parent) for parent in stage.parents},
        "sources": list(stage.sources),
    }
    view["known_archs"] = list(KNOWN_ARCHS)
    if stage.arch_dependent:
        view["arch"] = list(stage_archs(stage, pins, archs))
    return view


def stage_archs(stage: Stage, pins: Pins, archs: tuple[str, ...]) -> tuple[str, ...]:
    """The archs ``stage`` builds for in an image of ``archs``: a stage that compiles, for
    [build].source_archs where they hold them all."""
    return pins.build.compiled_for(archs) if stage.compiles else archs


def render(
    stage: Stage, pins: Pins, archs: tuple[str, ...], *, squash: bool = True, sealed: bool = False
) -> str:
    """Stage ``stage``'s Dockerfile. ``squash=False`` renders it for one plain Dockerfile
    (dockerfiles.py), where no engine appends a squashed stage's configuration: its stages
    then remove in place. ``sealed``: it builds with the network off, from its closure (the
    files its build fetched, by sha256, in the context's ``closure/<stage>/``); a stage's key
    is of the recipe as it renders unsealed, since the closure is the one its key fetched."""
    where = f"docker/{stage.recipe}"
    view = {**context(stage, pins, archs), "squash": squash, "sealed": sealed}
    if sealed:
        # pip finds packages only in the closure's folder: no index, no network (execute.py)
        view["pip"] = (
            f"--mount=type=secret,id={PIP_SECRET} "
            f"--mount=type=bind,source=closure/{stage.name},target={CLOSURE}"
        )
    import jinja2  # imported by the environment: only its errors are wanted here

    try:
        template = _TEMPLATES.environment().get_template(stage.recipe)
        return template.render(view)
    except jinja2.TemplateNotFound:
        raise RenderError(f"{where}: no such template; stage {stage.name!r} names it") from None
    except jinja2.UndefinedError as exc:
        raise RenderError(
            f"{where}: {exc.message}; stage {stage.name!r} must declare what its recipe reads "
            f"in stages/{stage.name}.py"
        ) from None
    except jinja2.TemplateError as exc:
        raise RenderError(f"{where}: {exc}") from None


# The view mirrors the pins: a dataclass becomes a namespace (attribute access
# only, so a field named like a dict method still reads as the field), a
# mapping a dict, a tuple a list. Only declared paths are copied into it.


def _place(view: Any, node: object, rest: PinPath, pins: Pins, read: PinPath) -> None:
    head, rest = rest[0], rest[1:]
    child = _child(node, head, pins, read)
    if not rest:
        _put(view, head, _plain(child))
        return
    sub = _get(view, head)
    if sub is None:
        sub = types.SimpleNamespace() if dataclasses.is_dataclass(child) else {}
        _put(view, head, sub)
    _place(sub, child, rest, pins, read)


def _child(node: object, name: str, pins: Pins, read: PinPath) -> object:
    if isinstance(node, Mapping):
        if name in node:
            return node[name]
    elif dataclasses.is_dataclass(node) and name in {f.name for f in dataclasses.fields(node)}:
        return getattr(node, name)
    raise PinsError(
        pins.file,
        format_table(read),
        "is read by a stage but missing from the pins",
        f"add {format_table(read)} (stages/ declares which pins each stage reads)",
    )


def _get(view: Any, name: str) -> Any:
    return view.get(name) if isinstance(view, dict) else getattr(view, name, None)


def _put(view: Any, name: str, value: object) -> None:
    if isinstance(view, dict):
        view[name] = value
    else:
        setattr(view, name, value)


def _plain(node: object) -> object:
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        # A location (an index or key URL) is where the host fetches: no recipe's business.
        return types.SimpleNamespace(
            **{
                f.name: _plain(getattr(node, f.name))
                for f in dataclasses.fields(node)
                if not f.metadata.get("location", False)
            }
        )
    if isinstance(node, Mapping):
        return {key: _plain(value) for key, value in node.items()}
    if isinstance(node, tuple):
        return list(node)
    return node
