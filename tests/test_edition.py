"""The student edition holds nothing of the grader, and works as a student would set it up.

The scan collects what must stay hidden, by content: every telling line (long, naming two things
of its own) of the solution regions, hidden-test regions and mark-scheme cells of the source
notebooks, and every two consecutive lines of code, one of them telling, of the reference
functions' bodies (grader/reference/) and of the checks (grader/checks/); what the source
notebooks also show in their public cells is not a secret. No file of the edition may contain any of them,
nor any grader marker. The fresh-venv test installs the edition's pinned environment into a new
virtual environment and runs every released notebook there up to its first unfinished task.
"""

from __future__ import annotations

import ast
import builtins
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grader.course import load_course
from grader.editions.release import STUDENT_LOCK, ReleaseError, release
from grader.editions.submit_cell import SOURCE as SUBMIT_SOURCE
from grader.editions.submit_cell import is_submit_cell

ROOT = Path(__file__).resolve().parents[1]
COURSE = load_course(ROOT / "course.yml")
MIN_LINE = 20  # shorter lines ("return z", "raise ValueError(") say nothing about an answer
IMPORTS = ("import ", "from ")
COMMON = set(keyword.kwlist) | set(dir(builtins)) | {"_", "self", "error", "np", "torch"}
MARKERS = (
    "BEGIN SOLUTION",
    "END SOLUTION",
    "BEGIN HIDDEN TESTS",
    "assert_part(",
    "mark_scheme",
    "Mark scheme",
)
REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)### END \1", re.S)
VENV_INSTALL_TIMEOUT_S = 900
NOTEBOOK_TIMEOUT_S = 300


def _telling(line: str) -> bool:
    """A line that could only come from one place: long, whole, and naming two things of its own."""
    if len(line) < MIN_LINE or line.endswith(("(", "[", "{", ",")):
        return False
    names = set(re.findall(r"[A-Za-z_]\w*", re.sub(r"\"[^\"]*\"|'[^']*'", "", line))) - COMMON
    return len(names) >= 2


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if _telling(line.strip())}


def _normal(text: str) -> str:
    """`text` with every line stripped and blank lines and comments dropped: how code is compared."""
    return "\n".join(
        line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")
    )


def _pairs(text: str) -> set[str]:
    """Every two consecutive lines of code (normalised) of which one is telling: a single idiom such
    as `if weight.ndim != 2:` may be shared by honest code, two lines in a row are a copy."""
    lines = _normal(text).splitlines()
    return {
        f"{first}\n{second}"
        for first, second in zip(lines, lines[1:])
        if not first.startswith(IMPORTS)
        and not second.startswith(IMPORTS)
        and (_telling(first) or _telling(second))
    }


def _body(node, source: str) -> str:
    """The source of `node`'s body without its docstring."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    lines = source.splitlines()
    return "\n".join(lines[body[0].lineno - 1 : body[-1].end_lineno]) if body else ""


def _cell_text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def secrets() -> dict[str, str]:
    """Text -> where it comes from, for everything the student edition must not contain: each telling
    line of the notebooks' hidden regions, each two telling lines in a row of the grader's code."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "grader" / "reference").glob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for pair in _pairs(_body(node, source)):
                    found.setdefault(pair, f"grader/reference/{path.name}:{node.name}")
    for path in sorted((ROOT / "grader" / "checks").glob("*.py")):
        for pair in _pairs(path.read_text()):
            found.setdefault(pair, f"grader/checks/{path.name}")
    public: list[str] = []
    for assignment in COURSE.assignments:
        notebook = json.loads((ROOT / "source" / assignment.id / assignment.notebook).read_text())
        for index, cell in enumerate(notebook["cells"]):
            text = _cell_text(cell)
            where = f"source/{assignment.id} cell {index}"
            if "mark-scheme" in cell.get("metadata", {}).get("tags", []):
                for line in _lines(text):
                    found.setdefault(line, f"{where} (mark scheme)")
                continue
            for match in REGION.finditer(text):
                for line in _lines(match.group(2)):
                    found.setdefault(line, f"{where} ({match.group(1).lower()})")
            public.append(REGION.sub("", text))
    shown = _normal("\n".join(public))
    return {text: where for text, where in found.items() if text not in shown}


SECRETS = secrets()


def scan(folder: Path) -> list[str]:
    """One line per secret or marker found in any file under `folder`, by content."""
    problems = []
    for path in sorted(
        p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts
    ):
        text = path.read_bytes().decode("utf-8", errors="replace")
        texts = [text]
        if path.suffix == ".ipynb":
            notebook = json.loads(text)
            texts += [_cell_text(cell) for cell in notebook["cells"]]
            texts += [json.dumps(notebook["metadata"])]
        whole = "\n".join(texts)
        normal = _normal(whole)
        relative = path.relative_to(folder)
        problems += [f"{relative}: grader marker {marker!r}" for marker in MARKERS if marker in whole]
        problems += [
            f"{relative}: {text!r} from {where}" for text, where in SECRETS.items() if text in normal
        ]
    return problems


@pytest.fixture(scope="module")
def student_edition(tmp_path_factory) -> Path:
    return release(tmp_path_factory.mktemp("editions") / "student")


@pytest.fixture(scope="module")
def self_study_edition(tmp_path_factory) -> Path:
    return release(tmp_path_factory.mktemp("editions") / "self-study", self_study=True)


def test_secrets_were_collected():
    kinds = ("grader/reference/", "grader/checks/", "(solution)", "(hidden tests)", "(mark scheme)")
    counts = {kind: sum(kind in where for where in SECRETS.values()) for kind in kinds}
    assert all(count >= 10 for count in counts.values()), counts
    assert len(SECRETS) > 1000


def test_student_edition_holds_no_answer_test_scheme_or_grader_code(student_edition):
    problems = scan(student_edition)
    assert not problems, "the student edition leaks:\n" + "\n".join(problems[:40])


def test_the_scan_finds_a_planted_reference_body(student_edition, tmp_path):
    copy = tmp_path / "leaky"
    shutil.copytree(student_edition, copy)
    leaked = (ROOT / "grader" / "reference" / "shapes.py").read_text()
    (copy / "layerlab" / "helpers.py").write_text(leaked)
    notebook_path = copy / "assignments" / "02_parameters" / "02_parameters.ipynb"
    notebook = json.loads(notebook_path.read_text())
    source = json.loads((ROOT / "source" / "02_parameters" / "02_parameters.ipynb").read_text())
    scheme = next(c for c in source["cells"] if "mark-scheme" in c.get("metadata", {}).get("tags", []))
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": _cell_text(scheme)})
    notebook_path.write_text(json.dumps(notebook))
    problems = scan(copy)
    assert any(p.startswith("layerlab/helpers.py:") and "grader/reference/shapes.py" in p for p in problems)
    assert any(p.startswith("assignments/02_parameters") and "(mark scheme)" in p for p in problems)


def test_student_edition_layout(student_edition):
    top = sorted(p.name for p in student_edition.iterdir())
    assert top == [
        ".gitignore",
        "README.md",
        "assignments",
        "edition.json",
        "layerlab",
        "pyproject.toml",
        "requirements.lock",
    ]
    assert not list(student_edition.rglob("*.py")) or all(
        p.relative_to(student_edition).parts[0] == "layerlab" for p in student_edition.rglob("*.py")
    )
    assert json.loads((student_edition / "edition.json").read_text())["edition"] == "student"
    readme = (student_edition / "README.md").read_text()
    commands = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(commands) == 2 and "pip install -r requirements.lock" in commands[0]
    assert "jupyter lab" in commands[1]
    assert "LAYERLAB_SERVICE_URL" in readme and "layerlab-service.toml" in readme
    pyproject = (student_edition / "pyproject.toml").read_text()
    assert 'name = "layerlab"' in pyproject and "nbgrader" not in pyproject and "grader*" not in pyproject


def test_released_notebooks_are_the_course_release_and_end_with_submit(student_edition):
    for assignment in COURSE.assignments:
        ours = student_edition / "assignments" / assignment.id / assignment.notebook
        assert ours.read_bytes() == (ROOT / "assignments" / assignment.id / assignment.notebook).read_bytes()
        last = json.loads(ours.read_text())["cells"][-1]
        assert is_submit_cell(last) and _cell_text(last) == SUBMIT_SOURCE
        assert "illustration" in last["metadata"]["tags"], "the grader must never run the submit cell"


def test_student_lock_is_the_closure_of_its_roots_at_the_main_pins(student_edition):
    from grader.editions.lock import student_lock

    committed = (ROOT / STUDENT_LOCK).read_text()
    assert committed == student_lock(), (
        "stale: run `python -m grader.editions.lock > requirements-student.lock`"
    )
    assert (student_edition / "requirements.lock").read_text() == committed
    names = {line.split("==")[0].lower() for line in committed.splitlines() if "==" in line}
    assert {"torch", "jupyterlab", "numpy", "ipykernel"} <= names
    assert not names & {"nbgrader", "sqlalchemy", "alembic", "dask", "pytest", "playwright"}
    assert "torch==2.13.0" in committed.splitlines()


def test_archive_and_git_repository(tmp_path):
    out = release(tmp_path / "course-student", archive=True, git=True)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and ".git" not in p.parts)
    tracked = subprocess.run(["git", "ls-files"], cwd=out, capture_output=True, text=True, check=True).stdout
    assert sorted(tracked.splitlines()) == files
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=out, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
    with tarfile.open(tmp_path / "course-student.tar.gz") as archive:
        names = sorted(m.name.removeprefix("course-student/") for m in archive.getmembers() if m.isfile())
    assert names == files
    with pytest.raises(ReleaseError, match="already exists"):
        release(out)


def test_cli_writes_the_edition(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "grader", "release-student", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote the student edition" in done.stdout and (tmp_path / "out" / "README.md").is_file()
    again = subprocess.run(
        [sys.executable, "-m", "grader", "release-student", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.slow
def test_nbgrader_exchange_releases_the_same_notebooks(student_edition, tmp_path):
    """`nbgrader release_assignment` then `fetch_assignment` hand a student the edition's folder of an
    assignment, byte for byte (nbgrader publishes assignments/<id>/ as it is; one assignment keeps
    this test short, the others are the same copy)."""
    assignment = COURSE.assignments[0]
    course_copy = tmp_path / "course"
    course_copy.mkdir()
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy2(ROOT / name, course_copy / name)
    for folder in ("source", "assignments", "grader"):
        shutil.copytree(ROOT / folder, course_copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    exchange, student_home = tmp_path / "exchange", tmp_path / "student"
    exchange.mkdir()
    student_home.mkdir()
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    options = [f"--Exchange.root={exchange}", f"--CourseDirectory.course_id={COURSE.course_id}"]
    for cwd, command in ((course_copy, "release_assignment"), (student_home, "fetch_assignment")):
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", command, assignment.id, *options],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"nbgrader {command}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    fetched = student_home / assignment.id
    ours = student_edition / "assignments" / assignment.id
    assert sorted(p.name for p in fetched.iterdir()) == sorted(p.name for p in ours.iterdir())
    for path in ours.iterdir():
        assert (fetched / path.name).read_bytes() == path.read_bytes(), f"{assignment.id}/{path.name} differs"


def test_self_study_edition_has_solutions_and_checks_on_public_inputs(self_study_edition, tmp_path):
    for assignment in COURSE.assignments:
        assert (self_study_edition / "solutions" / assignment.id / assignment.notebook).is_file()
    assert json.loads((self_study_edition / "edition.json").read_text())["edition"] == "self-study"
    assert "sympy==" in (self_study_edition / "requirements.lock").read_text()
    notebook = self_study_edition / "solutions" / "01_shapes" / "01_shapes.ipynb"
    env = {k: v for k, v in os.environ.items() if k != COURSE.secret_env and not k.startswith("LAYERLAB_")}
    env["PYTHONPATH"] = str(self_study_edition)
    done = subprocess.run(
        [sys.executable, "-c", "import grader, sys; print(grader.__file__)"],
        capture_output=True,
        text=True,
        cwd=self_study_edition,
        env=env,
    )
    assert done.stdout.strip().startswith(str(self_study_edition)), "should use the edition's own grader"
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(notebook), "--json"],
        capture_output=True,
        text=True,
        cwd=self_study_edition,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    manual = sum(p.points for p in COURSE.assignment("01_shapes").parts if p.kind == "manual")
    assert result["score"] == result["max_score"] - manual  # free-text parts are the instructor's

    work = self_study_edition / "assignments" / "01_shapes" / "01_shapes.ipynb"
    mine = json.loads(notebook.read_text())
    for cell in mine["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "answer_linear_forward":
            cell["source"] = "def linear_forward(X, W, b):\n    return X @ W + b\n"
    work.write_text(json.dumps(mine))
    env["HOME"] = str(tmp_path)  # no ~/.config/layerlab/service.toml
    code = f"from layerlab import check; check('linear_forward', {str(work)!r})"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=work.parent, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    forward = COURSE.assignment("01_shapes").part("linear_forward").points
    assert lines[0].startswith("No grading service is configured: checking here on the public inputs")
    assert any(
        "linear_forward" in line and f"0/{forward:g}" in line and "weight-rows-are-inputs" in line
        for line in lines
    )
    assert not any("relu" in line for line in lines), "check() shows only the part asked for"


# --- a fresh virtual environment, as a student sets it up ---------------------------------------------

RUN_TO_FIRST_TASK = r"""
import json, sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

report = {"python": sys.executable, "notebooks": {}}
for name in sys.argv[1:]:
    path = Path(name)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=%(timeout)d, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    ran, stopped = 0, None
    with client.setup_kernel():
        probe = nbformat.v4.new_code_cell("import sys; print(sys.executable)")
        client.execute_cell(probe, 0)
        kernel_python = probe.outputs[0]["text"].strip()
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            try:
                client.execute_cell(cell, index)
                ran += 1
            except CellExecutionError:
                error = next(o for o in cell.outputs if o.output_type == "error")
                stopped = {"cell": index, "ename": error.ename, "evalue": error.evalue[:300]}
                break
    report["notebooks"][path.stem] = {"ran": ran, "stopped": stopped, "kernel_python": kernel_python}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def student_venv(student_edition, tmp_path_factory) -> Path:
    """The edition's README set-up command, run in a fresh venv (torch from /opt/wheels when present)."""
    venv = tmp_path_factory.mktemp("student-venv") / ".venv"
    debian = Path("/usr/bin/python3")  # what a student on Debian has, and what the Makefile prefers
    python = debian if debian.is_file() else Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, timeout=120)
    extra = ["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir() else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", *extra, "-r", "requirements.lock", "."],
        cwd=student_edition,
        env=env,
        capture_output=True,
        text=True,
        timeout=VENV_INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, f"the student set-up failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return venv


@pytest.mark.slow
@pytest.mark.xdist_group("student-venv")
def test_student_environment_has_layerlab_and_no_grader(student_venv, student_edition, tmp_path):
    python = str(student_venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LAYERLAB_"))}
    code = (
        "import importlib.util as u, layerlab, torch; from layerlab import submit, check;"
        "print(layerlab.__file__, torch.__version__, [n for n in ('grader', 'nbgrader') if u.find_spec(n)])"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    where, version, found = done.stdout.split(" ", 2)
    assert where.startswith(str(student_venv)) and version.startswith("2.13.0") and found.strip() == "[]"
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout


@pytest.mark.slow
@pytest.mark.xdist_group("student-venv")
def test_released_notebooks_run_in_the_student_environment_up_to_the_first_task(
    student_venv, student_edition
):
    python = str(student_venv / "bin" / "python")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LAYERLAB_", "JUPYTER"))
    }
    env["MPLBACKEND"] = "Agg"
    paths = [str(student_edition / "assignments" / a.id / a.notebook) for a in COURSE.assignments]
    done = subprocess.run(
        [python, "-c", RUN_TO_FIRST_TASK % {"timeout": NOTEBOOK_TIMEOUT_S}, *paths],
        capture_output=True,
        text=True,
        cwd=student_edition,
        env=env,
        timeout=len(paths) * NOTEBOOK_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.splitlines()[-1])
    for assignment in COURSE.assignments:
        outcome = report["notebooks"][Path(assignment.notebook).stem]
        assert outcome["kernel_python"].startswith(str(student_venv)), outcome
        stopped = outcome["stopped"]
        assert stopped is not None, f"{assignment.id} ran to the end although its tasks are stubs"
        first_task = next(p.task for p in assignment.parts if p.kind != "manual")
        assert stopped["ename"] in ("NotImplementedError", "AssertionError"), (assignment.id, stopped)
        assert stopped["evalue"].startswith(f"Task {first_task}"), (assignment.id, stopped)
        assert outcome["ran"] >= 2, (assignment.id, outcome)
