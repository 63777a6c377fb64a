"""NormaliseOutputs: executed output that is the same on every run."""

from __future__ import annotations

import copy
import re

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List, Unicode


MEMORY_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{8,16}\b")


class NormaliseOutputs(NbGraderPreprocessor):
    """No widget state or ids, no memory addresses, merged streams, execution counts 1, 2, 3, ..."""

    volatile_mimetypes = List(
        Unicode(),
        ["application/vnd.jupyter.widget-view+json"],
        help="Output types dropped because they change on every run.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        count = 0
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
            if cell.cell_type != "code":
                continue
            count += 1
            cell.execution_count = count if cell.source.strip() else None
            cell.outputs = self.normalised(cell.outputs, cell.execution_count)
        return nb, resources

    def normalised(self, outputs, execution_count) -> list:
        result = []
        for output in outputs:
            output = copy.deepcopy(output)
            kind = output.get("output_type")
            if kind in ("display_data", "execute_result"):
                for mimetype in self.volatile_mimetypes:
                    output.data.pop(mimetype, None)
                if not output.data:
                    continue
                if "text/plain" in output.data:
                    output.data["text/plain"] = MEMORY_ADDRESS.sub("0x…", _joined(output.data["text/plain"]))
                if kind == "execute_result":
                    output.execution_count = execution_count
            if kind == "stream":
                output.text = _joined(output.text)
                if result and result[-1].get("output_type") == "stream" and result[-1].name == output.name:
                    result[-1].text += output.text
                    continue
            result.append(NotebookNode(output))
        return result


def _joined(text) -> str:
    """Output text as one string (nbformat files may store it as a list of lines)."""
    return "".join(text) if isinstance(text, list) else str(text)
