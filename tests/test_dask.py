"""autograde on a Dask cluster: same gradebook as the local pool, no loss when a worker dies,
and a driver that accepts from workers only what grade_submission promises."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import gradebook_dump

from grader.autograde import AutogradeError, autograde
from grader.course import load_course
from grader.demo import prepare
from grader.demo_class import CLASS, write_submissions
from grader.pipeline.executors import RemoteGradingError
from grader.pipeline.records import secret_fingerprint
from grader.pipeline.remote import (
    PROTOCOL,
    environment_fingerprint,
    grade_on_worker,
    result_from_wire,
    result_to_wire,
)
from grader.result import PartResult, Status, SubmissionResult

REPO = Path(__file__).resolve().parent.parent
SECRET = "dask-test-secret"
STUDENTS = ("ada", "sam", "tia", "max", "x-allclose", "x-exit", "x-steal", "x-gradebook")
ASSIGNMENT = "01_shapes"
LOOPBACK_HTTP = {"dashboard_address": "127.0.0.1:0"}  # the scheduler's /health page; no dashboard
PARALLEL = ("04_tensor_parallel", ("ada", "rio"))  # its checks start gloo processes on the worker

try:
    import distributed

    from grader.pipeline.cluster import DaskExecutor
except ImportError:
    distributed = DaskExecutor = None
pytestmark = pytest.mark.xdist_group("dask")  # one xdist worker keeps the module's cluster and reference
needs_dask = pytest.mark.skipif(
    distributed is None,
    reason="dask and distributed are not installed (pip install 'layers-course-grader[dask]')",
)


def on_cluster(test):
    """Marks for a test that grades on a LocalCluster."""
    for mark in (needs_dask, pytest.mark.slow):
        test = mark(test)
    return test


# --- the wire format, without a cluster --------------------------------------------------------


def course_and_parts():
    course = load_course()
    return course, course.assignment(ASSIGNMENT).parts


def valid_wire() -> dict:
    course, parts = course_and_parts()
    results = [
        PartResult(
            p.id,
            0.0 if p.kind == "manual" else p.points,
            p.points,
            Status.MANUAL if p.kind == "manual" else Status.PASSED,
            f"feedback {p.id}",
        )
        for p in parts
    ]
    answers = {p.id: f"# answer {p.id}\n" for p in parts}
    return result_to_wire(
        SubmissionResult("/w/nb.ipynb", ASSIGNMENT, "ada", results, None, ["a warning"], answers)
    )


def test_valid_result_round_trips_through_json():
    course, parts = course_and_parts()
    wire = json.loads(json.dumps(valid_wire()))
    result = result_from_wire(wire, course, ASSIGNMENT, "ada", "/driver/nb.ipynb")
    assert result.notebook == "/driver/nb.ipynb" and result.warnings == ["a warning"]
    assert [p.to_dict() for p in result.parts] == wire["parts"]
    assert result.answers == wire["answers"] and result.score == wire["score"]


def _tamper(name: str, wire: dict) -> None:
    parts = wire["parts"]
    auto = next(p for p in parts if p["status"] == "passed")
    if name == "missing part":
        parts.pop()
    elif name == "extra part":
        parts.append(dict(parts[0], id="bonus"))
    elif name == "reordered parts":
        parts.reverse()
    elif name == "score above max":
        auto["score"] = auto["max_score"] + 1
    elif name == "negative score":
        auto["score"] = -1.0
    elif name == "NaN score":
        auto["score"] = math.nan
    elif name == "bool score":
        auto["score"] = True
    elif name == "inflated max":
        auto["max_score"] = auto["score"] = 1000.0
    elif name == "unknown status":
        auto["status"] = "excellent"
    elif name == "manual status on an automatic part":
        auto["status"] = "manual"
    elif name == "feedback not text":
        auto["feedback"] = ["x"]
    elif name == "codes not a list":
        auto["misconceptions"] = "missing-bias"
    elif name == "another student":
        wire["student"] = "bob"
    elif name == "answers for unknown parts":
        wire["answers"]["../../etc"] = "x"
    elif name == "result not an object":
        wire.clear()
        wire["parts"] = None
    else:
        raise AssertionError(name)


TAMPERINGS = [
    "missing part",
    "extra part",
    "reordered parts",
    "score above max",
    "negative score",
    "NaN score",
    "bool score",
    "inflated max",
    "unknown status",
    "manual status on an automatic part",
    "feedback not text",
    "codes not a list",
    "another student",
    "answers for unknown parts",
    "result not an object",
]


@pytest.mark.parametrize("name", TAMPERINGS)
def test_result_outside_the_contract_is_rejected(name):
    course, _ = course_and_parts()
    wire = valid_wire()
    _tamper(name, wire)
    with pytest.raises(RemoteGradingError):
        result_from_wire(json.loads(json.dumps(wire)), course, ASSIGNMENT, "ada", "/driver/nb.ipynb")


class _Job:
    student, assignment, path = "ada", ASSIGNMENT, Path("/driver/nb.ipynb")


def offline_grading():
    """A DaskExecutor without a cluster, enough for `receive`."""
    grading = object.__new__(DaskExecutor)
    grading.course, grading.fingerprint = load_course(), secret_fingerprint(SECRET)
    return grading


def reply(**fields) -> str:
    data = {
        "protocol": PROTOCOL,
        "worker": "host:1",
        "secret": secret_fingerprint(SECRET),
        "seconds": 1.5,
        "result": valid_wire(),
    }
    data.update(fields)
    return json.dumps({key: value for key, value in data.items() if value is not None})


def test_receive_accepts_a_good_reply():
    result, seconds = offline_grading().receive(_Job, reply())
    assert seconds == 1.5 and result.student == "ada" and str(result.notebook) == "/driver/nb.ipynb"


@pytest.mark.parametrize(
    "bad, words",
    [
        (reply(secret=secret_fingerprint("another secret")), "LAYERS_GRADER_SECRET"),
        (reply(refused="its grader code differs"), "refused: its grader code differs"),
        (reply(protocol=99), "protocol 99"),
        (reply(seconds=-1), "impossible time"),
        ("{not json", "unusable"),
        (json.dumps([1, 2]), "not a JSON object"),
    ],
)
def test_receive_rejects_bad_replies_naming_the_problem(bad, words):
    with pytest.raises(RemoteGradingError, match="ada/01_shapes") as raised:
        offline_grading().receive(_Job, bad)
    assert words in str(raised.value)


def test_worker_with_other_grader_code_refuses_before_grading():
    environment = dict(environment_fingerprint(), grader="0123456789abcdef")
    answer = json.loads(grade_on_worker({"protocol": PROTOCOL, "environment": environment}))
    assert "grader '" in answer["refused"] and "0123456789abcdef" in answer["refused"]
    assert "result" not in answer


@needs_dask
def test_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(RemoteGradingError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        DaskExecutor("tcp://127.0.0.1:1", load_course(), SECRET, connect_timeout_s=1)


# --- a real cluster on loopback ------------------------------------------------------------------


@pytest.fixture(scope="module")
def class_course(tmp_path_factory):
    """A course folder holding the small class's 01_shapes submissions (not graded)."""
    directory = tmp_path_factory.mktemp("dask") / "class"
    prepare(directory, REPO)
    course = load_course(directory / "course.yml")
    write_submissions(course, directory, [s for s in CLASS if s.id in STUDENTS], [ASSIGNMENT])
    write_submissions(course, directory, [s for s in CLASS if s.id in PARALLEL[1]], [PARALLEL[0]])
    return directory


def fresh_copy(source: Path, target: Path) -> tuple[object, Path]:
    shutil.copytree(source, target)
    return load_course(target / "course.yml"), target


def results_files(course_dir: Path) -> dict[str, dict]:
    found = {}
    for path in sorted(course_dir.glob("autograded/*/*/results.json")):
        data = json.loads(path.read_text())
        key = f"{path.parent.parent.name}/{path.parent.name}"
        found[key] = {field: data[field] for field in ("score", "parts", "error", "notebook")}
    return found


@pytest.fixture(scope="module")
def local_reference(class_course, tmp_path_factory):
    """(gradebook dump, results.json per student) of the local thread pool."""
    course, directory = fresh_copy(class_course, tmp_path_factory.mktemp("local") / "class")
    outcomes = autograde(course, directory, workers=2, secret=SECRET, progress_stream=open(os.devnull, "w"))
    assert all(o.graded for o in outcomes) and len(outcomes) == len(STUDENTS) + len(PARALLEL[1])
    results = results_files(directory)
    assert all(p["status"] != "error" for p in results[f"ada/{PARALLEL[0]}"]["parts"])
    return gradebook_dump(directory), results, directory


@pytest.fixture(scope="module")
def cluster():
    """A 2-worker, 1-thread-each LocalCluster on loopback whose workers hold the course secret."""
    saved = os.environ.get("LAYERS_GRADER_SECRET")
    os.environ["LAYERS_GRADER_SECRET"] = SECRET  # inherited by the worker processes
    try:
        with distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs=LOOPBACK_HTTP,
        ) as local_cluster:
            yield local_cluster
    finally:
        if saved is None:
            os.environ.pop("LAYERS_GRADER_SECRET", None)
        else:
            os.environ["LAYERS_GRADER_SECRET"] = saved


def comparable(results: dict[str, dict], directory: Path) -> dict[str, dict]:
    return {
        student: dict(data, notebook=str(Path(data["notebook"]).relative_to(directory)))
        for student, data in results.items()
    }


@on_cluster
def test_cluster_grades_exactly_like_the_local_pool(cluster, class_course, local_reference, tmp_path):
    reference_dump, reference_results, reference_dir = local_reference
    course, directory = fresh_copy(class_course, tmp_path / "class")
    outcomes = autograde(
        course,
        directory,
        secret=SECRET,
        dask=cluster.scheduler_address,
        progress_stream=open(os.devnull, "w"),
    )
    assert len(outcomes) == len(STUDENTS) + len(PARALLEL[1]) and all(o.graded for o in outcomes)
    assert gradebook_dump(directory) == reference_dump
    assert comparable(results_files(directory), directory) == comparable(reference_results, reference_dir)
    ada = (directory / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "grader-course-" not in ada and "grader-submission-" not in ada
    again = autograde(
        course,
        directory,
        secret=SECRET,
        dask=cluster.scheduler_address,
        progress_stream=open(os.devnull, "w"),
    )
    assert not any(o.graded for o in again)  # rerun: nothing changed, nothing sent


@on_cluster
def test_worker_killed_mid_run_loses_no_submission(cluster, class_course, local_reference, tmp_path):
    reference_dump = local_reference[0]
    course, directory = fresh_copy(class_course, tmp_path / "class")
    finished: dict = {}

    def grade_all():
        try:
            finished["outcomes"] = autograde(
                course,
                directory,
                secret=SECRET,
                dask=cluster.scheduler_address,
                progress_stream=open(os.devnull, "w"),
            )
        except BaseException as error:  # re-raised below, in the test's thread
            finished["error"] = error

    runner = threading.Thread(target=grade_all)
    runner.start()
    killed = None
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        deadline = time.monotonic() + 60
        while killed is None and runner.is_alive() and time.monotonic() < deadline:
            busy = [address for address, keys in client.processing().items() if keys]
            if busy and list(directory.glob("autograded/*/*/results.json")):
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed = busy[0]
            time.sleep(0.05)
    runner.join(timeout=120)
    assert not runner.is_alive(), "autograde did not finish after a worker was killed"
    if "error" in finished:
        raise finished["error"]
    assert killed is not None, "the run ended before a worker could be killed mid-task"
    outcomes = finished["outcomes"]
    assert len(outcomes) == len(STUDENTS) + len(PARALLEL[1]) and all(o.graded for o in outcomes)
    assert gradebook_dump(directory) == reference_dump


@on_cluster
def test_worker_with_another_secret_stops_the_run_before_writing(cluster, class_course, tmp_path):
    course, directory = fresh_copy(class_course, tmp_path / "class")
    with pytest.raises(AutogradeError, match="different course secret: set LAYERS_GRADER_SECRET"):
        autograde(
            course,
            directory,
            students=["ada"],
            secret="not the workers' secret",
            dask=cluster.scheduler_address,
            progress_stream=open(os.devnull, "w"),
        )
    assert gradebook_dump(directory) == [] and not list(directory.glob("autograded/*/*/results.json"))


SET_SECRET = "import os; os.environ['LAYERS_GRADER_SECRET'] = {!r}"  # run on one worker: plain text


@on_cluster
def test_a_worker_with_another_secret_is_excluded_and_the_rest_grade(
    cluster, class_course, local_reference, tmp_path
):
    reference_dump = local_reference[0]
    course, directory = fresh_copy(class_course, tmp_path / "class")
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        bad = sorted(client.nthreads())[0]
        client.run(exec, SET_SECRET.format("a misconfigured worker"), {}, workers=[bad])
        try:
            log = tmp_path / "progress.log"
            with open(log, "w") as stream:
                outcomes = autograde(
                    course, directory, secret=SECRET, dask=cluster.scheduler_address, progress_stream=stream
                )
        finally:
            client.run(exec, SET_SECRET.format(SECRET), {}, workers=[bad])
    assert len(outcomes) == len(STUDENTS) + len(PARALLEL[1]) and all(o.graded for o in outcomes)
    assert gradebook_dump(directory) == reference_dump
    text = log.read_text()
    assert f"excluded Dask worker {bad}" in text and "different course secret" in text


def test_a_worker_is_judged_by_its_identity_and_excluded_by_name():
    grading = offline_grading()
    grading.environment, grading.excluded, grading.notes = environment_fingerprint(), {}, []
    heard = []
    grading.warn = heard.append
    good = {
        "protocol": PROTOCOL,
        "environment": environment_fingerprint(),
        "secret": secret_fingerprint(SECRET),
    }
    assert grading.identity_problem(good) is None
    other_code = dict(good, environment=dict(environment_fingerprint(), grader="0123456789abcdef"))
    assert "0123456789abcdef" in grading.identity_problem(other_code)
    assert "LAYERS_GRADER_SECRET" in grading.identity_problem(dict(good, secret="another"))
    assert "could not describe itself" in grading.identity_problem(OSError("gone"))
    grading.exclude("tcp://10.0.0.9:1234", "it grades with a different course secret")
    grading.exclude("tcp://10.0.0.9:1234", "again")  # named once
    assert grading.excluded == {"tcp://10.0.0.9:1234": "it grades with a different course secret"}
    assert heard == [
        "autograde: excluded Dask worker tcp://10.0.0.9:1234: it grades with a different course secret"
    ]
