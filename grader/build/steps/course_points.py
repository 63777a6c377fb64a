"""CoursePoints: every graded cell is worth what course.yml gives its part."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.build.context import context
from grader.notebook import nbgrader_metadata


class CoursePoints(NbGraderPreprocessor):
    """Write each part's points from course.yml into its grade cell (nbgrader's `points`).

    Source notebooks need not state points; a cell that already holds the same number keeps it
    as written (2 or 2.0), so rebuilding an unchanged course changes no file.
    """

    def preprocess(self, nb, resources):
        _, assignment, _ = context(resources)
        parts = {part.id: part for part in assignment.parts}
        for cell in nb.cells:
            meta = nbgrader_metadata(cell)
            part = parts.get(meta.get("grade_id")) if meta.get("grade") else None
            if part is None:
                continue
            try:
                same = float(meta.get("points")) == part.points
            except (TypeError, ValueError):
                same = False
            if not same:
                meta["points"] = part.points
        return nb, resources
