"""Reference solutions of every automatically graded task, in NumPy float64.

One submodule per assignment, named by its course.yml `module` (by default the assignment id
without its number: 01_shapes -> `shapes`); the checks compare student answers against its
functions. `validation` holds the input validators they share (`positive_int`, `float_array`...).
Every submodule is imported here, so adding an assignment needs no list to edit.

Weights always use PyTorch's (out, in) orientation: Z = X @ W.T + b.
"""

import importlib
import pkgutil

__all__ = sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
for _name in __all__:
    importlib.import_module(f"{__name__}.{_name}")


def for_assignment(assignment):
    """The reference module of a course.Assignment (grader/reference/<assignment.module>.py)."""
    return importlib.import_module(f"{__name__}.{assignment.module}")
