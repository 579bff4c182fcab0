"""The pipeline's import graph, read from its source with `ast`: every import statement counts, at the top
of a module or inside a function (a function-level import hides a dependency from a reader, not from
Python), but those under `if TYPE_CHECKING:`, which never run. Imports made by name at run time
(pipeline/algorithms/__init__.py's `get_algorithm`) are not seen."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "pipeline"


def module_file(name: str, root: Path = REPO) -> Path | None:
    """The file of a dotted module name (a package's __init__.py), or None where the name is no module."""
    path = root / Path(*name.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return path / "__init__.py" if (path / "__init__.py").is_file() else None


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a `from ... import` names, its dots resolved against the importing module."""
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    base = parts[: len(parts) - node.level + is_package]  # a package's own name is the first level up
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path, root: Path = REPO) -> set[str]:
    """The package's modules `path` imports: `import pipeline.x`, `from pipeline.x import y` (pipeline.x,
    and pipeline.x.y where y is a module) and their relative forms. A package's __init__.py importing its
    own submodule (`from pipeline.algorithms import common`) imports the submodule, not itself."""
    importer, is_package, names = module_name(path, root), path.name == "__init__.py", []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # imports for type checkers only never run: not an edge of the graph
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = absolute(node, importer, is_package)
            own = is_package and module == importer
            names += ([] if own else [module]) + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return {
        name
        for name in names
        if (name == PACKAGE or name.startswith(f"{PACKAGE}.")) and module_file(name, root) is not None
    }


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Every module of the package -> the package's modules it imports."""
    return {module_name(path, root): imported_modules(path, root) for path in sorted((root / PACKAGE).rglob("*.py"))}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str]:
    """The shortest import path from `start` back to itself (breadth first), `start` at both ends; [] if none."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph.get(node, ())):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    return []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle for each set of modules that import one another (a module importing itself included)."""
    return [
        shortest_cycle(graph, component[0])
        for component in strongly_connected(graph)
        if len(component) > 1 or component[0] in graph.get(component[0], ())
    ]


def reachable(graph: dict[str, set[str]], starts: list[str]) -> set[str]:
    """The modules `starts` import, directly or through others, with `starts` themselves."""
    seen, stack = set(starts), list(starts)
    while stack:
        for name in graph.get(stack.pop(), ()):
            if name not in seen:
                seen.add(name)
                stack.append(name)
    return seen
