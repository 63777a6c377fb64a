"""The two pipelines of the build, shared with nbgrader's CLI through nbgrader_config.py.

* release (`assignments/<id>/<id>.ipynb`): mark-scheme cells removed, solution regions replaced
  by stubs that name the task, outputs cleared, hidden tests removed, cell checksums computed
  exactly as `nbgrader generate_assignment` computes them;
* solution (`solutions/<id>/<id>.ipynb`): solution markers and hidden tests removed, mark
  schemes shown as model answers, executed with nbclient (kernel python3), volatile output
  normalised.
"""

from __future__ import annotations

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

from grader.build.steps.check_source import CheckSource
from grader.build.steps.course_points import CoursePoints
from grader.build.steps.execute_notebook import ExecuteNotebook
from grader.build.steps.normalise_outputs import NormaliseOutputs
from grader.build.steps.parts_table import PartsTable
from grader.build.steps.remove_mark_schemes import RemoveMarkSchemes
from grader.build.steps.show_mark_schemes import ShowMarkSchemes
from grader.build.steps.stamp_build import StampBuild
from grader.build.steps.strip_solution_markers import StripSolutionMarkers
from grader.build.steps.task_stubs import TaskStubs


def assignment_steps(gradebook: bool = False) -> list:
    """The release pipeline; gradebook=True also saves cells, as nbgrader's generate_assignment does."""
    return [
        CheckSource,
        CoursePoints,
        PartsTable,
        IncludeHeaderFooter,
        RemoveMarkSchemes,
        LockCells,
        TaskStubs,
        ClearOutput,
        CheckCellMetadata,
        ComputeChecksums,
        *([SaveCells] if gradebook else []),
        ClearHiddenTests,
        ClearMarkScheme,
        ComputeChecksums,
        CheckCellMetadata,
        StampBuild,
    ]


def solution_steps(execute: bool = True) -> list:
    """The solution pipeline; execute=False gives the same cells without running them."""
    return [
        CheckSource,
        CoursePoints,
        PartsTable,
        IncludeHeaderFooter,
        StripSolutionMarkers,
        ClearHiddenTests,
        ClearMarkScheme,
        ShowMarkSchemes,
        LockCells,
        ClearOutput,
        *([ExecuteNotebook, NormaliseOutputs] if execute else []),
        StampBuild,
    ]
