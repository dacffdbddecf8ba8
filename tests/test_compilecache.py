"""ccache's figures, read from a stage's build log as BuildKit's plain progress shows them."""

from __future__ import annotations

from rocmgraph.building.compilecache import Stats, from_log

# What ccache 4.7's --show-stats printed in the demo's vLLM build, as the log holds it.
SHOWN = """\
#14 2.118 Cacheable calls:      2 /    2 (100.0%)
#14 2.118   Hits:               1 /    2 (50.00%)
#14 2.118     Direct:           1 /    1 (100.0%)
#14 2.118     Preprocessed:     0 /    1 ( 0.00%)
#14 2.118   Misses:             1 /    2 (50.00%)
#14 2.118 Local storage:
#14 2.118   Cache size (GB): 0.00 / 1.00 ( 0.00%)
#14 2.118   Hits:               0 /    2 ( 0.00%)
#14 2.118   Misses:             2 /    2 (100.0%)
#14 2.118 Remote storage:
#14 2.118   Hits:               1 /    2 (50.00%)
#14 2.118   Misses:             1 /    2 (50.00%)
#14 DONE 2.2s
"""


def test_hits_misses_and_the_shared_caches_hits_are_read() -> None:
    assert from_log(SHOWN) == Stats(hits=1, misses=1, remote_hits=1)
    assert str(from_log(SHOWN)) == "ccache 1 hit (1 shared), 1 miss"


# What ccache 4.7's --show-log-stats --verbose prints (a compile's own statistics log).
LOGGED = """\
#9 5.210 Cacheable calls:  18 / 18 (100.0%)
#9 5.210   Hits:           16 / 18 (88.89%)
#9 5.210     Direct:       16 / 16 (100.0%)
#9 5.210     Preprocessed:  0 /  2 ( 0.00%)
#9 5.210   Misses:          2 / 18 (11.11%)
#9 5.210 Successful lookups:
#9 5.210   Direct:         16 / 18 (88.89%)
#9 5.210   Preprocessed:    0 /  2 ( 0.00%)
#9 5.210 Local storage:
#9 5.210   Hits:            0 / 18 ( 0.00%)
#9 5.210   Misses:         18 / 18 (100.0%)
#9 5.210   Reads:          36
#9 5.210   Writes:         20
#9 5.210 Remote storage:
#9 5.210   Hits:           16 / 18 (88.89%)
#9 5.210   Misses:          2 / 18 (11.11%)
#9 DONE 5.3s
"""


def test_a_compiles_own_statistics_log_is_read() -> None:
    assert from_log(LOGGED) == Stats(hits=16, misses=2, remote_hits=16)
    assert str(from_log(LOGGED)) == "ccache 16 hits (16 shared), 2 misses"


def test_every_compile_of_a_stage_is_summed() -> None:
    twice = SHOWN + SHOWN.replace("#14", "#15")
    assert from_log(twice) == Stats(hits=2, misses=2, remote_hits=2)
    assert str(from_log(twice)) == "ccache 2 hits (2 shared), 2 misses"


def test_a_build_without_a_shared_cache_says_no_shared_hits() -> None:
    local = SHOWN.split("#14 2.118 Remote storage:", maxsplit=1)[0]
    assert str(from_log(local)) == "ccache 1 hit, 1 miss"


def test_a_build_that_compiled_nothing_says_nothing() -> None:
    assert from_log("#3 0.1 Successfully built demo_tilelang\n") is None
    assert from_log("#9 0.5 Cacheable calls:      0 /    0\n") is None
