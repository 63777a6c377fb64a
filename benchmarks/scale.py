"""How autograde scales: N synthetic submissions graded on a Dask cluster, for several N.

    python benchmarks/scale.py                      # N = 10 and 100 on a local 2-worker cluster
    python benchmarks/scale.py -n 10 -n 100 -n 1000 --workers 4
    python benchmarks/scale.py -n 100 --dask tcp://10.0.0.5:8786   # an existing cluster

The submissions are the demo class's notebooks (grader/demo_class.py: model answers, stubs,
typical mistakes and cheating attempts) copied under fresh student ids, interleaved so that
every N has the same mixture. Each N is graded into a fresh course folder (the demo's short
time limits). The table gives wall time per submission, the driver's peak RSS, and per worker
its peak RSS and the resident memory of its sandbox processes after the run. Time per
submission and worker memory should stay flat as N grows.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.autograde import autograde  # noqa: E402
from grader.course import DEFAULT_COURSE_FILE, load_course  # noqa: E402
from grader.demo import prepare  # noqa: E402
from grader.demo_class import CLASS, notebook_for  # noqa: E402

BENCH_SECRET = "scale-benchmark-secret"


def submission_plan(course, available: list[str], count: int) -> list[tuple[object, str, str]]:
    """(demo student, new student id, assignment id) for `count` submissions.

    The mixture of students is kept for every prefix of the plan.
    """
    pairs = [
        (student, assignment) for assignment in available for student in CLASS if student.submits(assignment)
    ]
    plan = []
    for index in range(count):
        student, assignment = pairs[(index * 7) % len(pairs)] if len(pairs) % 7 else pairs[index % len(pairs)]
        plan.append((student, f"{student.id}-{index:05d}", assignment))
    return plan


def write_class(course, directory: Path, count: int) -> int:
    """Write `count` submissions under directory/submitted/; returns how many were written."""
    available = [a.id for a in course.assignments if (directory / "source" / a.id / a.notebook).is_file()]
    cache = {}
    for student, new_id, assignment_id in submission_plan(course, available, count):
        assignment = course.assignment(assignment_id)
        key = (student.id, assignment_id)
        if key not in cache:
            cache[key] = (
                json.dumps(
                    notebook_for(directory, assignment, dataclasses.replace(student, id=new_id)), indent=1
                )
                + "\n"
            )
        folder = directory / "submitted" / new_id / assignment_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / assignment.notebook).write_text(cache[key], encoding="utf-8")
        (folder / "timestamp.txt").write_text("2026-11-30 09:00:00.000000 UTC\n", encoding="utf-8")
    return count


def process_memory(pid: int | None = None) -> dict[str, float]:
    """{"peak_rss_mb", "rss_mb"} of process `pid` (default: this one) and "children_rss_mb", the
    resident memory of all its descendants now (a worker's sandbox processes), from /proc."""
    pid = os.getpid() if pid is None else pid

    def status(process: int) -> dict[str, float]:
        values = {}
        try:
            for line in Path(f"/proc/{process}/status").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    values[key] = int(rest.split()[0]) / 1024
        except (OSError, ValueError, IndexError):
            pass
        return values

    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    descendants, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        descendants += children
        frontier += children
    own = status(pid)
    return {
        "peak_rss_mb": own.get("VmHWM", 0.0),
        "rss_mb": own.get("VmRSS", 0.0),
        "children_rss_mb": sum(status(child).get("VmRSS", 0.0) for child in descendants),
    }


def grade_once(count: int, address: str, root: Path) -> dict:
    """Grade `count` fresh submissions on the cluster at `address`; returns one table row."""
    from distributed import Client  # the optional dask extra; main checks it is installed

    directory = root / f"n{count}"
    prepare(directory, DEFAULT_COURSE_FILE.parent)
    course = load_course(directory / "course.yml")
    write_class(course, directory, count)
    start = time.perf_counter()
    outcomes = autograde(course, directory, secret=BENCH_SECRET, dask=address, progress_stream=io.StringIO())
    elapsed = time.perf_counter() - start
    with Client(address, set_as_default=False) as client:
        workers = client.run(process_memory)
    return {
        "n": count,
        "graded": sum(o.graded for o in outcomes),
        "seconds": elapsed,
        "per_submission": elapsed / max(count, 1),
        "driver_peak_mb": process_memory()["peak_rss_mb"],
        "worker_peak_mb": max(w["peak_rss_mb"] for w in workers.values()),
        "sandbox_mb": max(w["children_rss_mb"] for w in workers.values()),
        "workers": len(workers),
    }


def table(rows: list[dict]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| N | graded | wall time (s) | s / submission | driver peak RSS (MB) | worker peak RSS (MB, max) "
        "| sandbox RSS per worker (MB, max) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['n']} | {row['graded']} | {row['seconds']:.1f} | {row['per_submission']:.2f} "
            f"| {row['driver_peak_mb']:.0f} | {row['worker_peak_mb']:.0f} | {row['sandbox_mb']:.0f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-n",
        "--submissions",
        type=int,
        action="append",
        metavar="N",
        help="number of submissions (repeatable; default: 10 and 100)",
    )
    parser.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS",
        help="an existing Dask scheduler (default: start a local cluster)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, metavar="W", help="local cluster workers (default 2)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, metavar="T", help="threads per local worker (default 1)"
    )
    parser.add_argument(
        "--dir", default=None, metavar="DIR", help="where to build the courses (default: a temp folder)"
    )
    args = parser.parse_args(argv)
    counts = args.submissions or [10, 100]
    if any(n < 1 for n in counts) or args.workers < 1 or args.threads < 1:
        parser.error("-n, --workers and --threads must be at least 1")
    try:  # the optional dask extra
        from distributed import LocalCluster
    except ImportError:
        print("scale: needs dask and distributed (pip install 'layers-course-grader[dask]')", file=sys.stderr)
        return 2

    secret_env = load_course().secret_env
    os.environ.setdefault(secret_env, BENCH_SECRET)  # local workers inherit it; remote ones need it set
    if os.environ[secret_env] != BENCH_SECRET:
        print(
            f"scale: {secret_env} must be unset or {BENCH_SECRET!r} (here and on the workers)",
            file=sys.stderr,
        )
        return 2
    root = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="layers-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    cluster = None
    if args.dask is None:
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=args.threads,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )
    address = args.dask or cluster.scheduler_address
    rows = []
    try:
        for count in counts:
            rows.append(grade_once(count, address, root))
            print(f"N = {count}: {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    print(f"{rows[0]['workers']} worker(s); courses under {root}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
