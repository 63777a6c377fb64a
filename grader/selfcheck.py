"""`python -m grader check NOTEBOOK`: grade one filled-in notebook, for self-study and spot checks.

The assignment is recognised from the notebook's answer cells (their nbgrader grade_ids) or its
file name, unless --assignment names it. Exit status 0 whenever grading happened, whatever the
score; 1 when the notebook was read but could not be graded (e.g. it holds another assignment's
cells); 2 with a one-line message when the input is unusable (missing, not a notebook, unknown
assignment).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from grader.course import CourseError, add_course_option, load_course_dir
from grader.feedback import redact
from grader.misconceptions import MISCONCEPTIONS
from grader.notebook import NotebookError, grade_id_of, load_notebook, part_id_of
from grader.pipeline.progress import format_table
from grader.pipeline.warm_sandbox import isolated_sandbox
from grader.sandbox import SandboxError
from grader.seeding import PUBLIC_SECRET, grading_secret
from grader.submission import grade_submission


def add_arguments(parser):
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the filled-in notebook (.ipynb)")
    parser.add_argument(
        "--student",
        default="self-check",
        metavar="ID",
        help="student id the randomized inputs are drawn for (default: self-check)",
    )
    parser.add_argument(
        "--assignment",
        default=None,
        metavar="ID",
        help="assignment id (default: recognised from the notebook)",
    )
    add_course_option(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


class Unusable(Exception):
    """The input cannot be graded; the message says what is wrong with it."""


def detect_assignment(course, notebook_path: Path) -> str:
    """The assignment id of a notebook: by its answer cells' grade_ids, else by its file name."""
    try:
        data = load_notebook(notebook_path)
    except NotebookError as error:
        raise Unusable(str(error)) from None
    grade_ids = {part_id_of(grade_id) for grade_id in map(grade_id_of, data["cells"]) if grade_id}
    best, best_hits = None, 0
    for assignment in course.assignments:
        hits = len(grade_ids & {part.id for part in assignment.parts})
        if hits > best_hits:
            best, best_hits = assignment.id, hits
    if best is not None:
        return best
    stem = notebook_path.stem
    for assignment in course.assignments:
        if stem in (assignment.id, Path(assignment.notebook).stem) or stem.startswith(assignment.id):
            return assignment.id
    known = ", ".join(a.id for a in course.assignments)
    raise Unusable(
        f"cannot tell which assignment {notebook_path.name} belongs to (no known answer cells "
        f"and no matching file name); pass --assignment, one of: {known}"
    )


def run(args) -> int:
    try:
        course, _ = load_course_dir(args.course)
        path = Path(args.notebook)
        if not path.exists():
            raise Unusable(f"{path}: file not found")
        if not path.is_file():
            raise Unusable(f"{path} is not a file")
        if args.assignment is not None:
            assignment_id = course.assignment(args.assignment).id
            detect_assignment(course, path)  # still refuse something that is not a notebook
        else:
            assignment_id = detect_assignment(course, path)
    except (Unusable, CourseError) as error:
        print(f"check: {error}", file=sys.stderr)
        return 2
    try:
        result, public = grade_notebook(course, assignment_id, path, args.student)
    except SandboxError as error:
        print(f"check: the sandbox for student code could not start: {error}", file=sys.stderr)
        return 2
    if args.json:
        data = result.to_dict()
        print(
            json.dumps(
                {
                    key: data[key]
                    for key in ("notebook", "assignment", "student", "score", "max_score", "parts", "error")
                },
                indent=1,
            )
        )
    else:
        print(report(course, result, public))
    if result.error:
        print(f"check: {result.error}", file=sys.stderr)
        return 1
    return 0


def grade_notebook(course, assignment_id: str, path: Path, student: str):
    """(SubmissionResult, whether the public self-check secret was used)."""
    secret = grading_secret(course.secret_env)
    with isolated_sandbox(course.limits) as sandbox:
        for line in sandbox.describe():  # which walls are in force here
            print(f"check: {line}", file=sys.stderr)
        result = grade_submission(course, assignment_id, path, student, secret, sandbox)
    return result, secret == PUBLIC_SECRET


def report(course, result, public_secret: bool = False) -> str:
    """The per-part table a student or instructor reads after `check`."""
    assignment = course.assignment(result.assignment)
    tasks = {part.id: part.task for part in assignment.parts}
    rows = []
    for part in result.parts:
        score = "manual" if part.status == "manual" else f"{part.score:g}/{part.max_score:g}"
        text = textwrap.wrap(" ".join(redact(part.feedback).split()), 80) or [""]
        for code in part.misconceptions:
            text += textwrap.wrap(f"-> {code}: {MISCONCEPTIONS.get(code, '')}", 80, subsequent_indent="   ")
        rows.append([part.id, tasks.get(part.id, ""), score, str(part.status), text[0]])
        rows += [["", "", "", "", line] for line in text[1:]]
    lines = [f"{assignment.title} ({assignment.id}), student {result.student}", ""]
    if result.error:
        lines += [f"This notebook could not be graded: {redact(result.error)}", ""]
    lines.append(format_table(["part", "task", "score", "status", "feedback"], rows, max_width=200))
    manual = sum(p.max_score for p in result.parts if p.status == "manual")
    total = f"Total: {result.score:g}/{result.max_score:g}"
    if manual:
        total += (
            " (the 1 point for the free-text answer is graded by the instructor)"
            if manual == 1
            else f" (the {manual:g} points for free-text answers are graded by the instructor)"
        )
    lines += ["", total]
    for warning in getattr(result, "warnings", []) or []:
        lines.append(f"warning: {warning}")
    if public_secret:
        lines.append(
            f"note: {course.secret_env} is not set, so this check used the public self-check "
            "inputs; your graded inputs will differ."
        )
    return "\n".join(lines)
