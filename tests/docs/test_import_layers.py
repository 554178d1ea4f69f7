"""The product's imports point one way (docs/design.md, "Layers"), and no module imports itself round
a circle.

The graph is built from the source with `ast`; nothing is imported. Every `import` and `from ...
import` statement counts wherever it stands: at module level, inside a function (a lazy import is
still a dependency) and under `if TYPE_CHECKING:` (a type the module needs is a dependency too).
Loading by a name in a string (`importlib.import_module`, the CLI's command table, the checker
registry's "module:function" entries) is how an upper layer registers itself with a lower one, and is
not an edge.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Bottom first. A package may import its own modules and the packages of any LOWER layer; packages of
# one layer do not import each other (node and checkers know nothing of each other, nor do the two
# kinds of plug-in).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vocab",),  # the shared words: errors, faults, ops and generators, the plug-in protocols
    ("node", "checkers", "reports"),  # the system under test; history judges; the Spark reports
    ("nemesis", "workloads"),  # plug-ins: they speak vocab and may drive node's client code
    ("harness",),  # runner, suite, gate, backends, the kchaos CLI
)
PACKAGES = tuple(p for layer in LAYERS for p in layer)
LAYER_OF = {p: i for i, layer in enumerate(LAYERS) for p in layer}

# Inside the harness only this module imports the plug-in packages: the rest knows them by registry.
PLUGIN_PACKAGES = ("nemesis", "workloads")
PLUGIN_DOOR = "harness.plugins"

# Module edges a cycle may use for now. Each entry must say why and who removes it.
ALLOWED_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module (the longest product module the import names)
    path: str  # file of the import, relative to the repository
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} -> {self.target}"


def product_modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the product packages."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of `name` that is a product module (None: not ours)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_edges(modules: Mapping[str, Path], root: Path = ROOT) -> list[Edge]:
    """Every import statement of every module, as edges between product modules."""
    edges = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    origin = ".".join([*base, node.module] if node.module else base)
                else:
                    origin = node.module or ""
                # `from package import submodule` depends on the submodule; other names on `origin`
                names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
            else:
                continue
            for name in dict.fromkeys(names):
                target = _known(name, modules)
                if target is not None and target != module:
                    edges.append(Edge(module, target, rel, node.lineno))
    return edges


def _package(module: str) -> str:
    return module.partition(".")[0]


def upward_edges(edges: Iterable[Edge]) -> list[Edge]:
    """Edges from a package to one of a higher layer or of its own layer."""
    bad = []
    for edge in edges:
        src, dst = _package(edge.source), _package(edge.target)
        if src != dst and LAYER_OF[dst] >= LAYER_OF[src]:
            bad.append(edge)
    return bad


def plugin_door_edges(edges: Iterable[Edge]) -> list[Edge]:
    """Harness modules other than the plug-in door that import a plug-in package."""
    return [
        e
        for e in edges
        if _package(e.source) == "harness" and e.source != PLUGIN_DOOR and _package(e.target) in PLUGIN_PACKAGES
    ]


def cycles(edges: Iterable[Edge], allowed: frozenset[tuple[str, str]] = ALLOWED_CYCLE_EDGES) -> list[list[Edge]]:
    """The strongly connected components of more than one module (Tarjan), each as its edges."""
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Edge] = {}
    for e in edges:
        if (e.source, e.target) not in allowed:
            graph[e.source].add(e.target)
            where.setdefault((e.source, e.target), e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(start: str) -> None:  # iterative, so a deep graph cannot overflow the stack
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [
        sorted((where[(a, b)] for a in c for b in graph[a] if b in c), key=lambda e: (e.path, e.line))
        for c in components
    ]


@functools.cache
def _product_edges() -> tuple[Edge, ...]:
    return tuple(import_edges(product_modules()))


def _report(title: str, edges: Iterable[Edge]) -> str:
    return title + "\n" + "\n".join(f"  {e}" for e in edges)


def test_the_graph_is_the_product() -> None:
    """The scan sees every package and real edges (a scan that found nothing would pass the rest)."""
    modules = product_modules()
    edges = _product_edges()
    assert {m.partition(".")[0] for m in modules} == set(PACKAGES)
    assert len(modules) > 250
    assert any(e.source == "harness.runner" and e.target == "vocab.generators" for e in edges)
    assert any(e.source == "node.sim.world" and e.target == "vocab.faults.kinds" for e in edges)


def test_no_import_points_up_or_sideways() -> None:
    bad = upward_edges(_product_edges())
    assert not bad, _report(
        f"{len(bad)} import(s) against the layers {' < '.join('/'.join(layer) for layer in LAYERS)}:", bad
    )


def test_the_harness_reaches_plugins_only_through_its_door() -> None:
    bad = plugin_door_edges(_product_edges())
    assert not bad, _report(f"harness modules importing {'/'.join(PLUGIN_PACKAGES)} (use {PLUGIN_DOOR}):", bad)


def test_no_module_cycles() -> None:
    found = cycles(_product_edges())
    assert not found, "\n".join(
        _report(f"cycle {i + 1} ({len({e.source for e in c})} modules):", c) for i, c in enumerate(found)
    )


def _scan(tmp_path: Path, files: Mapping[str, str]) -> list[Edge]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    modules = product_modules(tmp_path, ("vocab", "node", "harness"))
    return import_edges(modules, tmp_path)


def test_the_scan_sees_lazy_relative_and_type_only_imports(tmp_path: Path) -> None:
    """The checks above are only as good as the scan: each kind of import it must see, on a toy tree."""
    edges = _scan(
        tmp_path,
        {
            "vocab/__init__.py": "",
            "vocab/words.py": "def f():\n    from harness import top\n",  # lazy, upward
            "node/__init__.py": "",
            "node/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from node.b import B\n",
            "node/b.py": "from . import a\n",  # relative, closes a cycle with node.a
            "harness/__init__.py": "",
            "harness/top.py": "X = 1\n",
        },
    )
    assert [str(e) for e in upward_edges(edges)] == ["vocab/words.py:2: vocab.words -> harness.top"]
    assert [[str(e) for e in c] for c in cycles(edges, frozenset())] == [
        ["node/a.py:3: node.a -> node.b", "node/b.py:1: node.b -> node.a"]
    ]
    assert cycles(edges, frozenset({("node.b", "node.a")})) == []
