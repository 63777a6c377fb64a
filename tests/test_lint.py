"""ruff, configured in pyproject.toml, finds nothing to fix anywhere in the repository.

Both commands run on the whole tree; only what pyproject.toml's [tool.ruff] excludes (and what
git ignores) is left out, so a new module is checked from its first commit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_check_passes_on_the_whole_repository():
    done = ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_whole_repository_unchanged():
    done = ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_sees_the_python_of_every_top_level_folder():
    """Every package, test folder, tool and benchmark is linted, not only some files."""
    listed = ruff("check", "--show-files").stdout
    for folder in ("grader", "layerlab", "tests", "benchmarks", "tools"):
        assert f"/{folder}/" in listed, f"ruff check . does not reach {folder}/"
