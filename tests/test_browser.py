"""End to end in a real browser: the notebooks as students and instructors see them in JupyterLab.

A copy of the course is served by JupyterLab on 127.0.0.1 and driven in headless Chromium. Each
released notebook (assignments/<id>/<id>.ipynb) is run from the Run menu, continuing below each
failing cell the way a student would: every error must be a stub's NotImplementedError naming
its task ("Task 1.4: ...") or a value stub's public test naming its task, and nothing may write to
stderr. Each solution notebook must run with no error output, and its widgets must render (the
forward-pass sliders of 01_shapes). Screenshots are kept in test-artifacts/browser/.
Skipped when Debian's chromium or Playwright for Python is missing.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from browser.lab import LabServer, NotebookTab, find_chromium
from grader.course import load_course

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
COURSE_FOLDERS = ("assignments", "solutions", "layerlab")
LAB_START_TIMEOUT_S = 180
RUN_TIMEOUT_S = 240  # one Run command: kernel start plus the cells it runs
UI_TIMEOUT_S = 90  # page load, save, each element awaited
NOTEBOOK_BUDGET_S = 480  # everything done with one notebook
TOTAL_BUDGET_S = 1500  # all notebooks together
TASK_MESSAGE = re.compile(r"Task (\d+\.\d+)\b")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def released_ids() -> list[str]:
    """Ids of the assignments with a released notebook assignments/<id>/<id>.ipynb."""
    return sorted(
        path.parent.name for path in (ROOT / "assignments").glob("*/*.ipynb") if path.stem == path.parent.name
    )


RELEASED = released_ids()


def test_released_notebooks_exist():
    assert RELEASED, "no released notebook assignments/<id>/<id>.ipynb: run `python -m grader build` first"


@pytest.fixture(scope="module")
def chromium():
    """A headless Debian Chromium driven by Playwright; skips (with the reason) without Chromium."""
    executable = find_chromium()
    if executable is None:
        pytest.skip(
            "Debian's chromium is not installed (/usr/bin/chromium or `chromium` on PATH): "
            "apt-get install -y --no-install-recommends chromium"
        )
    from playwright.sync_api import expect, sync_playwright  # pinned in requirements.lock: missing fails

    expect.set_options(timeout=UI_TIMEOUT_S * 1000)
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
            timeout=UI_TIMEOUT_S * 1000,
        )
    except BaseException:
        playwright.stop()
        raise
    try:
        yield browser
    finally:
        try:
            browser.close()
        finally:
            playwright.stop()


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """JupyterLab serving a copy of the released course, stopped with all its kernels afterwards."""
    course = tmp_path_factory.mktemp("course")
    for folder in COURSE_FOLDERS:
        if (ROOT / folder).is_dir():
            shutil.copytree(
                ROOT / folder,
                course / folder,
                ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"),
            )
    server = LabServer(
        course, tmp_path_factory.mktemp("jupyterlab"), Path(sys.executable).with_name("jupyter")
    )
    try:
        server.start(LAB_START_TIMEOUT_S)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def all_notebooks_deadline(chromium) -> float:
    """time.monotonic() by which every notebook of this module must be done."""
    return time.monotonic() + TOTAL_BUDGET_S


@pytest.fixture
def open_notebook(chromium, lab, all_notebooks_deadline):
    """`open_notebook(relative_path, screenshot_name)` -> NotebookTab, loaded with its kernel idle.

    Afterwards the page is screenshot into test-artifacts/browser/ (pass or fail), then closed,
    and every kernel is shut down.
    """
    opened = []

    def open_one(relative_path: str, screenshot_name: str) -> NotebookTab:
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        deadline = min(time.monotonic() + NOTEBOOK_BUDGET_S, all_notebooks_deadline)
        tab = NotebookTab(context.new_page(), lab.root / relative_path, RUN_TIMEOUT_S, UI_TIMEOUT_S, deadline)
        opened.append((context, tab, screenshot_name))
        tab.open(lab.notebook_url(relative_path, workspace=uuid.uuid4().hex[:12]))
        return tab

    yield open_one
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for context, tab, screenshot_name in opened:
        try:
            tab.page.wait_for_timeout(1000)
            tab.page.screenshot(path=str(ARTIFACTS / screenshot_name), timeout=UI_TIMEOUT_S * 1000)
        except Exception:
            pass
        finally:
            context.close()
    lab.shutdown_kernels()


def code_cells(notebook: dict) -> list[tuple[int, dict]]:
    """(index in the notebook, cell) of every code cell that has code in it."""
    return [
        (index, cell)
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code" and "".join(cell["source"]).strip()
    ]


def never_ran(notebook: dict) -> list[int]:
    """Indices of code cells the kernel never executed."""
    return [index for index, cell in code_cells(notebook) if cell.get("execution_count") is None]


def stderr_problems(notebook: dict) -> list[str]:
    """One line per output written to stderr."""
    return [
        f"cell {index} wrote to stderr: {''.join(output.get('text', ''))[:300]!r}"
        for index, cell in code_cells(notebook)
        for output in cell.get("outputs", [])
        if output["output_type"] == "stream" and output.get("name") == "stderr"
    ]


def run_like_a_student(tab: NotebookTab) -> dict:
    """Run All Cells; while a failing cell stopped the run, Run Selected Cell and All Below from the
    first code cell that has not run yet (twice at most for the same cell).

    Returns the saved notebook once every code cell has run, or when no run made progress.
    """
    notebook = tab.run_all()
    tries: dict[int, int] = {}
    while never_ran(notebook):
        first = never_ran(notebook)[0]
        tries[first] = tries.get(first, 0) + 1
        if tries[first] > 2:
            break
        notebook = tab.run_from(first)
    return notebook


def widget_cells(notebook: dict) -> list[int]:
    """Indices of code cells whose outputs include a Jupyter widget view."""
    return [
        index
        for index, cell in code_cells(notebook)
        if any(WIDGET_MIME in output.get("data", {}) for output in cell.get("outputs", []))
    ]


def assert_widgets_render(tab: NotebookTab, notebook: dict) -> None:
    """Every widget output is drawn by the widget manager, not left as an error or a placeholder."""
    from playwright.sync_api import expect

    for index in widget_cells(notebook):
        output = tab.output_of(index)
        output.first.scroll_into_view_if_needed()
        expect(
            output.locator(".jupyter-widgets").first, f"cell {index}: the widget output did not render"
        ).to_be_visible()
        text = " ".join(output.all_inner_texts())
        assert "Error displaying widget" not in text and "Loading widget" not in text, (
            f"cell {index}: the widget shows {text[:300]!r}"
        )


@pytest.mark.parametrize("assignment_id", RELEASED)
@pytest.mark.slow
@pytest.mark.xdist_group("browser")
def test_student_sees_each_task_stub(assignment_id, open_notebook):
    from playwright.sync_api import expect

    assignment = load_course().assignment(assignment_id)
    function_tasks = {part.task for part in assignment.parts if part.kind == "function"}
    value_tasks = {part.task for part in assignment.parts if part.kind in ("value", "symbolic")}
    tab = open_notebook(
        f"assignments/{assignment_id}/{assignment_id}.ipynb", f"{assignment_id}-assignment.png"
    )

    notebook = run_like_a_student(tab)

    problems = [f"cell {index} never ran" for index in never_ran(notebook)] + stderr_problems(notebook)
    stubs_seen: dict[str, tuple[int, str]] = {}
    for index, cell in code_cells(notebook):
        for output in cell.get("outputs", []):
            if output["output_type"] != "error":
                continue
            ename, evalue = output["ename"], output["evalue"]
            named = TASK_MESSAGE.match(evalue)
            task = named.group(1) if named else None
            if ename == "NotImplementedError" and task in function_tasks:
                stubs_seen.setdefault(task, (index, f"{ename}: Task {task}"))
            elif ename == "AssertionError" and task in value_tasks:
                stubs_seen.setdefault(task, (index, f"{ename}: Task {task}"))
            else:
                problems.append(f"cell {index}: {ename}: {evalue[:300]}")
    problems += [
        f"no cell shows the NotImplementedError of Task {task}"
        for task in sorted(function_tasks - set(stubs_seen))
    ]
    assert not problems, (
        f"{assignment_id} as released, run like a student would: a student should see only each stub's "
        f"NotImplementedError naming its task (tasks {', '.join(sorted(function_tasks))}) or a value stub's "
        "public test failing with a message that starts with its task (tasks "
        f"{', '.join(sorted(value_tasks))}), "
        "and nothing on stderr; instead:\n" + "\n".join(problems)
    )

    for task, (index, shown) in sorted(stubs_seen.items()):
        message = tab.output_of(index).filter(has_text=shown)
        message.first.scroll_into_view_if_needed()
        expect(message.first, f"cell {index} should show '{shown}' to the student").to_be_visible()
    assert_widgets_render(tab, notebook)
    if stubs_seen:
        tab.output_of(min(index for index, _ in stubs_seen.values())).first.scroll_into_view_if_needed()


@pytest.mark.parametrize("assignment_id", RELEASED)
@pytest.mark.slow
@pytest.mark.xdist_group("browser")
def test_solution_runs_without_errors(assignment_id, open_notebook):
    relative_path = f"solutions/{assignment_id}/{assignment_id}.ipynb"
    assert (ROOT / relative_path).is_file(), f"{relative_path} is missing: run `python -m grader build`"
    tab = open_notebook(relative_path, f"{assignment_id}-solution.png")

    notebook = tab.run_all()

    problems = [f"cell {index} never ran" for index in never_ran(notebook)] + stderr_problems(notebook)
    problems += [
        f"cell {index}: {output['ename']}: {output['evalue'][:300]}"
        for index, cell in code_cells(notebook)
        for output in cell.get("outputs", [])
        if output["output_type"] == "error"
    ]
    assert not problems, f"{relative_path}:\n" + "\n".join(problems)

    assert_widgets_render(tab, notebook)
    if assignment_id == "01_shapes":
        assert_forward_pass_sliders(tab, notebook)
    elif widget_cells(notebook):
        tab.output_of(widget_cells(notebook)[0]).first.scroll_into_view_if_needed()


def assert_forward_pass_sliders(tab: NotebookTab, notebook: dict) -> None:
    """The forward-pass explorer draws one live slider per input, and moving one updates its table."""
    from playwright.sync_api import expect

    explorers = [
        index
        for index in widget_cells(notebook)
        if "forward_pass_explorer" in "".join(notebook["cells"][index]["source"])
    ]
    assert explorers, "01_shapes should show the forward-pass explorer (forward_pass_explorer(...))"
    output = tab.output_of(explorers[0])
    sliders = output.locator(".widget-slider")
    sliders.first.scroll_into_view_if_needed()
    expect(sliders.first, "the forward-pass sliders did not render").to_be_visible()
    assert sliders.count() >= 2, f"expected one slider per input, found {sliders.count()}"

    table_before = output.first.inner_text()
    handle = sliders.first.locator(".noUi-handle").first
    handle.focus()
    for _ in range(5):
        handle.press("ArrowRight")
    expect(output.first, "moving a forward-pass slider did not update the explorer").not_to_have_text(
        table_before, use_inner_text=True, timeout=UI_TIMEOUT_S * 1000
    )
