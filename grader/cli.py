"""`python -m grader COMMAND`: each command lives in its own module, imported only when it runs."""

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
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module)
        if name == chosen:  # only the command that runs is imported, with everything it needs
            importlib.import_module(module).add_arguments(sub)
    args = parser.parse_args(argv)
    return importlib.import_module(args.module).run(args) or 0
