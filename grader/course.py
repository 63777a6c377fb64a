"""Reads and validates course.yml, the course's single source of truth."""

from __future__ import annotations

import argparse
import keyword
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

import yaml

KINDS = ("function", "value", "symbolic", "manual")
ID_PATTERN = re.compile(r"[A-Za-z0-9_]+")
ASSIGNMENT_ID_PATTERN = re.compile(r"\d{1,4}_[A-Za-z0-9_]+")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_MESSAGE = 300  # a value quoted in an error is cut so the message stays one readable line
DEFAULT_COURSE_FILE = Path(__file__).resolve().parent.parent / "course.yml"


class CourseError(ValueError):
    """course.yml is malformed; the message names the file, the field and what was expected."""


@dataclass(frozen=True)
class Limits:
    part_timeout_s: float = 20
    notebook_timeout_s: float = 240
    memory_mb: int = 3072
    output_kb: int = 256
    workers: int = 2


@dataclass(frozen=True)
class ServicePolicy:
    """The grading service's rules (course.yml `service:`); see grader/service/."""

    attempts_per_hour: int = 10
    hidden_feedback_before_deadline: bool = True
    max_upload_kb: int = 8192
    deadlines: tuple[tuple[str, datetime], ...] = ()  # (assignment id, aware UTC datetime)

    def deadline(self, assignment_id: str) -> datetime | None:
        return dict(self.deadlines).get(assignment_id)


@dataclass(frozen=True)
class Part:
    id: str
    kind: str
    points: float
    name: str
    exercises: tuple[int, ...]
    seeds: tuple[str, ...]
    task: str  # "2.5": assignment number, part number


@dataclass(frozen=True)
class Assignment:
    """One assignment; `module` names its grader/reference/<module>.py and grader/checks/<module>.py."""

    id: str
    title: str
    notebook: str
    parts: tuple[Part, ...]
    module: str = ""

    @property
    def number(self) -> int:
        return int(self.id.split("_")[0])

    @property
    def max_score(self) -> float:
        return sum(part.points for part in self.parts)

    def key(self, part: Part) -> str:
        """The part's course-wide name, "assignment.part", as used by checks and hidden tests."""
        return f"{self.id}.{part.id}"

    def part(self, part_id: str) -> Part:
        for part in self.parts:
            if part.id == part_id:
                return part
        raise KeyError(
            f"assignment {self.id} has no part {part_id!r} (known: {', '.join(p.id for p in self.parts)})"
        )


@dataclass(frozen=True)
class Course:
    course_id: str
    title: str
    secret_env: str
    limits: Limits
    assignments: tuple[Assignment, ...]
    path: Path
    exercises: int | None = None  # the chapter's exercise count: parts may cite 1..exercises
    service: ServicePolicy = ServicePolicy()

    def assignment(self, assignment_id: str) -> Assignment:
        for assignment in self.assignments:
            if assignment.id == assignment_id:
                return assignment
        known = ", ".join(a.id for a in self.assignments)
        raise CourseError(f"{self.path.name}: unknown assignment {assignment_id!r} (known: {known})")

    @property
    def root(self) -> Path:
        return self.path.parent


def _yaml_problem(error: Exception) -> str:
    """One line: where the YAML broke and what the parser expected there."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping instead of keeping the last."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)


class _Reader:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str):
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        raise CourseError(f"{self.path.name}: {where}: {message}")

    def field(self, mapping: dict, key: str, where: str, kind, required=True, default=None):
        if key not in mapping:
            if required:
                self.fail(f"{where}.{key}" if where else key, "missing required field")
            return default
        value = mapping[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if type(value) is bool and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            self.fail(
                f"{where}.{key}" if where else key, f"expected {names}, got {type(value).__name__} {value!r}"
            )
        return value

    def positive(self, mapping: dict, key: str, where: str, kind, default=None) -> int | float:
        """A finite number above zero (NaN, infinities and numbers beyond float range are refused)."""
        value = self.field(mapping, key, where, kind, required=default is None, default=default)
        try:
            usable = math.isfinite(value) and value > 0
        except OverflowError:
            usable = False
        if not usable:
            self.fail(f"{where}.{key}", f"expected a finite positive number, got {value!r:.40}")
        return value

    def mapping(self, value, where: str, allowed: set[str]) -> dict:
        if type(value) is not dict:
            self.fail(where, f"expected a mapping, got {type(value).__name__}")
        unknown = set(value) - allowed
        if unknown:
            self.fail(where, f"unknown field(s) {sorted(map(str, unknown))}; allowed: {sorted(allowed)}")
        return value


def load_course(path: str | Path = DEFAULT_COURSE_FILE) -> Course:
    """Parse and validate course.yml; raises CourseError naming the file and field."""
    path = Path(path)
    reader = _Reader(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise CourseError(f"{path}: file not found") from None
    except OSError as error:
        raise CourseError(f"{path}: cannot be read: {error.strerror or error}") from None
    except RecursionError:
        raise CourseError(f"{path.name}: not valid YAML: nested too deeply") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise CourseError(f"{path.name}: not valid YAML: {_yaml_problem(error)}") from None
    top = reader.mapping(
        raw,
        "top level",
        {"course_id", "title", "secret_env", "exercises", "limits", "assignments", "service"},
    )
    course_id = reader.field(top, "course_id", "", str)
    if not course_id.strip():
        reader.fail("course_id", "expected a non-empty course id")
    title = reader.field(top, "title", "", str, required=False, default=course_id)
    secret_env = reader.field(top, "secret_env", "", str)
    if not IDENTIFIER.fullmatch(secret_env):
        reader.fail("secret_env", f"expected an environment variable name, got {secret_env!r}")
    limits = _limits(reader, top.get("limits", {}))
    exercises = reader.field(top, "exercises", "", int, required=False)
    if exercises is not None and exercises < 1:
        reader.fail("exercises", f"expected the number of the chapter's exercises, got {exercises!r}")
    entries = reader.field(top, "assignments", "", list)
    if not entries:
        reader.fail("assignments", "expected at least one assignment")
    assignments = []
    for index, entry in enumerate(entries):
        assignment = _assignment(reader, entry, f"assignments[{index}]", exercises)
        for earlier in assignments:
            if earlier.id == assignment.id:
                reader.fail(f"assignments[{index}].id", f"duplicate assignment id {assignment.id!r}")
            if earlier.number == assignment.number:
                reader.fail(
                    f"assignments[{index}].id",
                    f"assignment number {assignment.number} is already "
                    f"used by {earlier.id!r}; task numbers would clash",
                )
            if earlier.notebook == assignment.notebook:
                reader.fail(
                    f"assignments[{index}].notebook",
                    f"notebook {assignment.notebook!r} is already used by {earlier.id!r}",
                )
        assignments.append(assignment)
    service = _service(reader, top.get("service", {}), {a.id for a in assignments})
    return Course(
        course_id, title, secret_env, limits, tuple(assignments), path.resolve(), exercises, service
    )


def _service(reader: _Reader, raw, assignment_ids: set[str]) -> ServicePolicy:
    fields = ServicePolicy.__dataclass_fields__
    raw = reader.mapping(raw, "service", set(fields))
    default = ServicePolicy()
    attempts = reader.positive(raw, "attempts_per_hour", "service", int, default=default.attempts_per_hour)
    upload = reader.positive(raw, "max_upload_kb", "service", int, default=default.max_upload_kb)
    hidden = reader.field(
        raw,
        "hidden_feedback_before_deadline",
        "service",
        bool,
        False,
        default.hidden_feedback_before_deadline,
    )
    deadlines = reader.mapping(raw.get("deadlines", {}), "service.deadlines", assignment_ids)
    parsed = []
    for assignment_id, value in deadlines.items():
        if type(value) is str:
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                pass
        if type(value) is not datetime:
            kind = "a date without a time" if type(value) is date else repr(value)
            reader.fail(f"service.deadlines.{assignment_id}", f"expected a date and time, got {kind}")
        if value.tzinfo is None:
            reader.fail(f"service.deadlines.{assignment_id}", f"{value} needs a time zone (e.g. Z or +01:00)")
        parsed.append((assignment_id, value.astimezone(timezone.utc)))
    return ServicePolicy(attempts, hidden, upload, tuple(sorted(parsed)))


def _limits(reader: _Reader, raw) -> Limits:
    raw = reader.mapping(raw, "limits", set(Limits.__dataclass_fields__))
    values = {}
    for key, spec in Limits.__dataclass_fields__.items():
        kind = (int, float) if spec.type == "float" else int
        values[key] = reader.positive(raw, key, "limits", kind, default=spec.default)
    return Limits(**values)


def _assignment(reader: _Reader, raw, where: str, exercises: int | None) -> Assignment:
    raw = reader.mapping(raw, where, {"id", "title", "notebook", "module", "parts"})
    assignment_id = reader.field(raw, "id", where, str)
    if not ASSIGNMENT_ID_PATTERN.fullmatch(assignment_id):
        reader.fail(f"{where}.id", f"expected an id like '01_shapes', got {assignment_id!r}")
    title = reader.field(raw, "title", where, str)
    notebook = reader.field(raw, "notebook", where, str)
    if not notebook.endswith(".ipynb") or notebook == ".ipynb" or "/" in notebook or "\\" in notebook:
        reader.fail(f"{where}.notebook", f"expected a notebook file name ending in .ipynb, got {notebook!r}")
    module = reader.field(raw, "module", where, str, required=False, default=assignment_id.split("_", 1)[1])
    if not IDENTIFIER.fullmatch(module) or keyword.iskeyword(module):
        reader.fail(f"{where}.module", f"expected a Python module name, got {module!r}")
    entries = reader.field(raw, "parts", where, list)
    if not entries:
        reader.fail(f"{where}.parts", "expected at least one part")
    number = int(assignment_id.split("_")[0])
    parts, seen = [], set()
    for index, entry in enumerate(entries):
        part = _part(reader, entry, f"{where}.parts[{index}]", f"{number}.{index + 1}", exercises)
        if part.id in seen:
            reader.fail(f"{where}.parts[{index}].id", f"duplicate part id {part.id!r} in {assignment_id}")
        seen.add(part.id)
        parts.append(part)
    return Assignment(assignment_id, title, notebook, tuple(parts), module)


def _part(reader: _Reader, raw, where: str, task: str, count: int | None) -> Part:
    raw = reader.mapping(raw, where, {"id", "kind", "points", "name", "exercises", "seeds"})
    part_id = reader.field(raw, "id", where, str)
    if not ID_PATTERN.fullmatch(part_id):
        reader.fail(f"{where}.id", f"expected letters, digits and underscores, got {part_id!r}")
    kind = reader.field(raw, "kind", where, str)
    if kind not in KINDS:
        reader.fail(f"{where}.kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    points = reader.positive(raw, "points", where, (int, float))
    name = reader.field(raw, "name", where, str, required=False, default=part_id)
    if not IDENTIFIER.fullmatch(name) or keyword.iskeyword(name):
        reader.fail(f"{where}.name", f"expected a Python identifier, got {name!r}")
    exercises = reader.field(raw, "exercises", where, list, required=False, default=[])
    last = count or float("inf")
    if not all(type(e) is int and 1 <= e <= last for e in exercises):
        wanted = f"from 1 to {count}" if count else "of at least 1"
        reader.fail(f"{where}.exercises", f"expected exercise numbers {wanted}, got {exercises!r}")
    seeds = reader.field(raw, "seeds", where, list, required=False, default=[])
    if not all(type(s) is str for s in seeds):
        reader.fail(f"{where}.seeds", f"expected a list of strings, got {seeds!r}")
    return Part(part_id, kind, float(points), name, tuple(exercises), tuple(seeds), task)


def add_course_option(parser, holds: str = "course.yml") -> None:
    """The `--course DIR` option shared by the commands that work on a course directory."""
    parser.add_argument(
        "--course",
        default=None,
        metavar="DIR",
        help=f"course directory holding {holds} (default: the current directory when it "
        "has course.yml, else this repository)",
    )


def worker_count(text: str) -> int:
    """argparse type for --workers: a whole number of at least 1, or a one-line usage error."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {count}")
    return count


def add_workers_option(parser, what: str = "submissions graded in parallel") -> None:
    """The `--workers N` option of the commands that grade (default: course.yml limits.workers)."""
    parser.add_argument(
        "--workers", type=worker_count, default=None, metavar="N", help=f"{what} (default: limits.workers)"
    )


def load_course_dir(directory: str | Path | None) -> tuple[Course, Path]:
    """(Course, course directory) for --course DIR, the current directory or this repository."""
    if directory is None:
        directory = Path.cwd() if (Path.cwd() / "course.yml").is_file() else DEFAULT_COURSE_FILE.parent
    directory = Path(directory).resolve()
    if not (directory / "course.yml").is_file():
        raise CourseError(f"{directory} has no course.yml; pass the course directory with --course")
    return load_course(directory / "course.yml"), directory
