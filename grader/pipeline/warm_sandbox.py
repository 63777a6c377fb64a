"""A sandbox entered in a background thread that lives until `close()`.

The sandbox's warm interpreter is tied to the thread that started it (it asks the kernel to end
it when its parent thread ends), so the same thread also waits and then leaves it. Starting takes
seconds, so the caller can open the gradebook meanwhile and call `get()` when it needs it.
"""

from __future__ import annotations

import threading

from grader.sandbox import Sandbox


def isolated_sandbox(limits) -> Sandbox:
    """The default sandbox factory: an isolated Sandbox for course.Limits `limits`."""
    return Sandbox(limits, isolate=True)


class WarmSandbox:
    """sandbox = WarmSandbox(factory, limits); sandbox.get() -> the entered sandbox; sandbox.close().

    factory(limits) returns a context manager (grader.sandbox.Sandbox or a stand-in in tests).
    `get()` re-raises whatever entering it raised.
    """

    def __init__(self, factory, limits):
        self.sandbox, self.entered, self.error = factory(limits), None, None
        self.ready, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, name="sandbox", daemon=True)
        self.thread.start()

    def _hold(self) -> None:
        try:
            self.entered = self.sandbox.__enter__()
        except BaseException as error:  # re-raised in the caller by get()
            self.error = error
            self.ready.set()
            return
        try:  # sympy for the symbolic checks (1.7 s measured), loaded while nothing waits for it
            import grader.symbolic  # noqa: F401
        except Exception:
            pass
        self.ready.set()
        self.done.wait()
        self.sandbox.__exit__(None, None, None)

    def get(self):
        self.ready.wait()
        if self.error is not None:
            raise self.error
        return self.entered

    def close(self) -> None:
        self.done.set()
        self.thread.join()
