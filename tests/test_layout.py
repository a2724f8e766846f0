"""The package's shape: no import cycle between its modules, no oversized class or function.

The import graph holds the imports that run when a module is imported: module-level ones,
including those under ``if``/``try``/``with`` and in class bodies, but not those inside
functions (deferred) nor under ``if TYPE_CHECKING:`` (never run). Counting the deferred
ones too, there is no cycle either: a function-level import may keep a heavy module from
loading early, never hide two modules that need each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "agentsession"

MAX_CLASS_LINES = 600
MAX_FUNCTION_LINES = 80

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path) -> str:
    """The dotted module name of ``path`` under the import root ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when the module is imported."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_imports(node.body)
            yield from _import_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _import_time_imports(block)
            for handler in node.handlers:
                yield from _import_time_imports(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _import_time_imports(node.body)


def _all_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``body`` that can run: the import-time ones and those
    inside functions, but none under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _all_imports(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    yield from _all_imports([n for n in block if isinstance(n, ast.stmt)])
                    for inner in block:  # except handlers and match cases hold statements
                        if isinstance(inner, ast.ExceptHandler | ast.match_case):
                            yield from _all_imports(inner.body)


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> Iterator[str]:
    """The known modules an import statement in ``module`` loads."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
        return
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if submodule in known:  # `from pkg import mod` loads the submodule mod
            yield submodule
        elif source in known:
            yield source


def import_graph(root: Path, package: str, *, deferred: bool = False) -> Graph:
    """Module -> the modules of the same package it imports at import time.

    Args:
        root: the import root (the directory holding the package).
        package: the top-level package name, e.g. ``agentsession``.
        deferred: count the imports inside functions too.
    """
    imports = _all_imports if deferred else _import_time_imports
    files = {module_name(p, root): p for p in (root / package).rglob("*.py")}
    known = set(files)
    graph: Graph = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = {
            target
            for node in imports(tree.body)
            for target in _targets(node, module, is_package, known)
        }
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None if the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle() -> None:
    """No module of agentsession imports itself back through other modules at import time."""
    graph = import_graph(SRC, "agentsession")
    assert "agentsession.cli.app" in graph["agentsession.__main__"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_cycle_counting_deferred_imports() -> None:
    """No module of agentsession reaches itself again, counting the imports made inside
    functions too: in the service layer each use case imports the state changes it
    shares with others (``service.changes``), never another use case that would import
    it back; the store registry loads a store's module when asked, and nothing the store
    imports needs the registry."""
    graph = import_graph(SRC, "agentsession", deferred=True)
    assert "agentsession.service.changes.leases" in graph["agentsession.service.core"]
    assert "agentsession.stores.sql.store" in graph["agentsession.stores.registry"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (deferred imports counted): " + " -> ".join(cycle or [])


def reached(graph: Graph, start: str) -> set[str]:
    """The modules ``start`` imports, straight or through others (``start`` left out)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    seen.discard(start)
    return seen


def test_client_stands_below_http_and_service() -> None:
    """The HTTP client needs the wire contract (``agentsession.protocol``), the models
    and the errors, never the service it talks to nor the server's modules: counting
    deferred imports, nothing it reaches is under ``agentsession.http`` or
    ``agentsession.service``."""
    graph = import_graph(SRC, "agentsession", deferred=True)
    below = reached(graph, "agentsession.client")
    assert "agentsession.protocol" in below
    above = sorted(m for m in below if m.split(".")[1] in ("http", "service"))
    assert not above, "the client reaches " + ", ".join(above)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_import_graph_sees_cycles_and_skips_deferred_imports(tmp_path: Path) -> None:
    """The checker itself: relative and submodule imports resolve; deferred ones are skipped."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from .sub.c import VALUE\n",
            "pkg/sub/__init__.py": "from .. import a\n",
            "pkg/sub/c.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ..a import X\n"
                "def f():\n    from pkg import a\n"
                "VALUE = 1\n"
            ),
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub"] == {"pkg.a"}
    assert graph["pkg.sub.c"] == set()
    assert find_cycle(graph) is None
    _write(tmp_path, {"pkg/sub/c.py": "try:\n    import pkg.a\nexcept ImportError:\n    pass\n"})
    assert find_cycle(import_graph(tmp_path, "pkg")) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]


def test_import_graph_counts_deferred_imports_when_asked(tmp_path: Path) -> None:
    """With ``deferred=True`` an import inside a function (or a method, or a block in
    one) is an arrow; one under ``if TYPE_CHECKING:`` still is not."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from . import c\n"
                "class B:\n    def f(self):\n        try:\n            from . import a\n"
                "        except ImportError:\n            pass\n"
            ),
            "pkg/c.py": "",
        },
    )
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
    graph = import_graph(tmp_path, "pkg", deferred=True)
    assert graph["pkg.b"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert reached(graph, "pkg.a") == {"pkg.b"}


def _oversized(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            limit = MAX_CLASS_LINES
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            limit = MAX_FUNCTION_LINES
        else:
            continue
        # A function is measured from its body (docstring included): the formatter puts
        # each keyword parameter of a long signature on its own line, and those lines
        # are declarations, not logic. A class is measured whole.
        start = node.lineno if isinstance(node, ast.ClassDef) else node.body[0].lineno
        lines = (node.end_lineno or node.lineno) - start + 1
        if lines > limit:
            where = path.relative_to(SRC.parent)
            yield f"{where}:{node.lineno} {node.name}: {lines} lines (limit {limit})"


def test_no_oversized_class_or_function() -> None:
    """Classes stay within 600 lines and function bodies within 80 (docstrings included,
    the signature not: ``ruff format`` lays out one parameter per line)."""
    found = [line for path in sorted(SRC.rglob("*.py")) for line in _oversized(path)]
    assert not found, "too long:\n" + "\n".join(found)


def test_the_formatter_lays_out_every_line() -> None:
    """No ``# fmt: skip``: a line packed by hand to fit a size limit hides the size the
    limit is there to show; ``make lint`` runs ``ruff format --check``."""
    marker = "# fmt: " + "skip"
    found = [
        f"{path.relative_to(SRC.parent)}:{n}"
        for root in (SRC, Path(__file__).parent)
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith(marker)
    ]
    assert not found, found
    makefile = (SRC.parent / "Makefile").read_text(encoding="utf-8")
    assert "ruff format --check" in makefile


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by their basename (the test folders are not
    packages): two ``test_x.py`` in different folders stop the collection of the whole
    suite ("import file mismatch")."""
    tests = Path(__file__).resolve().parent
    names = [p.name for p in tests.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
