"""requires.py: an installed distribution's requirements, as pip would install it plainly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocmgraph.inimage import requires


def test_requirements_behind_an_extra_are_left_out_and_other_markers_stay(tmp_path: Path) -> None:
    info = tmp_path / "verl-0.7.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: verl\nVersion: 0.7.0\n"
        "Requires-Dist: packaging\n"
        'Requires-Dist: numpy<2; python_version < "3.13"\n'
        'Requires-Dist: vllm<=0.12.0; extra == "vllm"\n'
        'Requires-Dist: sglang==0.5.8; extra=="sglang"\n'
    )
    script = Path(requires.__file__)
    done = subprocess.run(
        [sys.executable, str(script), "verl"],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert done.stdout.splitlines() == ["packaging", 'numpy<2; python_version < "3.13"']
