"""No import cycles among bosun's modules: a module and anything it imports form a tree, never a circle.

Why: a circle means neither side can be read, tested or replaced alone (the Engine composing services that import
the Engine back was one). Imports are read with ``ast`` from every file under ``core/``, ``store/``, ``server/`` and
``bosun/``, at module level and inside functions alike (a lazy import is still a dependency). Imports guarded by
``if TYPE_CHECKING:`` are excluded: they never run, and type-only references are how a Protocol names its user.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"bosun.core": ROOT / "core", "bosun.store": ROOT / "store", "bosun.server": ROOT / "server",
            "bosun": ROOT / "bosun"}


def _modules() -> dict[str, Path]:
    """Every bosun module name mapped to its file (``pkg/__init__.py`` is the package's own name)."""
    found: dict[str, Path] = {}
    for prefix, base in PACKAGES.items():
        pattern = "*.py" if prefix == "bosun" else "**/*.py"
        for path in sorted(base.glob(pattern)):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """The absolute names one module imports at run time, wherever the import statement sits."""
    names: list[str] = []
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names += [f"{base}.{a.name}" for a in node.names]  # a module, else resolved to ``base`` below
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the bosun modules it imports (a name that is not a module resolves to its nearest parent)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for target in _imported(ast.parse(path.read_text()), name, path.name == "__init__.py"):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_among_bosun_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle() -> None:
    """The finder itself is not vacuous: a made-up circle of three is reported, a tree is not."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
