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
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Assignment, Course, CourseError, Part
from grader.grading import grade_part
from grader.result import PartResult, Status
from grader.sandbox import RemoteFunction, Sandbox, SandboxError, hidden_paths
from grader.student import MissingFunction, NotDefined, StudentError, StudentTimeout

log = logging.getLogger(__name__)

MAX_NOTEBOOK_BYTES = 32 * 2**20
ILLUSTRATION_TAG = "illustration"


@dataclass
class SubmissionResult:
    notebook: str
    assignment: str
    student: str
    parts: list[PartResult]
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    output: str = ""
    retry: bool = False  # the grader, not the notebook, failed: the next autograde run grades it again

    @property
    def score(self) -> float:
        return round(sum(part.score for part in self.parts), 6)

    @property
    def max_score(self) -> float:
        return round(sum(part.max_score for part in self.parts), 6)

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "assignment": self.assignment,
            "student": self.student,
            "score": self.score,
            "max_score": self.max_score,
            "parts": [part.to_dict() for part in self.parts],
            "error": self.error,
            "warnings": list(self.warnings),
        }


class NotebookError(ValueError):
    """The file is not a usable notebook; the message is written for the student."""


@dataclass(frozen=True)
class Cell:
    index: int
    cell_type: str
    source: str
    grade_id: str | None
    solution: bool
    grade: bool
    tags: tuple[str, ...]


def _text(source, where: str) -> str:
    if type(source) is str:
        return source
    if type(source) is list and all(type(line) is str for line in source):
        return "".join(source)
    raise NotebookError(f"{where} has a source that is neither text nor a list of lines")


def _cell(raw, index: int) -> Cell:
    where = f"cell {index + 1}"
    if type(raw) is not dict:
        raise NotebookError(f"{where} is not a notebook cell (it is a {type(raw).__name__}, not an object)")
    if type(raw.get("cell_type")) is not str:
        raise NotebookError(f"{where} is not a notebook cell (its cell_type is {raw.get('cell_type')!r:.40})")
    metadata = raw.get("metadata", {})
    metadata = metadata if type(metadata) is dict else {}
    nbgrader = metadata.get("nbgrader", {})
    nbgrader = nbgrader if type(nbgrader) is dict else {}
    grade_id = nbgrader.get("grade_id")
    tags = metadata.get("tags", [])
    tags = tuple(tag for tag in tags if type(tag) is str) if type(tags) is list else ()
    return Cell(
        index,
        raw["cell_type"],
        _text(raw.get("source", ""), where),
        grade_id if type(grade_id) is str else None,
        nbgrader.get("solution") is True,
        nbgrader.get("grade") is True,
        tags,
    )


def load_notebook(path: str | Path, what: str = "the notebook") -> dict:
    """A notebook file's JSON object, which holds a list of cells; NotebookError says clearly what is wrong."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{what} {path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
        data = path.read_bytes()
    except OSError as error:
        raise NotebookError(f"{what} {path.name} cannot be read: {error.strerror or error}") from None
    if not data.strip():
        raise NotebookError(f"{what} {path.name} is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError(
            f"{what} {path.name} is not a notebook: it is not UTF-8 text (a binary or corrupted file?)"
        ) from None
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"{what} {path.name} is not a notebook: invalid JSON ({error})") from None
    if type(notebook) is not dict or type(notebook.get("cells")) is not list:
        raise NotebookError(f"{what} {path.name} is not a Jupyter notebook: it has no list of cells")
    return notebook


def read_notebook(path: str | Path, what: str = "the notebook") -> list[Cell]:
    """The cells of an nbformat-4 notebook file; NotebookError says clearly what is wrong."""
    path = Path(path)
    notebook = load_notebook(path, what)
    if notebook.get("nbformat") != 4:
        raise NotebookError(
            f"{what} {path.name} has nbformat {notebook.get('nbformat')!r}; expected a version 4 notebook"
        )
    try:
        return [_cell(raw, index) for index, raw in enumerate(notebook["cells"])]
    except NotebookError as error:
        raise NotebookError(f"{what} {path.name}: {error}") from None


def _answer_id(part: Part) -> str:
    return part.id if part.kind == "manual" else f"answer_{part.id}"


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
        by_id = {_answer_id(part): part for part in self.assignment.parts}
        for grade_id, count in counts.items():
            if count > 1 and grade_id in by_id:
                note = (
                    f"Your notebook has {count} cells with grade_id {grade_id!r} (a duplicated cell?); "
                    "the first one was graded."
                )
                self.part_notes[by_id[grade_id].id].append(note)
                self.warnings.append(note)
        for part in self.assignment.parts:
            cell = self.submitted.get(_answer_id(part))
            if cell is not None:
                self.answers[part.id] = cell.source

    def missing_answer(self, part: Part) -> PartResult | None:
        cell = self.submitted.get(_answer_id(part))
        task = _task(part)
        if cell is None:
            return _zero(
                part,
                Status.FAILED,
                f"Your notebook has no answer cell for {task} "
                f"(nbgrader grade_id {_answer_id(part)!r}); it may have been deleted.",
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
        parts = {f"answer_{part.id}": part for part in self.assignment.parts if part.kind != "manual"}
        steps, placed = [], {part.id for part in self.assignment.parts if part.kind == "manual"}
        for cell in source_cells:
            if cell.cell_type != "code" or ILLUSTRATION_TAG in cell.tags:
                continue
            if cell.solution:
                submitted = self.submitted.get(cell.grade_id) if cell.grade_id else None
                if submitted is not None and submitted.cell_type == "code":
                    label = f"<answer {cell.grade_id.removeprefix('answer_')}>"
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
        source_cells = read_notebook(source, "the course's source notebook")
    except NotebookError as error:
        result.error = f"The course is missing its source notebook for {assignment.id}: {error}"
        result.retry = True
        result.parts = _failed(
            parts, Status.ERROR, "Not graded: the course's source notebook is unavailable."
        )
        return result
    grading = _Grading(assignment, student, secret)
    grading.collect_answers(cells)
    if not any(_answer_id(part) in grading.submitted for part in parts):
        result.error = (
            f"{Path(notebook_path).name} has none of the answer cells of assignment "
            f"{assignment.id} (no cell with an nbgrader grade_id like "
            f"{_answer_id(parts[0])!r}); is it the notebook of another assignment?"
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
