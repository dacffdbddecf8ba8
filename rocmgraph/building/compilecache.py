"""What ccache did in a source build: the hits and misses its ``--show-log-stats`` printed.

Each compile of a source stage keeps ccache's counters in a statistics log of its own
(``CCACHE_STATSLOG``) and shows them after, so the figures in a stage's log are that
build's own, though other builds share the cache at the same moment (zeroing the cache's
counters would mix theirs in). Summed over the stage's RUNs,
they tell whether a shared compile cache (compile_cache=) paid: a build on a new
machine of a small change should be mostly remote hits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A line of BuildKit's plain progress: "#12 3.456 <what the step printed>".
_STEP_OUTPUT = re.compile(r"^#\d+ \d+\.\d+ (.*)$")
_COUNT = re.compile(r"^\s*(Hits|Misses):\s+(\d+)\b")
_SECTION = re.compile(r"^(Cacheable calls|Successful lookups|Local storage|Remote storage):")


@dataclass(frozen=True)
class Stats:
    hits: int = 0
    misses: int = 0
    remote_hits: int = 0  # of the hits, those the shared compile cache answered

    def __add__(self, other: Stats) -> Stats:
        return Stats(
            self.hits + other.hits,
            self.misses + other.misses,
            self.remote_hits + other.remote_hits,
        )

    def __str__(self) -> str:
        remote = f" ({self.remote_hits} shared)" if self.remote_hits else ""
        return f"ccache {self.hits} {_plural(self.hits, 'hit')}{remote}, {self.misses} " + _plural(
            self.misses, "miss", "misses"
        )


def from_log(text: str) -> Stats | None:
    """The sum of every ccache statistics in a build log; None if it compiled nothing."""
    total, seen, section = Stats(), False, ""
    for raw in text.splitlines():
        match = _STEP_OUTPUT.match(raw)
        line = match.group(1) if match else raw
        if found := _SECTION.match(line):
            section = found.group(1)
            continue
        count = _COUNT.match(line)
        if not count:
            continue
        what, n = count.group(1), int(count.group(2))
        if section == "Cacheable calls":
            seen = True
            total += Stats(hits=n) if what == "Hits" else Stats(misses=n)
        elif section == "Remote storage" and what == "Hits":
            total += Stats(remote_hits=n)
    return total if seen and (total.hits or total.misses) else None


def _plural(n: int, one: str, many: str = "") -> str:
    return one if n == 1 else many or f"{one}s"
