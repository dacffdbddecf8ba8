"""Benchmark: the Dockerfile audit on 5 MB inputs of every shape, beside BuildKit's parser.

Each shape is written once, then read three ways in the same run: by BuildKit's
own parser (the ``dockerfile`` package, the parse alone), by our reader (the
parse alone), and by the whole audit (parse, shell, variables, findings). A
shape BuildKit refuses (a line over 65535 bytes) is refused by both at once.
The official parser is stopped after a time limit: it is quadratic in the length
of one instruction. Ours is timed in CPU seconds of this process, so that other
work on the machine does not count.

The shapes of one line are as large as a line may be (65535 bytes), repeated
to 5 MB. Time per KB of the whole audit shows what no total can: a shape whose
cost grows faster than its size. The goal is every shape the audit reads (not
refuses) within twice the median.

    python3 benchmarks/dockerfile_audit.py [--limit 120]

It prints one markdown table, then the median and the worst shape.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

from rocmgraph.common.errors import Unchecked
from rocmgraph.dockerfile.audit import audit
from rocmgraph.dockerfile.syntax import MAX_LINE, NotADockerfile, parse

MB = 5_000_000
T = TypeVar("T")


def _lines(run: str) -> str:
    """``RUN <run>`` lines to 5 MB, each of them one BuildKit reads (65535 bytes at most)."""
    line = f"RUN {run}\n"
    assert len(line) <= MAX_LINE + 1, len(line)
    return "FROM s\n" + line * (MB // len(line))


def _filled(unit: str) -> str:
    """``unit && unit && ...``, as long as one line may be."""
    return " && ".join([unit] * ((MAX_LINE - 4) // (len(unit) + 4)))


SHAPES: dict[str, str] = {
    "one 5 MB word": "FROM s\nRUN echo " + "a" * MB + "\n",
    "one RUN of 1.25M continuation lines": "FROM s\nRUN " + "a \\\n" * (MB // 4) + "b\n",
    "830k short RUNs": "FROM s\n" + "RUN a\n" * (MB // 6),
    "1.25M comment lines": "FROM s\n" + "# c\n" * (MB // 4),
    "227k `pip install` in one RUN": "FROM s\nRUN " + "pip install q==1 && \\\n" * (MB // 22),
    "238k `pip install` RUNs": "FROM s\n" + "RUN pip install x==1\n" * (MB // 21),
    "200k nested ifs": "FROM s\nRUN " + "if a; then \\\n" * 200_000 + "fi; \\\n" * 200_000 + "\n",
    "357k ENV substitutions": "FROM s\n" + "ENV A=${A:-x}\n" * (MB // 14),
    "`$(echo ...)` 100 deep, 64 KB lines": _lines(
        _filled("echo " + "$(echo " * 100 + "x" + ")" * 100)
    ),
    "`$(echo ...)` 8,000 deep (refused)": _lines("echo " + "$(echo " * 8_000 + "x" + ")" * 8_000),
    "`${X:-...}` 10,000 deep": _lines("echo " + "${X:-" * 10_000 + "x" + "}" * 10_000),
    "16,000 heredocs in one RUN": "FROM s\n"
    + ("RUN " + "<<E " * 16_000 + "\n" + "pip install x==1\nE\n" * 16_000) * 13,
    "65,535-byte lines of `pip install`": _lines("pip install" + " x==1" * 13_104),
    "`ENV A=${A}${A}` 333k times (refused)": "FROM s\nENV A=x\n"
    + "ENV A=${A}${A}\n" * (MB // 15)
    + "RUN pip install $A\n",
    "64k git clone, WORKDIR, checkout": "FROM s\n"
    + "".join(
        f"RUN git clone https://example.org/r{i}\nWORKDIR /r{i}\nRUN git checkout v{i}\n"
        for i in range(64_000)
    ),
}


def _official(text: str) -> None:
    import dockerfile

    with contextlib.suppress(dockerfile.GoParseError):
        dockerfile.parse_string(text)


def _timed(function: Callable[[str], T], text: str) -> tuple[float, T | None]:
    """CPU seconds of ``function(text)``, and what it gave (None when it refused the text)."""
    started = time.process_time()
    result: T | None = None
    with contextlib.suppress(NotADockerfile, Unchecked):
        result = function(text)
    return time.process_time() - started, result


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
    print("| input (5 MB) | BuildKit's parser | our parser | whole audit | ms per KB | findings |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    per_kb: dict[str, float] = {}
    for name, text in SHAPES.items():
        official = _official_timed(text, args.limit)
        ours, _ = _timed(parse, text)
        whole, report = _timed(audit, text)
        rate = whole / (len(text) / 1000) * 1000
        findings = "refused"
        if report is not None:
            findings = str(len(report.findings))
            per_kb[name] = rate
        print(f"| {name} | {official} | {ours:.2f} s | {whole:.2f} s | {rate:.3f} | {findings} |",
              flush=True)  # fmt: skip
    median = statistics.median(per_kb.values())
    worst = max(per_kb, key=per_kb.__getitem__)
    print(f"\nmedian of the shapes read: {median:.3f} ms per KB; the worst, {worst}: "
          f"{per_kb[worst]:.3f} ms per KB, {per_kb[worst] / median:.1f}x the median")  # fmt: skip


if __name__ == "__main__":
    main()
