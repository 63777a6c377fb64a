"""The grading service under a class's load: N students submit within a window, and the service
crashes (kill -9) halfway and is restarted.

    python benchmarks/service_load.py                        # 300 students within 120 s, 2 workers
    python benchmarks/service_load.py --students 50 --window 20 --no-crash

Each student submits one of the five assignments (model answers, a typical mistake or the
stubs, in a fixed mixture) at a random moment of the window (--burst of them in the second
before the crash, a rush that leaves attempts queued), then long-polls for the result,
as layerlab's submit() does. A request that meets the crashed service is retried with the same
request id, so an attempt accepted just before the crash is found again (409 with its id)
instead of being made twice. Reported: p50/p95 time from submit to feedback (all students, and
those whose attempt did not meet the crash), the time to drain the queue after the last
submission, and the checks: one attempt on disk per student with its notebook, receipt and
result, every result the expected score, every student's notebook in submitted/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

MISTAKES = {
    "01_shapes": {"linear_forward": "def linear_forward(X, W, b):\n    return X @ W + b\n"},
    "03_gradients": {
        "linear_backward": "def linear_backward(G, X, W):\n    return G.T @ X, G @ W, G\n",
    },
}


def variants(course) -> dict[str, list[tuple[str, bytes, float]]]:
    """assignment -> [(kind, notebook bytes, expected automatic score)]."""
    from service_kit import notebook_bytes

    found = {}
    for assignment in course.assignments:
        automatic = sum(p.points for p in assignment.parts if p.kind != "manual")
        found[assignment.id] = [("model", notebook_bytes(assignment.id), automatic)]
        found[assignment.id].append(("stubs", notebook_bytes(assignment.id, base="stubs"), 0.0))
        if assignment.id in MISTAKES:
            found[assignment.id].append(
                ("mistake", notebook_bytes(assignment.id, MISTAKES[assignment.id]), None)
            )
    return found


class Student:
    def __init__(self, index: int, assignment: str, kind: str, body: bytes, expected, arrival: float):
        self.id, self.assignment, self.kind, self.body = f"s{index:04d}", assignment, kind, body
        self.expected, self.arrival = expected, arrival
        self.request_id = uuid.uuid4().hex
        self.attempt = None
        self.submitted = self.graded = None
        self.retries = 0
        self.result = None


def run_student(student: Student, url: str, start: float, stop: threading.Event) -> None:
    from service_kit import post_notebook, request, token

    delay = start + student.arrival - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    student.submitted = time.monotonic()
    secret_token = token(student.id)
    while student.attempt is None and not stop.is_set():
        try:
            status, answer = post_notebook(
                url, student.assignment, student.body, secret_token, request_id=student.request_id
            )
        except (urllib.error.URLError, OSError):
            student.retries += 1
            time.sleep(0.5)
            continue
        if status in (200, 202):
            student.attempt = answer["attempt"]
        elif status == 409 and answer.get("error") == "replay":
            student.attempt = answer["attempt"]
        else:
            raise RuntimeError(f"{student.id}: {status} {answer}")
    headers = {"Authorization": f"Bearer {secret_token}"}
    while not stop.is_set():
        try:
            status, answer = request(f"{url}/attempts/{student.attempt}?wait=20", headers=headers, timeout=60)
        except (urllib.error.URLError, OSError):
            student.retries += 1
            time.sleep(0.5)
            continue
        if status == 200 and answer["status"] == "graded":
            student.graded, student.result = time.monotonic(), answer["result"]
            return
        if status != 200:
            raise RuntimeError(f"{student.id}: {status} {answer}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--window", type=float, default=120.0, help="seconds over which students submit")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=18530)
    parser.add_argument("--crash-at", type=float, default=None, help="seconds in (default: half the window)")
    parser.add_argument("--no-crash", action="store_true")
    parser.add_argument(
        "--burst", type=int, default=40, help="students who submit in the second before the crash (a rush)"
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    from service_kit import ServiceProcess, service_course

    from grader.course import load_course

    course_yml = load_course(REPO / "course.yml")
    rng = random.Random(args.seed)
    crash_at = None if args.no_crash else (args.crash_at if args.crash_at is not None else args.window / 2)
    rush = crash_at if crash_at is not None else args.window / 2
    options = variants(course_yml)
    students = []
    for index in range(args.students):
        assignment = course_yml.assignments[index % len(course_yml.assignments)].id
        kind, body, expected = options[assignment][
            (index // len(course_yml.assignments)) % len(options[assignment])
        ]
        arrival = rush - rng.uniform(0.2, 1.2) if index < args.burst else rng.uniform(0, args.window)
        students.append(Student(index, assignment, kind, body, expected, arrival))

    with tempfile.TemporaryDirectory(prefix="service-load-") as folder:
        course = service_course(Path(folder) / "course", {"attempts_per_hour": 1000})
        data = Path(folder) / "data"
        service = ServiceProcess(course, data, port=args.port, workers=args.workers).start()
        stop = threading.Event()
        crash_at = (
            None if args.no_crash else (args.crash_at if args.crash_at is not None else args.window / 2)
        )
        crash_window = None
        try:
            start = time.monotonic()
            with ThreadPoolExecutor(max_workers=len(students)) as pool:
                futures = [pool.submit(run_student, s, service.url, start, stop) for s in students]
                if crash_at is not None:
                    time.sleep(max(0.0, start + crash_at - time.monotonic()))
                    down = time.monotonic()
                    service.kill()
                    service.start()
                    crash_window = (down, time.monotonic())
                    print(
                        f"crashed at {down - start:.1f} s, serving again after {crash_window[1] - down:.1f} s"
                    )
                deadline = start + args.window + 900
                for future in futures:
                    future.result(timeout=max(1.0, deadline - time.monotonic()))
            last_submit = max(s.submitted for s in students)
            last_feedback = max(s.graded for s in students)
        finally:
            stop.set()
            service.stop()
        queued_again = [
            line for line in service.log_tail(10_000).splitlines() if "queued from before" in line
        ]
        problems = verify(students, data)

    latencies = [s.graded - s.submitted for s in students]
    spared = [
        s.graded - s.submitted
        for s in students
        if crash_window is None or s.graded < crash_window[0] or s.submitted > crash_window[1]
    ]
    print()
    print(
        f"{len(students)} students, {len(course_yml.assignments)} assignments, "
        f"submitted within {args.window:g} s, {args.workers} grading workers"
    )
    print("| submit -> feedback | p50 | p95 | max |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| all students | {statistics.median(latencies):.2f} s | {percentile(latencies, 0.95):.2f} s | "
        f"{max(latencies):.2f} s |"
    )
    if crash_window is not None:
        print(
            f"| attempts not caught by the crash ({len(spared)}) | {statistics.median(spared):.2f} s | "
            f"{percentile(spared, 0.95):.2f} s | {max(spared):.2f} s |"
        )
    print(f"queue drained {last_feedback - last_submit:.2f} s after the last submission")
    if crash_window is not None:
        print(
            f"restart: {queued_again[-1].split('; ')[1] if queued_again else 'no restart line found'}; "
            f"{sum(s.retries > 0 for s in students)} students retried a request"
        )
    if problems:
        print("PROBLEMS:\n" + "\n".join(problems[:30]))
        return 1
    print(
        f"checked: {len(students)} attempts on disk with notebook, receipt and result; every score as "
        "expected; every student's notebook in submitted/ with timestamp.txt; nothing lost or doubled"
    )
    return 0


def verify(students: list[Student], data: Path) -> list[str]:
    problems = []
    for student in students:
        folders = list((data / "service" / "attempts" / student.id).glob("*/*"))
        if len(folders) != 1:
            problems.append(f"{student.id}: {len(folders)} attempts on disk, expected 1")
            continue
        folder = folders[0]
        body = (folder / "notebook.ipynb").read_bytes()
        meta = json.loads((folder / "attempt.json").read_text())
        if body != student.body or meta["sha256"] != hashlib.sha256(body).hexdigest():
            problems.append(f"{student.id}: the stored notebook or its hash differs from what was sent")
        if not (folder / "result.json").is_file():
            problems.append(f"{student.id}: no result.json")
        result = student.result
        automatic = result["score"]
        if student.expected is not None and abs(automatic - student.expected) > 1e-9:
            problems.append(
                f"{student.id} ({student.assignment}, {student.kind}): score {automatic}, expected "
                f"{student.expected}"
            )
        if student.kind == "mistake" and automatic >= result["max_score"] - result["manual_points"]:
            problems.append(f"{student.id} ({student.assignment}): the mistake earned full marks")
        submitted = data / "submitted" / student.id / student.assignment
        if not (submitted / "timestamp.txt").is_file() or not list(submitted.glob("*.ipynb")):
            problems.append(f"{student.id}: nothing in submitted/")
    return problems


if __name__ == "__main__":
    raise SystemExit(main())
