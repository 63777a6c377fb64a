"""Edit a committed source notebook by grade_id, following docs/notebooks.md.

The source notebooks in source/ are edited directly (in JupyterLab or with this module); the build
turns them into assignments/ and solutions/. This module is for edits that are easier as code:

    nb = SourceNotebook.open("02_parameters")        # or SourceNotebook.create("06_new") for a new one
    nb.set_source("answer_layer_parameters", '''def layer_parameters(d_in, d_out, bias=True): ...''')
    nb.insert_after("layer_parameters", nb.markdown("### Task 2.2 — the count as a formula"))
    nb.insert_after("layer_parameters", *nb.answer("params_formula", "...", public="assert ..."))
    nb.remove("width_vs_depth_mark_scheme")
    nb.remove("width_vs_depth")
    nb.insert_after("answer_count_parameters", *nb.manual("width_vs_depth", answer="...", scheme="..."))
    nb.save()

    .venv/bin/python tools/notebooks/authoring.py 02_parameters   # list cells, roles and grade_ids

Points are not written into cells: the build takes every part's points from course.yml.
"""

from __future__ import annotations

import copy
import hashlib
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.build.source import PARTS_TABLE_MARKERS  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.notebook import (  # noqa: E402
    HIDDEN_MARKERS,
    ILLUSTRATION_TAG,
    MARK_SCHEME_TAG,
    SOLUTION_MARKERS,
    answer_cell_id,
    cell_tags,
    grade_id_of,
    mark_scheme_cell_id,
)

NOTEBOOK_METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
    "language_info": {"name": "python"},
}
PUBLIC_DONE = 'print("all public tests passed — hidden tests run when your work is graded")'


class AuthoringError(ValueError):
    """An edit that cannot be made; the message names the notebook and the cell."""


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _nbgrader(grade_id: str, grade: bool, solution: bool, locked: bool) -> dict:
    return {
        "grade": grade,
        "solution": solution,
        "locked": locked,
        "grade_id": grade_id,
        "schema_version": 3,
    }


class SourceNotebook:
    """One source notebook, source/<id>/<notebook>, held in memory until save()."""

    def __init__(self, assignment_id: str, root: Path = ROOT):
        self.root = Path(root)
        self.assignment = load_course(self.root / "course.yml").assignment(assignment_id)
        self.path = self.root / "source" / self.assignment.id / self.assignment.notebook
        self.label = self.path.relative_to(self.root).as_posix()
        self.notebook = None

    @classmethod
    def open(cls, assignment_id: str, root: Path = ROOT) -> SourceNotebook:
        nb = cls(assignment_id, root)
        try:
            nb.notebook = nbformat.read(nb.path, as_version=4)
        except FileNotFoundError:
            raise AuthoringError(f"{nb.label}: file not found") from None
        return nb

    @classmethod
    def create(cls, assignment_id: str, root: Path = ROOT) -> SourceNotebook:
        """A new source notebook: a title cell with the parts-table region, nothing else yet."""
        nb = cls(assignment_id, root)
        if nb.path.exists():
            raise AuthoringError(f"{nb.label}: already exists; open it instead")
        title = f"# Assignment {nb.assignment.number} — {nb.assignment.title}"
        nb.notebook = new_notebook(metadata=copy.deepcopy(NOTEBOOK_METADATA))
        nb.append(nb.markdown(f"{title}\n\n{PARTS_TABLE_MARKERS[0]}\n{PARTS_TABLE_MARKERS[1]}"))
        return nb

    @property
    def cells(self) -> list:
        return self.notebook.cells

    # ------------------------------------------------------------------------- finding cells

    def index(self, grade_id: str) -> int:
        """Position of the cell with this nbgrader grade_id (or, failing that, this cell id)."""
        for name in (grade_id_of, lambda cell: cell.get("id")):
            found = [index for index, cell in enumerate(self.cells) if name(cell) == grade_id]
            if found:
                return found[0]
        raise AuthoringError(f"{self.label}: no cell has grade_id or cell id {grade_id!r}")

    def cell(self, grade_id: str):
        return self.cells[self.index(grade_id)]

    # ------------------------------------------------------------------------- editing

    def set_source(self, grade_id: str, text: str) -> None:
        self.cell(grade_id).source = _clean(text)

    def insert_after(self, grade_id: str, *cells) -> None:
        self._insert(self.index(grade_id) + 1, cells)

    def insert_before(self, grade_id: str, *cells) -> None:
        self._insert(self.index(grade_id), cells)

    def append(self, *cells) -> None:
        self._insert(len(self.cells), cells)

    def remove(self, grade_id: str) -> None:
        del self.cells[self.index(grade_id)]

    def _insert(self, position: int, cells) -> None:
        taken = {cell.get("id") for cell in self.cells}
        grade_ids = {grade_id_of(cell) for cell in self.cells}
        for cell in cells:  # check them all before changing anything
            grade_id = grade_id_of(cell)
            if grade_id and grade_id in grade_ids:
                raise AuthoringError(f"{self.label}: a cell with grade_id {grade_id!r} already exists")
            grade_ids.add(grade_id)
        for offset, cell in enumerate(cells):
            cell["id"] = self._new_id(cell, taken)
            taken.add(cell["id"])
            self.cells.insert(position + offset, cell)

    @staticmethod
    def _new_id(cell, taken: set) -> str:
        seed = grade_id_of(cell) or cell.source
        for attempt in range(1000):
            candidate = hashlib.sha256(f"{attempt}:{seed}".encode()).hexdigest()[:8]
            if candidate not in taken:
                return candidate
        raise AuthoringError("no free cell id")

    # ------------------------------------------------------------------------- new cells

    def markdown(self, text: str):
        return new_markdown_cell(_clean(text))

    def code(self, text: str, locked: bool = False, illustration: bool = False):
        """A code cell; a locked one (setup, helpers) gets grade_id `setup_<n>`: students cannot edit it."""
        cell = new_code_cell(_clean(text))
        if illustration:
            cell.metadata["tags"] = [ILLUSTRATION_TAG]
        if locked:
            used = {grade_id_of(c) for c in self.cells}
            number = next(n for n in range(1, 10_000) if f"setup_{n:02d}" not in used)
            cell.metadata["nbgrader"] = _nbgrader(f"setup_{number:02d}", False, False, True)
        return cell

    def answer(self, part_id: str, text: str, public: str = "") -> list:
        """The answer cell `answer_<part>` and its test cell `<part>` (the hidden test, then public tests)."""
        part = self._part(part_id, manual=False)
        answer = new_code_cell(_clean(text))
        answer.metadata["nbgrader"] = _nbgrader(answer_cell_id(part), False, True, False)
        body = "\n".join(
            filter(
                None,
                [
                    f"### {HIDDEN_MARKERS[0]}",
                    "from grader.inline import assert_part",
                    f'assert_part("{self.assignment.key(part)}", {part.name})',
                    f"### {HIDDEN_MARKERS[1]}",
                    _clean(public),
                    PUBLIC_DONE,
                ],
            )
        )
        test = new_code_cell(body)
        test.metadata["nbgrader"] = _nbgrader(part.id, True, False, True)
        return [answer, test]

    def manual(self, part_id: str, answer: str, scheme: str) -> list:
        """The free-text answer cell `<part>` (model answer between solution markers), its mark scheme."""
        part = self._part(part_id, manual=True)
        begin, end = SOLUTION_MARKERS
        cell = new_markdown_cell(f"### {begin}\n{_clean(answer)}\n### {end}")
        cell.metadata["nbgrader"] = _nbgrader(answer_cell_id(part), True, True, False)
        scheme_cell = new_markdown_cell(_clean(scheme))
        scheme_cell.metadata["tags"] = [MARK_SCHEME_TAG]
        scheme_cell.metadata["nbgrader"] = _nbgrader(mark_scheme_cell_id(part), False, False, True)
        return [cell, scheme_cell]

    def _part(self, part_id: str, manual: bool):
        try:
            part = self.assignment.part(part_id)
        except Exception as error:
            raise AuthoringError(f"{self.label}: {error}") from None
        if (part.kind == "manual") != manual:
            use = "manual()" if part.kind == "manual" else "answer()"
            raise AuthoringError(
                f"part {part_id!r} of {self.assignment.id} is a {part.kind} part: write it with {use}"
            )
        return part

    # ------------------------------------------------------------------------- saving

    def save(self) -> Path:
        nbformat.validate(self.notebook)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(nbformat.writes(self.notebook) + "\n", encoding="utf-8")
        return self.path

    def outline(self) -> str:
        """One line per cell: position, cell id, type, grade_id or tags, and its first line."""
        lines = []
        for number, cell in enumerate(self.cells, start=1):
            role = grade_id_of(cell) or ",".join(cell_tags(cell)) or "-"
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            lines.append(f"{number:3d} {cell.get('id', '?'):>16} {cell.cell_type:8} {role:28} {first[:60]}")
        return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: authoring.py ASSIGNMENT_ID   (lists the cells of its source notebook)")
    print(SourceNotebook.open(sys.argv[1]).outline())
