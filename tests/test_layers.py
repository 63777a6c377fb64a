"""The grader's imports run one way, and no module imports another that imports it back.

Layers, lowest first: core -> reference and checks -> sandbox -> pipeline -> build and cli. A
module may import its own layer and the ones below it. Every import counts, inside functions
too. A module not named in LAYERS counts as the top layer, so nothing below may import it.
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"
LAYERS = {
    "core": [
        "grader",
        "grader.course",
        "grader.result",
        "grader.codec",
        "grader.symbolic",
        "grader.misconceptions",
        "grader.seeding",
        "grader.student",
        "grader.fakes",
        "grader.files",
        "grader.text",
        "grader.notebook",
    ],
    "reference and checks": ["grader.reference", "grader.checks", "grader.grading", "grader.inline"],
    "sandbox": ["grader.sandbox", "grader.submission"],
    "pipeline": ["grader.pipeline", "grader.gradebook", "grader.feedback", "grader.formgrader"],
    "build and cli": [],
}
ORDER = list(LAYERS)


def module_name(path: Path) -> str:
    parts = path.relative_to(GRADER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index in ORDER of the longest LAYERS prefix naming `module` (a package covers its modules,
    except `grader` itself)."""
    best, level = -1, len(ORDER) - 1
    for index, name in enumerate(ORDER):
        for prefix in LAYERS[name]:
            covers = module == prefix or (prefix != "grader" and module.startswith(prefix + "."))
            if covers and len(prefix) > best:
                best, level = len(prefix), index
    return level


def imports(path: Path, known: set[str]) -> set[str]:
    """The grader modules `path` imports (from X import Y counts as X.Y when X.Y is a module)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, base]).strip(".")
            for alias in node.names:  # `from package import module` imports the module
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {name for name in found if name in known}


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in GRADER.rglob("*.py")}
    known = set(paths)
    return {name: imports(path, known) - {name} for name, path in paths.items()}


def test_every_layer_imports_only_itself_and_below():
    wrong = [
        f"{module} ({ORDER[layer_of(module)]}) imports {target} ({ORDER[layer_of(target)]})"
        for module, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module) and target != "grader"
    ]
    assert wrong == []


def test_no_import_cycles():
    edges = {m: {t for t in targets if t != "grader"} for m, targets in graph().items()}
    cycles, state = [], {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(edges.get(module, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join(stack[stack.index(target) :] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_layer_check_sees_imports():
    edges = graph()
    assert "grader.pipeline.executors" in edges["grader.autograde"]
    assert layer_of("grader.pipeline.jobs") == ORDER.index("pipeline")
    assert layer_of("grader.checks.shapes") == ORDER.index("reference and checks")
    assert layer_of("grader.service.app") == ORDER.index("build and cli")
