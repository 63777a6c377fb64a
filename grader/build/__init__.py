"""`python -m grader build [--check] [ASSIGNMENT ...]`: regenerate assignments/ and solutions/.

The source notebook `source/<id>/<id>.ipynb` is the single source of truth for a notebook's
content, and course.yml for its ids, points and exercises (docs/notebooks.md). The build runs two
pipelines of small nbconvert preprocessors over each source (grader.build.pipelines, one step per
module in grader.build.steps, reusing nbgrader's own steps where they fit) and writes the release
to assignments/ and the executed solution to solutions/.

Both notebooks carry a digest of their source (grader.build.digest). Solutions are re-executed
only when that digest or their cells change, so a second build on an unchanged tree changes
nothing. `--check` rebuilds in memory without running anything and lists the generated files that
are out of date. nbgrader_config.py registers the same pipelines, so `nbgrader generate_assignment`
writes the same release notebook and `nbgrader generate_solution` the same kind of clean solution.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grader.build.builder import Builder
from grader.build.source import BuildError
from grader.course import DEFAULT_COURSE_FILE, CourseError, load_course


def add_arguments(parser):
    parser.add_argument(
        "assignments", nargs="*", metavar="ASSIGNMENT", help="assignment ids from course.yml (default: all)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if assignments/ or solutions/ are out of date with source/",
    )
    parser.add_argument(
        "--force", action="store_true", help="re-execute solutions even when they are up to date"
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the course directory holding course.yml (default: this repository)",
    )


def run(args) -> int:
    root = (args.root or DEFAULT_COURSE_FILE.parent).resolve()
    try:
        course = load_course(root / "course.yml")
        selected = (
            [course.assignment(a) for a in args.assignments] if args.assignments else list(course.assignments)
        )
        builder = Builder(root, course)
        if args.check:
            problems = builder.check(selected)
            if problems:
                print(
                    f"python -m grader build --check: {len(problems)} generated file(s) "
                    "are out of date with source/:",
                    file=sys.stderr,
                )
                for problem in problems:
                    print(f"  {problem}", file=sys.stderr)
                print(
                    "Run `python -m grader build` (or `make build`) and commit the result.", file=sys.stderr
                )
                return 1
            print(
                "assignments/ and solutions/ are up to date with source/ "
                f"({len(selected)} assignment(s) checked)"
            )
            return 0
        builder.build(selected, force=args.force)
        return 0
    except (BuildError, CourseError) as error:
        print(f"python -m grader build: error: {error}", file=sys.stderr)
        return 1
