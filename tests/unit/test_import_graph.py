"""``gateway/`` has no import circle of any kind (issues 21 and 34): every module can be read,
tested and replaced from the bottom up. The graph is every import of every module (``ast``):
module level, under ``if TYPE_CHECKING:`` (annotations only) and inside functions (deferred),
and every ``"module:attribute"`` string a registry names (:mod:`gateway.registry`: ``KINDS``,
``STEPS``, the authentication providers), so neither a type-only nor a lazy import nor a
registry line can hide a circle (issue 41: ``topology`` loaded ``event_stream`` through
``KINDS`` while ``event_stream`` imported ``workers`` inside a function)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.source import parse as parse_source

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: module level, under ``if TYPE_CHECKING:``, inside
    functions and classes. A type-only or deferred import is still a dependency: the two
    modules cannot be read, tested or replaced one without the other."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


#: A registry target as :func:`gateway.registry.resolve` takes it: ``"package.module:attribute"``.
_TARGET = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+):[A-Za-z_]\w*")


def _registry_targets(tree: ast.Module) -> list[str]:
    """The modules named by ``"module:attribute"`` string constants anywhere in a module: what
    a registry imports when a line of it is used."""
    return [match.group(1) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (match := _TARGET.fullmatch(node.value))]


def import_graph(root: Path = GATEWAY) -> dict[str, set[str]]:
    """Module → the ``gateway`` modules it imports anywhere. ``from package import name``
    counts the submodule when ``name`` is one, else the package; importing ``a.b.c`` also runs
    ``a`` and ``a.b``, but a package importing its own submodules is no circle, so only the
    named module is an edge. A registry's ``"module:attribute"`` string is an edge to its module."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = parse_source(path.read_text(encoding="utf-8"))
        edges: set[str] = {t for t in _registry_targets(tree) if t in modules and t != name}
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (depth-first search, colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_reads_type_only_and_deferred_imports(tmp_path):
    pkg = tmp_path / "gateway"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nfrom gateway.sub import b\nfrom . import c\n"
        "if TYPE_CHECKING:\n    from gateway import d\n")
    (pkg / "sub" / "b.py").write_text("from ..c import x\n")
    (pkg / "c.py").write_text("x = 1\n")
    (pkg / "d.py").write_text("def f():\n    import gateway.e\n")
    (pkg / "e.py").write_text("class K:\n    from gateway.sub.b import x\n")
    graph = import_graph(pkg)
    assert graph["gateway.a"] == {"gateway.sub.b", "gateway.c", "gateway.d"}
    assert graph["gateway.sub.b"] == {"gateway.c"}
    assert graph["gateway.d"] == {"gateway.e"}
    assert graph["gateway.e"] == {"gateway.sub.b"}
    assert find_cycle(graph) is None
    (pkg / "c.py").write_text("def g():\n    from gateway.a import y\n")  # deferred, still a circle
    assert find_cycle(import_graph(pkg)) == ["gateway.a", "gateway.c", "gateway.a"]


def test_the_graph_reads_registry_strings_as_imports(tmp_path):
    pkg = tmp_path / "gateway"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kinds.py").write_text('KINDS = {"x": "gateway.kind:Kind"}\nDOC = "see gateway.kind:Kind below"\n')
    (pkg / "kind.py").write_text("class Kind:\n    def start(self):\n        from gateway.server import run\n")
    (pkg / "server.py").write_text("from gateway.kinds import KINDS\n")
    graph = import_graph(pkg)
    assert graph["gateway.kinds"] == {"gateway.kind"}  # the registry line, not the prose
    assert find_cycle(graph) == ["gateway.kind", "gateway.server", "gateway.kinds", "gateway.kind"]


def test_gateway_has_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or ())
