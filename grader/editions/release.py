"""`python -m grader release-student OUT`: write the student edition, or with --self-study the self-study one.

The student edition holds what a student of a graded class may have, and nothing of the grader:

    README.md            two commands: set up, open JupyterLab
    requirements.lock    the pinned student environment (requirements-student.lock)
    pyproject.toml       layerlab as its own package, with its own dependencies
    layerlab/            the helpers the notebooks import, and `submit`/`check`
    assignments/<id>/    the released notebooks, byte for byte what `nbgrader release_assignment`
                         publishes from this course (the build writes both)
    edition.json         which edition this is and which course it belongs to

The self-study edition adds solutions/ (executed model answers, mark schemes as model answers)
and the grader with course.yml and source/, so that `python -m grader check NOTEBOOK` and
layerlab's `check()` grade on the public inputs. It contains every answer, so it is for learners
without a class; never hand it to a graded class.

OUT is written as a folder; --archive also packs it into OUT.tar.gz, --git makes it a git
repository with one commit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
STUDENT_LOCK = "requirements-student.lock"
SELF_STUDY_EXTRA = ("PyYAML", "sympy", "mpmath")  # the grader's own needs beyond the student lock
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "feedback")
LAYERLAB_DEPENDENCIES = ("numpy>=2.0", "torch==2.13.0", "matplotlib>=3.8", "ipywidgets>=8")
SELF_STUDY_DEPENDENCIES = ("sympy>=1.13", "pyyaml>=6")


class ReleaseError(Exception):
    """The edition cannot be written; the message says why."""


def add_arguments(parser):
    parser.add_argument("out", metavar="OUT", help="folder to write the edition to (must not exist)")
    parser.add_argument(
        "--self-study",
        action="store_true",
        help="the self-study edition: adds solutions/ and the public-input check (never for a graded class)",
    )
    parser.add_argument("--archive", action="store_true", help="also write OUT.tar.gz")
    parser.add_argument("--git", action="store_true", help="make OUT a git repository with one commit")


def run(args) -> int:
    try:
        out = release(Path(args.out), self_study=args.self_study, archive=args.archive, git=args.git)
    except ReleaseError as error:
        print(f"release-student: {error}", file=sys.stderr)
        return 2
    edition = "self-study" if args.self_study else "student"
    print(f"release-student: wrote the {edition} edition to {out}")
    return 0


def release(
    out: Path, self_study: bool = False, archive: bool = False, git: bool = False, root=REPOSITORY
) -> Path:
    """Write the edition to `out` (a new folder); returns its path."""
    from grader.course import CourseError, load_course

    out = Path(out).resolve()
    if out.exists():
        raise ReleaseError(f"{out} already exists; choose a new folder")
    try:
        course = load_course(root / "course.yml")
    except CourseError as error:
        raise ReleaseError(str(error)) from None
    missing = [
        f"assignments/{a.id}/{a.notebook}"
        for a in course.assignments
        if not (root / "assignments" / a.id / a.notebook).is_file()
    ]
    if missing:
        raise ReleaseError(f"released notebooks missing ({', '.join(missing)}): run `python -m grader build`")
    out.mkdir(parents=True)
    try:
        _write(out, course, root, self_study)
        if git:
            _git(out, course, self_study)
        if archive:
            _archive(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out


def _write(out: Path, course, root: Path, self_study: bool) -> None:
    for assignment in course.assignments:
        shutil.copytree(
            root / "assignments" / assignment.id, out / "assignments" / assignment.id, ignore=IGNORED
        )
    shutil.copytree(root / "layerlab", out / "layerlab", ignore=IGNORED)
    lock = (root / STUDENT_LOCK).read_text(encoding="utf-8")
    dependencies = list(LAYERLAB_DEPENDENCIES)
    if self_study:
        for assignment in course.assignments:
            shutil.copytree(
                root / "solutions" / assignment.id, out / "solutions" / assignment.id, ignore=IGNORED
            )
            shutil.copytree(root / "source" / assignment.id, out / "source" / assignment.id, ignore=IGNORED)
        shutil.copytree(root / "grader", out / "grader", ignore=IGNORED)
        shutil.copy2(root / "course.yml", out / "course.yml")
        lock += "".join(f"{line}\n" for line in _pins(root / "requirements.lock", SELF_STUDY_EXTRA, lock))
        dependencies += SELF_STUDY_DEPENDENCIES
    (out / "requirements.lock").write_text(lock, encoding="utf-8")
    (out / "pyproject.toml").write_text(_pyproject(course, dependencies, self_study), encoding="utf-8")
    (out / "README.md").write_text(_readme(course, self_study), encoding="utf-8")
    (out / ".gitignore").write_text(".venv/\n.ipynb_checkpoints/\n__pycache__/\nlayerlab-service.toml\n")
    edition = {"edition": "self-study" if self_study else "student", "course_id": course.course_id}
    (out / "edition.json").write_text(json.dumps(edition, indent=1) + "\n", encoding="utf-8")


def _pins(lock: Path, names, already: str) -> list[str]:
    """The lines of `lock` pinning `names` that `already` (another lock's text) does not pin."""
    wanted = {name.lower() for name in names}
    have = {line.split("==")[0].lower() for line in already.splitlines() if "==" in line}
    return [
        line.strip()
        for line in lock.read_text(encoding="utf-8").splitlines()
        if "==" in line and line.split("==")[0].lower() in wanted - have
    ]


def _pyproject(course, dependencies: list[str], self_study: bool) -> str:
    packages = '["layerlab*", "grader*"]' if self_study else '["layerlab*"]'
    listed = "".join(f'    "{dependency}",\n' for dependency in dependencies)
    return (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "layerlab"\nversion = "0.1.0"\n'
        f'description = "Student toolkit of the course {course.title.replace(chr(34), chr(39))}"\n'
        f'requires-python = ">=3.11"\ndependencies = [\n{listed}]\n\n'
        f"[tool.setuptools.packages.find]\ninclude = {packages}\n"
    )


def _readme(course, self_study: bool) -> str:
    assignments = "\n".join(f"- `assignments/{a.id}/{a.notebook}`: {a.title}" for a in course.assignments)
    edition = "self-study edition" if self_study else "student edition"
    text = f"""# {course.title} — {edition}

Python 3.11 or newer. Two commands, run in this folder:

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements.lock .    # set up (once)
.venv/bin/jupyter lab assignments                                        # open the course
```

`requirements.lock` pins every package (torch 2.13.0, JupyterLab 4). On a machine without an
NVIDIA GPU, torch's CPU-only build saves several gigabytes: install `torch==2.13.0` from torch's
CPU package index first, then run the set-up command.

{assignments}

Fill in each cell that raises `NotImplementedError("Task x.y: …")` and run the test cell below it.
Public tests catch shape and type slips; the hidden checks run when your work is graded.
"""
    if self_study:
        return (
            text
            + """
## Self-study

`solutions/<id>/<id>.ipynb` are the executed model solutions. The grader is included, so you
can grade your own notebook on the public inputs, from this folder:

```bash
.venv/bin/python -m grader check assignments/01_shapes/01_shapes.ipynb
```

In a notebook, `from layerlab import check; check("linear_forward")` grades one task the same
way, and the last cell (`submit()`) grades the whole notebook. Save the notebook first (Ctrl+S):
they read the saved file.
"""
        )
    return (
        text
        + """
## Feedback and submitting

The last cell of each notebook is `from layerlab import submit; submit()`: it sends the notebook,
as last saved (Ctrl+S first), to your course's grading service and shows a table of parts, scores,
feedback and the misconception behind each mistake. `check("linear_forward")` does the same for
one task. Every call is one attempt; your course sets how many you have per hour. The last attempt
before the deadline is your submission.

Your instructor gives you the service address and your personal token. Put them in a file
`layerlab-service.toml` in this folder (or in `~/.config/layerlab/service.toml`):

```toml
url = "https://grading.example.edu/layers"
token = "your-student-id.0123456789abcdef0123456789abcdef"
```

or set `LAYERLAB_SERVICE_URL` and `LAYERLAB_SERVICE_TOKEN` before starting JupyterLab. Keep the
token to yourself: it submits as you. Without either, `submit()` says in one line that no service
is configured.
"""
    )


def _git(out: Path, course, self_study: bool) -> None:
    def git(*arguments):
        result = subprocess.run(["git", *arguments], cwd=out, capture_output=True, text=True)
        if result.returncode != 0:
            raise ReleaseError(f"git {' '.join(arguments)} failed: {result.stderr.strip()[:300]}")

    edition = "self-study" if self_study else "student"
    git("init", "--quiet", "--initial-branch=main")
    git("add", "--all")
    git(
        "-c",
        "user.name=Course staff",
        "-c",
        "user.email=course@localhost",
        "commit",
        "--quiet",
        "-m",
        f"{course.title}: {edition} edition",
    )


def _archive(out: Path) -> Path:
    target = out.with_name(out.name + ".tar.gz")
    with tarfile.open(target, "w:gz") as archive:
        archive.add(
            out, arcname=out.name, filter=lambda info: None if ".git" in Path(info.name).parts else info
        )
    return target
