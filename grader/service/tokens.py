"""`python -m grader tokens`: per-student tokens for the grading service, derived from the course secret.

A token is `<student>.<tag>`, where the tag is HMAC-SHA256(secret, "layerlab-service-token/" +
student) in hex. The service recomputes the tag, so it keeps no token list, and a token names
its student. Changing the course secret revokes every token at once.

    >>> token = token_for("s3cret", "ada")
    >>> token.startswith("ada.") and student_of("s3cret", token)
    'ada'
    >>> student_of("s3cret", "ada.0000") is None
    True
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import re
import sys
from pathlib import Path

STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
TAG_CHARS = 32
PURPOSE = "layerlab-service-token/"


def _tag(secret: str, student: str) -> str:
    digest = hmac.new(secret.encode(), (PURPOSE + student).encode(), hashlib.sha256).hexdigest()
    return digest[:TAG_CHARS]


def token_for(secret: str, student: str) -> str:
    """The service token of `student`; ValueError for an id that cannot name a folder safely."""
    if not STUDENT_ID.fullmatch(student) or student in (".", ".."):
        raise ValueError(
            f"student id {student!r:.80} must be 1-64 letters, digits or _.@+- "
            "and start with a letter or digit"
        )
    return f"{student}.{_tag(secret, student)}"


def student_of(secret: str, token: str) -> str | None:
    """The student a token belongs to, or None when it is not a token of this course."""
    if type(token) is not str or len(token) > 200:
        return None
    student, _, tag = token.strip().rpartition(".")
    if not STUDENT_ID.fullmatch(student) or len(tag) != TAG_CHARS:
        return None
    return student if hmac.compare_digest(tag, _tag(secret, student)) else None


def add_arguments(parser):
    parser.add_argument("students", nargs="*", metavar="STUDENT", help="student ids")
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="read student ids from FILE: one per line, or a CSV whose first column is the id",
    )
    parser.add_argument("--csv", action="store_true", help="print CSV (student,token) with a header")
    from grader.course import add_course_option

    add_course_option(parser)


def read_students(path: str | Path) -> list[str]:
    """Student ids from a text file (one per line) or a CSV (first column; a header 'student' is skipped)."""
    rows = csv.reader(Path(path).read_text(encoding="utf-8").splitlines())
    ids = [row[0].strip() for row in rows if row and row[0].strip() and not row[0].startswith("#")]
    return ids[1:] if ids and ids[0].lower() in ("student", "student_id", "id") else ids


def run(args) -> int:
    from grader.course import CourseError, load_course_dir
    from grader.seeding import PUBLIC_SECRET, grading_secret

    try:
        course, _ = load_course_dir(args.course)
        students = list(args.students) + (read_students(args.from_file) if args.from_file else [])
    except (CourseError, OSError) as error:
        print(f"tokens: {error}", file=sys.stderr)
        return 2
    secret = grading_secret(course.secret_env)
    if secret == PUBLIC_SECRET:
        print(
            f"tokens: {course.secret_env} is not set; tokens derive from the course secret", file=sys.stderr
        )
        return 2
    if not students:
        print("tokens: name the students (STUDENT ... or --from FILE)", file=sys.stderr)
        return 2
    try:
        rows = [(student, token_for(secret, student)) for student in dict.fromkeys(students)]
    except ValueError as error:
        print(f"tokens: {error}", file=sys.stderr)
        return 2
    writer = csv.writer(sys.stdout, lineterminator="\n")
    if args.csv:
        writer.writerow(["student", "token"])
        writer.writerows(rows)
    else:
        for student, token in rows:
            print(f"{student}\t{token}")
    return 0
