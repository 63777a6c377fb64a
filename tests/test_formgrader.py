"""formgrader's copy of a submission: the student's text, none of their active content, the mark scheme.

A hostile submission stores <script>, event handlers, javascript: links, forged nbgrader metadata
and attachments in its outputs, markdown and metadata. The copy autograde writes for formgrader
must carry none of it, whatever the submission held, and nbgrader's own formgrader template must
render it without any script or handler of the student's. The same template renders a verbatim
copy with the student's script in it, which shows the checks below can see one.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_gradebook import run_fake

from grader import formgrader
from grader.course import load_course
from grader.gradebook import GRADEBOOK_ENV

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "01_shapes"
MANUAL_PART = "relu_zero_reason"
ANSWER_MARKER = "The bias -4 turns this unit off"
MARK_SCHEME_TEXT = "ReLU maps negative values to 0"
SCRIPT = "<script>document.title = 'PWNED-script'; fetch('/pwned-script');</script>"
IMAGE = "<img src=\"/pwned-img-src\" onerror=\"document.title = 'PWNED-img'; fetch('/pwned-img')\">"


def copy_course(root: Path, assignments=(ASSIGNMENT,)) -> Path:
    """A course directory holding course.yml and the real source and released notebooks."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "course.yml", root / "course.yml")
    for assignment_id in assignments:
        for folder in ("source", "assignments"):
            shutil.copytree(REPO / folder / assignment_id, root / folder / assignment_id)
    return root


def released(course_dir: Path) -> dict:
    course = load_course(course_dir / "course.yml")
    notebook = course.assignment(ASSIGNMENT).notebook
    data = json.loads((course_dir / "assignments" / ASSIGNMENT / notebook).read_text())
    for cell in data["cells"]:  # one string per source, as the stand-in grader reads it
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return data


def hostile_notebook(base: dict) -> dict:
    """`base` (a released notebook) with active content in every place a notebook can hold it."""
    notebook = copy.deepcopy(base)
    notebook["metadata"]["title"] = SCRIPT
    notebook["metadata"]["language_info"] = {"name": "python", "pygments_lexer": "<script>x</script>"}
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id == MANUAL_PART:
            cell["source"] = (
                f"**{ANSWER_MARKER}.**\n\n{SCRIPT}\n\n{IMAGE}\n\n[read more](javascript:fetch('/pwned-link'))"
            )
            cell["attachments"] = {"a.svg": {"image/svg+xml": "<svg onload=\"fetch('/pwned-svg')\"></svg>"}}
            cell["metadata"]["nbgrader"]["points"] = 1000
            cell["metadata"]["tags"] = ['x" onmouseover="fetch(\'/pwned-tag\')']
        elif grade_id == "answer_layer_shapes":
            cell["outputs"] = [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {
                        "text/html": SCRIPT + IMAGE,
                        "application/javascript": "fetch('/pwned-js')",
                        "text/plain": "hidden tests passed: 15/15",
                    },
                },
                {"output_type": "stream", "name": "stdout", "text": "All hidden tests passed!\n"},
            ]
            cell["execution_count"] = 7
        elif grade_id == "layer_shapes":  # a test cell claiming to be worth everything
            cell["metadata"]["nbgrader"].update(points=99, grade_id='layer_shapes" onclick="x()')
    notebook["cells"].append(
        {"cell_type": "raw", "metadata": {"format": "text/html"}, "source": SCRIPT, "id": "raw-1"}
    )
    notebook["cells"].append(
        {"cell_type": "markdown", "metadata": {}, "source": f"Scratch \x00 \ud800 {IMAGE}", "id": "md-1"}
    )
    return notebook


class ActiveContent(HTMLParser):
    """Collects what a browser would run from a page: script bodies, on* handlers, javascript: URLs."""

    def __init__(self):
        super().__init__()
        self.found, self.tags, self._in_script = [], set(), False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self._in_script = tag == "script"
        for name, value in attrs:
            if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and "pwned" in data.lower():
            self.found.append(f"<script>{data.strip()[:80]}</script>")


def active_content(page: str) -> list[str]:
    parser = ActiveContent()
    parser.feed(page)
    return [item for item in parser.found if "pwned" in item.lower() or "x()" in item]


def render_like_formgrader(path: Path) -> str:
    """The HTML formgrader serves for a notebook: nbgrader's formgrade template via nbconvert."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {
        "assignment_id": ASSIGNMENT,
        "notebook_id": ASSIGNMENT,
        "submission_id": "s1",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": "eve",
        "last_name": None,
        "first_name": None,
        "notebook_path": f"autograded/eve/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
    }
    page, _ = HTMLExporter(config=config).from_filename(str(path), resources=resources)
    return page


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course where eve handed in the hostile notebook and ada a plain one, autograded."""
    course_dir = copy_course(tmp_path_factory.mktemp("course"))
    base = released(course_dir)
    for student, notebook in (("eve", hostile_notebook(base)), ("ada", base)):
        folder = course_dir / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    run_fake(course_dir)
    return course_dir


def autograded_copy(course_dir: Path, student: str) -> Path:
    return course_dir / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def test_the_copy_carries_no_outputs_attachments_or_foreign_metadata(graded):
    course = load_course(graded / "course.yml")
    copy_ = json.loads(autograded_copy(graded, "eve").read_text(encoding="utf-8"))
    assert copy_["metadata"] == {
        "kernelspec": formgrader.KERNELSPEC,
        "language_info": {"name": "python"},
    }
    trusted = {info.name: info for info in formgrader_structure(course)}
    graded_ids = []
    for cell in copy_["cells"]:
        assert set(cell) <= {"cell_type", "id", "metadata", "source", "outputs", "execution_count"}
        assert cell["cell_type"] in ("code", "markdown")
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
        assert set(cell["metadata"]) <= {"nbgrader", "tags"}
        assert cell["metadata"].get("tags", ["mark-scheme"]) == ["mark-scheme"]  # only the course's own tag
        nbgrader = cell["metadata"].get("nbgrader")
        if nbgrader:
            info = trusted[nbgrader["grade_id"]]
            assert nbgrader["points"] == info.points and nbgrader["grade"] == info.grade
            graded_ids.append(nbgrader["grade_id"])
        assert "\x00" not in cell["source"] and "\ud800" not in cell["source"]
    assert MANUAL_PART in graded_ids and len(graded_ids) == len(set(graded_ids))
    assert "layer_shapes" not in graded_ids  # its forged grade_id is not one the course defines
    text = json.dumps(copy_)
    for marker in ("hidden tests passed", "All hidden tests passed", "/pwned-svg", "/pwned-js"):
        assert marker not in text


def formgrader_structure(course):
    from grader.gradebook import structure_cells

    return structure_cells(course, course.assignment(ASSIGNMENT))


def test_markdown_is_cleaned_and_the_mark_scheme_follows_the_answer(graded):
    copy_ = json.loads(autograded_copy(graded, "eve").read_text(encoding="utf-8"))
    cells = copy_["cells"]
    index = next(
        i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == MANUAL_PART
    )
    answer, scheme = cells[index]["source"], cells[index + 1]["source"]
    assert ANSWER_MARKER in answer and "&lt;script&gt;" in answer
    assert "<script" not in answer and "<img" not in answer and "javascript:" not in answer
    assert "Mark scheme" in scheme and MARK_SCHEME_TEXT in scheme
    assert cells[index + 1]["metadata"] == {
        "tags": ["mark-scheme"]
    }  # shown next to the answer, graded nowhere
    assert all("<script" not in cell["source"] for cell in cells if cell["cell_type"] == "markdown")


def test_formgraders_template_renders_no_student_script(graded):
    page = render_like_formgrader(autograded_copy(graded, "eve"))
    assert ANSWER_MARKER in page and MARK_SCHEME_TEXT in page
    assert active_content(page) == []
    assert "PWNED" not in page.split("<title>")[1].split("</title>")[0]


@pytest.mark.filterwarnings("ignore:No lexer found")
def test_a_verbatim_copy_would_run_the_students_script(graded, tmp_path):
    """The control: the same template and checks find the script in an unprotected copy."""
    verbatim = tmp_path / f"{ASSIGNMENT}.ipynb"
    shutil.copy(graded / "submitted" / "eve" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", verbatim)
    found = active_content(render_like_formgrader(verbatim))
    assert any("pwned-script" in item for item in found) and any("onerror" in item for item in found)


def test_a_plain_submission_keeps_every_cell_and_answer(graded):
    course = load_course(graded / "course.yml")
    original = released(graded)
    copy_ = json.loads(autograded_copy(graded, "ada").read_text(encoding="utf-8"))
    schemes = len(formgrader.mark_schemes(course, course.assignment(ASSIGNMENT)))
    assert len(copy_["cells"]) == len(original["cells"]) + schemes
    code = [c["source"] for c in original["cells"] if c["cell_type"] == "code"]
    assert [c["source"] for c in copy_["cells"] if c["cell_type"] == "code"] == code


def test_a_missing_answer_cell_still_gets_its_grade_box_and_mark_scheme(tmp_path):
    course_dir = copy_course(tmp_path / "course")
    course = load_course(course_dir / "course.yml")
    cells = [
        c
        for c in released(course_dir)["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") != MANUAL_PART
    ]
    notebook = formgrader.formgrader_notebook(course, course.assignment(ASSIGNMENT), cells + [42, "junk"])
    last = notebook["cells"][-2:]
    assert last[0]["metadata"]["nbgrader"]["grade_id"] == MANUAL_PART
    assert "no cell for this answer" in last[0]["source"] and "Mark scheme" in last[1]["source"]


def test_an_unreadable_submission_removes_a_stale_copy(graded, tmp_path):
    course = load_course(graded / "course.yml")
    stale = tmp_path / "copy.ipynb"
    stale.write_text("{}")
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    assert formgrader.write_copy(course, ASSIGNMENT, broken, stale) is False
    assert not stale.exists()


@pytest.mark.parametrize(
    "markdown",
    [
        "<a href='javascript:fetch(1)'>x</a>",
        "[x](JaVaScRiPt:fetch(1))",
        "<svg><script>fetch(1)</script></svg>",
        "<div onclick=fetch(1)>x</div>",
        "<style>body{background:url(/pwned)}</style>",
        "<iframe src=/pwned></iframe>",
        "<math><mi xlink:href=javascript:fetch(1)>x</mi></math>",
        "```\n<div>\n\n<script>fetch(1)</script>\n```",
        "<div>\n\n[x](javascript:fetch(1))\n\n</div>",
        "<!-- --><script>fetch(1)</script>",
    ],
)
def test_cleaned_markdown_has_no_active_element_and_renders_unchanged(markdown):
    from nbconvert.filters.markdown import markdown2html

    cleaned = formgrader.safe_markdown(markdown)
    parser = ActiveContent()
    parser.feed(cleaned.replace("fetch(1)", "fetch('/pwned')"))
    assert parser.found == [] and parser.tags <= formgrader.ALLOWED_TAGS
    assert markdown2html(cleaned).strip() == cleaned  # what formgrader renders is what was cleaned


def test_a_student_folder_named_with_markup_never_reaches_formgrader(tmp_path):
    """formgrader writes student ids into its page unescaped, so intake refuses markup in them."""
    course_dir = copy_course(tmp_path / "course")
    hostile_id = "<img src=x onerror=fetch('/pwned')>"
    for student in (hostile_id, "ada"):
        folder = course_dir / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(released(course_dir)), encoding="utf-8")
    outcomes, _ = run_fake(course_dir)
    assert [outcome.job.student for outcome in outcomes] == ["ada"]
    assert "not a usable student id" in (course_dir / "progress.log").read_text()
    assert not (course_dir / "autograded" / hostile_id).exists()


def nbgrader(course_dir: Path, *args: str, gradebook_url: str | None = None):
    """nbgrader's own CLI run in `course_dir` (its nbgrader_config.py) -> CompletedProcess.

    The gradebook is `gradebook_url` given as $LAYERS_GRADEBOOK_URL, else the course's gradebook.db.
    """
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    env.pop(GRADEBOOK_ENV, None)
    env.update({GRADEBOOK_ENV: gradebook_url} if gradebook_url else {})
    command = [str(Path(sys.executable).with_name("nbgrader")), *args]
    return subprocess.run(command, cwd=course_dir, env=env, capture_output=True, text=True, timeout=300)


def test_nbgraders_feedback_pages_leave_the_mark_scheme_out(graded):
    """`nbgrader generate_feedback` renders the autograded copies for students: no mark scheme there."""
    copy_ = autograded_copy(graded, "ada").read_text(encoding="utf-8")
    assert MARK_SCHEME_TEXT in copy_  # the copy holds it, so only the feedback steps can drop it
    shutil.copy(REPO / "nbgrader_config.py", graded / "nbgrader_config.py")
    done = nbgrader(graded, "generate_feedback", ASSIGNMENT, "--student", "ada", "--force")
    assert done.returncode == 0, done.stderr[-2000:]
    page = (graded / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "Task 1.3" in page and MARK_SCHEME_TEXT not in page and "Mark scheme" not in page
