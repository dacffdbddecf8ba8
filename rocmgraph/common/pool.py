"""Builders: several container engines that build a run's stages at once (``builders=``).

Stages pass between builders through the shared stage cache: a stage built on one
is pushed, and a builder that needs it as a parent pulls it. So the pool picks, for
each stage, the builder with the fewest builds running (independent stages spread
out), and among those the one that already holds most of the stage's parents (a
chain of stages stays where its images are, and pulls nothing).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rocmgraph.common.engine import Engine


@dataclass(frozen=True)
class Builder:
    name: str  # as the user wrote it: its DOCKER_HOST
    engine: Engine


class Pool:
    def __init__(self, builders: Sequence[Builder]) -> None:
        if not builders:
            raise ValueError("a pool needs a builder")  # a bug: the task layer checks
        self.builders = tuple(builders)
        self._running = dict.fromkeys(range(len(builders)), 0)
        self._lock = threading.Lock()

    def choose(self, parents: Sequence[str]) -> int:
        """The index of the builder for a stage whose parents' images are ``parents``: the
        least busy, then the one holding most of them, then the first listed."""
        with self._lock:
            least = min(self._running.values())
            idle = [i for i, running in self._running.items() if running == least]
            held = {i: sum(self.builders[i].engine.image_exists(p) for p in parents) for i in idle}
            chosen = max(idle, key=lambda i: (held[i], -i))
            self._running[chosen] += 1
            return chosen

    @contextlib.contextmanager
    def builder_for(self, parents: Sequence[str]) -> Iterator[Builder]:
        """A builder for one stage's build, counted as busy until the block ends."""
        chosen = self.choose(parents)
        try:
            yield self.builders[chosen]
        finally:
            with self._lock:
                self._running[chosen] -= 1
