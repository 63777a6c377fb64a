"""Student functions living in a sandboxed process, seen only as data (values: Session.value)."""

from __future__ import annotations

from grader.sandbox.runner import Session
from grader.student import StudentFunction


class RemoteFunction(StudentFunction):
    """A function defined in a `Session`'s student process; behaves exactly like LocalFunction.

    Each call sends the arguments (encoded by grader.codec) and returns the reply bytes from
    grader.student.call_and_encode in the child; a hang past the part's time limit raises
    StudentTimeout and a dead process StudentCrashed (the session then restarts for the next part).
    """

    def __init__(self, session: Session, name: str):
        super().__init__(name)
        self.session = session
        self.generation = session.generation

    def _call(self, wire_args: bytes) -> bytes:
        return self.session.call(self.name, wire_args, self.generation, self.last_callables)
