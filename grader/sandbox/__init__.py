"""Running student code in a separate, walled-off process forked from a warm interpreter.

`Sandbox` owns the warm interpreter (grader/sandbox/zygote.py); `Session` is one submission's
process; `RemoteFunction` lets checks call a student function there exactly as they call a
`LocalFunction`. The trusted grader decodes every reply with grader.codec and never unpickles.
"""

from grader.sandbox.remote import RemoteFunction
from grader.sandbox.runner import (
    CellOutcome,
    IsolationUnavailable,
    Sandbox,
    SandboxError,
    Session,
    hidden_paths,
)

__all__ = [
    "CellOutcome",
    "IsolationUnavailable",
    "RemoteFunction",
    "Sandbox",
    "SandboxError",
    "Session",
    "hidden_paths",
]
