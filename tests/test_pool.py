"""The builders' pool picks an engine for each stage: the least busy, then the one holding
most of the stage's parents. (Engines here are sets of refs; the real ones, two dockerds,
are in test_fleet.)"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from rocmgraph.common.engine import BuildJob
from rocmgraph.common.pool import Builder, Pool


class Holding:
    """An engine that holds some images and answers only whether it does."""

    def __init__(self, *refs: str) -> None:
        self.refs = set(refs)

    def image_exists(self, ref: str) -> bool:
        return ref in self.refs

    def image_id(self, ref: str) -> str | None:
        raise NotImplementedError

    def image_ids(self, refs: Sequence[str]) -> dict[str, str | None]:
        raise NotImplementedError

    def build(self, job: BuildJob) -> str:
        raise NotImplementedError

    def config(self, ref: str) -> Mapping[str, object]:
        raise NotImplementedError

    def layers(self, ref: str) -> list[str]:
        raise NotImplementedError

    def tag(self, ref: str, alias: str) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        raise NotImplementedError

    def pull(self, ref: str) -> None:
        raise NotImplementedError

    def push(self, ref: str) -> str:
        raise NotImplementedError

    def labels(self, ref: str) -> Mapping[str, str]:
        raise NotImplementedError

    def untag(self, ref: str) -> None:
        raise NotImplementedError


def pool(*engines: Holding) -> Pool:
    return Pool([Builder(f"unix:///run/{i}.sock", engine) for i, engine in enumerate(engines)])


def test_a_stage_builds_where_its_parents_are_when_every_builder_is_idle() -> None:
    builders = pool(Holding(), Holding("ns/wheels:k"))
    with builders.builder_for(["ns/wheels:k"]) as chosen:
        assert chosen.name == "unix:///run/1.sock"
    with builders.builder_for(["ns/other:k"]) as chosen:
        assert chosen.name == "unix:///run/0.sock"  # a tie: the first listed


def test_independent_stages_spread_over_the_builders_though_one_holds_their_parent() -> None:
    builders = pool(Holding("ns/wheels:k"), Holding())
    with (
        builders.builder_for(["ns/wheels:k"]) as first,
        builders.builder_for(["ns/wheels:k"]) as second,
    ):
        assert (first.name, second.name) == ("unix:///run/0.sock", "unix:///run/1.sock")
        with builders.builder_for(["ns/wheels:k"]) as third:
            assert third.name == "unix:///run/0.sock"  # both busy: where the parent is
    with builders.builder_for([]) as after:
        assert after.name == "unix:///run/0.sock"  # each was freed when its block ended


def test_a_failed_build_frees_its_builder() -> None:
    builders = pool(Holding(), Holding())
    with pytest.raises(RuntimeError), builders.builder_for([]):
        raise RuntimeError("the build failed")
    with builders.builder_for([]) as first, builders.builder_for([]) as second:
        assert {first.name, second.name} == {"unix:///run/0.sock", "unix:///run/1.sock"}


def test_threads_that_ask_at_once_get_different_builders() -> None:
    builders = pool(*(Holding() for _ in range(4)))
    barrier, chosen = threading.Barrier(4), []
    lock = threading.Lock()

    def take() -> None:
        with builders.builder_for([]) as builder:
            with lock:
                chosen.append(builder.name)
            barrier.wait(timeout=10)  # all four held at once

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(chosen) == [f"unix:///run/{i}.sock" for i in range(4)]
