"""The cold-build profile reading a squash's log and the disk (benchmarks/coldprofile.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import coldprofile

# A squashed slim's log as docker 20.10 prints it (--progress=plain), cut to its steps.
SLIM_LOG = """\
#4 [slim_trimmed 1/2] FROM docker.io/verl-bench/wheels:921bc56128fa
#4 CACHED

#5 [slim_trimmed 2/2] RUN rm -rf /opt/rocm/lib /opt/rocm/share/miopen
#5 DONE 0.1s

#6 [slim 1/2] COPY --from=slim_trimmed / /
#6 DONE 7.7s

#7 [slim 2/2] WORKDIR /workspace
#7 DONE 0.0s

#8 exporting to image
#8 exporting layers
#8 exporting layers 3.5s done
#8 writing image sha256:8695acf26c3a done
#8 DONE 3.5s
"""


def test_a_squash_s_copy_and_export_are_read_from_its_log() -> None:
    assert coldprofile.squash_parts(SLIM_LOG) == coldprofile.SquashParts(copy=7.7, export=3.5)


def test_a_copy_of_part_of_a_tree_is_no_squash() -> None:
    # prune gathers /kept alone: a copy, but not of a whole image
    log = SLIM_LOG.replace("COPY --from=slim_trimmed / /", "COPY --from=pruning /kept /kept")
    assert coldprofile.squash_parts(log) is None


def test_a_squash_that_did_not_finish_has_no_parts() -> None:
    assert coldprofile.squash_parts(SLIM_LOG.replace("#6 DONE 7.7s\n", "")) is None
    assert coldprofile.squash_parts(SLIM_LOG.replace("#8 exporting layers 3.5s done\n", "")) is None


def test_the_write_rate_writes_to_the_folder_and_leaves_nothing(tmp_path: Path) -> None:
    rate = coldprofile.write_rate(tmp_path, megabytes=4)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []


def test_a_build_shows_its_engine_cpu_or_a_question_mark() -> None:
    assert coldprofile.Timed(1.234, 0.5).shown(2) == "1.23 s (0.50 s)"
    assert coldprofile.Timed(10.04, None).shown() == "10.0 s (? s)"
