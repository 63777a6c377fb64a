"""nbgrader configuration: this repository is an nbgrader course directory.

    nbgrader generate_assignment 01_shapes     # source/ -> assignments/ (+ gradebook.db)
    nbgrader generate_solution 01_shapes       # source/ -> solutions/ (executed, clean)
    nbgrader autograde 01_shapes               # submitted/<student>/01_shapes -> autograded/

Both generators run the pipelines of `python -m grader build` (grader/build/pipelines.py), so nbgrader
writes the same student notebooks as the build: stubs that name the task, no hidden tests, no
mark schemes, nbgrader checksums. nbgrader 0.9.6 has no `db_assignments` option any more: an
assignment enters the gradebook when `generate_assignment` runs (create_assignment, on by
default) or via `nbgrader db assignment add`; the course's assignment list is course.yml,
mirrored by the folders in source/.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if importlib.util.find_spec("grader") is None:
    sys.path.insert(0, str(ROOT))

from grader.build.pipelines import assignment_steps, solution_steps  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.formgrader import feedback_steps  # noqa: E402
from grader.gradebook import gradebook_url  # noqa: E402

course = load_course(ROOT / "course.yml")
c = get_config()  # noqa: F821  (provided by nbgrader's config loader)

c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = course.course_id
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.solution_directory = "solutions"
# The gradebook of `python -m grader autograde` and `export`: $LAYERS_GRADEBOOK_URL, else gradebook.db here.
c.CourseDirectory.db_url = gradebook_url(ROOT)
# formgrader would print this whole configuration, the gradebook URL and its password included, on a page.
c.FormgradeExtension.debug = False
# formgrader shows outputs cleaned (the autograded copies it opens carry none: grader/formgrader.py).
c.HTMLExporter.sanitize_html = True
# nbgrader generate_feedback renders those copies for students: without the mark schemes shown to graders.
c.GenerateFeedback.preprocessors = feedback_steps()

c.GenerateAssignment.create_assignment = True
# assignments/ is committed, so regenerate it instead of skipping it; the output is identical
# to `python -m grader build`, and regenerating is what fills the gradebook for autograde.
c.GenerateAssignment.force = True
c.GenerateAssignment.preprocessors = assignment_steps(gradebook=True)
# grader.build.steps.execute_notebook.ExecuteNotebook takes its cell timeout from course.yml too.
c.GenerateSolution.preprocessors = solution_steps(execute=True)

# autograde: hidden tests grade each part in the notebook's own kernel (grader.inline).
c.Execute.timeout = int(course.limits.notebook_timeout_s)
c.Execute.interrupt_on_timeout = True
