"""ShowMarkSchemes: in the solutions, each free-text part shows its model answer and its mark scheme."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.build.context import context
from grader.notebook import MARK_SCHEME_SUFFIX, nbgrader_metadata


class ShowMarkSchemes(NbGraderPreprocessor):
    """Head each manual part's answer and mark scheme; the scheme becomes plain markdown."""

    answer_heading = Unicode(
        "**Model answer** (task {task})", help="Heading of a model answer; {task} is its task number."
    ).tag(config=True)
    scheme_heading = Unicode(
        "**Mark scheme** (task {task}, {points})",
        help="Heading of a mark scheme; {task} is its task number, {points} e.g. '2 points'.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        _, assignment, _ = context(resources)
        manual = {part.id: part for part in assignment.parts if part.kind == "manual"}
        for cell in nb.cells:
            grade_id = nbgrader_metadata(cell).get("grade_id", "")
            part = manual.get(grade_id.removesuffix(MARK_SCHEME_SUFFIX))
            if part is None:
                continue
            if grade_id == part.id:
                heading = self.answer_heading.format(task=part.task)
            else:  # shown as plain text: nbgrader must not look for it in the gradebook
                cell.metadata.pop("nbgrader", None)
                points = f"{part.points:g} point" + ("" if part.points == 1 else "s")
                heading = self.scheme_heading.format(task=part.task, points=points)
            if not cell.source.startswith(heading):
                cell.source = f"{heading}\n\n{cell.source.strip()}"
        return nb, resources
