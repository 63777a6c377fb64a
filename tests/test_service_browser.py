"""A student submits from JupyterLab in Chromium to a real grading service on loopback.

The student edition is served by JupyterLab, with the documented config file layerlab-service.toml
naming the service and the student's token. The student's 01_shapes notebook has every task done,
with linear_forward written as X @ W + b. The student runs the last cell (`submit()`), sees the
table naming the misconception, fixes the cell in the editor, saves, submits again and sees full
marks. Both attempts, their receipts and results, and the nbgrader submission are then on disk.
Skipped when Debian's chromium or Playwright for Python is missing.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from pathlib import Path

import pytest
from browser.lab import LabServer, NotebookTab, find_chromium
from service_kit import ServiceProcess, notebook, service_course, token

from grader.course import load_course
from grader.editions.release import release

STUDENT = "ada"
WRONG = "def linear_forward(X, W, b):\n    return X @ W + b\n"
RIGHT = "def linear_forward(X, W, b):\n    return X @ W.T + b\n"
FORWARD = load_course().assignment("01_shapes").part("linear_forward").points
UI_TIMEOUT_S = 90
RUN_TIMEOUT_S = 240
BUDGET_S = 600

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        pytest.skip("Debian's chromium is not installed: apt-get install -y --no-install-recommends chromium")
    from playwright.sync_api import expect, sync_playwright  # pinned in requirements.lock: missing fails

    expect.set_options(timeout=UI_TIMEOUT_S * 1000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    course = service_course(tmp_path_factory.mktemp("browser-service") / "course")
    with ServiceProcess(course, course.parent / "data", workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def lab(browser, service, tmp_path_factory):
    edition = release(tmp_path_factory.mktemp("browser-edition") / "student")
    config = f'url = "{service.url.removesuffix("/api/v1")}"\ntoken = "{token(STUDENT)}"\n'
    (edition / "layerlab-service.toml").write_text(config)
    work = notebook("01_shapes", {"linear_forward": WRONG})
    (edition / "assignments" / "01_shapes" / "01_shapes.ipynb").write_text(json.dumps(work, indent=1))
    with pytest.MonkeyPatch.context() as patch:
        for name in ("LAYERLAB_SERVICE_URL", "LAYERLAB_SERVICE_TOKEN"):
            patch.delenv(name, raising=False)
        server = LabServer(
            edition, tmp_path_factory.mktemp("lab-state"), Path(sys.executable).with_name("jupyter")
        )
        try:
            server.start(180)
            yield server
        finally:
            server.shutdown_kernels()
            server.stop()


def _answer_cell(data: dict, grade_id: str) -> int:
    return next(
        index
        for index, cell in enumerate(data["cells"])
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id
    )


def run_cell(tab: NotebookTab, index: int) -> dict:
    """Run > Run Selected Cell and Do not Advance on cell `index`; wait, save, return the notebook."""
    return tab._run("notebook:run-cell", f"Run Selected Cell and Do not Advance (cell {index})", index)


def test_student_submits_fixes_and_resubmits(browser, lab, service):
    import time

    from playwright.sync_api import expect

    relative = "assignments/01_shapes/01_shapes.ipynb"
    path = lab.root / relative
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    artifacts = Path(__file__).resolve().parents[1] / "test-artifacts" / "browser"
    artifacts.mkdir(parents=True, exist_ok=True)
    try:
        tab = NotebookTab(context.new_page(), path, RUN_TIMEOUT_S, UI_TIMEOUT_S, time.monotonic() + BUDGET_S)
        tab.open(lab.notebook_url(relative, workspace=uuid.uuid4().hex[:12]))
        data = json.loads(path.read_text())
        submit_cell = len(data["cells"]) - 1
        assert "submit()" in "".join(data["cells"][submit_cell]["source"])

        run_cell(tab, submit_cell)
        first = tab.output_of(submit_cell)
        expect(first.filter(has_text="weight-rows-are-inputs").first).to_be_visible()
        expect(first.filter(has_text=f"0 / {FORWARD:g}").first).to_be_visible()
        tab.page.screenshot(path=str(artifacts / "service-first-attempt.png"))

        answer = _answer_cell(data, "answer_linear_forward")
        editor = tab.cells.nth(answer).locator(".cm-content").first
        editor.scroll_into_view_if_needed()
        editor.click()
        tab.page.keyboard.press("Control+A")
        tab.page.keyboard.insert_text(RIGHT.rstrip("\n"))
        tab.page.keyboard.press("Escape")
        saved = tab.save()
        assert "".join(saved["cells"][answer]["source"]).strip() == RIGHT.strip()

        run_cell(tab, submit_cell)
        second = tab.output_of(submit_cell)
        expect(second.filter(has_text="full marks on every automatically graded part").first).to_be_visible()
        expect(second.filter(has_text="weight-rows-are-inputs")).to_have_count(0)
        shown = " ".join(second.all_inner_texts())
        tab.page.screenshot(path=str(artifacts / "service-second-attempt.png"))
    finally:
        context.close()

    attempts = sorted((service.data / "service" / "attempts" / STUDENT / "01_shapes").iterdir())
    assert len(attempts) == 2
    results = [json.loads((folder / "result.json").read_text()) for folder in attempts]
    scores = [{p["part"]: p["score"] for p in result["parts"]}["linear_forward"] for result in results]
    assert scores == [0, FORWARD]
    last = json.loads((attempts[-1] / "attempt.json").read_text())
    assert last["id"] in shown, "the receipt shown is the last attempt's"
    submitted = service.data / "submitted" / STUDENT / "01_shapes"
    assert hashlib.sha256((submitted / "01_shapes.ipynb").read_bytes()).hexdigest() == last["sha256"]
    assert (submitted / "timestamp.txt").read_text().strip()
    graded = json.loads((submitted / "01_shapes.ipynb").read_text())
    assert (
        "".join(graded["cells"][_answer_cell(graded, "answer_linear_forward")]["source"]).strip()
        == RIGHT.strip()
    )
