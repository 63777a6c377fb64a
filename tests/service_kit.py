"""A grading service in its own process on loopback, and the notebooks students send it.

Used by tests/test_service*.py and benchmarks/service_load.py:

    course = service_course(tmp_path / "course", service={"attempts_per_hour": 3})
    with ServiceProcess(course, tmp_path / "data") as service:
        reply = post_notebook(service.url, "01_shapes", notebook_bytes(course, "01_shapes"), token)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parents[1]
SECRET = "service-test-secret"
START_TIMEOUT_S = 120


def free_port(first: int = 18500, last: int = 18599) -> int:
    """A port of this project's service range that nothing listens on now (others may run these tests)."""
    ports = list(range(first, last + 1))
    random.shuffle(ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {first}-{last}")


def service_course(folder: Path, service: dict | None = None) -> Path:
    """A course directory with this repository's course.yml (plus `service:`) and source notebooks."""
    folder.mkdir(parents=True)
    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    if service is not None:
        data["service"] = service
    (folder / "course.yml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    shutil.copytree(ROOT / "source", folder / "source", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return folder


def token(student: str, secret: str = SECRET) -> str:
    from grader.service.tokens import token_for

    return token_for(secret, student)


def notebook(assignment_id: str, answers: dict[str, str] | None = None, base: str = "solutions") -> dict:
    """The released notebook of an assignment with the model answers (base "solutions") or the stubs,
    and `answers` (part id -> answer cell source) put in."""
    from grader.course import load_course
    from grader.demo_class import notebook_for

    assignment = load_course(ROOT / "course.yml").assignment(assignment_id)
    student = SimpleNamespace(
        base=base, answers={f"{assignment_id}.{part}": source for part, source in (answers or {}).items()}
    )
    return notebook_for(ROOT, assignment, student)


def notebook_bytes(
    assignment_id: str, answers: dict[str, str] | None = None, base: str = "solutions"
) -> bytes:
    return (json.dumps(notebook(assignment_id, answers, base), indent=1) + "\n").encode()


def request(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None, timeout=150
):
    """(status, decoded JSON) of one HTTP request; 4xx and 5xx answers are returned, not raised."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def submit_headers(
    student_token: str | None, request_id: str | None = None, sent: float | None = None
) -> dict:
    headers = {"Content-Type": "application/x-ipynb+json", "X-Request-Id": request_id or uuid.uuid4().hex}
    headers["X-Request-Time"] = f"{time.time() if sent is None else sent:.3f}"
    if student_token is not None:
        headers["Authorization"] = f"Bearer {student_token}"
    return headers


def post_notebook(
    base_url: str, assignment_id: str, body: bytes, student_token: str | None, wait: float = 0, **kw
):
    query = f"?wait={wait:g}" if wait else ""
    return request(
        f"{base_url}/assignments/{assignment_id}/attempts{query}",
        "POST",
        body,
        submit_headers(student_token, **kw),
    )


def wait_graded(base_url: str, attempt: str, student_token: str, timeout_s: float = 300) -> dict:
    """The attempt's answer once graded (long-polls the service)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, answer = request(
            f"{base_url}/attempts/{attempt}?wait=20", headers={"Authorization": f"Bearer {student_token}"}
        )
        assert status == 200, answer
        if answer["status"] == "graded":
            return answer
        assert time.monotonic() < deadline, f"attempt {attempt} not graded after {timeout_s:.0f} s: {answer}"


class ServiceProcess:
    """`python -m grader serve` on 127.0.0.1:port for `course`, writing to `data`; a context manager."""

    def __init__(
        self,
        course: Path,
        data: Path,
        port: int | None = None,
        workers: int = 1,
        extra_env: dict | None = None,
        args=(),
        prefix: str = "",
    ):
        port = port or free_port()
        self.course, self.data, self.port, self.workers = Path(course), Path(data), port, workers
        self.args = list(args)
        self.env = dict(os.environ, LAYERS_GRADER_SECRET=SECRET, PYTHONUNBUFFERED="1", **(extra_env or {}))
        self.url = f"http://127.0.0.1:{port}{prefix}/api/v1"
        self.args += ["--prefix", prefix] if prefix else []
        self.process: subprocess.Popen | None = None
        self.log_path = self.data.parent / f"serve-{port}.log"
        self.starts = 0

    def start(self) -> "ServiceProcess":
        self.starts += 1
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader", "serve", "--course", str(self.course), "--data", str(self.data)]
            + ["--port", str(self.port), "--workers", str(self.workers), *self.args],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"the service exited with {self.process.returncode}:\n{self.log_tail()}"
                    )
                try:
                    status, _ = request(f"{self.url}/status", timeout=5)
                    if status == 200:
                        return self
                except (OSError, ValueError):
                    pass
                time.sleep(0.3)
            raise AssertionError(f"the service did not answer within {START_TIMEOUT_S} s:\n{self.log_tail()}")
        except BaseException:
            self.kill()
            raise

    def wait_idle(self, timeout_s: float = 300) -> None:
        """Return once nothing is queued or being graded."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = request(f"{self.url}/status")[1]
            if status["queued"] == 0 and status["grading"] == 0:
                return
            assert time.monotonic() < deadline, f"the queue did not drain in {timeout_s:.0f} s: {status}"
            time.sleep(0.2)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """Kill the service and everything it started at once (a crash, not a shutdown)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            self.kill()
        self.process = None

    def __enter__(self) -> "ServiceProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes), to show that nothing changed."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(Path(folder).rglob("*"))
        if path.is_file() and "staging" not in path.parts
    }
