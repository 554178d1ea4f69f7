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
    return list(_tarjan(out, keep_singletons=False))


def _tarjan(out: Sequence[Iterable[int]], keep_singletons: bool) -> Iterator[list[int]]:
    """Components in Tarjan's emission order (every component after those it reaches); nodes
    without successors are never emitted."""
    n = len(out)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
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
                if keep_singletons or len(component) > 1:
                    component.reverse()
                    yield component


def component_order(out: Sequence[Iterable[int]]) -> list[int]:
    """Each node's component number in Tarjan's emission order (-1 for a node without successors).

    Tarjan emits a component only after every component it reaches, so if x reaches y then
    number(x) >= number(y): a search towards y may skip every node numbered below y's component.
    """
    number = [-1] * len(out)
    for i, component in enumerate(_tarjan(out, keep_singletons=True)):
        for v in component:
            number[v] = i
    return number


# --- cycles of a given anomaly class --------------------------------------------------------------
# A search state carries what the walk so far contains, in one small int: the number of rw edges
# (capped at 2) in bits 0-1, then one bit each for: a wr edge, a process edge, a realtime edge, "the
# last edge was rw", "two rw edges were adjacent", "the first edge was rw". The class of a closed
# cycle follows from it (adjacency across the closing point included); a last bit says a first edge
# has been taken.
_WR_SEEN, _PROCESS_SEEN, _REALTIME_SEEN, _LAST_RW, _ADJ_RW, _FIRST_RW, _STARTED = 4, 8, 16, 32, 64, 128, 256
FLAG_STATES = 512


def step_flags(flags: int, kind: int) -> int:
    if kind == RW:
        count = min((flags & 3) + 1, 2)
        adjacent = _ADJ_RW if flags & _LAST_RW else 0
        first = 0 if flags & _STARTED else _FIRST_RW
        return (flags & ~3) | count | _LAST_RW | adjacent | first | _STARTED
    flags = (flags & ~_LAST_RW) | _STARTED
    if kind == WR:
        return flags | _WR_SEEN
    if kind == PROCESS:
        return flags | _PROCESS_SEEN
    if kind == REALTIME:
        return flags | _REALTIME_SEEN
    return flags


def classify(flags: int) -> str:
    """Elle's names for a closed cycle: G0 (ww only), G1c (ww + wr), G-single (one rw), G-nonadjacent
    (two or more rw, none adjacent), G2-item (two or more rw, some adjacent), with a -process /
    -realtime suffix when the cycle needs process-order / real-time edges."""
    rw = flags & 3
    adjacent = flags & _ADJ_RW or (flags & _LAST_RW and flags & _FIRST_RW)
    if rw == 0:
        base = "G1c" if flags & _WR_SEEN else "G0"
    elif rw == 1:
        base = "G-single"
    else:
        base = "G2-item" if adjacent else "G-nonadjacent"
    if flags & _REALTIME_SEEN:
        return base + "-realtime"
    if flags & _PROCESS_SEEN:
        return base + "-process"
    return base


_STEP = {kind: [step_flags(f, kind) for f in range(FLAG_STATES)] for kind in EDGE_TYPES}
_CLASS = [classify(f) for f in range(FLAG_STATES)]
_KINDS = [tuple(k for k in EDGE_TYPES if mask & k) for mask in range(32)]


@dataclass(frozen=True)
class CycleSpec:
    """One cycle class: the edge kind its distinguished first edge has (`start`), the kinds the rest
    of the cycle may use (`path`), and whether a walk may never take two rw edges in a row."""

    name: str
    start: int
    path: int
    nonadjacent: bool = False


def _spec(name: str, start: int, path: int, nonadjacent: bool = False) -> CycleSpec:
    return CycleSpec(name, start, path, nonadjacent)


def cycle_specs(process: bool, realtime: bool) -> list[CycleSpec]:
    """Every cycle class, most severe first (Elle's order): the plain dependency classes, then those
    needing process order, then those needing real time (as far as the graph has such edges).

    Each class starts from edges of its rarest mandatory kind: G-single from its one rw edge with the
    rest restricted to ww / wr, so which starts can close is decided by reachability alone."""
    base = [
        ("G0", WW, WW, 0),
        ("G1c", WR, WW | WR, 0),
        ("G-single", RW, WW | WR, 0),
        ("G-nonadjacent", WW | WR, DEPENDENCIES, 1),
        ("G2-item", RW, DEPENDENCIES, 0),
    ]
    specs = [_spec(n, s, p, bool(na)) for n, s, p, na in base]
    if process:
        for n, s, p, na in base:
            start = PROCESS if n == "G0" else s | PROCESS if n == "G-nonadjacent" else s
            specs.append(_spec(f"{n}-process", start, p | PROCESS, bool(na)))
    if realtime:
        for n, s, p, na in base:
            start = REALTIME if n == "G0" else s | PROCESS | REALTIME if n == "G-nonadjacent" else s
            specs.append(_spec(f"{n}-realtime", start, p | PROCESS | REALTIME, bool(na)))
    return specs


@dataclass
class Cycle:
    name: str
    nodes: list[int]  # edge i runs from nodes[i] to nodes[(i + 1) % len(nodes)]
    kinds: list[int]  # the single edge type each step uses


@dataclass
class SearchOutcome:
    cycle: Cycle | None
    exhausted: bool  # False when the work budget ran out before every candidate was tried
    candidates: int = 0  # start edges that could close a cycle (by reachability)
    tried: int = 0  # of those, how many were searched
    expanded: int = 0  # search states expanded


@dataclass
class _Region:
    """What one class's search inside one component needs: the graph, the component's nodes, the
    path subgraph's component numbers (a node numbered below a target cannot reach it), the spec."""

    out: list[dict[int, int]]
    members: dict[int, int]
    comp: dict[int, int]
    spec: CycleSpec

    def steps(self, node: int, floor: int) -> Iterator[tuple[int, int]]:
        """(successor, edge kind) pairs a path may take from `node` towards a target at `floor`."""
        allowed, members, comp = self.spec.path, self.members, self.comp
        for succ, mask in self.out[node].items():
            usable = mask & allowed
            if usable and succ in members and comp[succ] >= floor:
                for kind in _KINDS[usable]:
                    yield succ, kind


def find_cycle(
    out: list[dict[int, int]], members: set[int], spec: CycleSpec, budget: int = 400_000, extra: int = 32
) -> SearchOutcome:
    """A short cycle of class `spec.name` inside one strongly connected component.

    Candidates are the component's edges of the start kind whose head can reach their tail through
    `path` edges (component numbers of the path subgraph decide that without searching); those whose
    ends share a path component come first, since they always close. From each, a breadth-first
    search over (node, flags) states runs back to the tail, skipping nodes that cannot reach it, so
    the cycle found from each candidate is a shortest one; after the first hit `extra` more
    candidates are tried for a shorter one. Gives up (`exhausted` False) after `budget` states.
    """
    nodes = sorted(members)
    local = {n: i for i, n in enumerate(nodes)}
    adjacency = [[local[b] for b, mask in out[a].items() if mask & spec.path and b in local] for a in nodes]
    number = component_order(adjacency)
    region = _Region(out, local, {n: number[i] for n, i in local.items()}, spec)
    comp = region.comp
    same: list[tuple[int, int, int]] = []
    cross: list[tuple[int, int, int]] = []
    for a in nodes:
        ca = comp[a]
        for b, mask in out[a].items():
            usable = mask & spec.start
            if not usable or b not in local:
                continue
            kind = _KINDS[usable][0]
            if comp[b] == ca and ca != -1:
                same.append((a, b, kind))
            elif comp[b] > ca != -1:
                cross.append((a, b, kind))
    candidates = same + cross
    if spec.nonadjacent and candidates:
        candidates = _on_nonadjacent_cycles(out, local, spec, candidates)
    outcome = SearchOutcome(None, exhausted=True, candidates=len(candidates))
    best: Cycle | None = None
    after_hit = 0
    for a, b, kind in candidates:
        if outcome.expanded > budget:
            outcome.exhausted = False
            break
        bound = len(best.nodes) - 1 if best is not None else len(nodes)
        if bound < 2:
            break
        found, cost = _bfs_back(region, kind, a, b, bound, budget - outcome.expanded)
        outcome.expanded += cost
        outcome.tried += 1
        if found is not None and (best is None or len(found.nodes) < len(best.nodes)):
            best = found
        if best is not None:
            after_hit += 1
            if after_hit > extra:
                break
    outcome.cycle = best
    if best is not None:
        outcome.exhausted = True
    return outcome


def _on_nonadjacent_cycles(
    out: list[dict[int, int]], local: dict[int, int], spec: CycleSpec, candidates: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The start edges that lie on some closed walk never taking two rw edges in a row.

    Over states (transaction, "the last edge was rw"), such walks are exactly the cycles; a simple
    cycle with no adjacent rw edges is one of them, so a start edge on none (its state edge outside
    every strongly connected component of the state graph) cannot start one: in one linear pass this
    proves most components free of G-nonadjacent without searching them start by start."""
    allowed = spec.path | spec.start
    states: list[list[int]] = [[] for _ in range(2 * len(local))]
    for a, i in local.items():
        for b, mask in out[a].items():
            j = local.get(b)
            if j is None or not mask & allowed:
                continue
            if mask & allowed & ~RW:
                states[2 * i].append(2 * j)
                states[2 * i + 1].append(2 * j)
            if mask & allowed & RW:
                states[2 * i].append(2 * j + 1)
    number = component_order(states)
    sizes: dict[int, int] = {}
    for n in number:
        sizes[n] = sizes.get(n, 0) + 1
    kept = []
    for a, b, kind in candidates:
        i, j = 2 * local[a], 2 * local[b]
        target = number[j]
        if sizes.get(target, 0) > 1 and target != -1 and target in (number[i], number[i + 1]):
            kept.append((a, b, kind))
    return kept


def _bfs_back(region: _Region, start: int, a: int, b: int, max_edges: int, budget: int) -> tuple[Cycle | None, int]:
    """Shortest walk b -> a over path edges (at most `max_edges - 1` of them) that closes, with the
    edge a -> b of kind `start`, a cycle of the spec's class.

    States are node * FLAG_STATES + flags; `parent` maps a state to (previous state, edge type).
    """
    if b == a:
        return None, 0
    first = b * FLAG_STATES + _STEP[start][0]
    parent: dict[int, tuple[int, int] | None] = {first: None}
    frontier = [first]
    name, nonadjacent = region.spec.name, region.spec.nonadjacent
    rejected = False
    floor = region.comp[a]
    expanded = 0
    depth = 1
    while frontier and depth < max_edges:
        depth += 1
        following: list[int] = []
        for state in frontier:
            node, flags = divmod(state, FLAG_STATES)
            expanded += 1
            for succ, kind in region.steps(node, floor):
                nxt_flags = _STEP[kind][flags]
                if nonadjacent and nxt_flags & _ADJ_RW:
                    continue
                nxt = succ * FLAG_STATES + nxt_flags
                if nxt in parent:
                    continue
                parent[nxt] = (state, kind)
                if succ != a:
                    following.append(nxt)
                elif _CLASS[nxt_flags] == name:
                    cycle = _unwind(parent, nxt, a, start, name)
                    if len(set(cycle.nodes)) == len(cycle.nodes):
                        return cycle, expanded
                    # a closed walk through some node twice is two cycles, neither necessarily of
                    # this class: keep looking
                    rejected = True
        frontier = following
    if rejected:
        # The state search reached the class only by walks that repeat a node; those may have hidden
        # a simple cycle (states are visited once), so search simple paths for this start alone.
        found, cost = _dfs_simple(region, start, a, b, max_edges, budget - expanded)
        return found, expanded + cost
    return None, expanded


def _dfs_simple(region: _Region, start: int, a: int, b: int, max_edges: int, budget: int) -> tuple[Cycle | None, int]:
    """Depth-first search over simple paths b -> a (branch and bound on length): exact, and
    exponential at worst, so bounded by `budget` expanded steps."""
    spec, floor = region.spec, region.comp[a]
    best: Cycle | None = None
    limit = max_edges
    expanded = 0
    path_nodes = [b]
    path_kinds: list[int] = []
    on_path = {a, b}
    stack = [(_STEP[start][0], region.steps(b, floor))]
    while stack and expanded <= budget:
        flags, steps = stack[-1]
        for succ, kind in steps:
            nxt = _STEP[kind][flags]
            if spec.nonadjacent and nxt & _ADJ_RW:
                continue
            expanded += 1
            if succ == a:
                if _CLASS[nxt] == spec.name and len(path_nodes) + 1 <= limit:
                    best = Cycle(spec.name, [a, *path_nodes], [start, *path_kinds, kind])
                    limit = len(path_nodes)
            elif succ not in on_path and len(path_nodes) + 1 < limit:
                path_nodes.append(succ)
                path_kinds.append(kind)
                on_path.add(succ)
                stack.append((nxt, region.steps(succ, floor)))
                break
        else:
            stack.pop()
            if len(path_nodes) > 1:
                on_path.discard(path_nodes.pop())
                path_kinds.pop()
    return best, expanded


def _unwind(parent: dict[int, tuple[int, int] | None], end: int, a: int, start: int, name: str) -> Cycle:
    nodes: list[int] = []
    kinds: list[int] = []
    state = end
    while True:
        link = parent[state]
        if link is None:
            break
        prev, kind = link
        nodes.append(prev // FLAG_STATES)
        kinds.append(kind)
        state = prev
    nodes.reverse()
    kinds.reverse()
    return Cycle(name=name, nodes=[a, *nodes], kinds=[start, *kinds])


def any_cycle(out: list[dict[int, int]], members: set[int]) -> Cycle:
    """Some shortest cycle through one edge of a strongly connected component, classified by the
    edges it uses: the fallback when a class's search gives up, so a component never goes unnamed."""
    a = min(members)
    b = next(s for s in out[a] if s in members)
    parent: dict[int, tuple[int, int] | None] = {b: None}
    frontier = [b]
    while a not in parent:
        following = []
        for node in frontier:
            for succ, mask in out[node].items():
                if succ in members and succ not in parent:
                    parent[succ] = (node, _KINDS[mask][0])
                    following.append(succ)
        frontier = following
    nodes, kinds = [], []
    node = a
    while parent[node] is not None:
        prev, kind = parent[node]  # type: ignore[misc]
        nodes.append(prev)
        kinds.append(kind)
        node = prev
    nodes.reverse()
    kinds.reverse()
    cycle_nodes = [a, *nodes]
    cycle_kinds = [_KINDS[out[a][b]][0], *kinds]
    flags = 0
    for kind in cycle_kinds:
        flags = _STEP[kind][flags]
    return Cycle(name=_CLASS[flags], nodes=cycle_nodes, kinds=cycle_kinds)
