"""The gradebook on a real PostgreSQL server: grading, reruns, `kill -9` halfway, hostile student text.

The module starts a throwaway cluster of its own with Debian's postgresql programs (initdb and
pg_ctl, as the postgres user when the tests run as root) in a temporary folder, listening on
127.0.0.1 on a free port in 18600-18699 with password authentication, and removes it afterwards.
Each test gets a fresh database. The URL is the README's `postgresql://user:password@host:port/db`.
Skipped, with the reason, only where the PostgreSQL server programs are not installed.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import gradebook_dump
from test_formgrader import nbgrader
from test_gradebook import FakeGrader, make_course, run_fake

from grader import gradebook as gbm
from grader.course import load_course
from grader.result import PartResult

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
PORTS = range(18600, 18700)
USER = "layers"
START_TIMEOUT_S = 120
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres")]


def server_programs() -> Path | None:
    """The bin folder of the newest installed PostgreSQL server (initdb and pg_ctl), or None."""
    folders = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(Path(f).parent.name), reverse=True
    )
    for folder in [*folders, *(str(Path(p).parent) for p in [shutil.which("pg_ctl")] if p)]:
        if all(os.access(Path(folder) / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    return None


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1} for the test PostgreSQL server")


class Cluster:
    """A PostgreSQL cluster in a temporary folder, owned by the postgres user when run as root."""

    def __init__(self, bindir: Path):
        self.bindir, self.password = bindir, "pw-" + secrets.token_hex(12)
        self.root = Path(tempfile.mkdtemp(prefix="layers-postgres-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.as_user = {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}
        self.port = None

    def run(self, *command: str) -> None:
        done = subprocess.run(
            [str(self.bindir / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            cwd=self.root,
            **self.as_user,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command[:2])} failed: {done.stderr.strip()[-2000:]}\n{self.log_tail()}"
            )

    def start(self) -> None:
        password_file = self.root / "password"
        password_file.write_text(self.password + "\n")
        if self.as_user:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(password_file, "postgres", "postgres")
        self.run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            "--pwfile",
            str(password_file),
            "--auth",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        password_file.unlink()
        self.port = free_port()
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start"
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url().replace("postgresql://", "postgres://"), autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.port is not None and (self.data / "postmaster.pid").exists():
            for mode in ("fast", "immediate"):
                try:
                    self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")
                    break
                except (RuntimeError, subprocess.TimeoutExpired):
                    continue
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    bindir = server_programs()
    if bindir is None:
        pytest.skip("the PostgreSQL server programs are not installed: apt-get install postgresql")
    server = Cluster(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def database(cluster, request):
    """The URL of a new, empty database for this test."""
    return cluster.create_database(f"gb_{request.node.name[:40].lower()}_{secrets.token_hex(3)}")


def dump(url: str, course_dir: Path) -> list[dict]:
    course = load_course(course_dir / "course.yml")
    gradebook = gbm.open_gradebook(url, course.course_id)
    try:
        return gbm.dump(gradebook)
    finally:
        gradebook.close()


def row_counts(url: str) -> dict[str, int]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
                for table in ("submitted_assignment", "submitted_notebook", "grade", "comment", "student")
            }
    finally:
        engine.dispose()


def bigger_class(root: Path, students: int) -> Path:
    """make_course's course with `students` students, copies of its three kinds of submission."""
    course_dir = make_course(root)
    submitted = course_dir / "submitted"
    kinds = sorted(p.name for p in submitted.iterdir())
    for index in range(students - len(kinds)):
        shutil.copytree(submitted / kinds[index % len(kinds)], submitted / f"s{index:02d}")
    return course_dir


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(course dir, dump) of a clean run into SQLite: what every PostgreSQL run must equal."""
    course_dir = bigger_class(tmp_path_factory.mktemp("sqlite") / "course", 12)
    run_fake(course_dir)
    return course_dir, gradebook_dump(course_dir)


def test_grading_and_reruns_store_exactly_what_sqlite_stores(database, reference, tmp_path):
    course_dir = bigger_class(tmp_path / "course", 12)
    outcomes, grader = run_fake(course_dir, db_url=database)
    assert len(grader.calls) == 24 and all(o.graded for o in outcomes)
    assert dump(database, course_dir) == reference[1]
    _, again = run_fake(course_dir, db_url=database)
    assert again.calls == []
    _, forced = run_fake(course_dir, db_url=database, force=True)
    assert len(forced.calls) == 24
    assert dump(database, course_dir) == reference[1]
    assert row_counts(database)["submitted_assignment"] == 24 and row_counts(database)["student"] == 12


def test_one_setting_serves_autograde_export_and_nbgraders_cli(database, tmp_path):
    course_dir = make_course(tmp_path / "course")
    shutil.copy(REPO / "nbgrader_config.py", course_dir / "nbgrader_config.py")
    env = {**os.environ, gbm.GRADEBOOK_ENV: database}
    run_fake(course_dir, db_url=database)
    exported = subprocess.run(
        [sys.executable, "-m", "grader", "export", "--csv", "-", "--course", str(course_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [row["student"] for row in rows] == ["ada", "bob", "cy"]
    listed = nbgrader(course_dir, "db", "student", "list", gradebook_url=database)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert all(f"{student} (" in listed.stdout for student in ("ada", "bob", "cy")), listed.stdout
    assert not (course_dir / "gradebook.db").exists()  # nothing went to a SQLite file on the side


def test_a_wrong_password_is_a_one_line_error_without_the_password(cluster, database, tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    wrong = database.replace(cluster.password, "Wrong-" + cluster.password[::-1])
    secret = load_course(course_dir / "course.yml").secret_env
    env = {**os.environ, gbm.GRADEBOOK_ENV: wrong, secret: "s3cret"}
    for command in (["autograde"], ["export", "--csv", "-"]):
        done = subprocess.run(
            [sys.executable, "-m", "grader", *command, "--course", str(course_dir)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 2, done.stderr
        assert "password authentication failed" in done.stderr and ":***@127.0.0.1" in done.stderr
        assert cluster.password[::-1] not in done.stdout + done.stderr
        assert done.stderr.count("\n") == 1, done.stderr


CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_gradebook import FakeGrader, run_fake

class Announcing(FakeGrader):  # says when half the class is graded; never finishes the last quarter
    def __call__(self, *args):
        if len(self.calls) >= {announce}:  # two grading threads: the count can step over {announce}
            Path({marker!r}).write_text("halfway")
        time.sleep(600 if len(self.calls) >= {stall} else 0.02)
        return super().__call__(*args)

run_fake(Path({course!r}), Announcing(), db_url={url!r}, workers=2)
"""


def test_kill_9_halfway_then_a_rerun_loses_and_duplicates_nothing(database, reference, tmp_path):
    course_dir = bigger_class(tmp_path / "course", 12)
    marker = tmp_path / "halfway"
    script = CHILD.format(
        tests=str(TESTS), announce=12, stall=18, marker=str(marker), course=str(course_dir), url=database
    )
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert marker.exists(), child.stderr.read() if child.poll() is not None else "no progress"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    partial = dump(database, course_dir)
    clean = {(row["student"], row["assignment"]): row for row in reference[1]}
    assert 1 <= len(partial) < 24
    for row in partial:  # a submission is in the gradebook whole or not at all
        assert row == clean[(row["student"], row["assignment"])]
    _, rerun = run_fake(course_dir, db_url=database)
    assert 24 - len(partial) <= len(rerun.calls) <= 24 - len(partial) + 2  # + those killed mid-write
    assert dump(database, course_dir) == reference[1]
    counts = row_counts(database)
    assert counts["submitted_assignment"] == counts["submitted_notebook"] == 24 and counts["student"] == 12


def test_the_gradebook_stores_surrogates_and_nul_from_student_text(database, tmp_path):
    """PostgreSQL refuses NUL and UTF-8 refuses lone surrogates: every comment is made storable."""
    from grader.submission import SubmissionResult

    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    course = load_course(course_dir / "course.yml")
    assignment = course.assignment("01_shapes")
    nasty = "raised ValueError('\ud800 and \x00 NUL')"
    parts = [
        PartResult(p.id, 0.0, p.points, "failed", f"Wrong {nasty}", ("missing-bias",))
        for p in assignment.parts
    ]
    result = SubmissionResult("nb.ipynb", assignment.id, "bob", parts, f"the notebook {nasty}")
    gradebook = gbm.open_gradebook(database, course.course_id)
    try:
        gbm.ensure_assignment(gradebook, course, assignment)
        gbm.record_submission(gradebook, course, result)
        stored = json.dumps(gbm.dump(gradebook), ensure_ascii=False)
    finally:
        gradebook.close()
    assert "\x00" not in stored and "\ud800" not in stored
    assert stored.count("\ufffd and  NUL") >= len(assignment.parts)  # the rest of the text is kept


class HostileText(FakeGrader):
    """bob's feedback and answers quote a lone surrogate and NUL characters, as student code can."""

    def __call__(self, course, assignment_id, path, student, secret, sandbox):
        result = super().__call__(course, assignment_id, path, student, secret, sandbox)
        if student == "bob":
            nasty = "raised ValueError('\ud800 and \x00 NUL')"
            result.parts = [
                PartResult(p.id, p.score, p.max_score, p.status, f"{p.feedback} {nasty}")
                for p in result.parts
            ]
            result.answers = {key: f"{value}\x00\ud800" for key, value in result.answers.items()}
            result.error = f"the notebook {nasty}"
        return result


def test_surrogates_and_nul_in_student_text_cannot_stop_the_class(database, tmp_path):
    course_dir = make_course(tmp_path / "course")
    outcomes, grader = run_fake(course_dir, HostileText(), db_url=database, workers=1)
    assert len(grader.calls) == 6 and all(o.graded for o in outcomes)
    rows = {(row["student"], row["assignment"]): row for row in dump(database, course_dir)}
    assert len(rows) == 6
    bob = json.dumps(rows[("bob", "01_shapes")], ensure_ascii=False)
    assert "\x00" not in bob and "\ud800" not in bob and "\ufffd and  NUL" in bob
    sqlite_dir = make_course(tmp_path / "plain")
    run_fake(sqlite_dir)
    plain = {(row["student"], row["assignment"]): row for row in gradebook_dump(sqlite_dir)}
    for key, row in rows.items():
        if key[0] != "bob":
            assert row == plain[key]  # every other student's grades intact
    page = course_dir / "feedback" / "bob" / "01_shapes" / "01_shapes.html"
    assert "\ufffd and  NUL" in page.read_text(encoding="utf-8")  # the feedback page is written too
    _, again = run_fake(course_dir, HostileText(), db_url=database)
    assert again.calls == []  # recorded once, not retried on every run
