"""ExecuteNotebook: run the solution top to bottom with nbclient; any error stops the build."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer, Unicode

from grader.build.context import RESOURCES_KEY, context, source_label
from grader.build.digest import extra_files
from grader.build.source import KERNEL_NAME, BuildError, cell_label


class ExecuteNotebook(NbGraderPreprocessor):
    """Execute in a scratch folder holding the source folder's other files, as a student's copy would."""

    timeout = Integer(
        None,
        allow_none=True,
        help="Seconds one cell may run (default: limits.notebook_timeout_s in course.yml).",
    ).tag(config=True)
    kernel_name = Unicode(KERNEL_NAME, help="Kernel that runs the solutions.").tag(config=True)

    def preprocess(self, nb, resources):
        course, assignment, source_dir = context(resources)
        root = resources.get(RESOURCES_KEY, {}).get("root")
        label = source_label(resources, assignment)
        timeout = self.timeout if self.timeout is not None else int(course.limits.notebook_timeout_s)
        language_info = copy.deepcopy(nb.metadata.get("language_info"))
        with tempfile.TemporaryDirectory(prefix=f"build-{assignment.id}-") as workdir:
            for path in extra_files(source_dir):
                target = Path(workdir) / path.relative_to(source_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            client = NotebookClient(
                nb,
                timeout=timeout,
                kernel_name=self.kernel_name,
                resources={"metadata": {"path": workdir}},
                record_timing=False,
                store_widget_state=False,
                allow_errors=False,
            )
            try:
                client.execute(env=kernel_env(Path(root) if root else None), stderr=subprocess.DEVNULL)
            except (CellExecutionError, CellTimeoutError) as error:
                raise BuildError(
                    f"{label}: the solution notebook failed to run: {failed_cell(nb, error)}"
                ) from None
        if language_info is None:  # the kernel adds its exact Python version: keep the source's
            nb.metadata.pop("language_info", None)
        else:
            nb.metadata["language_info"] = language_info
        return nb, resources


def kernel_env(root: Path | None) -> dict:
    """The kernel's environment: inline figures, a fixed hash seed, the course root importable."""
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # let the kernel use the inline backend so figures are stored
    env["PYTHONHASHSEED"] = "0"
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
    return env


def failed_cell(nb, error) -> str:
    """'cell 12 (grade_id "answer_relu") raised ValueError: ...', or the error's last line."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{cell_label(index, cell)} raised {output.get('ename')}: {output.get('evalue')}"
    return str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
