"""Layering: the import graph of the product packages (autofuse, costmodel, tuning_db), with the
imports inside functions counted too (only `if TYPE_CHECKING:` imports are left out), has no
cycle: a new one fails here. Importing a submodule runs its packages' `__init__` first, so an
import of `autofuse.plan.graph_hash` is an edge to `autofuse.plan` too (the top-level
packages' own `__init__` run before anything, so they are left out)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autofuse", "costmodel", "tuning_db")

def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the product modules it imports (anywhere in its body)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for m, path in mods.items():
        pkg = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for b in ast.walk(tree) if isinstance(b, ast.If) and _is_type_checking(b.test)
                       for s in b.body for n in ast.walk(s)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # `if TYPE_CHECKING:` imports exist for annotations only
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - node.level + 1]) if node.level else ""
                mod = ".".join(x for x in (base, node.module or "") if x)
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    targets.append(sub if sub in mods else mod)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                r = resolve(t)
                while r is not None and "." in r:   # the module, then each package above it
                    if r != m and not m.startswith(r + "."):
                        graph[m].add(r)
                    r = r.rpartition(".")[0]
    return graph


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: set[tuple[str, ...]] = set()
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.add(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycle(s): " + "; ".join(" <-> ".join(c) for c in sorted(found))


def test_cycle_finder():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == {("a", "b", "c")}


def test_product_never_imports_benchmarks():
    for m, deps in import_graph().items():
        assert not any(d.startswith("benchmarks") for d in deps), m
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(p.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks"):
                    raise AssertionError(f"{p} imports {node.module}")
                if isinstance(node, ast.Import) and any(a.name.startswith("benchmarks") for a in node.names):
                    raise AssertionError(f"{p} imports benchmarks")
