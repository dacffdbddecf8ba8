"""Benchmark: the Dockerfile audit on 5 MB inputs of every shape, beside BuildKit's parser.

Each shape is written once, then read three ways in the same run: by BuildKit's
own parser (the ``dockerfile`` package, the parse alone), by our reader (the
parse alone), and by the whole audit (parse, shell, variables, findings). A
shape BuildKit refuses (a line over 65535 bytes) is refused by both at once.
The official parser is stopped after a time limit: it is quadratic in the length
of one instruction.

    python3 benchmarks/dockerfile_audit.py [--limit 120]

It prints one markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import time
from collections.abc import Callable

from rocmgraph.dockerfile.audit import audit
from rocmgraph.dockerfile.syntax import NotADockerfile, parse

MB = 5_000_000
SHAPES: dict[str, str] = {
    "one 5 MB word": "FROM s\nRUN echo " + "a" * MB + "\n",
    "one RUN of 1.25M continuation lines": "FROM s\nRUN " + "a \\\n" * (MB // 4) + "b\n",
    "830k short RUNs": "FROM s\n" + "RUN a\n" * (MB // 6),
    "1.25M comment lines": "FROM s\n" + "# c\n" * (MB // 4),
    "227k `pip install` in one RUN": "FROM s\nRUN " + "pip install q==1 && \\\n" * (MB // 22),
    "238k `pip install` RUNs": "FROM s\n" + "RUN pip install x==1\n" * (MB // 21),
    "200k nested ifs": "FROM s\nRUN " + "if a; then \\\n" * 200_000 + "fi; \\\n" * 200_000 + "\n",
    "357k ENV substitutions": "FROM s\n" + "ENV A=${A:-x}\n" * (MB // 14),
}


def _official(text: str) -> None:
    import dockerfile

    with contextlib.suppress(dockerfile.GoParseError):
        dockerfile.parse_string(text)


def _timed(function: Callable[[str], object], text: str) -> float:
    started = time.monotonic()
    with contextlib.suppress(NotADockerfile):
        function(text)
    return time.monotonic() - started


def _official_timed(text: str, limit: float) -> str:
    """BuildKit's parser in a child process, stopped after ``limit`` seconds."""
    child = multiprocessing.Process(target=_official, args=(text,))
    started = time.monotonic()
    child.start()
    child.join(limit)
    if child.is_alive():
        child.kill()
        child.join()
        return f"> {limit:.0f} s"
    return f"{time.monotonic() - started:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=120, help="seconds for BuildKit's parser")
    args = parser.parse_args()
    print("| input (5 MB) | BuildKit's parser | our parser | whole audit | findings |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, text in SHAPES.items():
        official = _official_timed(text, args.limit)
        ours = _timed(parse, text)
        whole = _timed(audit, text)
        try:
            findings = str(len(audit(text).findings))
        except NotADockerfile:
            findings = "refused"
        print(f"| {name} | {official} | {ours:.2f} s | {whole:.2f} s | {findings} |", flush=True)


if __name__ == "__main__":
    main()
