"""`python -m grader build [--check] [ASSIGNMENT ...]`: regenerate assignments/ and solutions/.

The source notebook `source/<id>/<id>.ipynb` is the single source of truth. The build runs two
pipelines of small nbconvert preprocessors over it, reusing nbgrader's own steps where they fit:

* release (`assignments/<id>/<id>.ipynb`): mark-scheme cells removed, solution regions replaced
  by stubs that name the task, outputs cleared, hidden tests removed, cell checksums computed
  exactly as `nbgrader generate_assignment` computes them;
* solution (`solutions/<id>/<id>.ipynb`): solution markers and hidden tests removed, mark
  schemes shown as model answers, executed with nbclient (kernel python3), volatile output
  normalised.

Both notebooks carry `metadata.layers_build.source_digest`, a digest of the source notebook
(outputs excluded), the assignment's entry in course.yml, the other files of the source folder
and BUILD_VERSION. Solutions are re-executed only when that digest or their cells change, so a
second build on an unchanged tree changes nothing. `--check` rebuilds in memory without running
anything and lists the generated files that are out of date.

nbgrader_config.py registers the same pipelines, so `nbgrader generate_assignment` writes the
same release notebook and `nbgrader generate_solution` the same kind of clean solution.
The nbconvert/nbgrader classes are created on first use (module `__getattr__`) so that
`python -m grader` stays fast to start.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from fnmatch import fnmatch
from pathlib import Path

BUILD_VERSION = "1"
BUILD_KEY = "layers_build"
KERNEL_NAME = "python3"
MARK_SCHEME_TAG = "mark-scheme"
ILLUSTRATION_TAG = "illustration"
SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
IGNORED_FILES = (".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.ipynb")
VOLATILE_MIMETYPES = ("application/vnd.jupyter.widget-view+json",)
GRADER_IMPORT = re.compile(r"^\s*(from|import)\s+grader\b")
MEMORY_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{8,16}\b")
EXECUTION_TIMEOUT_S = 300


class BuildError(Exception):
    """A source notebook or course.yml cannot be built; the message names the file and cell."""


# ---------------------------------------------------------------------------------------------
# Reading and validating a source notebook


def cell_label(index: int, cell) -> str:
    """'cell 7 (grade_id "answer_relu")' or 'cell 3 ("## Setup")': how errors name a cell."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    if grade_id:
        return f'cell {index + 1} (grade_id "{grade_id}")'
    first_line = next(
        (line.strip() for line in _text(cell.get("source", "")).splitlines() if line.strip()), ""
    )
    return f'cell {index + 1} ("{first_line[:50]}")' if first_line else f"cell {index + 1} (empty)"


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def read_notebook(path: Path, label: str | None = None):
    """Parse a notebook file into a NotebookNode (nbformat 4); BuildError on bad JSON or format."""
    import nbformat

    label = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BuildError(f"{label}: file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BuildError(f"{label}: cannot be read: {error}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise BuildError(
            f"{label}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if type(raw) is not dict or raw.get("nbformat") != 4 or type(raw.get("cells")) is not list:
        raise BuildError(
            f"{label}: not an nbformat 4 notebook (expected a JSON object with nbformat 4 and a list of cells)"
        )
    if type(raw.get("metadata", {})) is not dict:
        raise BuildError(f"{label}: the notebook's metadata should be a JSON object")
    for index, cell in enumerate(raw["cells"]):
        if type(cell) is not dict or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise BuildError(f"{label}: cell {index + 1} is not a code, markdown or raw cell")
        metadata = cell.get("metadata", {})
        nbgrader = metadata.get("nbgrader", {}) if type(metadata) is dict else {}
        if type(nbgrader) is not dict:
            raise BuildError(
                f"{label}: cell {index + 1}: metadata.nbgrader should be a JSON object, not {nbgrader!r}"
            )
        if type(nbgrader.get("grade_id", "")) is not str:
            raise BuildError(
                f"{label}: cell {index + 1}: nbgrader grade_id should be a string, not {nbgrader['grade_id']!r}"
            )
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat raises several unrelated types for bad structure
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BuildError(f"{label}: not a valid notebook: {message}") from None
    return notebook


def _regions(source: str, markers: tuple[str, str], where: str) -> list[tuple[int, int]]:
    """Line spans (begin, end) of marked regions; BuildError if unterminated or nested."""
    begin, end = markers
    spans, start = [], None
    for number, line in enumerate(source.split("\n"), start=1):
        if begin in line:
            if start is not None:
                raise BuildError(
                    f"{where}: '{begin}' on line {number} is nested inside the one on line {start}"
                )
            start = number
        elif end in line:
            if start is None:
                raise BuildError(f"{where}: '{end}' on line {number} has no '{begin}' before it")
            spans.append((start, number))
            start = None
    if start is not None:
        raise BuildError(f"{where}: '{begin}' on line {start} has no matching '{end}'")
    return spans


def _outside(source: str, spans: list[tuple[int, int]]) -> list[str]:
    lines = source.split("\n")
    inside = {n for begin, end in spans for n in range(begin, end + 1)}
    return [line for number, line in enumerate(lines, start=1) if number not in inside]


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []) or [])


def validate_source(notebook, assignment, label: str) -> None:
    """Check a source notebook against notebooks.md and the assignment's parts in course.yml."""
    kernel = notebook.metadata.get("kernelspec", {}).get("name")
    if kernel != KERNEL_NAME:
        raise BuildError(
            f"{label}: the kernel must be {KERNEL_NAME!r}, not {kernel!r} (metadata.kernelspec.name)"
        )
    cells = notebook.cells
    by_grade_id: dict[str, int] = {}
    for index, cell in enumerate(cells):
        where = f"{label}: {cell_label(index, cell)}"
        if "id" not in cell:
            raise BuildError(f"{where}: has no cell id; save the notebook as nbformat 4.5 or later")
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if grade_id is not None:
            if grade_id in by_grade_id:
                first = by_grade_id[grade_id]
                raise BuildError(
                    f"{where}: duplicate grade_id {grade_id!r} (also used by {cell_label(first, cells[first])})"
                )
            by_grade_id[grade_id] = index
        source = _text(cell.source)
        solutions = _regions(source, SOLUTION_MARKERS, where)
        hidden = _regions(source, HIDDEN_MARKERS, where)
        if solutions and not meta.get("solution"):
            raise BuildError(f"{where}: has a BEGIN SOLUTION region but is not an nbgrader solution cell")
        if hidden and not meta.get("grade"):
            raise BuildError(f"{where}: has a hidden-test region but is not an nbgrader grade (test) cell")
        if cell.cell_type == "code" and any(GRADER_IMPORT.match(line) for line in _outside(source, hidden)):
            raise BuildError(
                f"{where}: imports grader outside a hidden-test region; "
                "students do not have grader (solution code must be written inline)"
            )
        if MARK_SCHEME_TAG in _tags(cell) and not (
            cell.cell_type == "markdown" and meta.get("locked") and str(grade_id).endswith("_mark_scheme")
        ):
            raise BuildError(
                f"{where}: a mark-scheme cell must be a locked markdown cell with grade_id '<part>_mark_scheme'"
            )

    parts = {part.id: part for part in assignment.parts}
    for part in assignment.parts:
        _validate_part(notebook, assignment, part, by_grade_id, label)
    for grade_id, index in by_grade_id.items():
        cell, meta = cells[index], _nbgrader(cells[index])
        owner = (
            grade_id.removeprefix("answer_")
            if grade_id.startswith("answer_")
            else grade_id.removesuffix("_mark_scheme")
        )
        if (
            meta.get("grade") or meta.get("solution") or grade_id.endswith("_mark_scheme")
        ) and owner not in parts:
            raise BuildError(
                f"{label}: {cell_label(index, cell)} belongs to no part of {assignment.id} in course.yml "
                f"(parts: {', '.join(parts)})"
            )


def _validate_part(notebook, assignment, part, by_grade_id: dict, label: str) -> None:
    cells = notebook.cells
    what = f"{label}: part {part.id!r} ({part.kind}, task {part.task} in course.yml)"

    def find(grade_id: str, description: str) -> int:
        if grade_id not in by_grade_id:
            raise BuildError(f"{what} has no {description} (a cell with nbgrader grade_id {grade_id!r})")
        return by_grade_id[grade_id]

    def expect(index: int, cell_type: str, **flags) -> None:
        cell, meta = cells[index], _nbgrader(cells[index])
        where = f"{label}: {cell_label(index, cell)}"
        if cell.cell_type != cell_type:
            raise BuildError(f"{where}: should be a {cell_type} cell for part {part.id!r}")
        for flag, value in flags.items():
            if bool(meta.get(flag)) != value:
                raise BuildError(
                    f"{where}: nbgrader metadata {flag!r} should be {str(value).lower()} for part {part.id!r}"
                )
        if meta.get("grade"):
            try:
                points = float(meta.get("points"))
            except (TypeError, ValueError):
                points = None
            if points != part.points:
                raise BuildError(
                    f"{where}: is worth {meta.get('points')!r} points but course.yml gives part "
                    f"{part.id!r} {part.points:g}"
                )

    if part.kind == "manual":
        answer = find(part.id, "answer cell")
        expect(answer, "markdown", solution=True, grade=True, locked=False)
        scheme = find(f"{part.id}_mark_scheme", "mark-scheme cell")
        expect(scheme, "markdown", solution=False, grade=False, locked=True)
        if MARK_SCHEME_TAG not in _tags(cells[scheme]):
            raise BuildError(
                f"{label}: {cell_label(scheme, cells[scheme])}: needs the cell tag {MARK_SCHEME_TAG!r}"
            )
        if scheme != answer + 1:
            raise BuildError(
                f"{label}: {cell_label(scheme, cells[scheme])}: should come right after the answer cell"
            )
        return

    answer = find(f"answer_{part.id}", "answer cell")
    expect(answer, "code", solution=True, grade=False, locked=False)
    test = find(part.id, "test cell")
    expect(test, "code", solution=False, grade=True, locked=True)
    if test != answer + 1:
        raise BuildError(
            f"{label}: {cell_label(test, cells[test])}: the test cell should come right after the answer cell"
        )
    answer_where = f"{label}: {cell_label(answer, cells[answer])}"
    source = _text(cells[answer].source)
    if not _regions(source, SOLUTION_MARKERS, answer_where):
        raise BuildError(f"{answer_where}: has no '### BEGIN SOLUTION' / '### END SOLUTION' region")
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise BuildError(f"{answer_where}: is not valid Python (line {error.lineno}: {error.msg})") from None
    if part.kind == "function":
        if not any(isinstance(node, ast.FunctionDef) and node.name == part.name for node in tree.body):
            raise BuildError(f"{answer_where}: should define `def {part.name}(...)`")
    elif not any(
        isinstance(node, (ast.Assign, ast.AnnAssign)) and part.name in _assigned_names(node)
        for node in tree.body
    ):
        raise BuildError(f"{answer_where}: should assign `{part.name} = ...`")
    key = assignment.key(part)
    test_source = _text(cells[test].source)
    test_where = f"{label}: {cell_label(test, cells[test])}"
    hidden = _regions(test_source, HIDDEN_MARKERS, test_where)
    hidden_text = "\n".join(test_source.split("\n")[hidden[0][0] : hidden[0][1] - 1]) if hidden else ""
    pattern = rf"assert_part\(\s*[\"']{re.escape(key)}[\"']\s*,\s*{re.escape(part.name)}\s*\)"
    if not re.search(pattern, hidden_text):
        raise BuildError(f'{test_where}: the hidden tests should call assert_part("{key}", {part.name})')


def _assigned_names(node) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {target.id for target in targets if isinstance(target, ast.Name)}


# ---------------------------------------------------------------------------------------------
# The digest that ties a generated notebook to its source


def _without_outputs(notebook):
    """A copy without outputs, execution counts or timing metadata (what a digest should ignore)."""
    clean = copy.deepcopy(notebook)
    clean.metadata.pop("widgets", None)
    clean.metadata.pop(BUILD_KEY, None)
    for cell in clean.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return clean


def _canonical(notebook) -> str:
    return json.dumps(notebook, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _extra_files(source_dir: Path) -> list[Path]:
    """Files next to the source notebook that are released with it (as nbgrader copies them)."""
    if not source_dir.is_dir():
        return []
    found = []
    for path in sorted(source_dir.rglob("*")):
        relative = path.relative_to(source_dir)
        if path.is_file() and not any(
            fnmatch(part, pattern) for part in relative.parts for pattern in IGNORED_FILES
        ):
            found.append(path)
    return found


def source_digest(notebook, assignment, source_dir: Path) -> str:
    """sha256 of the source notebook (outputs ignored), its course.yml entry, extra files and BUILD_VERSION."""
    digest = hashlib.sha256()
    digest.update(f"build {BUILD_VERSION}\n".encode())
    digest.update(json.dumps(asdict(assignment), sort_keys=True).encode())
    digest.update(_canonical(_without_outputs(notebook)).encode())
    for path in _extra_files(source_dir):
        digest.update(f"\n{path.relative_to(source_dir).as_posix()}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Stubs: what a released answer cell says instead of the solution


def _one_line(text: str, limit: int = 110) -> str:
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    if len(paragraph) <= limit:
        return paragraph
    sentence = paragraph.split(". ")[0]
    return sentence if len(sentence) <= limit else paragraph[: limit - 3].rstrip() + "..."


def task_statement(part, source: str) -> str:
    """The short statement a stub gives: a function's docstring summary, or a value cell's comment."""
    spans = _regions(source, SOLUTION_MARKERS, part.id)
    if part.kind == "function":
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = None
        for node in getattr(tree, "body", []):
            if isinstance(node, ast.FunctionDef) and node.name == part.name and ast.get_docstring(node):
                return _one_line(ast.get_docstring(node))
        return f"implement {part.name}"
    for line in _outside(source, spans):
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("###"):
            comment = re.sub(r"^Task\s+\d+\.\d+\s*:\s*", "", stripped.lstrip("#").strip())
            if comment:
                return _one_line(comment)
    return f"set {part.name} to your answer" + (" (a string)" if part.kind == "symbolic" else "")


def task_stub(part, source: str) -> str:
    """The code that replaces the solution region of `part`'s answer cell in the release."""
    statement = task_statement(part, source)
    if part.kind == "function":
        return (
            f"raise NotImplementedError({json.dumps(f'Task {part.task}: {statement}', ensure_ascii=False)})"
        )
    if statement in source:  # the cell's own comment already says what to do
        statement = "replace None with your answer" + (" (a string)" if part.kind == "symbolic" else "")
    return f"{part.name} = None  # Task {part.task}: {statement}"


# ---------------------------------------------------------------------------------------------
# Pipeline steps (nbconvert preprocessors), created on first use


def _context(resources) -> tuple:
    """(course, assignment, source_dir) for the notebook being converted.

    The build puts them into resources["layers"]; under nbgrader's own CLI they are found from
    the working directory (nbgrader converts from the course root) and resources["nbgrader"].
    """
    layers = resources.get("layers")
    if layers:
        return layers["course"], layers["assignment"], Path(layers["source_dir"])
    from grader.course import CourseError, load_course

    try:
        course = load_course(Path.cwd() / "course.yml")
        assignment = course.assignment(resources["nbgrader"]["assignment"])
    except (CourseError, KeyError) as error:
        raise BuildError(f"cannot tell which assignment is being built: {error}") from None
    source_dir = Path(resources.get("metadata", {}).get("path") or Path.cwd() / "source" / assignment.id)
    resources["layers"] = {"course": course, "assignment": assignment, "source_dir": str(source_dir)}
    return course, assignment, source_dir


def _part_of(cell, assignment):
    grade_id = _nbgrader(cell).get("grade_id", "")
    part_id = grade_id.removeprefix("answer_")
    for part in assignment.parts:
        if part.id == part_id:
            return part
    return None


def _kernel_env(root: Path | None) -> dict:
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # let the kernel use the inline backend so figures are stored
    env["PYTHONHASHSEED"] = "0"
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
    return env


def _define_steps() -> dict:
    from nbgrader.preprocessors import ClearSolutions
    from nbgrader.preprocessors import NbGraderPreprocessor as Preprocessor  # enabled by default
    from traitlets import Integer, Unicode

    class CheckSource(Preprocessor):
        """Validate the source notebook and remember its digest for StampBuild."""

        def preprocess(self, nb, resources):
            course, assignment, source_dir = _context(resources)
            label = (
                resources.get("layers", {}).get("label") or f"source/{assignment.id}/{assignment.notebook}"
            )
            validate_source(nb, assignment, label)
            resources["layers"]["digest"] = source_digest(nb, assignment, source_dir)
            return nb, resources

    class RemoveMarkSchemes(Preprocessor):
        """Drop mark-scheme cells (tag 'mark-scheme'): students never see them."""

        def preprocess(self, nb, resources):
            nb.cells = [cell for cell in nb.cells if MARK_SCHEME_TAG not in _tags(cell)]
            return nb, resources

    class TaskStubs(ClearSolutions):
        """nbgrader's ClearSolutions, with stubs that name the task ('Task 1.4: ...')."""

        def preprocess_cell(self, cell, resources, index):
            _, assignment, _ = _context(resources)
            part = _part_of(cell, assignment)
            if part is None or part.kind == "manual" or cell.cell_type != "code":
                return super().preprocess_cell(cell, resources, index)
            default = self.code_stub
            self.code_stub = {**default, resources["language"]: task_stub(part, cell.source)}
            try:
                return super().preprocess_cell(cell, resources, index)
            finally:
                self.code_stub = default

    class StripSolutionMarkers(Preprocessor):
        """Keep solution code, drop the '### BEGIN/END SOLUTION' lines around it."""

        def preprocess_cell(self, cell, resources, index):
            begin, end = SOLUTION_MARKERS
            lines = [line for line in cell.source.split("\n") if begin not in line and end not in line]
            cell.source = "\n".join(lines)
            return cell, resources

    class ShowMarkSchemes(Preprocessor):
        """Label each manual part's model answer and show its mark scheme as plain markdown."""

        def preprocess(self, nb, resources):
            _, assignment, _ = _context(resources)
            for cell in nb.cells:
                grade_id = _nbgrader(cell).get("grade_id", "")
                part = next(
                    (
                        p
                        for p in assignment.parts
                        if p.kind == "manual" and grade_id in (p.id, f"{p.id}_mark_scheme")
                    ),
                    None,
                )
                if part is None:
                    continue
                if grade_id == part.id:
                    heading = f"**Model answer** (task {part.task})"
                else:  # shown as plain text: nbgrader must not look for it in the gradebook
                    cell.metadata.pop("nbgrader", None)
                    points = f"{part.points:g} point" + ("" if part.points == 1 else "s")
                    heading = f"**Mark scheme** (task {part.task}, {points})"
                if not cell.source.startswith(heading):
                    cell.source = f"{heading}\n\n{cell.source.strip()}"
            return nb, resources

    class ExecuteNotebook(Preprocessor):
        """Run the notebook top to bottom with nbclient; any error stops the build."""

        timeout = Integer(EXECUTION_TIMEOUT_S, help="Seconds one cell may run.").tag(config=True)
        kernel_name = Unicode(KERNEL_NAME, help="Kernel that runs the solutions.").tag(config=True)

        def preprocess(self, nb, resources):
            from nbclient import NotebookClient
            from nbclient.exceptions import CellExecutionError, CellTimeoutError

            _, assignment, source_dir = _context(resources)
            root = resources.get("layers", {}).get("root")
            label = (
                resources.get("layers", {}).get("label") or f"source/{assignment.id}/{assignment.notebook}"
            )
            language_info = copy.deepcopy(nb.metadata.get("language_info"))
            with tempfile.TemporaryDirectory(prefix=f"build-{assignment.id}-") as workdir:
                for path in _extra_files(source_dir):
                    target = Path(workdir) / path.relative_to(source_dir)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
                client = NotebookClient(
                    nb,
                    timeout=self.timeout,
                    kernel_name=self.kernel_name,
                    resources={"metadata": {"path": workdir}},
                    record_timing=False,
                    store_widget_state=False,
                    allow_errors=False,
                )
                try:
                    client.execute(env=_kernel_env(Path(root) if root else None), stderr=subprocess.DEVNULL)
                except (CellExecutionError, CellTimeoutError) as error:
                    raise BuildError(
                        f"{label}: the solution notebook failed to run: {_failed_cell(nb, error)}"
                    ) from None
            if language_info is None:  # the kernel adds its exact Python version: keep the source's
                nb.metadata.pop("language_info", None)
            else:
                nb.metadata["language_info"] = language_info
            return nb, resources

    class NormaliseOutputs(Preprocessor):
        """Make executed output reproducible: no widget ids, merged streams, stable counts."""

        def preprocess(self, nb, resources):
            nb.metadata.pop("widgets", None)
            count = 0
            for cell in nb.cells:
                cell.metadata.pop("execution", None)
                if cell.cell_type != "code":
                    continue
                count += 1
                cell.execution_count = count if cell.source.strip() else None
                cell.outputs = _normalised_outputs(cell.outputs, cell.execution_count)
            return nb, resources

    class StampBuild(Preprocessor):
        """Record the source digest in the generated notebook's metadata."""

        def preprocess(self, nb, resources):
            digest = resources.get("layers", {}).get("digest")
            if digest is None:
                raise BuildError("StampBuild needs CheckSource earlier in the pipeline")
            nb.metadata[BUILD_KEY] = {"source_digest": digest, "build_version": BUILD_VERSION}
            return nb, resources

    steps = (
        CheckSource,
        RemoveMarkSchemes,
        TaskStubs,
        StripSolutionMarkers,
        ShowMarkSchemes,
        ExecuteNotebook,
        NormaliseOutputs,
        StampBuild,
    )
    for step in steps:
        step.__module__ = __name__
        step.__qualname__ = step.__name__
    return {step.__name__: step for step in steps}


STEP_NAMES = (
    "CheckSource",
    "RemoveMarkSchemes",
    "TaskStubs",
    "StripSolutionMarkers",
    "ShowMarkSchemes",
    "ExecuteNotebook",
    "NormaliseOutputs",
    "StampBuild",
)


def __getattr__(name: str):
    if name in STEP_NAMES:
        globals().update(_define_steps())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _failed_cell(nb, error) -> str:
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{cell_label(index, cell)} raised {output.get('ename')}: {output.get('evalue')}"
    return str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__


def _normalised_outputs(outputs, execution_count):
    from nbformat import NotebookNode

    result = []
    for output in outputs:
        output = copy.deepcopy(output)
        kind = output.get("output_type")
        if kind in ("display_data", "execute_result"):
            for mimetype in VOLATILE_MIMETYPES:
                output.data.pop(mimetype, None)
            if not output.data:
                continue
            if "text/plain" in output.data:
                output.data["text/plain"] = MEMORY_ADDRESS.sub("0x…", _text(output.data["text/plain"]))
            if kind == "execute_result":
                output.execution_count = execution_count
        if kind == "stream":
            output.text = _text(output.text)
            if result and result[-1].get("output_type") == "stream" and result[-1].name == output.name:
                result[-1].text += output.text
                continue
        result.append(NotebookNode(output))
    return result


def assignment_steps(gradebook: bool = False) -> list:
    """The release pipeline; with gradebook=True it also saves cells as nbgrader's generate_assignment does."""
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ComputeChecksums,
        IncludeHeaderFooter,
        LockCells,
        SaveCells,
    )

    module = sys.modules[__name__]
    return [
        module.CheckSource,
        IncludeHeaderFooter,
        module.RemoveMarkSchemes,
        LockCells,
        module.TaskStubs,
        ClearOutput,
        CheckCellMetadata,
        ComputeChecksums,
        *([SaveCells] if gradebook else []),
        ClearHiddenTests,
        ClearMarkScheme,
        ComputeChecksums,
        CheckCellMetadata,
        module.StampBuild,
    ]


def solution_steps(execute: bool = True) -> list:
    """The solution pipeline; execute=False gives the same cells without running them."""
    from nbgrader.preprocessors import (
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        IncludeHeaderFooter,
        LockCells,
    )

    module = sys.modules[__name__]
    running = [module.ExecuteNotebook, module.NormaliseOutputs] if execute else []
    return [
        module.CheckSource,
        IncludeHeaderFooter,
        module.StripSolutionMarkers,
        ClearHiddenTests,
        ClearMarkScheme,
        module.ShowMarkSchemes,
        LockCells,
        ClearOutput,
        *running,
        module.StampBuild,
    ]


# ---------------------------------------------------------------------------------------------
# The build itself


class Builder:
    """Builds one course directory (the folder holding course.yml)."""

    def __init__(self, root: Path, course):
        self.root, self.course = root, course

    def paths(self, assignment) -> dict[str, Path]:
        name = assignment.notebook
        return {
            "source": self.root / "source" / assignment.id / name,
            "assignment": self.root / "assignments" / assignment.id / name,
            "solution": self.root / "solutions" / assignment.id / name,
        }

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def convert(self, notebook, assignment, steps) -> str:
        """Run `steps` over a copy of `notebook`; returns the notebook text nbgrader would write."""
        from nbconvert.exporters import NotebookExporter
        from traitlets.config import Config

        config = Config()
        config.Exporter.default_preprocessors = []
        exporter = NotebookExporter(config=config)
        for step in steps:
            exporter.register_preprocessor(step, enabled=True)
        paths = self.paths(assignment)
        resources = {
            "metadata": {"path": str(paths["source"].parent), "name": assignment.id},
            "nbgrader": {
                "assignment": assignment.id,
                "notebook": Path(assignment.notebook).stem,
                "student": ".",
            },
            "layers": {
                "course": self.course,
                "assignment": assignment,
                "source_dir": str(paths["source"].parent),
                "root": str(self.root),
                "label": self.rel(paths["source"]),
            },
        }
        try:
            output, _ = exporter.from_notebook_node(copy.deepcopy(notebook), resources=resources)
        except RuntimeError as error:  # nbgrader's own steps report bad regions this way
            raise BuildError(f"{self.rel(paths['source'])}: {error}") from None
        return output

    def load(self, assignment):
        paths = self.paths(assignment)
        notebook = read_notebook(paths["source"], self.rel(paths["source"]))
        validate_source(notebook, assignment, self.rel(paths["source"]))
        return notebook

    def stale_copies(self, assignment) -> dict[Path, bytes]:
        """Copies of the source folder's extra files in assignments/ and solutions/ that are missing or differ."""
        source_dir = self.paths(assignment)["source"].parent
        copies = {}
        for path in _extra_files(source_dir):
            data = path.read_bytes()
            for folder in ("assignments", "solutions"):
                target = self.root / folder / assignment.id / path.relative_to(source_dir)
                if not target.exists() or target.read_bytes() != data:
                    copies[target] = data
        return copies

    def stale_solution(self, notebook, assignment) -> str | None:
        """Why the stored solution must be rebuilt, or None when it is up to date."""
        path = self.paths(assignment)["solution"]
        if not path.exists():
            return "missing"
        try:
            stored = read_notebook(path, self.rel(path))
        except BuildError as error:
            return f"unreadable ({error})"
        digest = source_digest(notebook, assignment, self.paths(assignment)["source"].parent)
        if stored.metadata.get(BUILD_KEY, {}).get("source_digest") != digest:
            return "built from a different source (digest differs)"
        import nbformat

        expected = nbformat.reads(
            self.convert(notebook, assignment, solution_steps(execute=False)), as_version=4
        )
        if _canonical(_without_outputs(stored)) != _canonical(_without_outputs(expected)):
            return "its cells differ from what the source produces"
        if any(
            output.get("output_type") == "error"
            for cell in stored.cells
            for output in cell.get("outputs", [])
        ):
            return "it contains error output"
        return None

    def check(self, assignments) -> list[str]:
        problems = []
        for assignment in assignments:
            paths = self.paths(assignment)
            if not paths["source"].exists():
                for kind in ("assignment", "solution"):
                    if paths[kind].exists():
                        problems.append(
                            f"{self.rel(paths[kind])}: has no source ({self.rel(paths['source'])} is missing)"
                        )
                continue
            notebook = self.load(assignment)
            expected = self.convert(notebook, assignment, assignment_steps())
            if not paths["assignment"].exists():
                problems.append(f"{self.rel(paths['assignment'])}: missing")
            elif paths["assignment"].read_text(encoding="utf-8") != expected:
                problems.append(
                    f"{self.rel(paths['assignment'])}: differs from what {self.rel(paths['source'])} produces"
                )
            reason = self.stale_solution(notebook, assignment)
            if reason:
                problems.append(f"{self.rel(paths['solution'])}: {reason}")
            problems += [
                f"{self.rel(path)}: missing or differs from its copy in source/"
                for path in self.stale_copies(assignment)
            ]
        return problems

    def build(self, assignments, force: bool = False, log=print) -> None:
        for assignment in assignments:
            paths = self.paths(assignment)
            if not paths["source"].exists():
                log(f"{assignment.id}: skipped, {self.rel(paths['source'])} does not exist yet")
                continue
            notebook = self.load(assignment)
            release = self.convert(notebook, assignment, assignment_steps())
            self._write(paths["assignment"], release, log)
            reason = "forced" if force else self.stale_solution(notebook, assignment)
            if reason:
                log(f"{self.rel(paths['solution'])}: executing ({reason})")
                self._write(paths["solution"], self.convert(notebook, assignment, solution_steps()), log)
            else:
                log(f"{self.rel(paths['solution'])}: up to date")
            for path, data in self.stale_copies(assignment).items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                log(f"{self.rel(path)}: copied")

    def _write(self, path: Path, text: str, log) -> None:
        if path.exists() and path.read_text(encoding="utf-8") == text:
            log(f"{self.rel(path)}: up to date")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        log(f"{self.rel(path)}: written")


def add_arguments(parser):
    parser.add_argument(
        "assignments", nargs="*", metavar="ASSIGNMENT", help="assignment ids from course.yml (default: all)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if assignments/ or solutions/ are out of date with source/",
    )
    parser.add_argument(
        "--force", action="store_true", help="re-execute solutions even when they are up to date"
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the course directory holding course.yml (default: this repository)",
    )


def run(args) -> int:
    from grader.course import DEFAULT_COURSE_FILE, CourseError, load_course

    root = (args.root or DEFAULT_COURSE_FILE.parent).resolve()
    try:
        course = load_course(root / "course.yml")
        selected = (
            [course.assignment(a) for a in args.assignments] if args.assignments else list(course.assignments)
        )
        builder = Builder(root, course)
        if args.check:
            problems = builder.check(selected)
            if problems:
                print(
                    f"python -m grader build --check: {len(problems)} generated file(s) are out of date with source/:",
                    file=sys.stderr,
                )
                for problem in problems:
                    print(f"  {problem}", file=sys.stderr)
                print(
                    "Run `python -m grader build` (or `make build`) and commit the result.", file=sys.stderr
                )
                return 1
            print(
                f"assignments/ and solutions/ are up to date with source/ ({len(selected)} assignment(s) checked)"
            )
            return 0
        builder.build(selected, force=args.force)
        return 0
    except (BuildError, CourseError) as error:
        print(f"python -m grader build: error: {error}", file=sys.stderr)
        return 1
