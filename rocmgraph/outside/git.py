"""The one module that runs git."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from rocmgraph.common import disk
from rocmgraph.outside import proc

# Never prompt for credentials, speak C so messages can be matched, and give up
# on a transfer that stalls rather than hang a build.
_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_LFS_SKIP_SMUDGE": "1",  # a file in LFS stays its pointer, with git-lfs or without
}
_CONFIG = {
    "http.lowSpeedLimit": "1000",
    "http.lowSpeedTime": "60",
    "advice.detachedHead": "false",
    # A tree is its commit, whatever the user's own git configuration says: no line endings
    # converted, no attributes or hooks of theirs, patches applied as they are written.
    # (Their other settings stay: credentials, proxies, URL rewrites only change where from.)
    "core.autocrlf": "false",
    "core.eol": "lf",
    "core.attributesFile": "/dev/null",
    "core.hooksPath": "/dev/null",
    "apply.whitespace": "nowarn",
}


def git(
    *args: str,
    cwd: Path | None = None,
    config: Mapping[str, str] | None = None,
    timeout: float | None = 3600,
    ceiling: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``git args`` in ``cwd`` and return its stdout.

    ``config`` adds ``-c key=value`` settings (mirror rewrites among them).
    ``ceiling`` stops git from finding a repository above that directory, so
    ``git apply`` in a plain tree never touches an enclosing checkout. A write its disk
    refused is a DiskError for ``cwd`` (git writes there), whatever git did next: a
    fetch that ran out of space is no network failure, nor a checkout a missing commit.
    """
    settings = {**_CONFIG, **(config or {})}
    argv = ["git", *(arg for key, value in settings.items() for arg in ("-c", f"{key}={value}"))]
    environ = {**os.environ, **_ENV, **(env or {})}
    if ceiling is not None:
        environ["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    try:
        return proc.run([*argv, *args], cwd=cwd, env=environ, timeout=timeout).stdout
    except proc.CommandFailed as exc:
        code = disk.in_words(exc.stderr)  # git's exit code says only 128
        if code is None:
            raise
        raise disk.refused(code, cwd or Path.cwd()) from None
