"""Grade one submitted notebook: student code in a sandboxed process, verdicts in this one.

The notebook is read as data. The program run for the student is built from the course's
SOURCE notebook: its setup code cells in order (illustration and test cells skipped), with
every answer cell replaced by the submission's cell of the same nbgrader grade_id. Right after
a part's answer cell has run, the part is graded here by `grader.grading.grade_part`: a
function part through a `RemoteFunction`, a value or symbolic part from its decoded value.
Test cells never run, and nothing a student's code does inside its own process can change a
verdict. Every part ends with a recorded score and reason, whatever the notebook contains.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from pathlib import Path

from grader.course import Assignment, Course, CourseError, Part
from grader.grading import grade_part
from grader.notebook import (
    ILLUSTRATION_TAG,
    Cell,
    NotebookError,
    answer_cell_id,
    part_id_of,
    read_notebook,
)
from grader.result import PartResult, Status, SubmissionResult
from grader.sandbox import RemoteFunction, Sandbox, SandboxError, hidden_paths
from grader.student import MissingFunction, NotDefined, StudentError, StudentTimeout

log = logging.getLogger(__name__)


def _task(part: Part) -> str:
    return f"Task {part.task}" if part.task else f"part {part.id}"


def _zero(part: Part, status: Status, feedback: str) -> PartResult:
    return PartResult(part.id, 0.0, part.points, status, feedback)


def _with_notes(result: PartResult, notes: list[str]) -> PartResult:
    if not notes:
        return result
    return dataclasses.replace(result, feedback=" ".join(notes) + "\n" + result.feedback)


class _Grading:
    """The state of grading one submission."""

    def __init__(self, assignment: Assignment, student: str, secret: str):
        self.assignment, self.student, self.secret = assignment, student, secret
        self.results: dict[str, PartResult] = {}
        self.part_notes: dict[str, list[str]] = {part.id: [] for part in assignment.parts}
        self.warnings: list[str] = []
        self.answers: dict[str, str] = {}
        self.submitted: dict[str, Cell] = {}
        self.cell_outcomes: dict[str, object] = {}
        self.session = None
        self.output = ""

    # ------------------------------------------------------------------ reading
    def collect_answers(self, cells: list[Cell]) -> None:
        counts: dict[str, int] = {}
        for cell in cells:
            if cell.grade_id is None:
                continue
            counts[cell.grade_id] = counts.get(cell.grade_id, 0) + 1
            self.submitted.setdefault(cell.grade_id, cell)
        by_id = {answer_cell_id(part): part for part in self.assignment.parts}
        for grade_id, count in counts.items():
            if count > 1 and grade_id in by_id:
                note = (
                    f"Your notebook has {count} cells with grade_id {grade_id!r} (a duplicated cell?); "
                    "the first one was graded."
                )
                self.part_notes[by_id[grade_id].id].append(note)
                self.warnings.append(note)
        for part in self.assignment.parts:
            cell = self.submitted.get(answer_cell_id(part))
            if cell is not None:
                self.answers[part.id] = cell.source

    def missing_answer(self, part: Part) -> PartResult | None:
        cell = self.submitted.get(answer_cell_id(part))
        task = _task(part)
        if cell is None:
            return _zero(
                part,
                Status.FAILED,
                f"Your notebook has no answer cell for {task} "
                f"(nbgrader grade_id {answer_cell_id(part)!r}); it may have been deleted.",
            )
        wanted = "markdown" if part.kind == "manual" else "code"
        if cell.cell_type != wanted:
            return _zero(
                part,
                Status.FAILED,
                f"The answer cell for {task} is a {cell.cell_type} cell; it should be a {wanted} cell.",
            )
        return None

    # ------------------------------------------------------------------ the program
    def plan(self, source_cells: list[Cell]) -> list[tuple[str, object]]:
        """Steps: ("cell", (label, source)) and ("grade", part), in source order."""
        parts = {answer_cell_id(part): part for part in self.assignment.parts if part.kind != "manual"}
        steps, placed = [], {part.id for part in self.assignment.parts if part.kind == "manual"}
        for cell in source_cells:
            if cell.cell_type != "code" or ILLUSTRATION_TAG in cell.tags:
                continue
            if cell.solution:
                submitted = self.submitted.get(cell.grade_id) if cell.grade_id else None
                if submitted is not None and submitted.cell_type == "code":
                    label = f"<answer {part_id_of(cell.grade_id)}>"
                    steps.append(("cell", (label, submitted.source)))
                part = parts.get(cell.grade_id)
                if part is not None and part.id not in placed:
                    steps.append(("grade", part))
                    placed.add(part.id)
            elif cell.grade:
                continue
            else:
                steps.append(("cell", (f"<setup cell {cell.index + 1}>", cell.source)))
        for part in self.assignment.parts:
            if part.id not in placed:
                steps.append(("grade", part))
        return steps

    # ------------------------------------------------------------------ grading
    def run(self, steps) -> None:
        for kind, payload in steps:
            if kind == "cell":
                label, source = payload
                self.cell_outcomes[label] = self.session.run_cell(label, source)
            else:
                part = payload
                self.results[part.id] = self.grade(part)

    def grade(self, part: Part) -> PartResult:
        missing = self.missing_answer(part)
        if missing is not None:
            return missing
        if part.kind == "manual":
            return grade_part(self.assignment, part, self.answers[part.id], self.student, self.secret)
        outcome = self.cell_outcomes.get(f"<answer {part.id}>")
        if outcome is not None and outcome.status in ("timeout", "crashed", "skipped"):
            status = Status.TIMEOUT if outcome.status == "timeout" else Status.ERROR
            return _zero(part, status, f"Your answer cell for {_task(part)} was skipped: {outcome.message}")
        raised = ""
        if outcome is not None and outcome.status == "raised":
            first_line = outcome.message.partition("\n")[0]
            raised = f" (its answer cell raised {first_line})"
        try:
            if part.kind == "function":
                answer = self.function(part, raised)
            else:
                try:
                    answer = self.session.value(part.name)
                except NotDefined as missing_value:
                    return _zero(part, Status.FAILED, f"Nothing to grade: {missing_value.reason}{raised}.")
        except StudentTimeout as error:
            return _zero(part, Status.TIMEOUT, f"Your code did not finish in time: {error.reason}")
        except StudentError as error:
            return _zero(part, Status.ERROR, f"Your code could not be graded: {error.reason}")
        return grade_part(self.assignment, part, answer, self.student, self.secret)

    def function(self, part: Part, raised: str):
        found = self.session.probe(part.name)
        if not found["defined"]:
            return MissingFunction(part.name, f"the notebook does not define `{part.name}`{raised}")
        if not found.get("callable"):
            kind = str(found.get("type", "a value"))
            return MissingFunction(part.name, f"`{part.name}` is an object of type {kind}, not a function")
        return RemoteFunction(self.session, part.name)


def _failed(course_parts, status: Status, feedback: str) -> list[PartResult]:
    return [_zero(part, status, feedback) for part in course_parts]


def grade_submission(
    course: Course, assignment_id: str, notebook_path, student: str, secret: str, sandbox: Sandbox | None
) -> SubmissionResult:
    """Grade one notebook for `student`; thread-safe, never raises for bad input.

    Every part of the assignment gets a result with a reason, in course.yml order. A problem
    with the notebook as a whole (unreadable, another assignment's...) is in `error`.
    """
    result = SubmissionResult(str(notebook_path), str(assignment_id), str(student), [])
    try:
        assignment = course.assignment(assignment_id)
    except CourseError as error:
        result.error = str(error)
        return result
    parts = assignment.parts
    try:
        cells = read_notebook(notebook_path)
    except NotebookError as error:
        result.error = str(error)
        result.parts = _failed(parts, Status.ERROR, f"Not graded: {error}.")
        return result
    source = course.root / "source" / assignment.id / assignment.notebook
    try:
        source_cells = read_notebook(source, "the course's source notebook", from_student=False)
    except NotebookError as error:
        result.error = f"The course is missing its source notebook for {assignment.id}: {error}"
        result.retry = True
        result.parts = _failed(
            parts, Status.ERROR, "Not graded: the course's source notebook is unavailable."
        )
        return result
    grading = _Grading(assignment, student, secret)
    grading.collect_answers(cells)
    if not any(answer_cell_id(part) in grading.submitted for part in parts):
        result.error = (
            f"{Path(notebook_path).name} has none of the answer cells of assignment "
            f"{assignment.id} (no cell with an nbgrader grade_id like "
            f"{answer_cell_id(parts[0])!r}); is it the notebook of another assignment?"
        )
        result.parts = _failed(parts, Status.ERROR, f"Not graded: {result.error}")
        return result
    result.answers = dict(grading.answers)
    owned = sandbox is None
    try:
        for part in parts:
            if part.kind == "manual":  # needs no student process, so no sandbox failure can lose it
                grading.results[part.id] = grading.grade(part)
        if owned:
            sandbox = Sandbox(course.limits)
            sandbox.start()
        _grade_in_session(grading, sandbox, source_cells, course, Path(notebook_path))
    except SandboxError as error:
        result.error, result.retry = f"The grader could not run this notebook safely: {error}", True
    except Exception:
        log.exception("grading %s for %s failed", notebook_path, student)
        result.error = (
            "The grader failed on this notebook (an internal error was logged for your instructor)."
        )
        result.retry = True
    finally:
        if owned and sandbox is not None:
            sandbox.close()
    reason = result.error or "Not graded."
    result.parts = [
        _with_notes(
            grading.results.get(part.id) or _zero(part, Status.ERROR, reason), grading.part_notes[part.id]
        )
        for part in parts
    ]
    result.output = grading.output
    result.warnings = list(dict.fromkeys([*(sandbox.warnings if sandbox else []), *grading.warnings]))
    return result


def _grade_in_session(grading: _Grading, sandbox: Sandbox, source_cells, course: Course, notebook: Path):
    notebook = notebook.resolve()
    deadline = time.monotonic() + float(course.limits.notebook_timeout_s)
    session = sandbox.session(
        hide=lambda: hidden_paths(course.root, _notebook_paths(notebook)), deadline=deadline
    )
    grading.session = session
    try:
        session.start()
        grading.run(grading.plan(source_cells))
    finally:
        session.close()
        grading.warnings.extend(session.notes)
        grading.output = session.output_text()


def _notebook_paths(notebook: Path) -> list[Path]:
    """The submission itself and its folder, unless that folder holds the Python environment."""
    environment = Path(sys.prefix).resolve()
    folder = notebook.parent
    return [notebook] if folder == environment or folder in environment.parents else [notebook, folder]
