"""No import cycle between kplane's modules, hidden ones included.

Every import statement counts — at the top, inside a function, or under ``TYPE_CHECKING``: a
cycle an in-function import or a type-checking guard makes legal at run time is still two
modules that cannot be understood, tested or moved one without the other. Importing
``a.b.c`` runs ``a`` and ``a.b`` first, so each module also depends on its parent packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", "build"}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in SKIP):
        for f in pkg.rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = f
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` is, or the nearest package holding it (for ``from pkg import obj``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                dep = _resolve(target, modules)
                while dep:
                    deps.add(dep)  # the module and every package above it run on import
                    dep = dep.rpartition(".")[0]
        deps.discard(name)
        parent = name.rpartition(".")[0]
        while parent:  # a module's own packages are not a cycle with it
            deps.discard(parent)
            parent = parent.rpartition(".")[0]
        graph[name] = {d for d in deps if d in modules}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "scheduler.framework.types" in graph["scheduler.framework.runtime"]  # top level, from-import
    assert "machinery.fit" in graph["scheduler.framework.node_info"]
    assert "machinery" in graph["machinery.fit"] or "machinery.resources" in graph["machinery.fit"]
    assert len(graph) > 200


def test_cycles_finds_a_hidden_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(import_graph())
    assert not found, "import cycles (each a set of modules that import one another):\n" + \
        "\n".join(" <-> ".join(c) for c in found)
