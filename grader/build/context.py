"""What a build step knows about the notebook it converts: the course, the assignment, the source folder.

The build puts them into `resources["layers"]`. Under nbgrader's own CLI (`nbgrader
generate_assignment`), which converts from the course root, they are found from the working
directory's course.yml and `resources["nbgrader"]["assignment"]`.
"""

from __future__ import annotations

from pathlib import Path

from grader.build.source import BuildError
from grader.course import CourseError, load_course
from grader.notebook import nbgrader_metadata, part_id_of

RESOURCES_KEY = "layers"


def context(resources) -> tuple:
    """(course, assignment, source_dir) for the notebook being converted."""
    layers = resources.get(RESOURCES_KEY)
    if layers:
        return layers["course"], layers["assignment"], Path(layers["source_dir"])
    try:
        course = load_course(Path.cwd() / "course.yml")
        assignment = course.assignment(resources["nbgrader"]["assignment"])
    except (CourseError, KeyError) as error:
        raise BuildError(f"cannot tell which assignment is being built: {error}") from None
    source_dir = Path(resources.get("metadata", {}).get("path") or Path.cwd() / "source" / assignment.id)
    resources[RESOURCES_KEY] = {"course": course, "assignment": assignment, "source_dir": str(source_dir)}
    return course, assignment, source_dir


def source_label(resources, assignment) -> str:
    """How errors name the source notebook: its path relative to the course root."""
    return resources.get(RESOURCES_KEY, {}).get("label") or f"source/{assignment.id}/{assignment.notebook}"


def part_of(cell, assignment):
    """The course.yml part whose answer or test cell this is (grade_id `answer_<id>` or `<id>`), or None."""
    part_id = part_id_of(nbgrader_metadata(cell).get("grade_id", ""))
    for part in assignment.parts:
        if part.id == part_id:
            return part
    return None
