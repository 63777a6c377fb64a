"""`python -m grader export --csv FILE`: grades from the gradebook as one CSV row per student.

Columns: student, then `<assignment>.<part>` for every graded part, `<assignment>.total` after each
assignment's parts, `total` (grand total) and `needs_manual_grade` (parts still waiting for a
grader). Scores are the gradebook's: a manual score, where given, overrides the automatic one.
A part of an assignment the student never submitted is left empty.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from grader.course import CourseError, add_course_option, load_course_dir
from grader.gradebook import (
    GradebookError,
    add_db_option,
    gradebook_url,
    open_gradebook,
    redact_url,
    score_table,
)


def add_arguments(parser):
    parser.add_argument("--csv", required=True, metavar="FILE", help="CSV file to write ('-' for stdout)")
    add_db_option(parser)
    add_course_option(parser)


def rows(table) -> tuple[list[str], list[list]]:
    """(header, rows) of the CSV for a `grader.gradebook.ScoreTable`."""
    header, layout = ["student"], []
    for assignment in dict.fromkeys(assignment for assignment, _ in table.columns):
        parts = [column for column in table.columns if column[0] == assignment]
        header += [f"{a}.{p}" for a, p in parts] + [f"{assignment}.total"]
        layout.append((assignment, parts))
    header += ["total", "needs_manual_grade"]
    out = []
    for student in sorted(table.scores):
        scores = table.scores[student]
        row, grand = [student], 0.0
        for _, parts in layout:
            subtotal = sum(scores.get(c, 0.0) for c in parts)
            row += [_number(scores[c]) if c in scores else "" for c in parts] + [_number(subtotal)]
            grand += subtotal
        out.append(row + [_number(grand), table.needs_manual.get(student, 0)])
    return header, out


def _number(value: float) -> str:
    return f"{round(value, 6):g}"


def run(args) -> int:
    try:
        course, course_dir = load_course_dir(args.course)
        url = gradebook_url(course_dir, args.db)
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
            raise GradebookError(
                f"no gradebook at {redact_url(url)}; run `python -m grader autograde` first or pass --db"
            )
        gradebook = open_gradebook(url, course.course_id)
        try:
            header, body = rows(score_table(gradebook, course))
        finally:
            gradebook.close()
    except (CourseError, GradebookError) as error:
        print(f"export: {error}", file=sys.stderr)
        return 2
    try:
        if args.csv == "-":
            _write(sys.stdout, header, body)
        else:
            with open(args.csv, "w", newline="", encoding="utf-8") as handle:
                _write(handle, header, body)
    except OSError as error:
        print(f"export: cannot write {args.csv}: {error.strerror}", file=sys.stderr)
        return 2
    if args.csv != "-":
        print(f"wrote {len(body)} student(s) x {len(header) - 1} columns to {args.csv}", file=sys.stderr)
    return 0


def _write(handle, header, body) -> None:
    writer = csv.writer(handle)
    writer.writerow(header)
    writer.writerows(body)
