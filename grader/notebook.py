"""The course's notebook conventions, and the one reader of notebook files.

Every module that names a cell, a tag or a marker asks this one:

- a part's answer cell has nbgrader grade_id `answer_<part>` (automatic parts, a code cell) or
  `<part>` (manual parts, a markdown cell): `answer_cell_id`;
- a manual part's mark scheme is a locked markdown cell tagged `mark-scheme` with grade_id
  `<part>_mark_scheme`: `mark_scheme_cell_id`, `is_mark_scheme`;
- a code cell tagged `illustration` only shows something and is never run by the grader;
- `### BEGIN SOLUTION` / `### END SOLUTION` surround model answers and `### BEGIN HIDDEN TESTS` /
  `### END HIDDEN TESTS` the tests students never see: `stub_source`, `without_solution_markers`.

`load_notebook` and `read_notebook` read a notebook file as data, refusing links and special
files when it comes from a student, and raise NotebookError with a one-line reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.files import UnsafeFile, read_regular

ANSWER_PREFIX = "answer_"
MARK_SCHEME_TAG = "mark-scheme"
MARK_SCHEME_SUFFIX = "_mark_scheme"
ILLUSTRATION_TAG = "illustration"
SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
SOLUTION_REGION = re.compile(
    r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*$", re.S | re.M
)
SOLUTION_MARKER_LINE = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[^\n]*\n?", re.M)
HIDDEN_REGION = re.compile(r"### BEGIN (HIDDEN TESTS|MARK SCHEME).*?(### END \1|\Z)", re.S)
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
MARKDOWN_STUB = "YOUR ANSWER HERE"
MAX_NOTEBOOK_BYTES = 32 * 2**20
NO_ANSWER = "no answer"


# --- names ------------------------------------------------------------------------------------


def answer_cell_id(part) -> str:
    """The grade_id of a course.Part's answer cell.

    >>> from types import SimpleNamespace as P
    >>> answer_cell_id(P(id="relu", kind="function")), answer_cell_id(P(id="why", kind="manual"))
    ('answer_relu', 'why')
    """
    return part.id if part.kind == "manual" else f"{ANSWER_PREFIX}{part.id}"


def part_id_of(grade_id: str) -> str:
    """The part id an answer cell's grade_id names: 'answer_relu' -> 'relu', 'why' -> 'why'."""
    return grade_id.removeprefix(ANSWER_PREFIX)


def mark_scheme_cell_id(part) -> str:
    """The grade_id of a manual part's mark-scheme cell: '<part>_mark_scheme'."""
    return f"{part.id}{MARK_SCHEME_SUFFIX}"


# --- raw cells (JSON dicts or nbformat nodes) --------------------------------------------------


def cell_text(cell) -> str:
    """A raw cell's source as one string (nbformat allows a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def cell_tags(cell) -> tuple[str, ...]:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tuple(tag for tag in tags if type(tag) is str) if isinstance(tags, list) else ()


def nbgrader_metadata(cell) -> dict:
    """A raw cell's metadata.nbgrader, or {} when it is missing or not a mapping."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return nbgrader if isinstance(nbgrader, dict) else {}


def grade_id_of(cell) -> str | None:
    grade_id = nbgrader_metadata(cell).get("grade_id")
    return grade_id if type(grade_id) is str else None


def is_mark_scheme(cell) -> bool:
    """Whether a raw cell is a mark scheme (by its tag or its grade_id)."""
    return MARK_SCHEME_TAG in cell_tags(cell) or (grade_id_of(cell) or "").endswith(MARK_SCHEME_SUFFIX)


def is_illustration(cell) -> bool:
    return ILLUSTRATION_TAG in cell_tags(cell)


# --- solution regions --------------------------------------------------------------------------


def stub_source(source: str, cell_type: str) -> str:
    """`source` with each solution region replaced by the stub a released notebook shows.

    >>> stub_source("x = 1\\n### BEGIN SOLUTION\\ny = 2\\n### END SOLUTION", "code")
    'x = 1\\n# YOUR CODE HERE\\nraise NotImplementedError()'
    """
    stub = MARKDOWN_STUB if cell_type == "markdown" else CODE_STUB
    return SOLUTION_REGION.sub(lambda m: "\n".join(m.group(1) + line for line in stub.splitlines()), source)


def is_blank_answer(text) -> bool:
    """True for a free-text answer left empty or as the released stub ("YOUR ANSWER HERE").

    >>> is_blank_answer("  YOUR ANSWER HERE\n"), is_blank_answer("Because ReLU is flat there.")
    (True, False)
    """
    return not isinstance(text, str) or text.strip() in ("", MARKDOWN_STUB)


def without_solution_markers(text: str) -> str:
    """`text` without its '### BEGIN/END SOLUTION' lines (the solution itself stays)."""
    return SOLUTION_MARKER_LINE.sub("", text)


def without_hidden_regions(text: str) -> str:
    """`text` with hidden tests and mark schemes replaced by '[hidden]' and no solution markers."""
    return without_solution_markers(HIDDEN_REGION.sub("[hidden]", text))


# --- reading -----------------------------------------------------------------------------------


class NotebookError(ValueError):
    """The file is not a usable notebook; the message is written for the student."""


@dataclass(frozen=True)
class Cell:
    index: int
    cell_type: str
    source: str
    grade_id: str | None
    solution: bool
    grade: bool
    tags: tuple[str, ...]


def load_notebook(path: str | Path, what: str = "the notebook", *, from_student: bool = True) -> dict:
    """A notebook file's JSON object, which holds a list of cells; NotebookError says what is wrong.

    from_student: refuse links and special files (grader.files.read_regular); the course's own
    notebooks are read with from_student=False, links allowed.
    """
    path = Path(path)
    try:
        if from_student:
            data = read_regular(path, MAX_NOTEBOOK_BYTES)
        elif path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{what} {path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
        else:
            data = path.read_bytes()
    except UnsafeFile as error:
        raise NotebookError(f"{what} cannot be read: {error}") from None
    except OSError as error:
        raise NotebookError(f"{what} {path.name} cannot be read: {error.strerror or error}") from None
    if not data.strip():
        raise NotebookError(f"{what} {path.name} is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError(
            f"{what} {path.name} is not a notebook: it is not UTF-8 text (a binary or corrupted file?)"
        ) from None
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"{what} {path.name} is not a notebook: invalid JSON ({error})") from None
    if type(notebook) is not dict or type(notebook.get("cells")) is not list:
        raise NotebookError(f"{what} {path.name} is not a Jupyter notebook: it has no list of cells")
    return notebook


def read_notebook(path: str | Path, what: str = "the notebook", *, from_student: bool = True) -> list[Cell]:
    """The cells of an nbformat-4 notebook file; NotebookError says clearly what is wrong."""
    path = Path(path)
    notebook = load_notebook(path, what, from_student=from_student)
    if notebook.get("nbformat") != 4:
        raise NotebookError(
            f"{what} {path.name} has nbformat {notebook.get('nbformat')!r}; expected a version 4 notebook"
        )
    try:
        return [_cell(raw, index) for index, raw in enumerate(notebook["cells"])]
    except NotebookError as error:
        raise NotebookError(f"{what} {path.name}: {error}") from None


def _text(source, where: str) -> str:
    if type(source) is str:
        return source
    if type(source) is list and all(type(line) is str for line in source):
        return "".join(source)
    raise NotebookError(f"{where} has a source that is neither text nor a list of lines")


def _cell(raw, index: int) -> Cell:
    where = f"cell {index + 1}"
    if type(raw) is not dict:
        raise NotebookError(f"{where} is not a notebook cell (it is a {type(raw).__name__}, not an object)")
    if type(raw.get("cell_type")) is not str:
        raise NotebookError(f"{where} is not a notebook cell (its cell_type is {raw.get('cell_type')!r:.40})")
    nbgrader = nbgrader_metadata(raw)
    return Cell(
        index,
        raw["cell_type"],
        _text(raw.get("source", ""), where),
        grade_id_of(raw),
        nbgrader.get("solution") is True,
        nbgrader.get("grade") is True,
        cell_tags(raw),
    )
