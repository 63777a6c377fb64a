"""`python -m grader COMMAND`: each command lives in its own module and is imported on use."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "demo": ("grader.demo", "build a demo class, autograde it and print the results"),
    "check": ("grader.selfcheck", "grade one filled-in notebook"),
    "autograde": ("grader.autograde", "grade submitted/ into nbgrader's gradebook"),
    "export": ("grader.export", "write grades to CSV"),
    "build": ("grader.build", "regenerate assignments/ and solutions/ from source/"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module)
        importlib.import_module(module).add_arguments(sub)
    args = parser.parse_args(argv)
    return importlib.import_module(args.module).run(args) or 0
