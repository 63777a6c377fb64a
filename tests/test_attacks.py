"""Hostile submissions: each gets no credit it did not earn, with a recorded reason, while the
honest parts of the same notebook still score and nothing outlives the student's process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attacks import kit
from attacks.snippets import ATTACKS
from grader.sandbox import Sandbox
from grader.submission import grade_submission

pytestmark = [pytest.mark.xdist_group("sandbox"), pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
GRADEBOOK_TEXT = "the real gradebook"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("attack-course") / "course")
    (course.root / "gradebook.db").write_text(GRADEBOOK_TEXT)
    return course


@pytest.fixture(scope="module")
def sandbox(course):
    with Sandbox(course.limits) as box:
        yield box


@pytest.fixture(scope="module")
def other_student(course, tmp_path_factory):
    return kit.write_submission(tmp_path_factory.mktemp("submitted") / "carol" / "nb.ipynb")


def grade(course, sandbox, path, student="mallory"):
    return grade_submission(course, kit.ASSIGNMENT, path, student, "attack-secret", sandbox)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_earns_nothing_and_costs_only_its_own_parts(
    attack, course, sandbox, other_student, tmp_path, monkeypatch
):
    monkeypatch.setenv("SANDBOX_TEST_SECRET", "attack-secret")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    sources = attack.sources(course=course.root, repo=REPO, grader_pid=os.getpid(), other=other_student)
    path = kit.write_submission(tmp_path / "mallory" / "nb.ipynb", sources)
    result = grade(course, sandbox, path)
    assert result.error is None
    for part in result.parts:
        if part.id in attack.zero:
            assert part.score == 0, f"{attack.name}: {part.id} earned {part.score}: {part.feedback}"
            assert part.feedback.strip()
            assert attack.reason in part.feedback, part.feedback
        else:
            assert part.score == kit.FULL_MARKS[part.id], (
                f"{attack.name}: honest {part.id} lost marks: {part.feedback}"
            )
    for text in attack.hidden:
        assert text not in result.output
    for text in attack.seen:
        assert text in result.output
    assert len(result.output.encode()) <= course.limits.output_kb * 1024 + 200
    assert kit.descendants(sandbox._process.pid) == []
    assert (course.root / "gradebook.db").read_text() == GRADEBOOK_TEXT
    assert (course.root / "course.yml").read_text() == kit.COURSE_YML


def test_files_left_by_one_student_do_not_reach_the_next(course, sandbox, tmp_path):
    planter = """
import os
for path in ["/tmp/answers.py", "/var/tmp/answers.py", "/dev/shm/answers.py",
             os.path.expanduser("~/answers.py"), "answers.py", "$course/answers.py"]:
    try:
        open(path, "w").write("magic = 42")
    except OSError:
        pass
magic = 0
"""
    reader = """
import os
magic = 0
for path in ["/tmp/answers.py", "/var/tmp/answers.py", "/dev/shm/answers.py",
             os.path.expanduser("~/answers.py"), "answers.py", "$course/answers.py"]:
    if os.path.exists(path):
        exec(open(path).read())
        print("FOUND", path)
"""
    from string import Template

    first = kit.write_submission(
        tmp_path / "alice" / "nb.ipynb", {"answer_magic": Template(planter).substitute(course=course.root)}
    )
    second = kit.write_submission(
        tmp_path / "bob" / "nb.ipynb", {"answer_magic": Template(reader).substitute(course=course.root)}
    )
    assert kit.scores(grade(course, sandbox, first, "alice"))["magic"] == 0
    result = grade(course, sandbox, second, "bob")
    assert kit.scores(result)["magic"] == 0 and "FOUND" not in result.output
    assert not (course.root / "answers.py").exists()


def test_tampered_test_cells_and_extra_cells_are_ignored(course, sandbox, tmp_path):
    cells = kit.submission_cells({"answer_double": "def double(x):\n    return x\n"})
    for cell in cells:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id == "double":
            cell["source"] = "def double(x):\n    return 2 * x\n"
    cells.append(kit.code("def double(x):\n    return 2 * x\n"))
    cells.append(kit.code("def double(x):\n    return 2 * x\n", {"grade_id": "extra", "solution": True}))
    result = grade(course, sandbox, kit.write_submission(tmp_path / "nb.ipynb", cells=cells))
    assert kit.scores(result)["double"] == 0
    assert kit.scores(result)["square"] == 1


def test_a_submission_renaming_cells_cannot_borrow_the_source_solution(course, sandbox, tmp_path):
    cells = [
        cell
        for cell in kit.submission_cells()
        if cell["metadata"].get("nbgrader", {}).get("grade_id") != "answer_double"
    ]
    result = grade(course, sandbox, kit.write_submission(tmp_path / "nb.ipynb", cells=cells))
    assert kit.scores(result)["double"] == 0 and "no answer cell" in kit.part(result, "double").feedback
    assert kit.SOLUTION_MARKER not in result.output
