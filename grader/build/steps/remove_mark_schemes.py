"""RemoveMarkSchemes: students never see a mark scheme."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.notebook import MARK_SCHEME_TAG, cell_tags


class RemoveMarkSchemes(NbGraderPreprocessor):
    """Drop every cell carrying the mark-scheme tag."""

    tag = Unicode(MARK_SCHEME_TAG, help="Cell tag that marks a mark-scheme cell.").tag(config=True)

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if self.tag not in cell_tags(cell)]
        return nb, resources
