"""Reading a source notebook and checking it against docs/notebooks.md and course.yml.

Every problem is a BuildError whose message names the file and the cell, e.g.
`source/01_shapes/01_shapes.ipynb: cell 7 (grade_id "answer_relu"): has no '### BEGIN SOLUTION' ...`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
from nbformat.v4.nbjson import JSONReader

from grader.notebook import (
    HIDDEN_MARKERS,
    MARK_SCHEME_SUFFIX,
    MARK_SCHEME_TAG,
    SOLUTION_MARKERS,
    NotebookError,
    answer_cell_id,
    cell_tags,
    cell_text,
    load_notebook,
    mark_scheme_cell_id,
    nbgrader_metadata,
    part_id_of,
)

KERNEL_NAME = "python3"
PARTS_TABLE_MARKERS = ("<!-- BEGIN PARTS TABLE -->", "<!-- END PARTS TABLE -->")
GRADER_IMPORT = re.compile(r"^\s*(from|import)\s+grader\b")


class BuildError(Exception):
    """A source notebook or course.yml cannot be built; the message names the file and cell."""


def cell_label(index: int, cell) -> str:
    """'cell 7 (grade_id "answer_relu")' or 'cell 3 ("## Setup")': how errors name a cell."""
    grade_id = nbgrader_metadata(cell).get("grade_id")
    if grade_id:
        return f'cell {index + 1} (grade_id "{grade_id}")'
    first_line = next((line.strip() for line in cell_text(cell).splitlines() if line.strip()), "")
    return f'cell {index + 1} ("{first_line[:50]}")' if first_line else f"cell {index + 1} (empty)"


def read_notebook(path: Path, label: str | None = None):
    """Parse a course notebook into a NotebookNode (nbformat 4); BuildError on bad JSON or format."""
    label = label or str(path)
    try:
        raw = load_notebook(path, "the notebook", from_student=False)
    except NotebookError as error:
        raise BuildError(f"{label}: {error}") from None
    if raw.get("nbformat") != 4:
        raise BuildError(f"{label}: not an nbformat 4 notebook (nbformat is {raw.get('nbformat')!r})")
    if type(raw.get("metadata", {})) is not dict:
        raise BuildError(f"{label}: the notebook's metadata should be a JSON object")
    for index, cell in enumerate(raw["cells"]):
        if type(cell) is not dict or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise BuildError(f"{label}: cell {index + 1} is not a code, markdown or raw cell")
        metadata = cell.get("metadata", {})
        nbgrader = metadata.get("nbgrader", {}) if type(metadata) is dict else {}
        if type(nbgrader) is not dict:
            raise BuildError(
                f"{label}: cell {index + 1}: metadata.nbgrader should be a JSON object, not {nbgrader!r}"
            )
        if type(nbgrader.get("grade_id", "")) is not str:
            raise BuildError(
                f"{label}: cell {index + 1}: nbgrader grade_id should be a string, "
                f"not {nbgrader['grade_id']!r}"
            )
    try:
        notebook = JSONReader().to_notebook(raw)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat raises several unrelated types for bad structure
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BuildError(f"{label}: not a valid notebook: {message}") from None
    return notebook


def regions(source: str, markers: tuple[str, str], where: str) -> list[tuple[int, int]]:
    """Line spans (begin, end) of marked regions; BuildError if unterminated or nested."""
    begin, end = markers
    spans, start = [], None
    for number, line in enumerate(source.split("\n"), start=1):
        if begin in line:
            if start is not None:
                raise BuildError(
                    f"{where}: '{begin}' on line {number} is nested inside the one on line {start}"
                )
            start = number
        elif end in line:
            if start is None:
                raise BuildError(f"{where}: '{end}' on line {number} has no '{begin}' before it")
            spans.append((start, number))
            start = None
    if start is not None:
        raise BuildError(f"{where}: '{begin}' on line {start} has no matching '{end}'")
    return spans


def outside(source: str, spans: list[tuple[int, int]]) -> list[str]:
    """The lines of `source` outside the given (begin, end) line spans."""
    lines = source.split("\n")
    inside = {n for begin, end in spans for n in range(begin, end + 1)}
    return [line for number, line in enumerate(lines, start=1) if number not in inside]


def validate_source(notebook, assignment, label: str) -> None:
    """Check a source notebook against docs/notebooks.md and the assignment's parts in course.yml."""
    kernel = notebook.metadata.get("kernelspec", {}).get("name")
    if kernel != KERNEL_NAME:
        raise BuildError(
            f"{label}: the kernel must be {KERNEL_NAME!r}, not {kernel!r} (metadata.kernelspec.name)"
        )
    cells = notebook.cells
    by_grade_id: dict[str, int] = {}
    for index, cell in enumerate(cells):
        where = f"{label}: {cell_label(index, cell)}"
        if "id" not in cell:
            raise BuildError(f"{where}: has no cell id; save the notebook as nbformat 4.5 or later")
        meta = nbgrader_metadata(cell)
        grade_id = meta.get("grade_id")
        if grade_id is not None:
            if grade_id in by_grade_id:
                first = by_grade_id[grade_id]
                raise BuildError(
                    f"{where}: duplicate grade_id {grade_id!r} "
                    f"(also used by {cell_label(first, cells[first])})"
                )
            by_grade_id[grade_id] = index
        source = cell_text(cell)
        solutions = regions(source, SOLUTION_MARKERS, where)
        hidden = regions(source, HIDDEN_MARKERS, where)
        if solutions and not meta.get("solution"):
            raise BuildError(f"{where}: has a BEGIN SOLUTION region but is not an nbgrader solution cell")
        if hidden and not meta.get("grade"):
            raise BuildError(f"{where}: has a hidden-test region but is not an nbgrader grade (test) cell")
        if cell.cell_type == "code" and any(GRADER_IMPORT.match(line) for line in outside(source, hidden)):
            raise BuildError(
                f"{where}: imports grader outside a hidden-test region; "
                "students do not have grader (solution code must be written inline)"
            )
        if MARK_SCHEME_TAG in cell_tags(cell) and not (
            cell.cell_type == "markdown" and meta.get("locked") and str(grade_id).endswith(MARK_SCHEME_SUFFIX)
        ):
            raise BuildError(
                f"{where}: a mark-scheme cell must be a locked markdown cell "
                "with grade_id '<part>_mark_scheme'"
            )

    parts = {part.id: part for part in assignment.parts}
    for part in assignment.parts:
        _validate_part(notebook, assignment, part, by_grade_id, label)
    for grade_id, index in by_grade_id.items():
        cell, meta = cells[index], nbgrader_metadata(cells[index])
        owner = part_id_of(grade_id).removesuffix(MARK_SCHEME_SUFFIX)
        if (meta.get("grade") or meta.get("solution") or grade_id.endswith(MARK_SCHEME_SUFFIX)) and (
            owner not in parts
        ):
            raise BuildError(
                f"{label}: {cell_label(index, cell)} belongs to no part of {assignment.id} in course.yml "
                f"(parts: {', '.join(parts)})"
            )


def _validate_part(notebook, assignment, part, by_grade_id: dict, label: str) -> None:
    cells = notebook.cells
    what = f"{label}: part {part.id!r} ({part.kind}, task {part.task} in course.yml)"

    def find(grade_id: str, description: str) -> int:
        if grade_id not in by_grade_id:
            raise BuildError(f"{what} has no {description} (a cell with nbgrader grade_id {grade_id!r})")
        return by_grade_id[grade_id]

    def expect(index: int, cell_type: str, **flags) -> None:
        cell, meta = cells[index], nbgrader_metadata(cells[index])
        where = f"{label}: {cell_label(index, cell)}"
        if cell.cell_type != cell_type:
            raise BuildError(f"{where}: should be a {cell_type} cell for part {part.id!r}")
        for flag, value in flags.items():
            if bool(meta.get(flag)) != value:
                raise BuildError(
                    f"{where}: nbgrader metadata {flag!r} should be {str(value).lower()} for part {part.id!r}"
                )

    if part.kind == "manual":
        answer = find(answer_cell_id(part), "answer cell")
        expect(answer, "markdown", solution=True, grade=True, locked=False)
        scheme = find(mark_scheme_cell_id(part), "mark-scheme cell")
        expect(scheme, "markdown", solution=False, grade=False, locked=True)
        if MARK_SCHEME_TAG not in cell_tags(cells[scheme]):
            raise BuildError(
                f"{label}: {cell_label(scheme, cells[scheme])}: needs the cell tag {MARK_SCHEME_TAG!r}"
            )
        if scheme != answer + 1:
            raise BuildError(
                f"{label}: {cell_label(scheme, cells[scheme])}: should come right after the answer cell"
            )
        return

    answer = find(answer_cell_id(part), "answer cell")
    expect(answer, "code", solution=True, grade=False, locked=False)
    test = find(part.id, "test cell")
    expect(test, "code", solution=False, grade=True, locked=True)
    if test != answer + 1:
        raise BuildError(
            f"{label}: {cell_label(test, cells[test])}: the test cell should come right after the answer cell"
        )
    answer_where = f"{label}: {cell_label(answer, cells[answer])}"
    source = cell_text(cells[answer])
    if not regions(source, SOLUTION_MARKERS, answer_where):
        raise BuildError(f"{answer_where}: has no '### BEGIN SOLUTION' / '### END SOLUTION' region")
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise BuildError(f"{answer_where}: is not valid Python (line {error.lineno}: {error.msg})") from None
    if part.kind == "function":
        if not any(isinstance(node, ast.FunctionDef) and node.name == part.name for node in tree.body):
            raise BuildError(f"{answer_where}: should define `def {part.name}(...)`")
    elif not any(
        isinstance(node, (ast.Assign, ast.AnnAssign)) and part.name in _assigned_names(node)
        for node in tree.body
    ):
        raise BuildError(f"{answer_where}: should assign `{part.name} = ...`")
    key = assignment.key(part)
    test_source = cell_text(cells[test])
    test_where = f"{label}: {cell_label(test, cells[test])}"
    hidden = regions(test_source, HIDDEN_MARKERS, test_where)
    hidden_text = "\n".join(test_source.split("\n")[hidden[0][0] : hidden[0][1] - 1]) if hidden else ""
    pattern = rf"assert_part\(\s*[\"']{re.escape(key)}[\"']\s*,\s*{re.escape(part.name)}\s*\)"
    if not re.search(pattern, hidden_text):
        raise BuildError(f'{test_where}: the hidden tests should call assert_part("{key}", {part.name})')
    if not test_source.lstrip().startswith(f"### {HIDDEN_MARKERS[0]}"):
        raise BuildError(
            f"{test_where}: the hidden tests should open the cell, before the public tests, "
            "so that nbgrader scores the grader's result whatever the public tests do"
        )


def _assigned_names(node) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {target.id for target in targets if isinstance(target, ast.Name)}
