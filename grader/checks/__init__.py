"""One check per automatically graded part, registered by `assignment.part`."""

from grader.checks.base import CHECKS, CheckContext, WrongAnswer, check, run_check  # noqa: F401
from grader.checks import (  # noqa: F401,E402  (registers every check)
    shapes,
    parameters,
    gradients,
    tensor_parallel,
    benchmark,
    formulas,
    quiz,
)
