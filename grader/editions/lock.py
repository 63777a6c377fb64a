"""The student environment's pins: the dependency closure of the student roots, at requirements.lock's pins.

`python -m grader.editions.lock > requirements-student.lock` rewrites the student lock from the
installed development environment (which installs requirements.lock); tests/test_edition.py
checks that the committed file equals what this computes.
"""

from __future__ import annotations

from pathlib import Path

ROOTS = ("numpy", "torch", "matplotlib", "ipywidgets", "jupyterlab")
HEADER = (
    "# The student environment: layerlab's dependencies and JupyterLab, pinned as in requirements.lock.\n"
    "# No nbgrader and no grader. Written by `python -m grader.editions.lock`; release-student copies it.\n"
    f"# roots: {' '.join(ROOTS)}\n"
)
REPOSITORY = Path(__file__).resolve().parents[2]


def closure(roots=ROOTS) -> set[str]:
    """Canonical names of the installed distributions `roots` need (extras followed, markers evaluated)."""
    from importlib.metadata import distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo = set(), [(root, "") for root in roots]
    while todo:
        name, extra = todo.pop()
        key = (canonicalize_name(name), extra)
        if key in seen:
            continue
        seen.add(key)
        for text in distribution(name).requires or []:
            requirement = Requirement(text)
            in_extra = "extra" in str(requirement.marker or "")
            if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
                continue
            if extra and not in_extra:
                continue  # already followed for the distribution itself
            todo.append((requirement.name, ""))
            todo += [(requirement.name, wanted) for wanted in requirement.extras]
    return {name for name, _ in seen}


def student_lock(main_lock: Path = REPOSITORY / "requirements.lock") -> str:
    """The text of requirements-student.lock: each needed distribution at its main-lock pin."""
    from packaging.utils import canonicalize_name

    pins = {}
    for line in main_lock.read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            pins[canonicalize_name(line.split("==")[0].strip())] = line.strip()
    needed = closure()
    missing = sorted(needed - set(pins) - {"setuptools"})
    if missing:
        raise ValueError(f"requirements.lock does not pin {', '.join(missing)}")
    return HEADER + "".join(f"{pins[name]}\n" for name in sorted(needed) if name in pins)


if __name__ == "__main__":
    print(student_lock(), end="")
