"""StripSolutionMarkers: a solution keeps its code and loses the marker lines around it."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.notebook import SOLUTION_MARKERS


class StripSolutionMarkers(NbGraderPreprocessor):
    """Drop every line holding a begin or end solution marker; keep everything between them."""

    begin_solution = Unicode(SOLUTION_MARKERS[0], help="Text that marks a solution's first line.").tag(
        config=True
    )
    end_solution = Unicode(SOLUTION_MARKERS[1], help="Text that marks a solution's last line.").tag(
        config=True
    )

    def preprocess_cell(self, cell, resources, index):
        lines = [
            line
            for line in cell.source.split("\n")
            if self.begin_solution not in line and self.end_solution not in line
        ]
        cell.source = "\n".join(lines)
        return cell, resources
