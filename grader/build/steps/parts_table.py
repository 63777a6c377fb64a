"""PartsTable: each notebook's table of tasks and points, written from course.yml."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from grader.build.context import context, source_label
from grader.build.source import PARTS_TABLE_MARKERS, BuildError
from grader.build.tables import parts_table, replace_region
from grader.notebook import nbgrader_metadata


class PartsTable(NbGraderPreprocessor):
    """Fill the one markdown region between the parts-table markers with the table of tasks.

    Whatever the source holds there is replaced: task numbers and points come from course.yml,
    what each task asks from its heading ('### Task 2.1 — parameters of one layer').
    """

    keep_markers = Bool(False, help="Keep the marker comments around the table in the output.").tag(
        config=True
    )

    def preprocess(self, nb, resources):
        _, assignment, _ = context(resources)
        label = source_label(resources, assignment)
        begin, end = PARTS_TABLE_MARKERS
        holders = [cell for cell in nb.cells if cell.cell_type == "markdown" and begin in cell.source]
        if len(holders) != 1:
            raise BuildError(
                f"{label}: needs one markdown cell with a '{begin}' ... '{end}' region, where the build "
                f"writes the table of tasks and points from course.yml (found {len(holders)})"
            )
        if nbgrader_metadata(holders[0]):  # the gradebook keeps nbgrader cells as the source writes them
            raise BuildError(
                f"{label}: the cell with the '{begin}' region should be a plain markdown cell, "
                "not an nbgrader cell"
            )
        table = parts_table(nb, assignment, label)
        holders[0].source = replace_region(
            holders[0].source, PARTS_TABLE_MARKERS, table, label, self.keep_markers
        )
        return nb, resources
