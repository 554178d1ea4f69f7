"""Sequential specifications for the linearizability checker.

A model says what one operation does to a state. The checker never looks inside ops itself: it asks
the model which ops matter (`keep`), which key each belongs to (`partition`, for P-compositionality),
and for each op a step function `state -> new state | ILLEGAL` (`compile`). Workloads add models by
subclassing `Model` and calling `register_model`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from checkers.history import Op

try:  # the compiled search and its helpers (setup.py builds it)
    from checkers import _lincore
except ImportError:  # pragma: no cover - depends on the build
    _lincore = None
from checkers.register_search import NO_NEED, Symmetry, forgetter, signatures, stale_observations
from checkers.zones import ZoneVerdict, analyse

ILLEGAL: Any = object()
INFINITY = float("inf")  # a step function returns this when the op cannot happen in that state

StepFn = Callable[[Any], Any]
Pruner = Callable[[Any, int, int, list[int]], int]  # -> index of a doomed op, or -1
Canonicalizer = Callable[[Any, int, int], Any]


@dataclass
class NativeSpec:
    """A register key as the compiled search takes it: per op a kind and interned values."""

    kind: list[int]
    a: list[int]
    b: list[int]
    ikind: list[int]
    ia: list[int]
    ib: list[int]
    values: int  # distinct values (ids 0 .. values - 1)
    pure: list[bool]  # determinate ops that are observers (`Model.observer`)
    blind: list[bool]  # determinate then indeterminate ops that are blind (`Model.blind`)
    unique: bool  # written values are unique: the guard applies
    symmetric: bool = False  # equal ops may be tried in one order only (`checkers.register_search`)


Guard = Callable[[Any, int, int, int], bool]  # (state, lo, dmask, op about to change it) -> blocked


def hashable(value: Any) -> Any:
    """States are memoised, so they must hash: JSON arrays become tuples."""
    cls = value.__class__
    if cls is int or cls is str or value is None:
        return value
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = "nil" if value is None else repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Model:
    """Base class: a deterministic state machine over a key's operations.

    Subclasses implement `init` and `step`; everything else has a sensible default. `compile` may be
    overridden with fast closures, because the search calls step functions in its innermost loop.
    """

    name: ClassVar[str] = "model"

    def init(self) -> Hashable:
        raise NotImplementedError

    def step(self, state: Any, op: Op) -> tuple[bool, Any]:
        """(legal, new state) of applying `op` (an ok op, or an info op taking effect) to `state`."""
        raise NotImplementedError

    def keep(self, op: Op) -> bool:
        """Whether `op` constrains the history. By default `fail` ops did not happen and are dropped."""
        return op.type != "fail"

    def partition(self, ops: Iterable[Op]) -> dict[Any, list[Op]]:
        """Independent sub-histories (P-compositionality); by default one per `key`."""
        group = getattr(_lincore, "group_by_key", None)  # None: no build, or one older than it
        if group is not None and isinstance(ops, list):
            grouped = group(ops)
            if grouped is not None:  # None: not the loader's Op objects
                return grouped
        parts: dict[Any, list[Op]] = {}
        for op in ops:
            parts.setdefault(op.key, []).append(op)
        return parts

    def compile(self, op: Op) -> StepFn:
        """A fast `state -> new state | ILLEGAL` for one op; the default wraps `step`."""
        step = self.step

        def fn(state: Any) -> Any:
            legal, new = step(state, op)
            return new if legal else ILLEGAL

        return fn

    def observer(self, op: Op) -> bool:
        """True if `op`, whenever legal, leaves the state unchanged (a read, a failed compare).

        The search takes such an op as soon as it is legal without branching, so this must hold in
        every state, not just the current one: "write 3" is no observer even when the state is 3.
        """
        return False

    def blind(self, op: Op) -> bool:
        """True if `op` is always legal and its result ignores the state (a plain write).

        Lets the search skip asking whether an earlier op could change what this one does.
        """
        return False

    def canonicalizer(self, ops: list[Op], info: list[Op]) -> Canonicalizer | None:
        """Optional: map a state to a representative of the states with the same future.

        `canon(state, lo, dmask)` may, for instance, forget a value that no pending op can observe
        before it is overwritten, so configurations differing only in that value are merged.
        """
        return None

    def pruner(self, ops: list[Op], info: list[Op]) -> Pruner | None:
        """Optional cheap necessary condition for a search configuration to lead anywhere.

        `ops` are the key's determinate ops in search order, `info` its indeterminate ones. The
        returned `doomed(state, lo, dmask, cands)` gets the state, the first op index not yet
        linearized, the linearized bitmask relative to `lo`, and the candidate indices; it returns
        the index of a pending op that can no longer become legal (which cuts the branch), or -1.
        It must never cut a configuration that could succeed.
        """
        return None

    def guard(self, ops: list[Op], info: list[Op]) -> Guard | None:
        """Optional: when a state, once left, can never come back (unique written values).

        `guard(state, lo, dmask, c)` says whether leaving `state` now (by op index `c`, -1 for an
        indeterminate op) is a dead end because some other pending op still needs that state.
        """
        return None

    def symmetry(self, ops: list[Op], info: list[Op]) -> Symmetry | None:
        """Optional: each op's step signature, when equal ops are interchangeable (see
        `checkers.register_search.shadowed`); the search then tries them in one order only."""
        return None

    def zones(self, ops: list[Op], info: list[Op]) -> ZoneVerdict | None:
        """Optional: a fast analysis run before the search (see `checkers.zones`). None: not applicable;
        a `ZoneVerdict` with valid True / False decides the key, with None it leaves it to the search."""
        return None

    def split(self, ops: list[Op]) -> tuple[list[Op], list[int], list[int], list[Op], list[int]] | None:
        """Optional fast path of the search's preparation: the kept determinate ops with their invoke
        and return times, the kept indeterminate ops with their invoke times, each by invoke time;
        None to let the checker do it with `keep`."""
        return None

    def native(self, ops: list[Op], info: list[Op]) -> NativeSpec | None:
        """Optional: the key in the compiled search's terms (`checkers._lincore`), or None for the
        Python search. Only models the compiled core knows (the register, which has no
        canonicalizer) give one."""
        return None

    def describe_op(self, op: Op) -> str:
        value = op.invoke_value if op.f != "read" else op.value
        suffix = "" if op.type == "ok" else f" ({op.type})"
        return f"{op.f} {_short(value)}{suffix}"

    def describe_state(self, state: Any) -> str:
        return _short(state)

    def requirement(self, op: Op) -> str | None:
        """The state `op` needs to be legal, in words ("state == 3"), or None if any state will do."""
        return None


def compare_failed(op: Op) -> bool:
    """Whether a failed cas failed its compare: no error given, or an error that says "compare"."""
    return op.error is None or "compare" in str(op.error).lower()


class RegisterModel(Model):
    """One register: read / write / cas; initially nil. A `fail` cas means the compare failed (an
    observation: the value was not `from`), unless its error says otherwise (`compare_failed`): a cas
    refused before it was sent (connection refused) observed nothing and did not happen."""

    name = "register"

    def __init__(self) -> None:
        self._recent: list[tuple[list[Op], list[tuple[str, Any, Any]]]] = []
        self._unique: tuple[list[Op], list[Op], bool] | None = None

    def init(self) -> Hashable:
        return None

    def keep(self, op: Op) -> bool:
        if op.f == "cas":
            return op.type != "fail" or compare_failed(op)  # an observation; info = may have swapped
        if op.f == "read":
            return op.type == "ok"  # failed / indeterminate reads constrain nothing
        return op.type != "fail"  # a failed write did not happen

    def _parts(self, op: Op) -> tuple[str, Any, Any]:
        """(f, a, b): read or write of a, or cas from a to b."""
        f = op.f
        if f == "read":
            return f, hashable(op.value), None
        if f == "write":
            return f, hashable(op.invoke_value), None
        if f == "cas":
            pair = op.invoke_value
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ValueError(f"cas value must be [from, to], got {pair!r} (op {op.id})")
            return f, hashable(pair[0]), hashable(pair[1])
        raise ValueError(f"register model: unknown f {f!r} (op {op.id})")

    def compile(self, op: Op) -> StepFn:
        f, a, b = self._parts(op)
        if f == "read":
            return lambda s: s if s == a else ILLEGAL
        if f == "write":
            return lambda s: a
        if op.type == "fail":
            return lambda s: s if s != a else ILLEGAL
        return lambda s: b if s == a else ILLEGAL

    def step(self, state: Any, op: Op) -> tuple[bool, Any]:
        new = self.compile(op)(state)
        return (False, state) if new is ILLEGAL else (True, new)

    def blind(self, op: Op) -> bool:
        return op.f == "write"

    def observer(self, op: Op) -> bool:
        if op.f != "cas":
            return op.f == "read"
        _, a, b = self._parts(op)
        return op.type == "fail" or a == b

    def _all_parts(self, ops: list[Op]) -> list[tuple[str, Any, Any]]:
        """`_parts` of every op of a key, computed once for the pruner, the guard and the zones
        (remembered for the last few lists, by identity; the lists are kept alive with them)."""
        for known, parts in self._recent:
            if known is ops:
                return parts
        parts = [self._parts(op) for op in ops]
        self._recent = [(ops, parts), *self._recent[:1]]
        return parts

    def pruner(self, ops: list[Op], info: list[Op]) -> Pruner | None:
        """A read (or successful cas) of v needs state v now, or a pending writer of v it can follow."""
        needs: dict[int, Any] = {}  # op index -> value it must observe
        consumes: dict[int, Any] = {}  # op index -> value a successful cas changes to another
        writers: dict[Any, list[int]] = {}  # value -> determinate ops that may set it, by index
        info_writers: dict[Any, list[int]] = {}  # value -> invoke times of indeterminate setters
        for i, (op, (f, a, b)) in enumerate(zip(ops, self._all_parts(ops), strict=True)):
            if f == "read" or (f == "cas" and op.type == "ok"):
                needs[i] = a
                if f == "cas" and a != b:
                    consumes[i] = a
            if f == "write":
                writers.setdefault(a, []).append(i)
            elif f == "cas" and op.type == "ok":
                writers.setdefault(b, []).append(i)
        for op, (f, a, b) in zip(info, self._all_parts(info), strict=True):
            info_writers.setdefault(a if f == "write" else b, []).append(op.invoke_time)
        if not needs:
            return None
        inv = [op.invoke_time for op in ops]
        ret = [op.complete_time for op in ops]
        return _settable_pruner(needs, writers, info_writers, inv, ret, consumes)

    def written(self, ops: list[Op]) -> list[Any]:
        """The values `ops` may write (writes, and cas that succeeded or may have)."""
        out = []
        for op, (f, a, b) in zip(ops, self._all_parts(ops), strict=True):
            if f == "write":
                out.append(a)
            elif f == "cas" and op.type != "fail":
                out.append(b)
        return out

    def unique_values(self, ops: list[Op], info: list[Op]) -> bool:
        """Whether every value is written by at most one op and none writes the initial nil: then a
        value, once overwritten, never comes back, and each value names its writer."""
        if self._unique is not None and self._unique[0] is ops and self._unique[1] is info:
            return self._unique[2]  # the guard and the zones both ask
        values = self.written(ops) + self.written(info)
        unique = None not in values and len(set(values)) == len(values)
        self._unique = (ops, info, unique)
        return unique

    def guard(self, ops: list[Op], info: list[Op]) -> Guard | None:
        """With unique values, leaving value v while a read of v (or a successful cas from v) is
        still pending dooms that op: nothing can write v again."""
        if not self.unique_values(ops, info):
            return None
        keepers: dict[Any, list[int]] = {}  # value -> determinate ops that need it, by index
        for i, (op, (f, a, _)) in enumerate(zip(ops, self._all_parts(ops), strict=True)):
            if f == "read" or (f == "cas" and op.type == "ok"):
                keepers.setdefault(a, []).append(i)
        empty: list[int] = []

        def blocked(state: Any, lo: int, dmask: int, c: int) -> bool:
            return any(k >= lo and k != c and not (dmask >> (k - lo)) & 1 for k in keepers.get(state, empty))

        return blocked

    def split(self, ops: list[Op]) -> tuple[list[Op], list[int], list[int], list[Op], list[int]] | None:
        """`keep` and the split by determinacy, compiled (None when not built, or ops out of order). A
        failed cas is kept when `compare_failed` says it observed the value (a build older than that
        argument keeps every failed cas, so a cas refused before sending is dropped here first)."""
        if _lincore is None:
            return None
        if hasattr(_lincore, "SPLIT_TAKES_COMPARE_FAILED"):  # it drops a cas refused before sending itself
            return _lincore.register_split(ops, compare_failed)
        if any(op.type == "fail" and op.f == "cas" and not compare_failed(op) for op in ops):
            ops = [op for op in ops if not (op.type == "fail" and op.f == "cas" and not compare_failed(op))]
        return _lincore.register_split(ops)

    def native(self, ops: list[Op], info: list[Op]) -> NativeSpec | None:
        """Op kinds (read 0, write 1, successful cas 2, failed cas 3; an indeterminate cas counts as
        one that may succeed) and values interned to ints, nil being 0."""
        if _lincore is not None:  # the same, compiled; None: something unusual, said below
            fast = _lincore.register_spec(ops, info, hashable)
            if fast is not None:
                spec = NativeSpec(*fast)
                spec.symmetric = not spec.unique
                return spec
        ids: dict[Any, int] = {None: 0}
        intern = ids.setdefault
        kinds = {"read": 0, "write": 1, "cas": 2}
        out: list[list[int]] = [[], [], [], [], [], []]
        for sub, base in ((ops, 0), (info, 3)):
            kind, a_ids, b_ids = out[base], out[base + 1], out[base + 2]
            for op, (f, a, b) in zip(sub, self._all_parts(sub), strict=True):
                kind.append(3 if f == "cas" and op.type == "fail" else kinds[f])
                a_ids.append(intern(a, len(ids)))
                b_ids.append(0 if b is None else intern(b, len(ids)))
        kind, a_ids, b_ids, ikind = out[0], out[1], out[2], out[3]
        pure = [k == 0 or k == 3 or (k == 2 and x == y) for k, x, y in zip(kind, a_ids, b_ids, strict=True)]
        blind = [k == 1 for k in kind] + [k == 1 for k in ikind]
        unique = self.unique_values(ops, info)
        return NativeSpec(
            *out,
            values=len(ids),
            pure=pure,
            blind=blind,
            unique=unique,
            symmetric=not unique,
        )

    def symmetry(self, ops: list[Op], info: list[Op]) -> Symmetry | None:
        """With repeated values, equal ops (same f and values) are interchangeable; with unique ones
        there are too few to pay for the check."""
        if self.unique_values(ops, info):
            return None
        parts, iparts = self._all_parts(ops), self._all_parts(info)
        inv = [op.invoke_time for op in ops]
        ret = [op.complete_time for op in ops]
        needs = [
            a if f == "read" or (f == "cas" and op.type != "fail") else NO_NEED
            for op, (f, a, _) in zip(ops, parts, strict=True)
        ]
        return Symmetry(
            signatures(ops, parts),
            signatures(info, iparts),
            forgetter(parts, iparts, inv, ret),
            needs,  # type: ignore[arg-type]
        )

    def zones(self, ops: list[Op], info: list[Op]) -> ZoneVerdict | None:
        """Gibbons & Korach zones when written values are unique: decides read/write histories,
        and finds the usual violations (a stale read) of histories with cas without any search."""
        if not self.unique_values(ops, info):
            return self._stale(ops, info)
        return analyse(ops, info, self._all_parts(ops), self._all_parts(info), _short)

    def _stale(self, ops: list[Op], info: list[Op]) -> ZoneVerdict | None:
        """Repeated values: no zones, but a read (or ok cas) of a value provably overwritten before it
        began is a proof too (`checkers.register_search.stale_observations`)."""
        found = stale_observations(ops, self._all_parts(ops), info, self._all_parts(info))
        if not found:
            return None
        first = found[0]
        why = (
            f"every op that may set {_short(first.value)} returned before op {ops[first.overwriter].id} "
            f"set another value, which returned before this op began"
        )
        return ZoneVerdict(False, doomed=[first.reader], because=[first.overwriter, *first.setters[-3:]], why=why)

    def describe_op(self, op: Op) -> str:
        f, a, b = self._parts(op)
        if f == "read":
            return f"read {_short(a)}"
        if f == "write":
            return f"write {_short(a)}" + (" (info)" if op.type == "info" else "")
        outcome = {"ok": "", "fail": " (compare failed)", "info": " (info)"}[op.type]
        return f"cas {_short(a)}→{_short(b)}{outcome}"

    def requirement(self, op: Op) -> str | None:
        f, a, _ = self._parts(op)
        if f == "write":
            return None
        if f == "cas" and op.type == "fail":
            return f"state != {_short(a)}"
        return f"state == {_short(a)}"


class KVModel(Model):
    """One string value per key, initially "": get / put / append (Porcupine's kv model)."""

    name = "kv"
    _ALIASES: ClassVar[dict[str, str]] = {"read": "get", "write": "put"}

    def init(self) -> Hashable:
        return ""

    def keep(self, op: Op) -> bool:
        f = self._ALIASES.get(op.f, op.f)
        return op.type == "ok" if f == "get" else op.type != "fail"

    def _value(self, op: Op) -> tuple[str, str]:
        f = self._ALIASES.get(op.f, op.f)
        if f not in ("get", "put", "append"):
            raise ValueError(f"kv model: unknown f {op.f!r} (op {op.id})")
        value = op.value if f == "get" else op.invoke_value
        return f, "" if value is None else str(value)

    def compile(self, op: Op) -> StepFn:
        f, v = self._value(op)
        if f == "get":
            return lambda s: s if s == v else ILLEGAL
        if f == "put":
            return lambda s: v
        return lambda s: None if s is None else s + v  # None: a value nobody can observe

    def observer(self, op: Op) -> bool:
        return self._value(op)[0] == "get"

    def blind(self, op: Op) -> bool:
        return self._value(op)[0] == "put"

    def canonicalizer(self, ops: list[Op], info: list[Op]) -> Canonicalizer | None:
        """Forget the value when a put must come before every pending get (real-time order).

        Then no get can observe the value, nor anything appended to it, before a put overwrites it,
        so all orders of the appends in between lead to the same future: one state (None) for all.
        """
        gets = [i for i, op in enumerate(ops) if self._value(op)[0] == "get"]
        puts = [i for i, op in enumerate(ops) if self._value(op)[0] == "put"]
        if not puts:
            return None
        inv = [op.invoke_time for op in ops]
        ret = [op.complete_time for op in ops]
        n = len(ops)

        def canon(state: Any, lo: int, dmask: int) -> Any:
            if not state:
                return state
            first_get = INFINITY  # invoke time of the earliest pending get
            for k in range(bisect_left(gets, lo), len(gets)):
                g = gets[k]
                if not (dmask >> (g - lo)) & 1:
                    first_get = inv[g]
                    break
            for k in range(bisect_left(puts, lo), len(puts)):
                p = puts[k]
                if p >= n or inv[p] >= first_get:
                    break
                if not (dmask >> (p - lo)) & 1 and ret[p] < first_get:
                    return None
            return state

        return canon

    def step(self, state: Any, op: Op) -> tuple[bool, Any]:
        new = self.compile(op)(state)
        return (False, state) if new is ILLEGAL else (True, new)

    LOOKAHEAD: ClassVar[int] = 32  # pending gets the pruner compares with the state, at most

    def pruner(self, ops: list[Op], info: list[Op]) -> Pruner | None:
        """A get of V needs the value to grow into V: V must extend the current value, or extend the
        value of a pending put invoked before the get returned (checked for the next few pending
        gets, in the window or beyond it)."""
        gets: list[int] = []
        values: list[str] = []  # by op index
        puts: list[int] = []  # indices of determinate puts
        for i, op in enumerate(ops):
            f, v = self._value(op)
            values.append(v)
            if f == "get":
                gets.append(i)
            elif f == "put":
                puts.append(i)
        info_puts = sorted((op.invoke_time, v) for op in info for f, v in [self._value(op)] if f == "put")
        if not gets:
            return None
        inv = [op.invoke_time for op in ops]
        ret = [op.complete_time for op in ops]
        lookahead = self.LOOKAHEAD

        def rescuable(want: str, deadline: Any, lo: int, dmask: int) -> bool:
            for k in range(bisect_left(puts, lo), len(puts)):
                p = puts[k]
                if inv[p] > deadline:
                    break
                if not (dmask >> (p - lo)) & 1 and want.startswith(values[p]):
                    return True
            return any(t <= deadline and want.startswith(v) for t, v in info_puts)

        def doomed(state: Any, lo: int, dmask: int, cands: list[int]) -> int:
            if state is None:
                return -1
            # Gets invoked after a pending put returned come after that put: the current value
            # cannot matter to them, so the scan stops there.
            barrier = INFINITY
            for k in range(bisect_left(puts, lo), len(puts)):
                p = puts[k]
                if inv[p] > barrier:
                    break
                if not (dmask >> (p - lo)) & 1 and ret[p] < barrier:
                    barrier = ret[p]
            checked = 0
            for k in range(bisect_left(gets, lo), len(gets)):
                g = gets[k]
                if inv[g] > barrier:
                    break
                if (dmask >> (g - lo)) & 1:
                    continue
                want = values[g]
                if not want.startswith(state) and not rescuable(want, ret[g], lo, dmask):
                    return g
                checked += 1
                if checked == lookahead:
                    break
            return -1

        return doomed

    def describe_state(self, state: Any) -> str:
        return "(unobservable)" if state is None else _short(state)

    def describe_op(self, op: Op) -> str:
        f, v = self._value(op)
        return f"{f} {_short(v)}" + (" (info)" if op.type == "info" else "")

    def requirement(self, op: Op) -> str | None:
        f, v = self._value(op)
        return f"state == {_short(v)}" if f == "get" else None


# AlterPartition refusals that say the partition is past the asked version. The controller answers them
# only when the request is not ahead of its state (KIP-497 as fixed by KAFKA-14154: a controller that is
# behind the request's epochs is stale and answers NOT_CONTROLLER), and only once the state it decided on
# is committed; so each is a claim about a committed state: leader epoch and partition epoch at least the
# asked ones, and the leader epoch (FENCED_LEADER_EPOCH) or the partition epoch (INVALID_UPDATE_VERSION)
# higher. NOT_LEADER_OR_FOLLOWER is no such claim: the reference controller also passes it on from the
# Raft core for a whole request whose batch lost leadership (see `checkers.registrations`).
STALE_REFUSALS = ("FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION")


class PartitionCasModel(Model):
    """A partition's (partition epoch, leader epoch, leader, ISR) under KIP-497 AlterPartition, a
    compare-and-set on (leader epoch, partition epoch) sent by the partition's leader.

    Ops: f "alter", invoke value {topic, partition, broker, leader_epoch, partition_epoch, isr}; an
    `ok` carries `result` {leader, leader_epoch, isr, partition_epoch}; `ok` ops that changed nothing
    are dropped (see `keep`). A `fail` did not happen; most are dropped too, but a refusal that says the
    partition is past the asked version (`STALE_REFUSALS`) is an observation of a committed state:
    leader epoch and partition epoch at least the asked ones, and for FENCED_LEADER_EPOCH a higher
    leader epoch, for INVALID_UPDATE_VERSION a higher partition epoch. Even a deposed controller's stale
    state was committed once, and epochs only grow, so the claim holds at the refusal's completion
    whoever answered.
    Between the compare-and-sets the controller may move the partition on by itself (fencing, shutdown,
    elections): such hidden changes only raise the partition epoch, and the leader epoch never falls.
    So an op naming partition epoch p is legal when the state is older than p (hidden changes got it
    there, with a leader epoch no higher than the op's), or is exactly p with the op's leader and
    leader epoch; never when the state is newer. The initial state is unknown (None: anything goes).
    A refusal that the current state does not satisfy is explained by hidden changes; the state then
    becomes partly unknown: a partition epoch of k - 0.5 means "k or later", leader and ISR None.
    """

    name = "partition-cas"

    def init(self) -> Hashable:
        return None

    def keep(self, op: Op) -> bool:
        """`ok` changes, `info` ops and refusals that claim a newer version. An `ok` that changed
        nothing wrote no record, so a deposed controller may have answered it from a stale state: it
        says nothing about the version it names."""
        if op.f != "alter":
            return False
        if op.type == "fail":
            return _refusal(op) is not None
        if op.type == "ok":
            try:
                return int(op.value["result"]["partition_epoch"]) != int(op.invoke_value["partition_epoch"])
            except (KeyError, TypeError, ValueError):
                return True  # malformed: `compile` says what is wrong with it
        return op.type == "info"

    def partition(self, ops: Iterable[Op]) -> dict[Any, list[Op]]:
        parts: dict[Any, list[Op]] = {}
        for op in ops:
            v = op.invoke_value
            key = f"{v['topic']}/{v['partition']}" if isinstance(v, dict) and "topic" in v else op.key
            parts.setdefault(key, []).append(op)
        return parts

    def _parts(self, op: Op) -> tuple[int, int, int, tuple[int, ...], tuple[int, int, int, tuple[int, ...]]]:
        """(sender, leader epoch, partition epoch, asked ISR, state after it took effect)."""
        v = op.invoke_value
        try:
            sender, le, pe = int(v["broker"]), int(v["leader_epoch"]), int(v["partition_epoch"])
            isr = tuple(sorted(int(b) for b in v["isr"]))
            if op.type == "ok":
                r = op.value["result"]
                after = (int(r["partition_epoch"]), int(r["leader_epoch"]), int(r["leader"]), tuple(sorted(r["isr"])))
            else:
                after = (pe + 1, le, sender, isr)
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"partition-cas: op {op.id} is not an AlterPartition op: {op.invoke_value!r}") from None
        return sender, le, pe, isr, after

    def compile(self, op: Op) -> StepFn:
        sender, le, pe, isr, after = self._parts(op)
        if op.type == "fail":
            return _refusal_step(_refusal(op) or "", le, pe)
        unchanged_ok = op.type == "ok" and after[0] == pe

        def step(s: Any) -> Any:
            if s is None:
                return after
            spe, sle, sleader, sisr = s
            if pe < spe or le < sle:
                return ILLEGAL
            if pe == spe:
                if le != sle or sender != sleader:
                    return ILLEGAL
                if unchanged_ok or (op.type == "info" and isr == sisr):
                    return s
            return after

        return step

    def step(self, state: Any, op: Op) -> tuple[bool, Any]:
        new = self.compile(op)(state)
        return (False, state) if new is ILLEGAL else (True, new)

    def describe_op(self, op: Op) -> str:
        sender, le, pe, isr, after = self._parts(op)
        if op.type == "fail":
            return f"alter by {sender} at (leader epoch {le}, partition epoch {pe}) refused with {_refusal(op)}"
        outcome = f" -> epoch {after[0]}" if op.type == "ok" else " (info)"
        return f"alter by {sender} at (leader epoch {le}, partition epoch {pe}) to ISR {list(isr)}{outcome}"

    def describe_state(self, state: Any) -> str:
        if state is None:
            return "unknown"
        pe, le, leader, isr = state
        if pe != int(pe):
            return f"epoch {int(pe + 0.5)} or later (leader epoch {le} or later), as a refusal said"
        return f"epoch {pe}: leader {leader} (leader epoch {le}), ISR {list(isr)}"

    def requirement(self, op: Op) -> str | None:
        sender, le, pe, _, _ = self._parts(op)
        if op.type == "fail":
            return f"partition epoch >= {pe} and leader epoch >= {le}, past the asked version"
        return f"partition epoch < {pe}, or == {pe} with leader {sender} at leader epoch {le}"


def _refusal(op: Op) -> str | None:
    """The STALE_REFUSALS code of a failed AlterPartition, or None."""
    value = op.value if isinstance(op.value, dict) else {}
    code = value.get("error")
    return code if code in STALE_REFUSALS else None


def _refusal_step(code: str, le: int, pe: int) -> StepFn:
    """A refusal as an observation: the state (after hidden changes, if it needs them) is past the
    asked version in the way `code` says."""
    need_pe = pe + (code == "INVALID_UPDATE_VERSION")
    need_le = le + (code == "FENCED_LEADER_EPOCH")

    def step(s: Any) -> Any:
        if s is None:
            return None
        spe, sle, _, _ = s
        known = spe == int(spe)
        if known and spe >= need_pe and sle >= need_le:
            return s
        # hidden changes (each raises the partition epoch) got the state there; only bounds are known
        low = int(spe) + 1 if known else int(spe + 0.5)
        return (max(low, need_pe) - 0.5, max(sle, need_le), None, None)

    return step


def _pending_setter(ws: list[int], lo: int, dmask: int, inv: list[int], deadline: Any) -> bool:
    """Whether some op of `ws` (indices, ascending) is not yet linearized and invoked by `deadline`."""
    for k in range(bisect_left(ws, lo), len(ws)):
        w = ws[k]
        if inv[w] > deadline:
            return False
        if not (dmask >> (w - lo)) & 1:
            return True
    return False


def _settable_pruner(
    needs: dict[int, Any],
    writers: dict[Any, list[int]],
    info_writers: dict[Any, list[int]],
    inv: list[int],
    ret: list[Any],
    consumes: dict[int, Any],
) -> Pruner:
    """Doomed: a candidate that needs value v while the state is not v and no unlinearized writer
    of v was invoked before it returned (a register-like state that ops overwrite wholesale). Or:
    k candidates that each end a stretch of v (a successful cas from v to another value) need k
    stretches of v begun by the k-th one's deadline (Hall's condition), and fewer ops can begin one."""
    empty: list[int] = []

    def doomed(state: Any, lo: int, dmask: int, cands: list[int]) -> int:
        for c in cands:
            v = needs.get(c, empty)
            if v is empty or state == v:
                continue
            deadline = ret[c]
            if _pending_setter(writers.get(v, empty), lo, dmask, inv, deadline):
                continue
            times = info_writers.get(v)
            if not times or times[0] > deadline:
                return c
        if consumes:
            ended: dict[Any, int] = {}
            for c in cands:  # earliest deadline first
                v = consumes.get(c, empty)
                if v is empty:
                    continue
                k = ended[v] = ended.get(v, 0) + 1
                if k >= 2 and _stretches_by(v, state, lo, dmask, ret[c], k) < k:
                    return c
        return -1

    def _stretches_by(v: Any, state: Any, lo: int, dmask: int, deadline: Any, enough: int) -> int:
        """Ops that may begin a stretch of v by `deadline`: the state itself, unlinearized writers
        invoked by then, indeterminate ones (linearized or not: an upper bound). Stops at `enough`."""
        got = 1 if state == v else 0
        ws = writers.get(v, empty)
        for k in range(bisect_left(ws, lo), len(ws)):
            if got >= enough or inv[ws[k]] > deadline:
                break
            if not (dmask >> (ws[k] - lo)) & 1:
                got += 1
        if got < enough:
            got += bisect_right(info_writers.get(v, empty), deadline)
        return got

    return doomed


MODELS: dict[str, type[Model]] = {}


def register_model(cls: type[Model]) -> type[Model]:
    """Make a model available by name (`--model NAME`); usable as a class decorator."""
    MODELS[cls.name] = cls
    return cls


register_model(RegisterModel)
register_model(KVModel)
register_model(PartitionCasModel)


def get_model(name_or_model: str | Model) -> Model:
    if isinstance(name_or_model, Model):
        return name_or_model
    try:
        return MODELS[name_or_model]()
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ValueError(f"unknown model {name_or_model!r} (known: {known})") from None
