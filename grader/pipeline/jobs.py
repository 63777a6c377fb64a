"""Finding submissions and fingerprinting them: one `Job` per (student, assignment).

Submissions are where nbgrader keeps them, submitted/<student>/<assignment>/<notebook>.ipynb,
with an optional timestamp.txt beside the notebook. Intake takes only regular files: a student
or assignment folder that is a link, a notebook or timestamp.txt that is a link, FIFO, device or
oversized file becomes a Job with `refused` set, which the pipeline records as that student's
zero with the reason (a linked student folder: for every assignment the run selects). Nothing is
read through a link.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.files import UnsafeFile, read_regular, refusal
from grader.notebook import MAX_NOTEBOOK_BYTES
from grader.text import is_safe_name, safe_text

MAX_TIMESTAMP_BYTES = 1024
TIMESTAMP_FILE = "timestamp.txt"


@dataclass(frozen=True)
class Job:
    """One submission to grade.

    student, assignment: ids; path: the notebook (it may not exist: then `refused` says so);
    digest: sha256 of the notebook's bytes (what tells a rerun that it changed); timestamp: the
    text of timestamp.txt, or None; refused: why intake would not read it, or None.
    """

    student: str
    assignment: str
    path: Path
    digest: str
    timestamp: str | None = None
    refused: str | None = None

    @classmethod
    def for_notebook(cls, student: str, assignment: str, path: str | os.PathLike, timestamp=None) -> "Job":
        """A Job for one notebook file, read safely once for its digest (see grader.files).

        >>> Job.for_notebook("ada", "01_shapes", "/nowhere.ipynb").refused
        'nowhere.ipynb: it does not exist'
        """
        path = Path(path)
        try:
            digest = hashlib.sha256(read_regular(path, MAX_NOTEBOOK_BYTES)).hexdigest()
        except UnsafeFile as error:
            return cls.refusing(student, assignment, path, str(error), timestamp)
        return cls(student, assignment, path, digest, timestamp)

    @classmethod
    def refusing(cls, student: str, assignment: str, path: Path, reason: str, timestamp=None) -> "Job":
        """A Job intake refused; its digest changes with the reason, so a fixed submission is re-graded."""
        digest = "refused:" + hashlib.sha256(reason.encode("utf-8", "replace")).hexdigest()[:16]
        return cls(student, assignment, Path(path), digest, timestamp, safe_text(reason, 500))


def read_timestamp(folder: Path) -> str | None:
    """The stripped text of folder/timestamp.txt, None when there is none; UnsafeFile when it is unsafe."""
    path = folder / TIMESTAMP_FILE
    if refusal(path) == "it does not exist":
        return None
    text = read_regular(path, MAX_TIMESTAMP_BYTES).decode("utf-8", "replace").strip()
    return safe_text(text, 200) or None


def _entries(folder: Path) -> list[tuple[str, int]]:
    """(name, lstat mode) of a folder's visible entries, sorted; links are not followed."""
    found = []
    with os.scandir(folder) as scan:
        for entry in scan:
            if not entry.name.startswith("."):
                found.append((entry.name, entry.stat(follow_symlinks=False).st_mode))
    return sorted(found)


def _is_folder_or_link(mode: int) -> bool:
    """A folder, or a link of any kind (to a folder, a file or nothing): intake refuses the links."""
    return stat.S_ISDIR(mode) or stat.S_ISLNK(mode)


def _course_assignments(course, course_dir: Path) -> list[str]:
    """The ids of course.yml's assignments that this course directory has a source notebook for."""
    return [a.id for a in course.assignments if (course_dir / "source" / a.id / a.notebook).is_file()]


def find_submissions(
    course,
    course_dir: Path,
    assignment_ids=None,
    students=None,
    warn=lambda message: print(message, file=sys.stderr),
) -> list[Job]:
    """Every submission under course_dir/submitted/, sorted by student then assignment.

    assignment_ids, students: only these (None: all). warn(message) hears what is skipped and why.
    Raises FileNotFoundError when there is no submitted/ folder, CourseError for an unknown id.
    """
    known = {a.id: a for a in course.assignments}
    for assignment_id in assignment_ids or ():
        course.assignment(assignment_id)  # CourseError naming the known ids
    submitted = Path(course_dir) / "submitted"
    if not submitted.is_dir():
        raise FileNotFoundError(f"no submitted/ folder in {course_dir}: nothing to grade")
    student_entries = [e for e in _entries(submitted) if _is_folder_or_link(e[1])]
    if students:
        missing = sorted(set(students) - {name for name, _ in student_entries})
        for student in missing:
            warn(f"autograde: no submissions from student {student!r} in {submitted}")
        student_entries = [e for e in student_entries if e[0] in set(students)]
    jobs, linked_students = [], []
    for student, mode in student_entries:
        if not is_safe_name(student):
            warn(f"autograde: skipping submitted/{student!r}: the folder name is not a usable student id")
            continue
        if stat.S_ISLNK(mode):
            linked_students.append(student)
            continue
        jobs += _student_jobs(course, course_dir, submitted / student, known, assignment_ids, warn)
    # a linked student's zero goes to every assignment the run selects: those asked for, else
    # every assignment of course.yml that this course has a source for or someone submitted
    selected = assignment_ids or [
        *dict.fromkeys([*_course_assignments(course, Path(course_dir)), *(job.assignment for job in jobs)])
    ]
    for student in linked_students:
        reason = f"submitted/{student} is a symbolic link, not a folder; nothing was read through it"
        warn(f"autograde: refusing {reason}")
        if not selected:
            warn(f"autograde: no assignment to record submitted/{student}'s refusal against")
        for assignment_id in selected:
            path = submitted / student / assignment_id / known[assignment_id].notebook
            jobs.append(Job.refusing(student, assignment_id, path, reason))
    return sorted(jobs, key=lambda job: (job.student, job.assignment))


def _student_jobs(course, course_dir: Path, student_dir: Path, known, assignment_ids, warn) -> list[Job]:
    jobs = []
    for name, mode in _entries(student_dir):
        if not _is_folder_or_link(mode):
            continue
        folder = student_dir / name
        if name not in known:
            if not assignment_ids:
                warn(
                    f"autograde: skipping {folder.relative_to(course_dir)}: "
                    f"{name!r} is not an assignment in course.yml"
                )
            continue
        if assignment_ids and name not in assignment_ids:
            continue
        path = folder / known[name].notebook
        if stat.S_ISLNK(mode):
            reason = f"{folder.relative_to(course_dir)} is a symbolic link, not a folder"
            jobs.append(Job.refusing(student_dir.name, name, path, reason))
            continue
        jobs.append(_job(course_dir, student_dir.name, name, path, warn))
    return jobs


def _job(course_dir: Path, student: str, assignment_id: str, path: Path, warn) -> Job:
    folder = path.parent
    if refusal(path) == "it does not exist":
        others = [
            folder / name for name, mode in _entries(folder) if name.endswith(".ipynb") and stat.S_ISREG(mode)
        ]
        if len(others) == 1:
            warn(
                f"autograde: {folder.relative_to(course_dir)} has {others[0].name} instead of "
                f"{path.name}; grading it"
            )
            path = others[0]
    try:
        timestamp = read_timestamp(folder)
    except UnsafeFile as error:
        return Job.refusing(student, assignment_id, path, str(error))
    return Job.for_notebook(student, assignment_id, path, timestamp)
