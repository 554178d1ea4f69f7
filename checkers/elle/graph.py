"""The transaction dependency graph: typed edges, strongly connected components, shortest cycles.

Nodes are dense integer transaction ids; `out[a]` maps a successor to a bit mask of edge types, so
one pair of transactions carries every relation between them in a single dict entry. Everything is
iterative (no recursion limit on long chains).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

WW, WR, RW, PROCESS, REALTIME = 1, 2, 4, 8, 16
DEPENDENCIES = WW | WR | RW
EDGE_NAMES = {WW: "ww", WR: "wr", RW: "rw", PROCESS: "process", REALTIME: "realtime"}
EDGE_TYPES = tuple(EDGE_NAMES)


class DepGraph:
    """A directed graph over transactions 0..n-1 with typed edges (self-loops are dropped)."""

    __slots__ = ("out",)

    def __init__(self, size: int) -> None:
        self.out: list[dict[int, int]] = [{} for _ in range(size)]

    def __len__(self) -> int:
        return len(self.out)

    def add(self, a: int, b: int, kind: int) -> None:
        if a != b:
            succ = self.out[a]
            succ[b] = succ.get(b, 0) | kind

    def edge_count(self) -> int:
        return sum(len(s) for s in self.out)

    def kinds(self, a: int, b: int) -> int:
        return self.out[a].get(b, 0)


def process_edges(chains: Iterable[list[int]]) -> Iterator[tuple[int, int]]:
    """Consecutive pairs of each process's transactions (given in the process's own order)."""
    for chain in chains:
        yield from itertools.pairwise(chain)


def realtime_edges(intervals: Iterable[tuple[int, int, int | None]]) -> Iterator[tuple[int, int]]:
    """A sparse edge set whose transitive closure is real-time order.

    `intervals` holds (id, invoke_time, complete_time or None). A precedes B iff A completed strictly
    before B was invoked. Sweeping events in time order, each invocation links from the current
    frontier (completed ops not yet superseded); a completion replaces, in the frontier, the ops that
    preceded the completing one, since anything later is ordered after them through it.
    """
    events: list[tuple[int, int, int]] = []
    for ident, start, end in intervals:
        events.append((start, 0, ident))  # invokes sort before completions at the same instant
        if end is not None:
            events.append((end, 1, ident))
    events.sort()
    frontier: set[int] = set()
    preds: dict[int, tuple[int, ...]] = {}
    for _, kind, ident in events:
        if kind == 0:
            before = tuple(frontier)
            preds[ident] = before
            for p in before:
                yield p, ident
        else:
            frontier.difference_update(preds.pop(ident, ()))
            frontier.add(ident)


def strongly_connected_components(out: Sequence[Iterable[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iteratively, over successor collections indexed 0..n-1; returns only the
    components with more than one node."""
    n = len(out)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1 or not out[root]:
            continue  # a node without successors is a component of its own
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, iter(out[root]))]
        while work:
            v, successors = work[-1]
            descended = False
            for w in successors:
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, iter(out[w])))
                    descended = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                if low[v] < low[parent]:
                    low[parent] = low[v]
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    component.reverse()
                    components.append(component)
    return components


# --- shortest cycles of a given anomaly class ---------------------------------------------------------
# A search state carries what the path so far contains: the number of rw edges (capped at 2) in bits
# 0-1, then one bit each for wr, process and realtime edges. The class of a closed cycle follows from it.
_WR_SEEN, _PROCESS_SEEN, _REALTIME_SEEN = 4, 8, 16


def step_flags(flags: int, kind: int) -> int:
    if kind == RW:
        return (flags & ~3) | min((flags & 3) + 1, 2)
    if kind == WR:
        return flags | _WR_SEEN
    if kind == PROCESS:
        return flags | _PROCESS_SEEN
    if kind == REALTIME:
        return flags | _REALTIME_SEEN
    return flags


def classify(flags: int) -> str:
    """Elle's names: G0 (ww only), G1c (+wr), G-single (one rw), G2-item (two or more rw), with a
    -process / -realtime suffix when the cycle needs process-order / real-time edges."""
    rw = flags & 3
    if rw == 0:
        base = "G1c" if flags & _WR_SEEN else "G0"
    else:
        base = "G-single" if rw == 1 else "G2-item"
    if flags & _REALTIME_SEEN:
        return base + "-realtime"
    if flags & _PROCESS_SEEN:
        return base + "-process"
    return base


_STEP = {kind: [step_flags(f, kind) for f in range(32)] for kind in EDGE_TYPES}
_CLASS = [classify(f) for f in range(32)]
_KINDS = [tuple(k for k in EDGE_TYPES if mask & k) for mask in range(32)]


@dataclass(frozen=True)
class CycleSpec:
    """Which cycle class to look for: the edge types it may use, edge types every such cycle contains
    (a search starts from edges of whichever of them is rarest) and the largest useful rw count."""

    name: str
    allowed: int
    starts: tuple[int, ...]
    max_rw: int


@dataclass
class Cycle:
    name: str
    nodes: list[int]  # edge i runs from nodes[i] to nodes[(i + 1) % len(nodes)]
    kinds: list[int]  # the single edge type each step uses


@dataclass
class SearchOutcome:
    cycle: Cycle | None
    exhausted: bool  # False when the work budget ran out before every start edge was tried


def shortest_cycle(
    out: list[dict[int, int]], members: set[int], spec: CycleSpec, budget: int = 300_000
) -> SearchOutcome:
    """A shortest cycle of class `spec.name` inside one strongly connected component.

    Each edge of type `spec.start` is a candidate first step; a breadth-first search over (node, flags)
    states looks for the way back to its source. The depth bound grows round by round (iterative
    deepening), so the first cycle found is a shortest one and short cycles in a large component are
    found cheaply. Gives up (`exhausted` False) once `budget` states have been expanded in total.
    """
    region = _regions(out, members, spec.allowed)  # a cycle of the class lies inside one region
    options = [
        (kind, [(a, b) for a in sorted(region) for b, mask in out[a].items() if mask & kind and b in region])
        for kind in spec.starts
    ]
    kind, starts = min(options, key=lambda option: len(option[1]))
    starts = [(a, b) for a, b in starts if region[a] is region[b]]
    if not starts:
        return SearchOutcome(None, exhausted=True)
    longest = max(len(r) for r in region.values()) - 1  # a path back never needs more edges
    work = 0
    bound = 1
    while True:
        for a, b in starts:
            found, cost = _bfs_back(out, region[a], spec, kind, a, b, bound)
            work += cost
            if found is not None:
                return SearchOutcome(found, exhausted=True)
            if work > budget:
                return SearchOutcome(None, exhausted=False)
        if bound >= longest:
            return SearchOutcome(None, exhausted=True)
        bound = min(longest, bound + max(1, bound // 2))


def _regions(out: list[dict[int, int]], members: set[int], allowed: int) -> dict[int, set[int]]:
    """node -> its strongly connected component when only `allowed` edges count (cyclic ones only)."""
    nodes = sorted(members)
    local = {n: i for i, n in enumerate(nodes)}
    adjacency = [[local[b] for b, mask in out[a].items() if mask & allowed and b in local] for a in nodes]
    region: dict[int, set[int]] = {}
    for component in strongly_connected_components(adjacency):
        shared = {nodes[i] for i in component}
        for n in shared:
            region[n] = shared
    return region


def _bfs_back(
    out: list[dict[int, int]],
    members: set[int],
    spec: CycleSpec,
    start: int,
    a: int,
    b: int,
    max_depth: int,
) -> tuple[Cycle | None, int]:
    """Shortest path b -> a (at most `max_depth` edges) that closes a cycle of the spec's class.

    States are encoded as node * 32 + flags; `parent` maps a state to (previous state, edge type).
    """
    first = b * 32 + _STEP[start][0]
    parent: dict[int, tuple[int, int] | None] = {first: None}
    frontier = [first]
    allowed, max_rw, name = spec.allowed, spec.max_rw, spec.name
    expanded = 0
    depth = 0
    while frontier and depth < max_depth:
        depth += 1
        following: list[int] = []
        for state in frontier:
            node, flags = divmod(state, 32)
            expanded += 1
            for succ, mask in out[node].items():
                usable = mask & allowed
                if not usable or succ not in members:
                    continue
                for kind in _KINDS[usable]:
                    nxt_flags = _STEP[kind][flags]
                    if (nxt_flags & 3) > max_rw:
                        continue
                    nxt = succ * 32 + nxt_flags
                    if nxt in parent:
                        continue
                    parent[nxt] = (state, kind)
                    if succ == a:
                        if _CLASS[nxt_flags] == name:
                            return _unwind(parent, nxt, a, start, name), expanded
                    else:
                        following.append(nxt)
        frontier = following
    return None, expanded


def _unwind(
    parent: dict[int, tuple[int, int] | None],
    end: int,
    a: int,
    start: int,
    name: str,
) -> Cycle:
    nodes: list[int] = []
    kinds: list[int] = []
    state = end
    while True:
        link = parent[state]
        if link is None:
            break
        prev, kind = link
        nodes.append(prev // 32)
        kinds.append(kind)
        state = prev
    nodes.reverse()
    kinds.reverse()
    return Cycle(name=name, nodes=[a, *nodes], kinds=[start, *kinds])
