"""Tables the build writes from course.yml, so that no author restates ids, points or exercises.

* each notebook's table of tasks, between PARTS_TABLE_MARKERS in a markdown cell;
* README.md's course table, between COURSE_TABLE_MARKERS.
"""

from __future__ import annotations

import re

from grader.build.context import part_of
from grader.build.source import BuildError, cell_label, regions
from grader.build.stubs import task_statement
from grader.notebook import cell_text, nbgrader_metadata

COURSE_TABLE_MARKERS = ("<!-- BEGIN COURSE TABLE -->", "<!-- END COURSE TABLE -->")
TASK_HEADING = re.compile(r"^#+\s*Task\s+(\d+\.\d+)\s*(?:—|–|-|:)\s*(.+?)\s*$")
KIND_MARKS = {"symbolic": " ∑", "manual": " ✍"}


def replace_region(text: str, markers: tuple[str, str], body: str, where: str, keep: bool) -> str:
    """`text` with the lines between `markers` replaced by `body` (markers kept only when `keep`)."""
    spans = regions(text, markers, where)
    if len(spans) != 1:
        raise BuildError(f"{where}: needs exactly one '{markers[0]}' ... '{markers[1]}' region")
    (begin, end), lines = spans[0], text.split("\n")
    middle = [lines[begin - 1], body, lines[end - 1]] if keep else [body]
    return "\n".join(lines[: begin - 1] + middle + lines[end:])


def task_headings(notebook, assignment, label: str) -> dict[str, str]:
    """{task: what its heading says}, from markdown headings '### Task 2.1 — parameters of one layer'."""
    tasks = {part.task for part in assignment.parts}
    found = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        for line in cell_text(cell).split("\n"):
            match = TASK_HEADING.match(line.strip())
            if not match:
                continue
            task, what = match.groups()
            if task not in tasks:
                raise BuildError(
                    f"{label}: {cell_label(index, cell)}: heading names task {task}, but course.yml "
                    f"gives {assignment.id} tasks {', '.join(part.task for part in assignment.parts)}"
                )
            if task in found:
                raise BuildError(f"{label}: {cell_label(index, cell)}: a second heading for task {task}")
            found[task] = what
    return found


def parts_table(notebook, assignment, label: str) -> str:
    """The markdown table of an assignment's tasks: number, what (its heading), points, and the total."""
    headings = task_headings(notebook, assignment, label)
    statements = {}
    for cell in notebook.cells:
        part = part_of(cell, assignment)
        if part is not None and part.kind != "manual" and nbgrader_metadata(cell).get("solution"):
            statements[part.task] = task_statement(part, cell_text(cell))
    rows = ["| task | what | points |", "| --- | --- | --- |"]
    for part in assignment.parts:
        what = headings.get(part.task) or statements.get(part.task) or "written answer"
        rows.append(f"| {part.task} | {what.replace('|', '/')} | {part.points:g} |")
    rows.append(f"| | **total** | **{assignment.max_score:g}** |")
    return "\n".join(rows)


def course_table(course) -> str:
    """README's table of assignments: id, topic, graded parts, seed exercises, points."""
    rows = [
        "| assignment | topic | graded parts | seed exercises | points |",
        "| --- | --- | --- | --- | --- |",
    ]
    for assignment in course.assignments:
        parts = ", ".join(part.id + KIND_MARKS.get(part.kind, "") for part in assignment.parts)
        exercises = sorted({number for part in assignment.parts for number in part.exercises})
        listed = ", ".join(map(str, exercises)) or "—"
        rows.append(
            f"| `{assignment.id}` | {assignment.title} | {parts} | {listed} | {assignment.max_score:g} |"
        )
    return "\n".join(rows)
