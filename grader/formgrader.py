"""The notebook formgrader opens to grade a submission: the student's text, none of their active content.

formgrader (nbgrader's web view of autograded/<student>/<assignment>/<notebook>.ipynb) renders
stored outputs and markdown as HTML without cleaning them and writes cell metadata into its page,
so a verbatim copy of a submission runs whatever script the student stored in it. The copy
written here keeps only what the person grading needs:

- every cell's source as text; no outputs, attachments or execution counts (whatever the
  student's kernel printed is theirs to forge; the grader's verdicts are in the gradebook);
- nbgrader metadata only on cells whose grade_id the course defines, rebuilt from the course
  (points, flags), never copied; no other metadata, and the notebook's own metadata replaced;
- markdown rendered here and cleaned by bleach's allow-list (no script, style, image, event
  handler or javascript: link), stored as one HTML block that formgrader shows unchanged;
- after each free-text answer, the part's mark scheme from the course's source notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.notebook import MARK_SCHEME_TAG
from grader.text import safe_text as storable_text

MAX_CELL_CHARS = 200_000
ALLOWED_TAGS = frozenset(
    {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2"}
    | {"h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup"}
    | {"table", "tbody", "td", "th", "thead", "tr", "ul"}
)
ALLOWED_ATTRIBUTES = {"a": ["href", "title"], "abbr": ["title"], "td": ["colspan"], "th": ["colspan"]}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
NO_CELL = "*The submission has no cell for this answer.*"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def safe_text(text, limit: int = MAX_CELL_CHARS) -> str:
    """A cell's source (text or a list of lines) as grader.text.safe_text makes it; "" for anything else.

    >>> safe_text("a\\x00b\\ud800c") == "ab\\ufffdc"
    True
    """
    if isinstance(text, list) and all(isinstance(line, str) for line in text):
        text = "".join(text)
    return storable_text(text, limit) if isinstance(text, str) else ""


def clean_html(markup: str) -> str:
    """`markup` reduced to the allow-list above; anything else is shown as text (escaped)."""
    from bleach.sanitizer import Cleaner

    cleaner = Cleaner(
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        protocols=ALLOWED_PROTOCOLS,
        strip=False,
        strip_comments=True,
    )
    return cleaner.clean(markup)


def safe_markdown(source: str, css_class: str = "layers-answer") -> str:
    """Markdown rendered to HTML as formgrader would, cleaned, on one line in one <div>.

    formgrader renders a markdown cell again; a single line opening with <div> is one HTML block
    to every CommonMark renderer, so the cleaned HTML reaches the page exactly as written here
    (newlines become the character reference &#10;, which displays the same).

    >>> safe_markdown("**hi** <script>x()</script>")
    '<div class="layers-answer"><p><strong>hi</strong> &lt;script&gt;x()&lt;/script&gt;</p></div>'
    """
    from nbconvert.filters.markdown import markdown2html

    rendered = clean_html(markdown2html(safe_text(source))).strip()
    return f'<div class="{css_class}">' + rendered.replace("\r", "").replace("\n", "&#10;") + "</div>"


def mark_schemes(course, assignment) -> dict[str, str]:
    """{manual part id: mark scheme markdown} from source/<id>/<notebook> (cells tagged mark-scheme)."""
    from grader.gradebook import _read_notebook
    from grader.notebook import is_mark_scheme

    source = _read_notebook(course.root / "source" / assignment.id / assignment.notebook)
    schemes = {}
    manual = {part.id for part in assignment.parts if part.kind == "manual"}
    for cell in source.cells if source else []:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or ""
        part_id = grade_id.removesuffix("_mark_scheme")
        if part_id in manual and is_mark_scheme(cell):
            schemes[part_id] = schemes.get(part_id, "") + cell.source
    return schemes


def _cell(cell_type: str, source: str, index: int, nbgrader: dict | None = None) -> dict:
    cell = {"cell_type": cell_type, "id": f"cell-{index}", "metadata": {}, "source": source}
    if nbgrader is not None:
        cell["metadata"] = {"nbgrader": nbgrader}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def _mark_scheme_cell(text: str, index: int) -> dict:
    body = safe_markdown(text, "panel-body")
    heading = '<div class="panel-heading"><strong>Mark scheme</strong> (shown to graders only)</div>'
    cell = _cell("markdown", f'<div class="panel panel-info layers-mark-scheme">{heading}{body}</div>', index)
    cell["metadata"]["tags"] = [MARK_SCHEME_TAG]  # feedback_steps() drops it from student pages
    return cell


def feedback_steps() -> list:
    """`nbgrader generate_feedback`'s preprocessors, led by one that drops the mark-scheme cells.

    generate_feedback renders the autograded copies written here for students; the mark scheme
    shown to graders must not reach them. For nbgrader_config.py: c.GenerateFeedback.preprocessors.
    """
    from nbconvert.preprocessors import TagRemovePreprocessor
    from nbgrader.converters import GenerateFeedback
    from traitlets import Bool, Set, Unicode

    class RemoveMarkSchemes(TagRemovePreprocessor):
        """Removes every cell tagged mark-scheme (on by default, unlike TagRemovePreprocessor)."""

        enabled = Bool(True, help="Whether to remove the mark-scheme cells.").tag(config=True)
        remove_cell_tags = Set(
            Unicode(), default_value={MARK_SCHEME_TAG}, help="Tags of the cells to remove."
        ).tag(config=True)

    return [RemoveMarkSchemes, *GenerateFeedback.class_traits()["preprocessors"].default()]


def formgrader_notebook(course, assignment, submitted_cells: list) -> dict:
    """The notebook formgrader shows for one submission (a JSON-ready dict, nbformat 4.5).

    Inputs:
    - course, assignment: grader.course objects; the course's notebooks define the graded cells
    - submitted_cells: the submission's "cells" list, as read from its file (any content)
    Returns the notebook described in the module docstring.
    """
    from grader.gradebook import structure_cells

    trusted = {info.name: info for info in structure_cells(course, assignment)}
    schemes = mark_schemes(course, assignment)
    manual = [part.id for part in assignment.parts if part.kind == "manual"]
    cells, placed = [], set()

    def add(cell_type: str, source: str, nbgrader: dict | None = None) -> None:
        cells.append(_cell(cell_type, source, len(cells), nbgrader))

    for raw in submitted_cells:
        raw = raw if isinstance(raw, dict) else {}
        cell_type = "code" if raw.get("cell_type") == "code" else "markdown"
        metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        nbgrader = metadata.get("nbgrader") if isinstance(metadata.get("nbgrader"), dict) else {}
        grade_id = nbgrader.get("grade_id")
        info = trusted.get(grade_id) if isinstance(grade_id, str) else None
        if info is not None and (info.name in placed or info.cell_type != cell_type):
            info = None
        source = safe_text(raw.get("source", ""))
        add(cell_type, source if cell_type == "code" else safe_markdown(source), _nbgrader(info))
        if info is not None:
            placed.add(info.name)
            if info.name in schemes:
                cells.append(_mark_scheme_cell(schemes[info.name], len(cells)))
    for part_id in manual:
        if part_id not in placed and part_id in trusted:
            add("markdown", safe_markdown(NO_CELL), _nbgrader(trusted[part_id]))
            if part_id in schemes:
                cells.append(_mark_scheme_cell(schemes[part_id], len(cells)))
    return {
        "cells": cells,
        "metadata": {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _nbgrader(info) -> dict | None:
    """nbgrader cell metadata for a course-defined cell (None for any other cell)."""
    if info is None:
        return None
    return {
        "grade": info.grade,
        "grade_id": info.name,
        "locked": info.locked,
        "points": info.points,
        "schema_version": 3,
        "solution": info.solution,
    }


def write_copy(course, assignment_id: str, submission: Path, destination: Path) -> bool:
    """Write formgrader's copy of `submission` to `destination`; False (and no copy) if unreadable.

    A stale copy from an earlier, readable version of the submission is removed, so formgrader
    never shows a notebook other than the one graded.
    """
    from grader.files import write_private
    from grader.notebook import NotebookError, load_notebook

    try:
        notebook = load_notebook(submission)
    except NotebookError:
        Path(destination).unlink(missing_ok=True)
        return False
    copy = formgrader_notebook(course, course.assignment(assignment_id), notebook["cells"])
    write_private(Path(destination), json.dumps(copy, indent=1, ensure_ascii=False) + "\n")
    return True
