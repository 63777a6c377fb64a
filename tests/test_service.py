"""The grading service on loopback, driven by real HTTP clients (urllib and layerlab's own).

One service runs for the module with a course whose `service:` policy is small enough to test:
3 attempts per hour, 1 MB uploads, public inputs only before the deadline of 01_shapes, and a
deadline already past for 03_gradients. Every refusal is checked for its status, code and words,
and for leaving every file of the service exactly as it was.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import pytest
from service_kit import (
    ROOT,
    SECRET,
    ServiceProcess,
    free_port,
    notebook,
    notebook_bytes,
    post_notebook,
    request,
    service_course,
    snapshot,
    token,
    wait_graded,
)

from grader.course import CourseError, load_course

POLICY = {
    "attempts_per_hour": 3,
    "max_upload_kb": 1024,
    "hidden_feedback_before_deadline": False,
    "deadlines": {"01_shapes": "2099-01-01T00:00:00Z", "03_gradients": "2020-01-01T00:00:00+01:00"},
}
TRANSPOSED = "def linear_forward(X, W, b):\n    return X @ W + b\n"
SHAPES = load_course(ROOT / "course.yml").assignment("01_shapes")
AUTOMATIC = sum(p.points for p in SHAPES.parts if p.kind != "manual")
MANUAL = sum(p.points for p in SHAPES.parts if p.kind == "manual")
FORWARD = SHAPES.part("linear_forward").points
SLOW = "import time\ntime.sleep(4)\n\ndef relu(Z):\n    import numpy as np\n    return np.maximum(Z, 0)\n"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("service")]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return service_course(tmp_path_factory.mktemp("service") / "course", POLICY)


@pytest.fixture(scope="module")
def service(course, tmp_path_factory):
    with ServiceProcess(course, tmp_path_factory.mktemp("service-data") / "data") as running:
        yield running


def test_policy_is_read_from_course_yml(course):
    policy = load_course(course / "course.yml").service
    assert policy.attempts_per_hour == 3 and policy.max_upload_kb == 1024
    assert policy.hidden_feedback_before_deadline is False
    assert policy.deadline("03_gradients") == datetime(2019, 12, 31, 23, tzinfo=timezone.utc)
    assert policy.deadline("02_parameters") is None
    assert load_course(ROOT / "course.yml").service.attempts_per_hour > 0


@pytest.mark.parametrize(
    "service_yaml, message",
    [
        ("  deadlines: {01_shapes: 2026-12-01}", "service.deadlines.01_shapes: expected a date and time"),
        ("  deadlines: {01_shapes: '2026-12-01 10:00'}", "needs a time zone"),
        ("  deadlines: {99_nothing: 2026-12-01T10:00:00Z}", "unknown field(s) ['99_nothing']"),
        ("  attempts_per_hour: 0", "service.attempts_per_hour: expected a finite positive number"),
        ("  hidden_feedback_before_deadline: maybe", "expected bool"),
        ("  retries: 3", "service: unknown field(s) ['retries']"),
    ],
)
def test_bad_service_section_is_one_clear_line(tmp_path, service_yaml, message):
    path = tmp_path / "course.yml"
    path.write_text((ROOT / "course.yml").read_text() + "\nservice:\n" + service_yaml + "\n")
    with pytest.raises(CourseError) as error:
        load_course(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_graded_attempt_is_on_disk_with_its_receipt(service):
    body = notebook_bytes("01_shapes", {"linear_forward": TRANSPOSED})
    status, answer = post_notebook(service.url, "01_shapes", body, token("ada"), wait=120)

    assert status == 200 and answer["status"] == "graded", answer
    receipt = answer["receipt"]
    assert receipt["sha256"] == hashlib.sha256(body).hexdigest() and receipt["bytes"] == len(body)
    parts = {part["part"]: part for part in answer["result"]["parts"]}
    assert parts["linear_forward"]["score"] == 0
    assert [m["code"] for m in parts["linear_forward"]["misconceptions"]] == ["weight-rows-are-inputs"]
    assert parts["linear_forward"]["misconceptions"][0]["meaning"].startswith("Rows of a PyTorch weight")
    assert parts["relu"]["score"] == parts["relu"]["max_score"] == 1
    assert parts["relu_zero_reason"]["status"] == "manual"
    assert answer["result"]["public_inputs"] is True and answer["result"]["late"] is False

    folder = service.data / "service" / "attempts" / "ada" / "01_shapes" / receipt["attempt"]
    assert (folder / "notebook.ipynb").read_bytes() == body
    stored = json.loads((folder / "attempt.json").read_text())
    assert stored["sha256"] == receipt["sha256"] and stored["received"] == receipt["received"]
    assert json.loads((folder / "result.json").read_text())["parts"] == answer["result"]["parts"]
    submitted = service.data / "submitted" / "ada" / "01_shapes"
    assert (submitted / "01_shapes.ipynb").read_bytes() == body
    stamp = datetime.strptime((submitted / "timestamp.txt").read_text().strip(), "%Y-%m-%d %H:%M:%S.%f %Z")
    assert stamp.replace(tzinfo=timezone.utc) == datetime.fromisoformat(receipt["received"])


def test_hidden_feedback_shows_no_hidden_test_or_model_answer(service):
    status, answer = post_notebook(
        service.url, "01_shapes", notebook_bytes("01_shapes", base="stubs"), token("cy"), 120
    )
    assert status == 200, answer
    text = json.dumps(answer)
    for forbidden in ("BEGIN HIDDEN", "BEGIN SOLUTION", "assert_part", "Mark scheme", str(ROOT), "grader/"):
        assert forbidden not in text
    assert {p["score"] for p in answer["result"]["parts"]} == {0}


def test_late_attempt_is_graded_but_not_submitted(service):
    status, answer = post_notebook(
        service.url, "03_gradients", notebook_bytes("03_gradients"), token("dee"), 120
    )
    assert status == 200 and answer["result"]["late"] is True and answer["result"]["public_inputs"] is False
    assert not (service.data / "submitted" / "dee").exists()
    assert (service.data / "service" / "attempts" / "dee" / "03_gradients" / answer["attempt"]).is_dir()


def test_layerlab_client_submits_and_checks_one_task(service, tmp_path, monkeypatch, capsys):
    client = importlib.import_module("layerlab.submit")

    path = tmp_path / "01_shapes.ipynb"
    path.write_bytes(notebook_bytes("01_shapes"))
    monkeypatch.setenv(client.ENV_URL, service.url.removesuffix("/api/v1"))
    monkeypatch.setenv(client.ENV_TOKEN, token("eve"))

    client.check("linear_forward", path)
    shown = capsys.readouterr().out
    assert client.last_feedback.full_marks and [p["part"] for p in client.last_feedback.parts] == [
        "linear_forward"
    ]
    assert "linear_forward" in shown and "full marks" in shown and "relu " not in shown

    client.submit(path)
    assert {p["part"] for p in client.last_feedback.parts} == {
        p.id for p in load_course().assignment("01_shapes").parts
    }
    assert (
        f"Automatic score: {AUTOMATIC:g}/{AUTOMATIC:g} (+{MANUAL:g} graded by your instructor)"
        in capsys.readouterr().out
    )


def test_layerlab_without_a_service_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    client = importlib.import_module("layerlab.submit")

    path = tmp_path / "01_shapes.ipynb"
    path.write_bytes(notebook_bytes("01_shapes"))
    monkeypatch.delenv(client.ENV_URL, raising=False)
    monkeypatch.delenv(client.ENV_TOKEN, raising=False)
    monkeypatch.setattr(client, "USER_CONFIG", tmp_path / "none.toml")
    monkeypatch.chdir(tmp_path)

    client.submit(path)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("No grading service is configured")


def test_layerlab_reads_the_config_file(tmp_path, monkeypatch):
    client = importlib.import_module("layerlab.submit")

    monkeypatch.delenv(client.ENV_URL, raising=False)
    monkeypatch.delenv(client.ENV_TOKEN, raising=False)
    (tmp_path / client.CONFIG_NAME).write_text('url = "http://127.0.0.1:1/"\ntoken = "ada.00"\n')
    (tmp_path / "deep" / "er").mkdir(parents=True)
    assert client.service_config(tmp_path / "deep" / "er")["token"] == "ada.00"
    monkeypatch.delenv(client.HUB_TOKEN, raising=False)
    (tmp_path / client.CONFIG_NAME).write_text('url = "http://127.0.0.1:1/"\n')
    with pytest.raises(ValueError, match="no token for the grading service in .*not on a JupyterHub"):
        client.service_config(tmp_path)
    monkeypatch.setenv(client.HUB_TOKEN, "hub-api-token")
    found = client.service_config(tmp_path)
    assert (found["scheme"], found["token"]) == ("token", "hub-api-token")
    (tmp_path / client.CONFIG_NAME).write_text('token = "ada.00"\n')
    with pytest.raises(ValueError, match='needs url = "..."'):
        client.service_config(tmp_path)


# --- refusals: each with its answer, and nothing changed ------------------------------------------


def _refused(service, expected_status, code, words, send):
    service.wait_idle()
    before = snapshot(service.data)
    status, answer = send()
    assert (status, answer.get("error")) == (expected_status, code), answer
    assert words in answer["message"], answer["message"]
    assert snapshot(service.data) == before, "a refused request changed the service's files"


def test_missing_token(service):
    body = notebook_bytes("01_shapes")
    _refused(
        service,
        401,
        "missing-token",
        "No token was sent",
        lambda: post_notebook(service.url, "01_shapes", body, None),
    )


@pytest.mark.parametrize(
    "bad_token",
    ["ada", "ada.0123456789abcdef0123456789abcdef", "nobody." + "f" * 32, "@@@.x", "x" * 500],
)
def test_wrong_token(service, bad_token):
    body = notebook_bytes("01_shapes")
    _refused(
        service,
        401,
        "bad-token",
        "not valid for this course",
        lambda: post_notebook(service.url, "01_shapes", body, bad_token),
    )


def test_token_of_another_course_secret(service):
    body = notebook_bytes("01_shapes")
    other = token("ada", secret="another-course")
    _refused(
        service, 401, "bad-token", "not valid", lambda: post_notebook(service.url, "01_shapes", body, other)
    )


def test_replayed_request(service):
    body = notebook_bytes("02_parameters")
    request_id = uuid.uuid4().hex
    status, first = post_notebook(service.url, "02_parameters", body, token("fay"), request_id=request_id)
    assert status in (200, 202), first
    _refused(
        service,
        409,
        "replay",
        f"already received (attempt {first['attempt']})",
        lambda: post_notebook(service.url, "02_parameters", body, token("fay"), request_id=request_id),
    )


def test_stale_request(service):
    body = notebook_bytes("02_parameters")
    _refused(
        service,
        409,
        "stale-request",
        "away from the service's time",
        lambda: post_notebook(service.url, "02_parameters", body, token("gus"), sent=time.time() - 3600),
    )


def test_too_many_attempts(service):
    body = notebook_bytes("02_parameters")
    for _ in range(POLICY["attempts_per_hour"]):
        status, answer = post_notebook(service.url, "02_parameters", body, token("hal"))
        assert status in (200, 202), answer
    _refused(
        service,
        429,
        "too-many-attempts",
        "You have used your 3 attempts of the last hour; your next attempt is possible at",
        lambda: post_notebook(service.url, "02_parameters", body, token("hal")),
    )
    status, answer = post_notebook(service.url, "02_parameters", body, token("ivy"))
    assert status in (200, 202), "another student's attempts must not count"


def test_oversized_upload(service):
    data = notebook(
        "01_shapes",
    )
    data["metadata"]["padding"] = "x" * (1100 * 1024)
    body = json.dumps(data).encode()
    _refused(
        service,
        413,
        "too-large",
        "notebooks up to 1024 kB are accepted",
        lambda: post_notebook(service.url, "01_shapes", body, token("jo")),
    )


@pytest.mark.parametrize(
    "body, words",
    [
        (b"", "is empty"),
        (b"print('hello')\n", "invalid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8 text"),
        (b'{"cells": 3}', "has no list of cells"),
        (b'{"nbformat": 3, "cells": []}', "expected a version 4 notebook"),
        (b"[" * 100000 + b"]" * 100000, "invalid JSON"),
    ],
    ids=["empty", "python", "binary", "cells-not-a-list", "nbformat-3", "deeply-nested"],
)
def test_not_a_notebook(service, body, words):
    _refused(
        service,
        400,
        "not-a-notebook",
        words,
        lambda: post_notebook(service.url, "01_shapes", body, token("kim")),
    )


def test_another_assignments_notebook(service):
    body = notebook_bytes("02_parameters")
    _refused(
        service,
        422,
        "wrong-assignment",
        "holds the answer cells of 02_parameters, not of 01_shapes",
        lambda: post_notebook(service.url, "01_shapes", body, token("lee")),
    )
    empty = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}).encode()
    _refused(
        service,
        422,
        "wrong-assignment",
        "none of the answer cells of 01_shapes",
        lambda: post_notebook(service.url, "01_shapes", empty, token("lee")),
    )


def test_unknown_assignment_and_attempt(service):
    body = notebook_bytes("01_shapes")
    _refused(
        service,
        404,
        "unknown-assignment",
        "There is no assignment '../etc'",
        lambda: post_notebook(service.url, "..%2Fetc", body, token("mo")),
    )
    status, answer = request(
        f"{service.url}/attempts/nothing", headers={"Authorization": f"Bearer {token('mo')}"}
    )
    assert (status, answer["error"]) == (404, "unknown-attempt")


def test_one_student_cannot_read_anothers_attempt(service):
    status, answer = post_notebook(
        service.url, "02_parameters", notebook_bytes("02_parameters"), token("ned")
    )
    assert status in (200, 202)
    status, other = request(
        f"{service.url}/attempts/{answer['attempt']}", headers={"Authorization": f"Bearer {token('ola')}"}
    )
    assert (status, other["error"]) == (404, "unknown-attempt")


def test_hostile_notebooks_cost_only_their_own_parts(service):
    from grader.demo_class import EXIT_EARLY, FORK_BOMB, INFINITE_LOOP

    sent = {}
    for student, answer in (("pat", EXIT_EARLY), ("quin", INFINITE_LOOP), ("rae", FORK_BOMB)):
        status, reply = post_notebook(
            service.url, "01_shapes", notebook_bytes("01_shapes", {"relu": answer}), token(student)
        )
        assert status in (200, 202), reply
        sent[student] = reply["attempt"]
    status, honest = post_notebook(service.url, "01_shapes", notebook_bytes("01_shapes"), token("sue"))
    assert status in (200, 202)
    for student, attempt in sent.items():
        parts = {p["part"]: p for p in wait_graded(service.url, attempt, token(student))["result"]["parts"]}
        assert parts["relu"]["score"] == 0, (student, parts["relu"])
        assert parts["linear_forward"]["score"] == FORWARD, (student, parts["linear_forward"])
    result = wait_graded(service.url, honest["attempt"], token("sue"))["result"]
    assert result["score"] == AUTOMATIC and not result["error"]
    assert request(f"{service.url}/status")[0] == 200


def test_tokens_command(tmp_path):
    from grader.service.tokens import student_of

    roster = tmp_path / "roster.csv"
    roster.write_text("student,email\nada,ada@example.edu\nbob,bob@example.edu\n")
    command = [sys.executable, "-m", "grader", "tokens", "--csv", "--from", str(roster), "cy"]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"LAYERS_GRADER_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "student,token" and [line.split(",")[0] for line in lines[1:]] == ["cy", "ada", "bob"]
    assert all(student_of(SECRET, line.split(",")[1]) == line.split(",")[0] for line in lines[1:])
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "LAYERS_GRADER_SECRET is not set" in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "grader", "tokens", "../x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"LAYERS_GRADER_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
    )
    assert bad.returncode == 2 and "student id '../x'" in bad.stderr


# --- queue and restart --------------------------------------------------------------------------


def test_queue_positions_and_a_crash_lose_nothing(course, tmp_path):
    """One worker, a slow first notebook: the others wait in line and say where. The service is killed
    with attempts still queued; after a restart every accepted attempt is graded."""
    data = tmp_path / "data"
    service = ServiceProcess(course, data).start()
    try:
        accepted = {}
        status, first = post_notebook(
            service.url, "01_shapes", notebook_bytes("01_shapes", {"relu": SLOW}), token("s0")
        )
        assert status == 202, first
        accepted["s0"] = first["attempt"]
        for index in range(1, 5):
            student = f"s{index}"
            status, reply = post_notebook(
                service.url, "02_parameters", notebook_bytes("02_parameters"), token(student)
            )
            assert status == 202 and reply["status"] == "queued", reply
            assert 1 <= reply["queue"]["position"] <= reply["queue"]["waiting"]
            accepted[student] = reply["attempt"]
        positions = [
            request(
                f"{service.url}/attempts/{accepted[f's{i}']}",
                headers={"Authorization": f"Bearer {token(f's{i}')}"},
            )[1]
            for i in range(1, 5)
        ]
        queued = [answer["queue"]["position"] for answer in positions if answer["status"] == "queued"]
        assert queued == sorted(queued) and len(set(queued)) == len(queued), positions
        service.kill()
        graded_before = {
            a for a in accepted.values() if list(data.glob(f"service/attempts/*/*/{a}/result.json"))
        }
        assert len(graded_before) < len(accepted), "the crash should leave attempts queued"

        service.start()
        for student, attempt in accepted.items():
            answer = wait_graded(service.url, attempt, token(student))
            assert (
                answer["result"]["score"] == answer["result"]["max_score"] - answer["result"]["manual_points"]
            )
        assert "attempt(s) queued from before" in service.log_tail(200)
        for student, attempt in accepted.items():
            assignment = "01_shapes" if student == "s0" else "02_parameters"
            assert (data / "submitted" / student / assignment / "timestamp.txt").is_file()
            assert len(list(data.glob(f"service/attempts/{student}/*/*/attempt.json"))) == 1
    finally:
        service.stop()


def test_grades_on_a_dask_cluster(course, tmp_path):
    """--dask: attempts are graded by the cluster's workers (which hold the course secret); public-only
    attempts (here all but 03_gradients, whose deadline is past) by the local pool, since a worker
    knows only the secret."""
    import distributed

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERS_GRADER_SECRET", SECRET)  # inherited by the worker processes
        cluster = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )
    with cluster, distributed.Client(cluster) as client:
        args = ["--dask", cluster.scheduler_address]
        with ServiceProcess(course, tmp_path / "data", args=args) as service:
            mistake = {"linear_backward": "def linear_backward(G, X, W):\n    return G.T @ X, G @ W, G\n"}
            status, remote = post_notebook(
                service.url, "03_gradients", notebook_bytes("03_gradients", mistake), token("dan"), wait=120
            )
            status_local, local = post_notebook(
                service.url, "01_shapes", notebook_bytes("01_shapes"), token("dan"), wait=120
            )
        assert status == 200 and remote["status"] == "graded", remote
        parts = {p["part"]: p for p in remote["result"]["parts"]}
        assert parts["linear_backward"]["score"] < parts["linear_backward"]["max_score"]
        assert parts["rel_error"]["score"] == parts["rel_error"]["max_score"]
        assert remote["result"]["public_inputs"] is False  # past its deadline: the hidden inputs
        assert status_local == 200 and local["result"]["public_inputs"] is True
        assert local["result"]["score"] == AUTOMATIC

        def grading_seconds(dask_scheduler):
            return sum(
                prefix.all_durations.get("compute", 0)
                for name, prefix in dask_scheduler.task_prefixes.items()
                if "grade" in name
            )

        assert client.run_on_scheduler(grading_seconds) > 0, "the cluster graded nothing"


# --- JupyterHub identities ----------------------------------------------------------------------

HUB_USERS = {"hub-token-of-wes": "wes"}


@pytest.fixture
def fake_hub():
    """A stand-in for the Hub's REST API (`GET /hub/api/user`) on loopback, in a thread of this process."""
    import asyncio
    import threading

    import tornado.web

    class UserHandler(tornado.web.RequestHandler):
        def get(self):
            scheme, _, api_token = self.request.headers.get("Authorization", "").partition(" ")
            if scheme != "token" or api_token not in HUB_USERS:
                self.set_status(403)
                self.finish({"status": 403, "message": "not allowed"})
                return
            self.finish({"kind": "user", "name": HUB_USERS[api_token]})

    ready, state, port = threading.Event(), {}, free_port()

    def serve():
        async def main():
            server = tornado.web.Application([("/hub/api/user", UserHandler)]).listen(port, "127.0.0.1")
            state["stop"] = asyncio.Event()
            state["loop"] = asyncio.get_running_loop()
            ready.set()
            await state["stop"].wait()
            server.stop()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(30)
    yield f"http://127.0.0.1:{port}/hub/api"
    state["loop"].call_soon_threadsafe(state["stop"].set)
    thread.join(30)


def test_jupyterhub_api_tokens_identify_students(course, tmp_path, fake_hub):
    client = importlib.import_module("layerlab.submit")
    env = {"JUPYTERHUB_API_URL": fake_hub}  # what the Hub gives its services
    with ServiceProcess(course, tmp_path / "data", extra_env=env, prefix="/services/grading") as service:
        url = service.url
        config = {"url": url.removesuffix("/api/v1"), "token": "hub-token-of-wes", "scheme": "token"}
        status, answer = client._request(
            config, "POST", "/assignments/02_parameters/attempts", notebook_bytes("02_parameters"), wait=120
        )
        assert status == 200 and answer["status"] == "graded", answer
        assert (
            tmp_path / "data" / "service" / "attempts" / "wes" / "02_parameters" / answer["attempt"]
        ).is_dir()

        before = snapshot(service.data)
        status, refused = client._request(
            dict(config, token="hub-token-of-nobody"), "POST", "/assignments/02_parameters/attempts", b"{}"
        )
        assert (status, refused["error"]) == (401, "bad-token")
        status, refused = request(
            f"{url}/assignments/02_parameters/attempts", "POST", b"{}", {"Authorization": "token x"}
        )
        assert (status, refused["error"]) == (401, "bad-token")
        assert snapshot(service.data) == before
        outside = request(f"http://127.0.0.1:{service.port}/api/v1/status")
        assert outside == (404, {"error": "http-404", "message": "Not Found"}), (
            "the API is under the prefix only"
        )
