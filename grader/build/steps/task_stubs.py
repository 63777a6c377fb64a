"""TaskStubs: nbgrader's ClearSolutions, with stubs that name the task ('Task 1.4: ...')."""

from __future__ import annotations

from nbgrader.preprocessors import ClearSolutions

from grader.build.context import context, part_of
from grader.build.stubs import task_stub


class TaskStubs(ClearSolutions):
    """Replace each solution region of a function, value or symbolic part by a stub naming its task.

    Other solution cells (free-text answers, cells of no course.yml part) get ClearSolutions'
    own `code_stub` and `text_stub`.
    """

    def preprocess_cell(self, cell, resources, index):
        _, assignment, _ = context(resources)
        part = part_of(cell, assignment)
        if part is None or part.kind == "manual" or cell.cell_type != "code":
            return super().preprocess_cell(cell, resources, index)
        default = self.code_stub
        self.code_stub = {**default, resources["language"]: task_stub(part, cell.source)}
        try:
            return super().preprocess_cell(cell, resources, index)
        finally:
            self.code_stub = default
