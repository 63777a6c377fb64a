"""One check per automatically graded part, registered by `@check(assignment, part)`.

Every submodule is imported here, so an assignment's grader/checks/<module>.py registers its
checks without a list to edit.
"""

import importlib
import pkgutil

from grader.checks.base import CHECKS, CheckContext, WrongAnswer, check, run_check  # noqa: F401

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
