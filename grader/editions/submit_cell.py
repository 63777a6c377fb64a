"""The last cell of every notebook: submit to the grading service. `python -m grader.editions.submit_cell
NOTEBOOK...` appends it to source notebooks that lack it (then run `python -m grader build`).

The cell is tagged `illustration`, so the grader never runs it in the sandbox, and `submit` so
that tools can find it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CELL_ID = "submit-notebook"
TAGS = ["illustration", "submit"]
SOURCE = (
    "# Submit: sends this notebook as last saved (save with Ctrl+S first) to your course's grading\n"
    "# service and shows a score per part. check(\"linear_forward\") checks one task (see the README).\n"
    "from layerlab import submit; submit()"
)


def submit_cell() -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": CELL_ID,
        "metadata": {"tags": list(TAGS)},
        "outputs": [],
        "source": SOURCE.splitlines(keepends=True),
    }


def is_submit_cell(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and "submit" in cell.get("metadata", {}).get("tags", [])


def append(path: Path) -> bool:
    """Append the submit cell to the notebook at `path` unless its last cell is one; True when changed."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    if notebook["cells"] and is_submit_cell(notebook["cells"][-1]):
        return False
    notebook["cells"] = [cell for cell in notebook["cells"] if not is_submit_cell(cell)] + [submit_cell()]
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {'submit cell added' if append(Path(name)) else 'already has it'}")
