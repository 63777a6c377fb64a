"""Helpers for writing nbgrader source notebooks that follow notebooks.md.

    nb = SourceNotebook("01_shapes")
    nb.md("# Title")
    nb.code("import numpy as np", locked=True)
    nb.answer("linear_forward", '''def linear_forward(X, W, b): ...''')
    nb.tests("linear_forward", "assert ...")
    nb.manual("relu_zero_reason", answer="...", scheme="- 1 point: ...")
    nb.save()

Cell ids are derived from the cell's role and position, so regenerating gives the same file.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.course import load_course  # noqa: E402

PUBLIC_DONE = 'print("all public tests passed — hidden tests run when your work is graded")'


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


class SourceNotebook:
    def __init__(self, assignment_id: str):
        self.assignment = load_course(ROOT / "course.yml").assignment(assignment_id)
        self.cells = []

    def _add(self, cell, kind: str):
        cell["id"] = f"{kind}-{len(self.cells) + 1:02d}"
        self.cells.append(cell)
        return cell

    def md(self, text: str):
        return self._add(new_markdown_cell(_clean(text)), "md")

    def code(self, text: str, locked: bool = False, illustration: bool = False):
        cell = new_code_cell(_clean(text))
        if illustration:
            cell.metadata["tags"] = ["illustration"]
        if locked:
            cell.metadata["nbgrader"] = {
                "grade": False,
                "solution": False,
                "locked": True,
                "grade_id": f"setup_{len(self.cells) + 1:02d}",
                "schema_version": 3,
            }
        return self._add(cell, "illustration" if illustration else "code")

    def answer(self, part_id: str, text: str):
        part = self.assignment.part(part_id)
        if part.kind == "manual":
            raise ValueError(
                f"part {part_id!r} of {self.assignment.id} is a manual part: write it with manual()"
            )
        cell = new_code_cell(_clean(text))
        cell.metadata["nbgrader"] = {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": f"answer_{part_id}",
            "schema_version": 3,
        }
        return self._add(cell, "answer")

    def tests(self, part_id: str, public: str):
        part = self.assignment.part(part_id)
        body = (
            _clean(public)
            + "\n"
            + PUBLIC_DONE
            + (
                "\n### BEGIN HIDDEN TESTS\nfrom grader.inline import assert_part\n"
                f'assert_part("{self.assignment.key(part)}", {part.name})\n### END HIDDEN TESTS'
            )
        )
        cell = new_code_cell(body)
        cell.metadata["nbgrader"] = {
            "grade": True,
            "solution": False,
            "locked": True,
            "points": part.points,
            "grade_id": part_id,
            "schema_version": 3,
        }
        return self._add(cell, "test")

    def manual(self, part_id: str, answer: str, scheme: str):
        part = self.assignment.part(part_id)
        if part.kind != "manual":
            raise ValueError(
                f"part {part_id!r} of {self.assignment.id} is a {part.kind} part: write it with answer()"
            )
        cell = new_markdown_cell("### BEGIN SOLUTION\n" + _clean(answer) + "\n### END SOLUTION")
        cell.metadata["nbgrader"] = {
            "grade": True,
            "solution": True,
            "locked": False,
            "points": part.points,
            "grade_id": part_id,
            "schema_version": 3,
        }
        self._add(cell, "manual")
        scheme_cell = new_markdown_cell(_clean(scheme))
        scheme_cell.metadata["tags"] = ["mark-scheme"]
        scheme_cell.metadata["nbgrader"] = {
            "grade": False,
            "solution": False,
            "locked": True,
            "grade_id": f"{part_id}_mark_scheme",
            "schema_version": 3,
        }
        self._add(scheme_cell, "scheme")

    def save(self) -> Path:
        notebook = new_notebook(
            cells=self.cells,
            metadata={
                "kernelspec": {
                    "name": "python3",
                    "display_name": "Python 3 (ipykernel)",
                    "language": "python",
                },
                "language_info": {"name": "python"},
            },
        )
        nbformat.validate(notebook)
        path = ROOT / "source" / self.assignment.id / self.assignment.notebook
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")
        return path
