"""Per-student feedback pages: the student's own answers, scores and feedback per part.

A page shows only what the student may see: their answer cells, the score, status and feedback
of each part and the misconceptions it revealed. Hidden tests, reference code, mark schemes and
the grader's own file paths never appear: feedback text passes through `redact` first.
"""

from __future__ import annotations

import html
import os
import re
import sys
from pathlib import Path

from grader.misconceptions import MISCONCEPTIONS
from grader.notebook import without_hidden_regions

GRADER_DIR = str(Path(__file__).resolve().parent)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } .sub { color: #555; margin-top: 0; }
.total { font-size: 1.2rem; margin: 1rem 0; }
.part { border: 1px solid #ddd; border-radius: 8px; margin: 1rem 0; padding: .6rem 1rem; }
.part h2 { font-size: 1.05rem; margin: .2rem 0 .5rem; display: flex; justify-content: space-between; }
.badge { font-size: .8rem; padding: .1rem .5rem; border-radius: 999px; color: white; }
.passed { background: #2e7d32; } .partial { background: #ef6c00; } .failed { background: #c62828; }
.error { background: #6a1b9a; } .timeout { background: #6a1b9a; } .manual { background: #1565c0; }
pre { background: #f6f8fa; padding: .6rem; border-radius: 6px; overflow-x: auto; font-size: .85rem; }
.feedback { white-space: pre-wrap; } .misconception { margin: .3rem 0; }
.misconception code { background: #fff3e0; padding: 0 .3rem; border-radius: 4px; }
.warning { background: #fff8e1; border-left: 4px solid #f9a825; padding: .5rem 1rem; }
"""


def redact(text: str, extra_paths: tuple[str, ...] = ()) -> str:
    """`text` without hidden regions or file paths of the grader, the course or the interpreter."""
    text = without_hidden_regions(text or "")
    text = re.sub(r"(/[^\s\"'<>]*)?/(grader|site-packages|dist-packages)/[^\s\"'<>,)]*", "…", text)
    paths = sorted({GRADER_DIR, sys.prefix, sys.base_prefix, *extra_paths}, key=len, reverse=True)
    for path in paths:
        if path and len(path) > 1:
            text = text.replace(path, "…")
    return text


def render(course, result, course_dir: str | os.PathLike | None = None) -> str:
    """The HTML feedback page for one `SubmissionResult`; every text from the student is escaped."""
    assignment = course.assignment(result.assignment)
    hide = tuple(str(Path(p).resolve()) for p in (course.root, course_dir) if p)

    def clean(text: str) -> str:
        return html.escape(redact(text, hide))

    answers = getattr(result, "answers", {}) or {}
    by_id = {part.id: part for part in result.parts}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(assignment.title)}: feedback for {html.escape(result.student)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(assignment.title)}</h1>",
        f'<p class="sub">Assignment {html.escape(assignment.id)} · student {html.escape(result.student)}</p>',
    ]
    manual_points = sum(p.max_score for p in result.parts if p.status == "manual")
    total = f"{result.score:g} / {result.max_score:g}"
    if manual_points:
        total += (
            " (1 more point is graded by your instructor)"
            if manual_points == 1
            else f" ({manual_points:g} more points are graded by your instructor)"
        )
    out.append(f'<p class="total"><strong>Automatic score:</strong> {total}</p>')
    if result.error:
        out.append(f'<p class="warning">This submission could not be graded: {clean(result.error)}</p>')
    for part in assignment.parts:
        part_result = by_id.get(part.id)
        if part_result is None:
            continue
        status = str(part_result.status)
        score = (
            "graded by your instructor"
            if status == "manual"
            else f"{part_result.score:g} / {part_result.max_score:g}"
        )
        out.append('<section class="part">')
        badge = f'<span class="badge {html.escape(status)}">{html.escape(status)}</span>'
        out.append(
            f"<h2><span>Task {html.escape(part.task)}: <code>{html.escape(part.name)}</code></span>"
            f"<span>{score} {badge}</span></h2>"
        )
        answer = answers.get(part.id)
        if answer is not None:
            out.append(f"<pre>{clean(answer)}</pre>")
        out.append(f'<div class="feedback">{clean(part_result.feedback)}</div>')
        for code in part_result.misconceptions:
            out.append(
                f'<p class="misconception"><code>{html.escape(code)}</code> '
                f"{html.escape(MISCONCEPTIONS.get(code, ''))}</p>"
            )
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
