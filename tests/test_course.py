"""course.yml: the real file loads and covers the chapter; malformed variants fail by name."""

from __future__ import annotations

import copy

import pytest
import yaml

from grader.checks import CHECKS
from grader.course import DEFAULT_COURSE_FILE, CourseError, load_course


@pytest.fixture(scope="module")
def course():
    return load_course()


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(DEFAULT_COURSE_FILE.read_text(encoding="utf-8"))


def test_real_course_loads(course):
    assert [a.id for a in course.assignments] == [
        "01_shapes",
        "02_parameters",
        "03_gradients",
        "04_tensor_parallel",
        "05_matmul_benchmark",
    ]
    for number, assignment in enumerate(course.assignments, start=1):
        assert assignment.number == number and assignment.notebook == f"{assignment.id}.ipynb"
        assert [part.task for part in assignment.parts] == [
            f"{number}.{i}" for i in range(1, len(assignment.parts) + 1)
        ]
        assert assignment.max_score == sum(part.points for part in assignment.parts) > 0
    assert course.assignment("01_shapes").part("x2_for_zero_output").name == "x2_zero"
    assert course.assignment("01_shapes").part("linear_forward").name == "linear_forward"
    assert course.limits.part_timeout_s > 0 and course.secret_env == "LAYERS_GRADER_SECRET"


def test_every_chapter_exercise_maps_to_a_part(course):
    covered = {exercise for a in course.assignments for part in a.parts for exercise in part.exercises}
    assert course.exercises == 16 and covered == set(range(1, course.exercises + 1))


def test_every_automatic_part_has_a_registered_check(course):
    missing = [
        a.key(part)
        for a in course.assignments
        for part in a.parts
        if part.kind != "manual" and a.key(part) not in CHECKS
    ]
    assert missing == []


def test_every_assignment_has_its_reference_and_checks_module(course):
    grader_dir = DEFAULT_COURSE_FILE.parent / "grader"
    for assignment in course.assignments:
        assert (grader_dir / "reference" / f"{assignment.module}.py").is_file(), assignment.id
        assert (grader_dir / "checks" / f"{assignment.module}.py").is_file(), assignment.id
    assert [a.module for a in course.assignments][:2] == ["shapes", "parameters"]  # the id without its number


def test_the_exercise_count_comes_from_course_yml(tmp_path, raw):
    data = copy.deepcopy(raw)
    data["exercises"] = 20
    data["assignments"][0]["parts"][0]["exercises"] = [17, 20]
    (tmp_path / "course.yml").write_text(yaml.safe_dump(data))
    assert load_course(tmp_path / "course.yml").assignments[0].parts[0].exercises == (17, 20)
    del data["exercises"]  # without a count, any exercise number from 1 up
    (tmp_path / "course.yml").write_text(yaml.safe_dump(data))
    assert load_course(tmp_path / "course.yml").exercises is None


def test_unknown_lookups(course):
    with pytest.raises(CourseError, match=r"course\.yml: unknown assignment '99_nope'.*01_shapes"):
        course.assignment("99_nope")
    with pytest.raises(KeyError, match="no_such_part"):
        course.assignment("01_shapes").part("no_such_part")


def first_part(data):
    return data["assignments"][0]["parts"][0]


def _delete_kind(data):
    del first_part(data)["kind"]


def _duplicate_part(data):
    parts = data["assignments"][0]["parts"]
    parts[1]["id"] = parts[0]["id"]


def _set(field, value, where=first_part):
    def edit(data):
        where(data)[field] = value

    return edit


def _top(field, value):
    return _set(field, value, where=lambda data: data)


def _delete_top(field):
    def edit(data):
        del data[field]

    return edit


MALFORMED = [
    ("missing field", _delete_kind, "assignments[0].parts[0].kind", "missing"),
    ("missing top field", _delete_top("course_id"), "course_id", "missing"),
    ("wrong type", _set("points", "two"), "assignments[0].parts[0].points", "expected int or float"),
    ("bool as number", _set("points", True), "assignments[0].parts[0].points", "bool"),
    ("duplicate part id", _duplicate_part, "assignments[0].parts[1].id", "duplicate"),
    ("unknown field", _set("colour", "red"), "assignments[0].parts[0]", "colour"),
    ("bad kind", _set("kind", "essay"), "assignments[0].parts[0].kind", "essay"),
    ("zero points", _set("points", 0), "assignments[0].parts[0].points", "positive"),
    ("negative points", _set("points", -1.5), "assignments[0].parts[0].points", "positive"),
    ("exercise out of range", _set("exercises", [17]), "assignments[0].parts[0].exercises", "1 to 16"),
    ("bad name", _set("name", "not an identifier"), "assignments[0].parts[0].name", "identifier"),
    ("bad seeds", _set("seeds", [2]), "assignments[0].parts[0].seeds", "strings"),
    (
        "bad notebook",
        _set("notebook", "x.py", where=lambda d: d["assignments"][0]),
        "assignments[0].notebook",
        ".ipynb",
    ),
    (
        "bad assignment id",
        _set("id", "shapes", where=lambda d: d["assignments"][0]),
        "assignments[0].id",
        "01_shapes",
    ),
    (
        "no parts",
        _set("parts", [], where=lambda d: d["assignments"][0]),
        "assignments[0].parts",
        "at least one",
    ),
    (
        "negative limit",
        _set("part_timeout_s", -1, where=lambda d: d["limits"]),
        "limits.part_timeout_s",
        "positive",
    ),
    ("unknown limit", _set("gpus", 1, where=lambda d: d["limits"]), "limits", "gpus"),
    ("bad secret env", _top("secret_env", "not valid!"), "secret_env", "environment variable"),
    ("no exercises", _top("exercises", 0), "exercises", "number of the chapter's exercises"),
    ("exercises not a number", _top("exercises", "16"), "exercises", "expected int"),
    (
        "bad module",
        _set("module", "not-a-module", where=lambda d: d["assignments"][0]),
        "assignments[0].module",
        "Python module name",
    ),
    ("assignments not a list", _top("assignments", {"a": 1}), "assignments", "expected list"),
    ("NaN points", _set("points", float("nan")), "assignments[0].parts[0].points", "finite positive"),
    (
        "infinite limit",
        _set("part_timeout_s", float("inf"), where=lambda d: d["limits"]),
        "limits.part_timeout_s",
        "finite positive",
    ),
    (
        "points beyond float range",
        _set("points", 10**400),
        "assignments[0].parts[0].points",
        "finite positive",
    ),
    ("id with a trailing newline", _set("id", "relu\n"), "assignments[0].parts[0].id", "letters"),
    ("keyword as name", _set("name", "lambda"), "assignments[0].parts[0].name", "identifier"),
    ("empty course id", _top("course_id", " "), "course_id", "non-empty"),
    (
        "assignment number 5000 digits long",
        _set("id", "9" * 5000 + "_x", where=lambda d: d["assignments"][0]),
        "assignments[0].id",
        "01_shapes",
    ),
    (
        "repeated assignment number",
        _set("id", "01_again", where=lambda d: d["assignments"][1]),
        "assignments[1].id",
        "already used by '01_shapes'",
    ),
    (
        "repeated notebook",
        _set("notebook", "01_shapes.ipynb", where=lambda d: d["assignments"][1]),
        "assignments[1].notebook",
        "already used",
    ),
]


@pytest.mark.parametrize("label, edit, field, detail", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_course_files_name_file_and_field(tmp_path, raw, label, edit, field, detail):
    data = copy.deepcopy(raw)
    edit(data)
    path = tmp_path / "course.yml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(CourseError) as error:
        load_course(path)
    message = str(error.value)
    assert message.startswith("course.yml: ") and "\n" not in message and len(message) < 400, message
    assert field in message and detail in message, message


@pytest.mark.parametrize(
    "text, detail",
    [
        ("assignments: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        ("", "expected a mapping"),
        ("course_id: a\nsecret_env: S\ncourse_id: b\n", "line 3, column 1: duplicate key 'course_id'"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_unreadable_course_files(tmp_path, text, detail):
    path = tmp_path / "course.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CourseError, match=r"^course\.yml: ") as error:
        load_course(path)
    assert detail in str(error.value)


def test_a_directory_is_not_read_as_a_course_file(tmp_path):
    with pytest.raises(CourseError, match="cannot be read") as error:
        load_course(tmp_path)
    assert str(tmp_path) in str(error.value)


def test_missing_course_file_names_the_path(tmp_path):
    path = tmp_path / "absent" / "course.yml"
    with pytest.raises(CourseError, match="file not found") as error:
        load_course(path)
    assert str(path) in str(error.value)
