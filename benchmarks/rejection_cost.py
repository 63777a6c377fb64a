"""How long does refusing a hostile symbolic answer take, next to grading an honest one?

    python benchmarks/rejection_cost.py [--repeat 3] [--limit 50]

Times, in one run, parsing each hostile text of tests/test_symbolic.py (as a scalar and as a
matrix formula) and grading each hostile answer of tests/test_checks_formulas.py, against
parsing and grading the model answer of the same part. Prints the slowest cases as ratios to
that peer; exits 1 when a refusal costs more than --limit times the honest answer. The unit
tests check that each refusal happens and says why; this measures what it costs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from test_checks_formulas import HOSTILE_ANSWERS, grade  # noqa: E402
from test_symbolic import HOSTILE_TEXTS, matrix, scalar  # noqa: E402

from grader.checks.formulas import SYMBOLIC_PARTS  # noqa: E402


def seconds(call, repeat: int) -> float:
    """Median wall time of `call()` over `repeat` runs (exceptions are part of the cost)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            call()
        except Exception:
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=float, default=20.0, help="largest ratio to the honest answer")
    args = parser.parse_args()
    rows = []
    for parse, honest in ((scalar, "d_out*(d_in + 1)"), (matrix, "G.T*X")):
        peer = seconds(lambda: parse(honest), args.repeat)
        for label, text in HOSTILE_TEXTS.items():
            rows.append((f"{parse.__name__}: {label}", seconds(lambda: parse(text), args.repeat), peer))
    for key in sorted(SYMBOLIC_PARTS):
        peer = seconds(lambda: grade(key, SYMBOLIC_PARTS[key].answers[0]), args.repeat)
        for label, answer in HOSTILE_ANSWERS.items():
            rows.append((f"{key}: {label}", seconds(lambda: grade(key, answer), args.repeat), peer))
    rows.sort(key=lambda row: row[1] / row[2], reverse=True)
    print(f"{'case':60} {'ms':>8} {'honest ms':>10} {'ratio':>7}")
    for case, cost, peer in rows[:15]:
        print(f"{case[:60]:60} {cost * 1e3:8.2f} {peer * 1e3:10.2f} {cost / peer:7.1f}")
    worst = max(cost / peer for _, cost, peer in rows)
    print(f"{len(rows)} refusals; the slowest costs {worst:.1f}x the honest answer (limit {args.limit:g}x)")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    raise SystemExit(main())
