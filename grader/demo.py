"""`python -m grader demo`: build a demo class in a fresh folder, autograde it, show the results.

The course (course.yml, source/, assignments/) is copied to a new temporary folder, so the
repository is never touched. The class (grader/demo_class.py) has a student with the model
solutions, one who handed in the stubs, one per typical mistake and one per cheating attempt.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

from grader import gradebook as gbm
from grader.autograde import autograde
from grader.course import DEFAULT_COURSE_FILE, CourseError, add_workers_option, load_course
from grader.demo_class import CLASS, write_submissions
from grader.feedback import redact
from grader.misconceptions import MISCONCEPTIONS
from grader.pipeline.progress import format_table

DEMO_SECRET = "demo-course-secret"
DEMO_LIMITS = {"part_timeout_s": 5, "notebook_timeout_s": 60}


def add_arguments(parser):
    parser.add_argument(
        "--dir",
        default=None,
        metavar="DIR",
        help="where to build the demo course (must not exist or be empty; default: a new temporary folder)",
    )
    add_workers_option(parser)


def prepare(directory: Path, repo: Path) -> None:
    """Copy the course into `directory` with the demo's shorter time limits.

    Raises CourseError, before copying anything, when course.yml is malformed.
    """
    load_course(repo / "course.yml")  # a malformed course.yml: CourseError before anything is copied
    if not (repo / "source").is_dir() or not any((repo / "source").glob("*/*.ipynb")):
        raise FileNotFoundError(f"the course notebooks are missing under {repo / 'source'}")
    directory.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((repo / "course.yml").read_text(encoding="utf-8"))
    config.setdefault("limits", {}).update(DEMO_LIMITS)
    (directory / "course.yml").write_text(
        "# A copy of the course's course.yml for the demo, with shorter time limits.\n"
        + yaml.safe_dump(config, sort_keys=False),
        encoding="utf-8",
    )
    for folder in ("source", "assignments"):
        if (repo / folder).is_dir():
            shutil.copytree(repo / folder, directory / folder)
    if (repo / "nbgrader_config.py").is_file():
        shutil.copy(repo / "nbgrader_config.py", directory / "nbgrader_config.py")


def run(args) -> int:
    repo = DEFAULT_COURSE_FILE.parent
    if args.dir:
        directory = Path(args.dir).resolve()
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            print(f"demo: {directory} already exists and is not empty; pick a new folder", file=sys.stderr)
            return 2
    else:
        directory = Path(tempfile.mkdtemp(prefix="layers-demo-"))
    try:
        prepare(directory, repo)
        course = load_course(directory / "course.yml")
    except (FileNotFoundError, CourseError) as error:
        print(f"demo: {error}", file=sys.stderr)
        return 2
    available = [a.id for a in course.assignments if (directory / "source" / a.id / a.notebook).is_file()]
    missing = [a.id for a in course.assignments if a.id not in available]
    students = tuple(s for s in CLASS if any(s.submits(a) for a in available))
    submissions = write_submissions(course, directory, students, available)
    workers = args.workers or course.limits.workers
    print(f"{course.title}: autograder demo\n")
    print(f"Course copied to {directory} (the repository is not touched).")
    if missing:
        print(f"Note: the notebooks of {', '.join(missing)} are not in source/ yet, so they are left out.")
    print(
        f"{len(students)} students handed in {len(submissions)} notebooks. Demo limits: "
        f"{course.limits.part_timeout_s:g} s per call into student code, "
        f"{course.limits.notebook_timeout_s:g} s per notebook; {workers} worker(s).\n"
    )
    start = time.monotonic()
    try:
        outcomes = autograde(course, directory, workers=workers, secret=DEMO_SECRET)
    except KeyboardInterrupt:
        print("\ndemo: interrupted", file=sys.stderr)
        return 130
    elapsed = time.monotonic() - start
    intact, integrity_note = gradebook_intact(course, directory, outcomes)
    rows, ok = verdicts(course, outcomes, intact, students)
    print()
    print(report(course, directory, outcomes, rows, elapsed, intact, integrity_note))
    return 0 if ok else 1


# --- judging the outcome ------------------------------------------------------------------------


def _auto_parts(result: dict) -> list[dict]:
    return [p for p in result.get("parts", []) if p.get("status") != "manual"]


def student_results(outcomes) -> dict[str, list[dict]]:
    by_student: dict[str, list[dict]] = {}
    for outcome in outcomes:
        by_student.setdefault(outcome.job.student, []).append(outcome.result)
    return by_student


def verdicts(course, outcomes, gradebook_ok: bool, students=None):
    """Rows (student, what they did, score, codes, verdict) and whether every verdict holds."""
    by_student = student_results(outcomes)
    rows, all_ok = [], True
    for student in students or CLASS:
        results = by_student.get(student.id, [])
        parts = {f"{r['assignment']}.{p['id']}": p for r in results for p in _auto_parts(r)}
        score = sum(p["score"] for p in parts.values())
        max_score = sum(p["max_score"] for p in parts.values())
        codes = sorted({c for p in parts.values() for c in p.get("misconceptions", [])})
        if not results:
            ok, verdict = False, "not graded"
        elif student.kind == "reference" and student.base == "solutions":
            lost = [key for key, p in parts.items() if p["score"] < p["max_score"]]
            ok = not lost
            verdict = "full marks" if ok else f"lost points on {', '.join(lost)}"
        elif student.kind == "reference":
            ok = score == 0 and "not-implemented" in codes
            verdict = "nothing to grade yet, told so" if ok else "stubs earned points"
        elif student.kind == "mistake":
            missing = [c for c in student.expect if c not in codes]
            ok = not missing
            verdict = "mistake named" if ok else f"not named: {', '.join(missing)}"
        else:
            attacked = _expand(course, student.attacked)
            gained = [key for key in attacked if parts.get(key, {}).get("score", 0) > 0]
            others = [p for key, p in parts.items() if key not in attacked]
            rest_ok = student.base == "stubs" or all(p["score"] == p["max_score"] for p in others)
            ok = not gained and rest_ok and (student.id != "x-gradebook" or gradebook_ok)
            if gained:
                verdict = f"CHEAT WORKED on {', '.join(gained)}"
            elif student.id == "x-gradebook" and not gradebook_ok:
                verdict = "GRADEBOOK CHANGED"
            elif not rest_ok:
                verdict = "blocked, but the rest was not graded in full"
            elif student.base == "solutions":
                verdict = "contained; the rest graded normally"
            else:
                verdict = "blocked: no points gained"
        all_ok &= ok
        mark = "ok " if ok else "!! "
        rows.append(
            [student.id, student.does, f"{score:g}/{max_score:g}", " ".join(codes) or "-", mark + verdict]
        )
    return rows, all_ok


def _expand(course, keys) -> list[str]:
    out = []
    for key in keys:
        assignment_id, _, part_id = key.partition(".")
        if part_id == "*":
            out += [
                f"{assignment_id}.{p.id}"
                for p in course.assignment(assignment_id).parts
                if p.kind != "manual"
            ]
        else:
            out.append(key)
    return out


def gradebook_intact(course, directory: Path, outcomes) -> tuple[bool, str]:
    """Whether the gradebook holds exactly the autograder's scores (no student rewrote it)."""
    try:
        gradebook = gbm.open_gradebook(gbm.default_db_url(directory), course.course_id)
    except gbm.GradebookError as error:
        return False, f"the gradebook cannot be opened: {error}"
    try:
        rows = {(row["student"], row["assignment"]): row for row in gbm.dump(gradebook)}
    except Exception as error:  # a corrupted database raises from sqlalchemy
        return False, f"the gradebook cannot be read: {type(error).__name__}"
    finally:
        gradebook.close()
    for outcome in outcomes:
        row = rows.get((outcome.job.student, outcome.job.assignment))
        if row is None:
            return False, f"{outcome.job.student}/{outcome.job.assignment} is missing from the gradebook"
        stored = {name: (auto, manual) for name, auto, manual, _, _ in row["grades"]}
        for part in outcome.result.get("parts", []):
            expected = (None if part["status"] == "manual" else part["score"], None)
            if stored.get(part["id"]) != expected:
                return (
                    False,
                    f"{outcome.job.student}/{outcome.job.assignment}.{part['id']} differs from "
                    "the autograder's result",
                )
    return True, f"all {len(outcomes)} submissions in the gradebook match the autograder's results"


# --- the printout ---------------------------------------------------------------------------------


def report(course, directory: Path, outcomes, rows, elapsed: float, intact: bool, integrity_note: str) -> str:
    out = [
        format_table(
            ["student", "what they handed in", "auto score", "misconceptions named", "verdict"],
            rows,
            max_width=64,
        ),
        "",
    ]
    out.append(
        f"Graded {len(outcomes)} notebooks in {elapsed:.1f} s (sandbox start-up included). Gradebook check: "
        f"{'ok' if intact else 'FAILED'}: {integrity_note}."
    )
    out += ["", "What the students are told (first lost part per student):", ""]
    by_student = student_results(outcomes)
    for student in CLASS:
        if student.kind == "reference" and student.base == "solutions":
            continue
        lost = [
            (r["assignment"], p)
            for r in by_student.get(student.id, [])
            for p in _auto_parts(r)
            if p["score"] < p["max_score"]
        ]
        if student.kind == "cheat":
            attacked = set(_expand(course, student.attacked))
            lost = [item for item in lost if f"{item[0]}.{item[1]['id']}" in attacked] or lost
        if not lost:
            continue
        assignment_id, part = lost[0]
        task = course.assignment(assignment_id).part(part["id"]).task
        out.append(
            f"  {student.id} - task {task} `{part['id']}` ({part['status']}, "
            f"{part['score']:g}/{part['max_score']:g}):"
        )
        out += textwrap.wrap(
            " ".join(redact(part["feedback"]).split()),
            96,
            initial_indent="      ",
            subsequent_indent="      ",
        )
        for code in part.get("misconceptions", []):
            out += textwrap.wrap(
                f"{code}: {MISCONCEPTIONS.get(code, '')}",
                96,
                initial_indent="      > ",
                subsequent_indent="        ",
            )
        out.append("")
    manual = sum(1 for o in outcomes for p in o.result.get("parts", []) if p.get("status") == "manual")
    example = next(iter(sorted((directory / "feedback").rglob("*.html"))), None)
    out += [
        "Where things are:",
        f"  gradebook (nbgrader)  {directory / 'gradebook.db'}  "
        f"({manual} free-text answers wait for manual grading)",
        f"  feedback pages        {directory / 'feedback'}/<student>/<assignment>/<notebook>.html",
    ]
    if example is not None:
        out.append(f"  for example           {example}")
    out += [
        f"  raw results           {directory / 'autograded'}/<student>/<assignment>/results.json",
        "",
        "Try next:",
        f"  python -m grader export --csv grades.csv --course {directory}",
        f"  python -m grader autograde --course {directory}      # a rerun re-grades nothing unchanged",
        f"  python -m grader check {directory / 'submitted' / 'max' / '01_shapes' / '01_shapes.ipynb'}",
    ]
    return "\n".join(out)
