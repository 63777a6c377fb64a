"""`python -m grader COMMAND`: each command lives in its own module, imported only when it runs."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = {
    "demo": ("grader.demo", "build a demo class, autograde it and print the results"),
    "check": ("grader.selfcheck", "grade one filled-in notebook"),
    "autograde": ("grader.autograde", "grade submitted/ into nbgrader's gradebook"),
    "export": ("grader.export", "write grades to CSV"),
    "build": ("grader.build", "regenerate assignments/ and solutions/ from source/"),
    "release-student": ("grader.editions.release", "write the student (or self-study) edition of the course"),
    "serve": ("grader.service.serve", "run the grading service students submit to"),
    "tokens": ("grader.service.tokens", "print the students' grading-service tokens"),
}
ISOLATING = ("demo", "check", "autograde")  # the commands that run student code
# The same names as grader.sandbox.runner.UNSAFE_FLAG / UNSAFE_ENV (importing it here costs 0.5 s).
UNSAFE_FLAG, UNSAFE_ENV = "--unsafe-no-isolation", "LAYERS_UNSAFE_NO_ISOLATION"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module)
        if name == chosen:  # only the command that runs is imported, with everything it needs
            importlib.import_module(module).add_arguments(sub)
        if name in ISOLATING:
            sub.add_argument(
                UNSAFE_FLAG,
                action="store_true",
                help="run student code even where the kernel refuses the namespaces that isolate it "
                "(it can then read what the grader's user can read)",
            )
    args = parser.parse_args(argv)
    if getattr(args, "unsafe_no_isolation", False):
        os.environ[UNSAFE_ENV] = "1"
    return importlib.import_module(args.module).run(args) or 0
