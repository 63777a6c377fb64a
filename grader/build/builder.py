"""Builder: writes, or checks, the generated notebooks of one course directory."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from traitlets.config import Config

from grader.build.context import RESOURCES_KEY
from grader.build.digest import BUILD_KEY, canonical, extra_files, source_digest, without_outputs
from grader.build.pipelines import assignment_steps, solution_steps
from grader.build.source import BuildError, read_notebook, validate_source
from grader.build.tables import COURSE_TABLE_MARKERS, course_table, replace_region

README = "README.md"


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
            RESOURCES_KEY: {
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
        """Extra source files whose copies in assignments/ or solutions/ are missing or differ."""
        source_dir = self.paths(assignment)["source"].parent
        copies = {}
        for path in extra_files(source_dir):
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
        expected = nbformat.reads(
            self.convert(notebook, assignment, solution_steps(execute=False)), as_version=4
        )
        if canonical(without_outputs(stored)) != canonical(without_outputs(expected)):
            return "its cells differ from what the source produces"
        if any(
            output.get("output_type") == "error"
            for cell in stored.cells
            for output in cell.get("outputs", [])
        ):
            return "it contains error output"
        return None

    def require_sources(self, assignments) -> None:
        """BuildError naming every assignment of course.yml whose source notebook is missing."""
        missing = [self.paths(a)["source"] for a in assignments if not self.paths(a)["source"].is_file()]
        if missing:
            raise BuildError(
                f"{', '.join(map(self.rel, missing))}: missing, but course.yml lists "
                f"{'it' if len(missing) == 1 else 'them'} (write the notebook as docs/notebooks.md "
                "describes, or remove the assignment from course.yml)"
            )

    def readme(self) -> str | None:
        """README.md with its course table written from course.yml; None without README or its markers."""
        path = self.root / README
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8")
        if COURSE_TABLE_MARKERS[0] not in text:
            return None
        return replace_region(text, COURSE_TABLE_MARKERS, course_table(self.course), README, keep=True)

    def check(self, assignments) -> list[str]:
        """What is out of date, one line per generated file; empty when everything is."""
        self.require_sources(assignments)
        problems = []
        readme = self.readme()
        if readme is not None and readme != (self.root / README).read_text(encoding="utf-8"):
            problems.append(f"{README}: its course table differs from course.yml")
        for assignment in assignments:
            paths = self.paths(assignment)
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
        """Write what is out of date; execute a solution only when its source changed (or `force`)."""
        self.require_sources(assignments)
        readme = self.readme()
        if readme is not None:
            self._write(self.root / README, readme, log)
        for assignment in assignments:
            paths = self.paths(assignment)
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
