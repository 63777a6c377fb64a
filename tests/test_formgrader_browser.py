"""formgrader in a real browser: a hostile submission's script does not run when a grader opens it.

A course is autograded with a submission whose display_data output and free-text answer carry
<script> and <img onerror>; each would set the page title and fetch a /pwned-... URL. nbgrader's
formgrader, served by a real Jupyter server on 127.0.0.1, shows the submission in headless
Debian Chromium driven by Playwright, and every request and title the page makes is watched.

As a control, a second student's autograded copy is replaced by the verbatim submission (what
formgrader showed before): there the script must run, which proves the watching sees it. Then
the hostile student's real copy must show the answer and the mark scheme, and run nothing.
Skipped, with the reason, when Debian's chromium is missing.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from browser.lab import LabServer
from test_browser import UI_TIMEOUT_S, chromium  # noqa: F401  (the Chromium fixture)
from test_formgrader import (
    ANSWER_MARKER,
    ASSIGNMENT,
    MARK_SCHEME_TEXT,
    copy_course,
    hostile_notebook,
    released,
)
from test_gradebook import run_fake

from grader import gradebook as gbm
from grader.course import load_course

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "formgrader"
SERVER_START_TIMEOUT_S = 180
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("formgrader_browser")]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A graded course: eve handed in the hostile notebook; ctl's formgrader copy is it, verbatim."""
    course_dir = copy_course(tmp_path_factory.mktemp("formgrader") / "course")
    shutil.copy(REPO / "nbgrader_config.py", course_dir / "nbgrader_config.py")
    hostile = hostile_notebook(released(course_dir))
    for student in ("eve", "ctl"):
        folder = course_dir / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(hostile), encoding="utf-8")
    run_fake(course_dir)
    verbatim = course_dir / "autograded" / "ctl" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    readable = [cell for cell in hostile["cells"] if "\ud800" not in cell["source"]]  # else a 500
    verbatim.write_text(json.dumps({**hostile, "cells": readable}), encoding="utf-8")
    return course_dir


@pytest.fixture(scope="module")
def server(chromium, course, tmp_path_factory):  # noqa: F811
    """Jupyter (with nbgrader's formgrader) serving the course, stopped with everything it started."""
    state = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(gbm.GRADEBOOK_ENV, raising=False)  # the course's own gradebook.db
        lab = LabServer(course, state, Path(sys.executable).with_name("jupyter"))
        try:
            lab.start(SERVER_START_TIMEOUT_S)
            yield lab
        finally:
            lab.stop()


def submission_id(course_dir: Path, student: str) -> str:
    course = load_course(course_dir / "course.yml")
    gradebook = gbm.open_gradebook(gbm.default_db_url(course_dir), course.course_id)
    try:
        return gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).id
    finally:
        gradebook.close()


def open_in_formgrader(browser, server, course_dir: Path, student: str, screenshot: str) -> dict:
    """Open the student's submission in formgrader; what the page did: requests, title, dialogs, text."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    requests, dialogs = [], []
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_S * 1000)
        page.on("request", lambda request: requests.append(request.url))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        url = (
            f"{server.url}/formgrader/submissions/{submission_id(course_dir, student)}/?token={server.token}"
        )
        response = page.goto(url, wait_until="load")
        assert response is not None and response.ok, (response and response.status, server.log_tail())
        page.locator(".nbgrader_cell").first.wait_for(state="visible")
        page.wait_for_load_state("networkidle")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        answer = page.locator(".nbgrader_cell", has_text=ANSWER_MARKER)
        if answer.count():
            answer.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / screenshot))
        return {
            "pwned": [url for url in requests if "/pwned" in url],
            "title": page.title(),
            "dialogs": dialogs,
            "text": page.inner_text("body"),
            "handlers": page.evaluate(
                "() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
                ".filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name))"
            ),
        }
    finally:
        context.close()


def test_the_verbatim_copy_runs_the_students_script(chromium, server, course):  # noqa: F811
    """The control: without the clean copy, formgrader runs the stored script and handler."""
    seen = open_in_formgrader(chromium, server, course, "ctl", "verbatim-copy.png")
    assert "PWNED" in seen["title"], seen["title"]
    assert any(url.endswith("/pwned-script") for url in seen["pwned"]), seen["pwned"]
    assert any(url.endswith("/pwned-img") for url in seen["pwned"]), seen["pwned"]


def test_formgrader_runs_nothing_of_the_hostile_submission(chromium, server, course):  # noqa: F811
    seen = open_in_formgrader(chromium, server, course, "eve", "hostile-submission.png")
    assert seen["pwned"] == [] and seen["dialogs"] == [], seen
    assert "PWNED" not in seen["title"], seen["title"]
    assert not [h for h in seen["handlers"] if h.startswith(("IMG", "SVG", "A ", "DIV"))], seen["handlers"]
    assert ANSWER_MARKER in seen["text"]  # the answer is there to grade, as text
    assert "<script>document.title" in seen["text"]  # shown, not run
    assert "Mark scheme" in seen["text"] and MARK_SCHEME_TEXT in seen["text"]
    assert "hidden tests passed" not in seen["text"].lower()  # the forged output is gone


def test_formgraders_pages_do_not_show_the_gradebook_url(server, course):
    """formgrader can print its whole configuration on a page, gradebook URL (and password) included."""
    import urllib.request

    request = urllib.request.Request(
        f"{server.url}/formgrader/manage_assignments", headers={"Authorization": f"token {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=UI_TIMEOUT_S) as response:
        page = response.read().decode("utf-8")
    assert "Manage Assignments" in page
    assert "db_url" not in page and "gradebook.db" not in page
