"""Grade the same class with vanilla `nbgrader autograde` and with `python -m grader autograde`.

    python benchmarks/autograde_vs_nbgrader.py [--students 4] [--assignments 01_shapes ...] [--workers 2]

Works on temporary copies of the course (the repository is not touched). Vanilla nbgrader runs
each notebook in a fresh Jupyter kernel, one after another, with the hidden tests grading in the
notebook's own process; the grader forks each submission from a warm, isolated interpreter and
grades several in parallel. Prints both wall times, the time per notebook, the throughput ratio,
and the grader's per-notebook overhead beyond the student's own compute (the time the same code
cells take in a warm interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nbgrader.api import Notebook  # noqa: E402

from grader.course import load_course  # noqa: E402
from grader.demo_class import CLASS, DemoStudent, write_submissions  # noqa: E402
from grader.gradebook import default_db_url, open_gradebook  # noqa: E402

SECRET = "benchmark-secret"


def benchmark_class(count: int) -> list[DemoStudent]:
    """`count` students who hand in every assignment: model solutions, stubs, and mixed mistakes."""
    mistakes = [s for s in CLASS if s.kind == "mistake"]
    mixed_a = {k: v for s in mistakes[0::2] for k, v in s.answers.items()}
    mixed_b = {k: v for s in mistakes[1::2] for k, v in s.answers.items()}
    students = [
        DemoStudent("ada", "model solutions", "solutions"),
        DemoStudent("sam", "stubs", "stubs"),
        DemoStudent("mia", "half of the typical mistakes", "solutions", mixed_a),
        DemoStudent("leo", "the other typical mistakes", "solutions", mixed_b),
    ]
    extra = [DemoStudent(f"student{i}", "model solutions", "solutions") for i in range(max(0, count - 4))]
    return (students + extra)[:count]


def make_course(directory: Path, students, assignment_ids) -> None:
    directory.mkdir(parents=True)
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy(REPO / name, directory / name)
    for folder in ("source", "assignments"):
        shutil.copytree(REPO / folder, directory / folder)
    course = load_course(directory / "course.yml")
    write_submissions(course, directory, students, assignment_ids)


def run(command: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed


def own_compute_seconds(course_dir: Path, course, assignment_ids) -> dict[tuple[str, str], float]:
    """Seconds each submission's code cells take in a warm interpreter (numpy and torch loaded)."""
    script = r'''
import json, sys, time, io, contextlib
import numpy, torch, matplotlib
matplotlib.use("Agg")
out = {}
for path in sys.argv[1:]:
    cells = json.load(open(path))["cells"]
    timings = []
    for attempt in range(2):  # the second run is warm: imports done, as in the grader's interpreter
        namespace = {"__name__": "__main__"}
        start = time.perf_counter()
        for cell in cells:
            meta = cell.get("metadata", {})
            skipped = "illustration" in meta.get("tags", []) or meta.get("nbgrader", {}).get("grade")
            if cell["cell_type"] != "code" or skipped:
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec("".join(cell["source"]), namespace)
            except BaseException:
                pass
        timings.append(time.perf_counter() - start)
    out[path] = min(timings)
print(json.dumps(out))
'''
    paths = sorted(str(p) for a in assignment_ids for p in (course_dir / "submitted").glob(f"*/{a}/*.ipynb"))
    done = subprocess.run(
        [sys.executable, "-c", script, *paths], capture_output=True, text=True, cwd=course_dir
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring the students' own compute failed:\n{done.stderr[-2000:]}")
    times = json.loads(done.stdout.strip().splitlines()[-1])
    return {(Path(p).parent.parent.name, Path(p).parent.name): t for p, t in times.items()}


def grader_seconds(course_dir: Path) -> dict[tuple[str, str], float]:
    return {
        (p.parent.parent.name, p.parent.name): json.loads(p.read_text())["seconds"]
        for p in (course_dir / "autograded").glob("*/*/results.json")
    }


def gradebook_layout(course_dir: Path, course_id: str) -> dict:
    """Every notebook's grade, solution and source cells as recorded in the course's gradebook."""
    gradebook = open_gradebook(default_db_url(course_dir), course_id)
    try:
        return {
            (nb.assignment.name, nb.name): (
                sorted((c.name, c.max_score, c.cell_type) for c in nb.grade_cells),
                sorted(c.name for c in nb.solution_cells),
                sorted((c.name, c.cell_type, c.locked, c.checksum, c.source) for c in nb.source_cells),
            )
            for nb in gradebook.db.query(Notebook).all()
        }
    finally:
        gradebook.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--assignments", nargs="*", default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", default=None, help="build the courses here and keep them")
    args = parser.parse_args(argv)

    if args.students < 1 or args.workers < 1:
        parser.error("--students and --workers must be at least 1")
    course = load_course(REPO / "course.yml")
    with_source = [a.id for a in course.assignments if (REPO / "source" / a.id / a.notebook).is_file()]
    assignment_ids = args.assignments or with_source
    unknown = [a for a in assignment_ids if a not in with_source]
    if unknown or not assignment_ids:
        parser.error(
            f"--assignments must name assignments with a source notebook ({', '.join(with_source)}), "
            f"not {', '.join(unknown) or 'none'}"
        )
    students = benchmark_class(args.students)
    root = Path(args.keep or tempfile.mkdtemp(prefix="autograde-bench-"))
    bin_dir = Path(sys.executable).parent
    env = dict(
        os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", **{course.secret_env: SECRET}
    )
    try:
        vanilla, ours, ours_one = root / "vanilla", root / "grader", root / "grader-1-worker"
        for directory in (vanilla, ours, ours_one):
            make_course(directory, students, assignment_ids)
        notebooks = len(students) * len(assignment_ids)
        print(
            f"{len(students)} students x {len(assignment_ids)} assignments = {notebooks} notebooks "
            f"({', '.join(assignment_ids)}); {os.cpu_count()} CPU cores\n"
        )

        setup = sum(
            run([str(bin_dir / "nbgrader"), "generate_assignment", a, "--force"], vanilla, env)
            for a in assignment_ids
        )
        vanilla_time = sum(
            run([str(bin_dir / "nbgrader"), "autograde", a, "--force"], vanilla, env) for a in assignment_ids
        )
        ours_time = run(
            [
                sys.executable,
                "-m",
                "grader",
                "autograde",
                "--course",
                str(ours),
                "--workers",
                str(args.workers),
                "--force",
            ],
            REPO,
            env,
        )
        ours_one_time = run(
            [
                sys.executable,
                "-m",
                "grader",
                "autograde",
                "--course",
                str(ours_one),
                "--workers",
                "1",
                "--force",
            ],
            REPO,
            env,
        )

        own = own_compute_seconds(ours_one, course, assignment_ids)
        per_notebook = grader_seconds(ours_one)
        overheads = [per_notebook[key] - own.get(key, 0.0) for key in per_notebook]
        print(f"vanilla nbgrader   generate_assignment (setup, not counted): {setup:7.1f} s")
        print(
            f"vanilla nbgrader   autograde:  {vanilla_time:7.1f} s   {vanilla_time / notebooks:6.2f} "
            "s/notebook  (sequential)"
        )
        print(
            f"grader autograde   {args.workers} workers:  {ours_time:7.1f} s   {ours_time / notebooks:6.2f} "
            "s/notebook  (wall time incl. start-up)"
        )
        print(
            f"grader autograde   1 worker:   {ours_one_time:7.1f} s   {ours_one_time / notebooks:6.2f} "
            "s/notebook"
        )
        print(
            f"\nthroughput ratio  {vanilla_time / ours_time:5.1f}x with {args.workers} workers "
            f"({vanilla_time / ours_one_time:.1f}x with 1 worker)"
        )
        print(
            f"per notebook (1 worker): grading {statistics.median(per_notebook.values()):.3f} s median, "
            f"student's own compute {statistics.median(own.values()):.3f} s median, "
            f"overhead {statistics.median(overheads):.3f} s median / {max(overheads):.3f} s max"
        )
        same = gradebook_layout(vanilla, course.course_id) == gradebook_layout(ours, course.course_id)
        print(
            f"gradebook cells recorded by grader autograde {'match' if same else 'DIFFER FROM'} "
            "those of nbgrader generate_assignment"
        )
        for (student, assignment), seconds in sorted(per_notebook.items()):
            print(
                f"  {student:10s} {assignment:22s} graded in {seconds:6.3f} s, own compute "
                f"{own.get((student, assignment), 0):6.3f} s"
            )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
