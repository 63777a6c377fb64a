"""What a grading run prints: a progress bar while it runs, aligned tables when it is done."""

from __future__ import annotations

import time
from collections import Counter

STATUS_ORDER = ["passed", "partial", "failed", "error", "timeout", "manual"]


class Progress:
    """A plain-text progress bar with ETA on a stream; one line per 10% when not a terminal.

    bar = Progress(total, sys.stderr); bar.advance("ada/01_shapes") after each; bar.finish().
    """

    def __init__(self, total: int, stream, width: int = 28):
        self.total, self.stream, self.width = total, stream, width
        self.done, self.start = 0, time.monotonic()
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last_tenth = -1
        self._draw("")

    def advance(self, label: str) -> None:
        self.done += 1
        self._draw(label)

    def _draw(self, label: str) -> None:
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        filled = int(self.width * self.done / max(self.total, 1))
        line = (
            f"grading [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
            f"{_clock(elapsed)} elapsed, ETA {_clock(eta) if eta is not None else '--:--'}  {label}"
        )
        if self.tty:
            self.stream.write("\r" + line[:118].ljust(118))
        else:
            tenth = self.done * 10 // max(self.total, 1)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
        elapsed = time.monotonic() - self.start
        self.stream.write(f"graded {self.done} submission(s) in {elapsed:.1f} s\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def format_table(headers: list[str], rows: list[list[str]], max_width: int = 60) -> str:
    """A plain-text table with aligned columns; long cells are cut at `max_width`.

    >>> print(format_table(["a", "bb"], [["1", "2"]]))
    a  bb
    -  --
    1  2
    """

    def cut(text) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    rows = [[cut(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), line]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)


def status_counts(parts: list[dict]) -> str:
    """'3 passed, 1 failed' for a record's parts, in a fixed order of statuses."""
    counts = Counter(part.get("status", "?") for part in parts)
    order = sorted(counts, key=lambda s: (STATUS_ORDER.index(s) if s in STATUS_ORDER else 9, s))
    return ", ".join(f"{counts[s]} {s}" for s in order)


def summary_table(outcomes) -> str:
    """One row per records.Outcome: student, assignment, score/max, status counts, note, error."""
    if not outcomes:
        return "No submissions found."
    rows = []
    for outcome in outcomes:
        result = outcome.result
        rows.append(
            [
                outcome.job.student,
                outcome.job.assignment,
                f"{result.get('score', 0):g}/{result.get('max_score', 0):g}",
                status_counts(result.get("parts", [])),
                "" if outcome.graded else "unchanged",
                result.get("error") or "",
            ]
        )
    graded = sum(o.graded for o in outcomes)
    table = format_table(["student", "assignment", "score", "parts", "note", "error"], rows)
    return f"{table}\n{graded} graded, {len(outcomes) - graded} unchanged since the last run."
