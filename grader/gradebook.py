"""Reading and writing nbgrader's gradebook (any SQLAlchemy URL) for `autograde` and `export`.

The layout matches what `nbgrader generate_assignment` and `nbgrader autograde` record, so
formgrader, `nbgrader export` and manual grading keep working on the result:

- per assignment: one notebook; per part one grade cell (name = part id, max_score = points;
  code for automatic parts, markdown for manual ones); solution cells `answer_<part>` (automatic
  parts) and `<part>` (manual parts); source cells for every graded, solution or locked cell.
- per submission: one `SubmittedAssignment` with its `SubmittedNotebook`, a `Grade` per grade cell
  (auto_score = the part's score; manual parts have no auto_score and need manual grading) and a
  `Comment` per solution cell carrying the feedback.

Every function here runs in the single driver process; `record_submission` is one transaction.

Which database: `--db URL`, else the environment variable LAYERS_GRADEBOOK_URL, else
sqlite:///<course>/gradebook.db (`gradebook_url`). nbgrader_config.py reads the same setting, so
`autograde`, `export`, nbgrader's CLI and formgrader share one gradebook. Messages show URLs with
the password hidden.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.notebook import (  # noqa: F401  (NO_ANSWER: part of this module's API)
    NO_ANSWER,
    NotebookError,
    answer_cell_id,
    cell_text,
    is_blank_answer,
    is_mark_scheme,
    load_notebook,
    stub_source,
)
from grader.text import safe_text


GRADEBOOK_ENV = "LAYERS_GRADEBOOK_URL"
CREDENTIALS = re.compile(r"(?P<user>[^\s'\"/:@]*):(?P<password>[^\s'\"@/]+)@")


class GradebookError(RuntimeError):
    """The gradebook cannot be opened or does not have the expected shape."""


def default_db_url(course_dir: Path) -> str:
    return f"sqlite:///{(Path(course_dir) / 'gradebook.db').resolve()}"


def gradebook_url(course_dir: Path, explicit: str | None = None) -> str:
    """The gradebook's SQLAlchemy URL: `explicit` (--db), else $LAYERS_GRADEBOOK_URL, else SQLite.

    >>> gradebook_url("/srv/course", "postgresql://grader@db/layers")
    'postgresql://grader@db/layers'
    """
    import os

    return explicit or os.environ.get(GRADEBOOK_ENV, "").strip() or default_db_url(Path(course_dir))


def add_db_option(parser) -> None:
    """The `--db URL` option of every command that opens the gradebook."""
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help=f"gradebook SQLAlchemy URL (default: ${GRADEBOOK_ENV}, else sqlite:///gradebook.db "
        "in the course dir)",
    )


def redact_url(url: str) -> str:
    """`url` with its password replaced by ***, fit for any message.

    >>> redact_url("postgresql://grader:hunter2@db.example/layers")
    'postgresql://grader:***@db.example/layers'
    """
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy can parse: hide anything shaped like user:password@
        return hide_credentials(str(url))


def hide_credentials(text: str) -> str:
    """`text` with every `user:password@` replaced by `user:***@` (driver messages may echo a URL)."""
    return CREDENTIALS.sub(lambda m: f"{m['user']}:***@", text)


def storable(text: str | None, limit: int = 100_000) -> str | None:
    """`text` as every gradebook backend stores it: valid UTF-8, no NUL, at most `limit` characters."""
    return None if text is None else safe_text(text, limit)


def alembic_head() -> str | None:
    """nbgrader's current database revision, read from its migration scripts (None if unclear)."""
    import nbgrader

    revisions, parents = set(), set()
    for script in (Path(nbgrader.__file__).parent / "alembic" / "versions").glob("*.py"):
        text = script.read_text(encoding="utf-8")
        revision = re.search(r"^revision\s*=\s*['\"](\w+)['\"]", text, re.M)
        parent = re.search(r"^down_revision\s*=\s*['\"](\w+)['\"]", text, re.M)
        if revision:
            revisions.add(revision.group(1))
        if parent:
            parents.add(parent.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _create_schema(db_url: str) -> None:
    """Create nbgrader's tables, stamped with the alembic head, as `Gradebook` would.

    nbgrader asks the `alembic` command for the head revision, a subprocess that costs seconds;
    reading the migration scripts gives the same answer at once.
    """
    from nbgrader.api import Base
    from sqlalchemy import create_engine, inspect, text

    head = alembic_head()
    if head is None:
        return
    engine = create_engine(db_url, future=True)
    try:
        if inspect(engine).get_table_names():
            return
        with engine.begin() as connection:
            Base.metadata.create_all(bind=connection)
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            connection.execute(
                text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head}
            )
    finally:
        engine.dispose()


def import_nbgrader_api():
    """nbgrader.api, imported without jsonschema's optional IRI checker.

    jsonschema builds that checker's grammar at import time (about a second); nbgrader and
    nbformat never validate IRIs, so every command starts that much faster without it.
    """
    import sys

    if "nbgrader.api" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # makes `import rfc3987_syntax` raise ImportError
        try:
            import nbgrader.api  # noqa: F401
        finally:
            del sys.modules["rfc3987_syntax"]
    import nbgrader.api

    return nbgrader.api


def open_gradebook(db_url: str, course_id: str):
    """An `nbgrader.api.Gradebook` for `db_url` (created if new); GradebookError naming the URL on failure."""
    import os
    import shutil
    import sys

    Gradebook = import_nbgrader_api().Gradebook
    if shutil.which("alembic") is None:  # in case nbgrader still needs to run `alembic`
        os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    try:
        _create_schema(db_url)
        return Gradebook(db_url, course_id=course_id)
    except Exception as error:  # sqlalchemy raises many types; all mean "cannot use this URL"
        raise GradebookError(
            f"cannot open the gradebook {redact_url(db_url)}: {describe_error(error)}"
        ) from None


def describe_error(error: BaseException) -> str:
    """`Type: message` on one line (SQLAlchemy appends the SQL statement and a link on further lines),
    with any password hidden."""
    lines = str(error).strip().splitlines()
    return hide_credentials(f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": "))


def notebook_name(assignment) -> str:
    """The gradebook name of an assignment's notebook: its file name without .ipynb."""
    return Path(assignment.notebook).stem


solution_cell_name = answer_cell_id  # the gradebook's name for a part's answer cell


# --- the assignment's structure ---------------------------------------------------------------


@dataclass(frozen=True)
class CellInfo:
    name: str
    cell_type: str  # "code" | "markdown"
    grade: bool
    solution: bool
    locked: bool
    points: float
    source: str
    checksum: str | None


def _read_notebook(path: Path | None):
    if path is None or not path.is_file():
        return None
    import nbformat

    try:
        notebook = load_notebook(path, "the course's notebook", from_student=False)
    except NotebookError:  # a broken course notebook falls back to course.yml alone
        return None
    cells = [dict(cell, source=cell_text(cell)) for cell in notebook["cells"] if isinstance(cell, dict)]
    return nbformat.from_dict(dict(notebook, cells=cells))


def structure_cells(course, assignment) -> list[CellInfo]:
    """The cells the gradebook records for `assignment`, as generate_assignment would.

    Graded and locked cells come from source/<id>/<notebook> (hidden tests included, as nbgrader
    keeps them for autograding); solution cells show the released stub from assignments/<id>/.
    Parts missing from the notebooks (or notebooks that do not exist yet) come from course.yml.
    """
    import nbformat
    from nbgrader import utils

    source = _read_notebook(course.root / "source" / assignment.id / assignment.notebook)
    released = _read_notebook(course.root / "assignments" / assignment.id / assignment.notebook)
    released_by_id = {}
    for cell in released.cells if released else []:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id:
            released_by_id[grade_id] = cell
    cells: dict[str, CellInfo] = {}
    course_points = {part.id: part.points for part in assignment.parts}
    for cell in source.cells if source else []:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if not grade_id or cell.cell_type not in ("code", "markdown"):
            continue
        grade, solution, locked = (
            bool(meta.get("grade")),
            bool(meta.get("solution")),
            bool(meta.get("locked")),
        )
        if not (grade or solution or locked) or grade_id in cells or is_mark_scheme(cell):
            continue
        shown = released_by_id.get(grade_id) if solution else None
        if shown is not None:
            text = shown.source
        else:
            text = stub_source(cell.source, cell.cell_type) if solution else cell.source
        points = float(course_points.get(grade_id, meta.get("points", 0)) or 0) if grade else 0.0
        copy = nbformat.from_dict(
            {
                "cell_type": cell.cell_type,
                "source": text,
                "metadata": {"nbgrader": {**meta, "points": points}},
            }
        )
        checksum = utils.compute_checksum(copy)
        cells[grade_id] = CellInfo(grade_id, cell.cell_type, grade, solution, locked, points, text, checksum)
    for part in assignment.parts:
        manual = part.kind == "manual"
        kind = "markdown" if manual else "code"
        existing = cells.get(part.id)
        if existing is None or not existing.grade:
            cells[part.id] = CellInfo(part.id, kind, True, manual, True, part.points, "", None)
        elif existing.points != part.points:  # course.yml is the source of truth for points
            cells[part.id] = CellInfo(
                existing.name,
                existing.cell_type,
                True,
                existing.solution,
                existing.locked,
                part.points,
                existing.source,
                existing.checksum,
            )
        if not manual and solution_cell_name(part) not in cells:
            name = solution_cell_name(part)
            cells[name] = CellInfo(name, "code", False, True, False, 0.0, "", None)
    return list(cells.values())


def ensure_assignment(gradebook, course, assignment) -> None:
    """Create the assignment, its notebook and its cells where missing (one transaction).

    Rows that `nbgrader generate_assignment` (or an earlier run) recorded are kept; only the grade
    cells' points and types follow course.yml.
    """
    from nbgrader.api import Assignment, GradeCell, MissingEntry, Notebook, SolutionCell, SourceCell

    db = gradebook.db
    try:
        try:
            row = gradebook.find_assignment(assignment.id)
        except MissingEntry:
            row = Assignment(name=assignment.id, course_id=gradebook.course_id)
            db.add(row)
        name = notebook_name(assignment)
        notebook = next((nb for nb in row.notebooks if nb.name == name), None)
        if notebook is None:
            notebook = Notebook(
                name=name,
                assignment=row,
                kernelspec=json.dumps(
                    {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
                ),
            )
            db.add(notebook)
        grade_cells = {cell.name: cell for cell in notebook.grade_cells}
        solution_cells = {cell.name: cell for cell in notebook.solution_cells}
        source_cells = {cell.name: cell for cell in notebook.source_cells}
        for info in structure_cells(course, assignment):
            if info.grade:
                cell = grade_cells.get(info.name) or GradeCell(name=info.name, notebook=notebook)
                _set(cell, max_score=info.points, cell_type=info.cell_type)
                db.add(cell)
            if info.solution:
                cell = solution_cells.get(info.name) or SolutionCell(name=info.name, notebook=notebook)
                db.add(cell)
            if (info.grade or info.solution or info.locked) and info.name not in source_cells:
                db.add(
                    SourceCell(
                        name=info.name,
                        notebook=notebook,
                        cell_type=info.cell_type,
                        locked=info.locked,
                        source=info.source,
                        checksum=info.checksum,
                    )
                )
        db.commit()
    except Exception:
        db.rollback()
        raise


def _set(row, **values) -> None:
    for key, value in values.items():
        if getattr(row, key) != value:
            setattr(row, key, value)


# --- one submission ---------------------------------------------------------------------------


def part_comment(part_result, error: str | None = None, answer: str | None = None) -> str | None:
    """The comment next to one answer: status, score, feedback and misconceptions (redacted, as
    `nbgrader generate_feedback` shows comments to students)."""
    from grader.feedback import redact
    from grader.misconceptions import MISCONCEPTIONS

    lines = []
    if error:
        lines.append(f"This submission could not be graded: {redact(error)}")
    if part_result is None:
        return "\n".join(lines) or None
    if part_result.status == "manual":
        if is_blank_answer(answer) and answer is not None:
            lines.append("No response.")
        return "\n".join(lines) or None
    score = f"{part_result.score:g}/{part_result.max_score:g}"
    lines.append(f"[{part_result.status}] {score}: {redact(part_result.feedback)}")
    for code in part_result.misconceptions:
        lines.append(f"Misconception {code}: {MISCONCEPTIONS.get(code, '')}".rstrip(": "))
    return "\n".join(lines)


def record_submission(gradebook, course, result, *, timestamp=None, changed: bool = True) -> None:
    """Write one `SubmissionResult` into the gradebook in a single transaction.

    Automatic parts get `auto_score`; manual parts get none and are flagged for manual grading.
    A blank free-text answer comes graded (`grader.grading.grade_part`: failed, 0, "no answer"),
    so it gets auto_score 0 and no flag, as nbgrader scores an untouched solution cell. A manual
    score already given is kept; `changed` (the submission differs from the one graded before)
    flags it for review, as nbgrader does. Comments pass through `storable`, so no student text
    can make the write fail.
    """
    from nbgrader import utils
    from nbgrader.api import Comment, Grade, MissingEntry, Student, SubmittedAssignment, SubmittedNotebook

    assignment = course.assignment(result.assignment)
    db = gradebook.db
    try:
        student = db.get(Student, result.student)
        if student is None:
            student = Student(id=result.student)
            db.add(student)
        assignment_row = gradebook.find_assignment(assignment.id)
        notebook = next(nb for nb in assignment_row.notebooks if nb.name == notebook_name(assignment))
        try:
            submission = gradebook.find_submission(assignment.id, result.student)
        except MissingEntry:
            submission = SubmittedAssignment(assignment=assignment_row, student=student)
            db.add(submission)
        try:
            stamp = utils.parse_utc(timestamp) if timestamp else None
        except (ValueError, OverflowError, TypeError):  # an unreadable timestamp.txt is left out
            stamp = None
        _set(submission, timestamp=stamp)
        submitted = next((nb for nb in submission.notebooks if nb.notebook_id == notebook.id), None)
        if submitted is None:
            submitted = SubmittedNotebook(notebook=notebook, assignment=submission)
            db.add(submitted)
        grades = {grade.cell_id: grade for grade in submitted.grades}
        comments = {comment.cell_id: comment for comment in submitted.comments}
        by_part = {part.id: part for part in result.parts}
        answers = getattr(result, "answers", {}) or {}
        for cell in notebook.grade_cells:
            grade = _row_for(db, grades, Grade, cell, submitted)
            part_result = by_part.get(cell.name)
            manual = part_result is None or part_result.status == "manual"
            needs = manual if grade.manual_score is None else bool(grade.needs_manual_grade) or changed
            _set(grade, auto_score=None if manual else float(part_result.score), needs_manual_grade=needs)
        parts_by_solution = {solution_cell_name(part): part for part in assignment.parts}
        for cell in notebook.solution_cells:
            comment = _row_for(db, comments, Comment, cell, submitted)
            part = parts_by_solution.get(cell.name)
            text = None
            if part is not None and part.id in by_part:
                text = part_comment(by_part[part.id], result.error, answers.get(part.id))
            elif result.error:
                text = part_comment(None, result.error)
            _set(comment, auto_comment=storable(text))
        db.commit()
    except Exception:
        db.rollback()
        raise


def _row_for(db, existing: dict, model, cell, submitted):
    """The submission's `model` row (Grade or Comment) for `cell`, added when missing."""
    row = existing.get(cell.id)
    if row is None:
        row = model(cell=cell, notebook=submitted)
        db.add(row)
    return row


def stored_scores(gradebook, assignment, student: str) -> dict[str, float | None] | None:
    """{part id: auto_score} recorded for `student`, or None when nothing is recorded."""
    from nbgrader.api import MissingEntry

    try:
        submitted = gradebook.find_submission_notebook(notebook_name(assignment), assignment.id, student)
    except MissingEntry:
        return None
    return {grade.cell.name: grade.auto_score for grade in submitted.grades}


# --- reading it back ---------------------------------------------------------------------------


def dump(gradebook) -> list[dict]:
    """A normalized, id-free view of every submission's grades and comments (for comparisons)."""
    from nbgrader.api import SubmittedNotebook

    rows = []
    for submitted in gradebook.db.query(SubmittedNotebook).all():
        rows.append(
            {
                "student": submitted.assignment.student.id,
                "assignment": submitted.assignment.assignment.name,
                "notebook": submitted.notebook.name,
                "grades": sorted(
                    (g.cell.name, g.auto_score, g.manual_score, g.extra_credit, bool(g.needs_manual_grade))
                    for g in submitted.grades
                ),
                "comments": sorted(
                    (c.cell.name, c.auto_comment, c.manual_comment) for c in submitted.comments
                ),
            }
        )
    return sorted(rows, key=lambda row: (row["student"], row["assignment"], row["notebook"]))


@dataclass
class ScoreTable:
    """Scores per student: columns are (assignment, part) pairs in course order."""

    columns: list[tuple[str, str]]
    max_scores: dict[tuple[str, str], float]
    scores: dict[str, dict[tuple[str, str], float]]  # student -> column -> score (missing: not submitted)
    needs_manual: dict[str, int]  # student -> number of parts still waiting for a manual grade


def score_table(gradebook, course=None) -> ScoreTable:
    """Every student's score per graded cell, read from the gradebook (manual scores win)."""
    from nbgrader.api import Assignment, Grade, Student

    order = {a.id: (i, [p.id for p in a.parts]) for i, a in enumerate(course.assignments)} if course else {}
    assignments = gradebook.db.query(Assignment).all()
    assignments.sort(key=lambda a: (order.get(a.name, (len(order), []))[0], a.name))
    columns, max_scores = [], {}
    for row in assignments:
        part_order = order.get(row.name, (0, []))[1]
        cells = [cell for nb in sorted(row.notebooks, key=lambda nb: nb.name) for cell in nb.grade_cells]
        cells.sort(
            key=lambda c: (part_order.index(c.name) if c.name in part_order else len(part_order), c.name)
        )
        for cell in cells:
            columns.append((row.name, cell.name))
            max_scores[(row.name, cell.name)] = float(cell.max_score)
    scores = {student.id: {} for student in gradebook.db.query(Student).all()}
    needs = {student: 0 for student in scores}
    for grade in gradebook.db.query(Grade).all():
        student = grade.notebook.assignment.student.id
        key = (grade.notebook.assignment.assignment.name, grade.cell.name)
        scores[student][key] = float(grade.score)
        needs[student] += bool(grade.needs_manual_grade)
    return ScoreTable(columns, max_scores, scores, needs)
