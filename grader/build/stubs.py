"""What a released answer cell says instead of the solution: a stub that names its task."""

from __future__ import annotations

import ast
import json
import re

from grader.build.source import outside, regions
from grader.notebook import SOLUTION_MARKERS


def one_line(text: str, limit: int = 110) -> str:
    """The first paragraph of `text` on one line, cut to its first sentence or `limit` characters."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    if len(paragraph) <= limit:
        return paragraph
    sentence = paragraph.split(". ")[0]
    return sentence if len(sentence) <= limit else paragraph[: limit - 3].rstrip() + "..."


def task_statement(part, source: str) -> str:
    """The short statement a stub gives: a function's docstring summary, or a value cell's comment."""
    spans = regions(source, SOLUTION_MARKERS, part.id)
    if part.kind == "function":
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = None
        for node in getattr(tree, "body", []):
            if isinstance(node, ast.FunctionDef) and node.name == part.name and ast.get_docstring(node):
                return one_line(ast.get_docstring(node))
        return f"implement {part.name}"
    for line in outside(source, spans):
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("###"):
            comment = re.sub(r"^Task\s+\d+\.\d+\s*:\s*", "", stripped.lstrip("#").strip())
            if comment:
                return one_line(comment)
    return f"set {part.name} to your answer" + (" (a string)" if part.kind == "symbolic" else "")


def task_stub(part, source: str) -> str:
    """The code that replaces the solution region of `part`'s answer cell in the release."""
    statement = task_statement(part, source)
    if part.kind == "function":
        return (
            f"raise NotImplementedError({json.dumps(f'Task {part.task}: {statement}', ensure_ascii=False)})"
        )
    if statement in source:  # the cell's own comment already says what to do
        statement = "replace None with your answer" + (" (a string)" if part.kind == "symbolic" else "")
    return f"{part.name} = None  # Task {part.task}: {statement}"
