"""The digest that ties a generated notebook to its source.

Generated notebooks carry `metadata.layers_build.source_digest`: a sha256 of the source notebook
(outputs excluded), the assignment's entry in course.yml, the other files of the source folder and
BUILD_VERSION. A solution is re-executed only when it changes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict
from fnmatch import fnmatch
from pathlib import Path

BUILD_VERSION = "1"
BUILD_KEY = "layers_build"
IGNORED_FILES = (".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.ipynb")


def without_outputs(notebook):
    """A copy without outputs, execution counts or timing metadata (what a digest should ignore)."""
    clean = copy.deepcopy(notebook)
    clean.metadata.pop("widgets", None)
    clean.metadata.pop(BUILD_KEY, None)
    for cell in clean.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return clean


def canonical(notebook) -> str:
    """The notebook as JSON with sorted keys and no whitespace: equal notebooks, equal text."""
    return json.dumps(notebook, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def extra_files(source_dir: Path) -> list[Path]:
    """Files next to the source notebook that are released with it (as nbgrader copies them)."""
    if not source_dir.is_dir():
        return []
    found = []
    for path in sorted(source_dir.rglob("*")):
        relative = path.relative_to(source_dir)
        if path.is_file() and not any(
            fnmatch(part, pattern) for part in relative.parts for pattern in IGNORED_FILES
        ):
            found.append(path)
    return found


def source_digest(notebook, assignment, source_dir: Path) -> str:
    """sha256 of the source notebook (no outputs), its course.yml entry, extra files and BUILD_VERSION."""
    digest = hashlib.sha256()
    digest.update(f"build {BUILD_VERSION}\n".encode())
    digest.update(json.dumps(asdict(assignment), sort_keys=True).encode())
    digest.update(canonical(without_outputs(notebook)).encode())
    for path in extra_files(source_dir):
        digest.update(f"\n{path.relative_to(source_dir).as_posix()}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()
