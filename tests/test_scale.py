"""benchmarks/scale.py on 4 synthetic submissions: it grades them all and prints its table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

try:
    import distributed  # noqa: F401

    HAVE_DASK = True
except ImportError:
    HAVE_DASK = False

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not HAVE_DASK,
        reason="dask and distributed are not installed (pip install 'layers-course-grader[dask]')",
    ),
]


def test_scale_smoke_run_prints_the_table(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "LAYERS_GRADER_SECRET"}
    done = subprocess.run(
        [sys.executable, "benchmarks/scale.py", "-n", "4", "--dir", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| N |"))
    assert "s / submission" in header and "driver peak RSS" in header and "worker peak RSS" in header
    row = next(line for line in lines if line.startswith("| 4 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "4"  # every submission graded
    assert float(cells[3]) > 0 and all(float(value) > 0 for value in cells[4:6])
    assert len(list(tmp_path.glob("n4/autograded/*/*/results.json"))) == 4


def test_scale_rejects_a_bad_count():
    done = subprocess.run(
        [sys.executable, "benchmarks/scale.py", "-n", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "at least 1" in done.stderr
