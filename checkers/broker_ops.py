"""The ops of the registrations and isr-changes workloads, read out of a history (and image dumps).

Those workloads play brokers of their own against the quorum controller (KIP-631: registration,
heartbeats, controlled shutdown) and lead partitions whose replicas are those brokers (KIP-497:
AlterPartition). This module turns their history into typed observations for the checkers in
`checkers/registrations.py` and `checkers/partition_state.py`. It knows nothing of `node/`: the
formats below are the contract with `workloads/played_brokers.py`.

Ops (`f`, invoke value; what an `ok` adds; a `fail` adds `error`, the server's error code name, or
the client's error class for a transport failure):

- `setup` (first op, ok only): the run's facts: `session_timeout_ms`, `heartbeat_interval_ms`,
  `fence_slack_ms`, `brokers` (the played broker ids), `nodes` (node name -> node id), `topics`
  (name -> {`topic_id`, `replicas`: {partition: [ids]}}), `registrations` made before the history
  began ([{`broker`, `incarnation`, `epoch`}], each then unfenced by a caught-up heartbeat).
- `register` {broker, incarnation, kind}; ok: `epoch`.
- `heartbeat` {broker, incarnation, epoch, offset, want_fence, want_shut_down, kind}; ok: `fenced`,
  `caught_up`, `shut_down`.
- `alter` {topic, partition, topic_id, broker, broker_epoch, leader_epoch, partition_epoch, isr,
  from_isr, kind}: AlterPartition of one partition as `broker`; ok: `result` {leader, leader_epoch,
  isr, partition_epoch}.
- `metadata` {node}: Metadata read from one node's image; ok: `offset` (the image's last applied
  offset), `brokers` (the unfenced broker ids), `partitions` {"topic/p": {leader, leader_epoch, isr,
  replicas, partition_epoch}}.
- `describe-cluster` {node}: DescribeCluster with fenced brokers; ok: `offset`, `brokers`
  {"id": {epoch, fenced}}.
- `quorum` {node}: DescribeQuorum at one controller; ok: `leader` (node id), `epoch`.
- `barrier` {}: a linearizable read at the active controller (a Raft read barrier); ok: `offset`,
  at least the offset of every record committed before the barrier was invoked.

The `node` field of a completion names the node that answered. Image dumps
(`nodes/<node>/metadata-image.json`, `node.metadata.dump.image_dump`) become image observations
taken after the end of the history.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.history import History, Op, fault_windows

IMAGE_DUMP_NAME = "metadata-image.json"
MAX_EXAMPLES = 8
INF = float("inf")

# Fault kinds that leave every running controller's sense of time alone: partitions and packet faults
# change no clock or timer, and a controller that crashed (kill, a power loss, a corrupted disk: each
# takes the node down until its stop restarts it) restarts in a new epoch, whose fresh sessions the
# session rules bound through DescribeQuorum brackets. Any other kind (clock skew, a paused or stalled
# process whose timers fire late, anything unknown) makes the session rules skip the interval.
TIME_NEUTRAL_FAULTS = frozenset({"partition", "packet", "kill", "lose_unsynced", "corrupt"})


class BrokerOpsError(ValueError):
    """An op or a dump the checkers cannot read; the message names the op id or the file."""


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


# --- typed observations ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition's state as one answer showed it. `replicas` is None when the answer had none."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...] | None = None

    @property
    def state(self) -> tuple[int, int, frozenset[int]]:
        """What a partition epoch names: equal epochs must mean equal states (the ISR as a set)."""
        return (self.leader, self.leader_epoch, frozenset(self.isr))


@dataclass(frozen=True, slots=True)
class BrokerView:
    epoch: int
    fenced: bool
    in_controlled_shutdown: bool | None = None  # only image dumps show it


@dataclass(frozen=True, slots=True)
class Timed:
    """Where an observation came from and when: invoked at `inv`, completed at `cmp` (None: never)."""

    op_id: int | None  # None for dumps and setup facts
    process: Any
    node: str | None
    inv: int
    cmp: int | None

    def describe(self) -> str:
        where = f" at {self.node}" if self.node else ""
        if self.op_id is None:
            return f"{self.process}{where}"
        return f"op {self.op_id} (process {self.process}{where})"


@dataclass(frozen=True, slots=True)
class Registration:
    at: Timed
    outcome: str  # ok | fail | info
    broker: int
    incarnation: str
    epoch: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    at: Timed
    outcome: str
    broker: int
    incarnation: str | None
    epoch: int
    offset: int
    want_fence: bool
    want_shut_down: bool
    fenced: bool | None = None
    caught_up: bool | None = None
    shut_down: bool | None = None
    error: str | None = None

    @property
    def catches_up(self) -> bool:
        """A heartbeat that may unfence its broker: it reports the registration record applied."""
        return self.offset >= self.epoch and not self.want_fence and not self.want_shut_down


@dataclass(frozen=True, slots=True)
class Alter:
    at: Timed
    outcome: str
    key: str  # topic/partition
    broker: int
    broker_epoch: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    from_isr: tuple[int, ...] | None
    result: PartitionView | None = None
    error: str | None = None

    @property
    def changed(self) -> bool:
        """An acknowledged change: a new partition epoch, so a committed record."""
        return self.result is not None and self.result.partition_epoch == self.partition_epoch + 1


@dataclass(frozen=True, slots=True)
class ImageRead:
    """A state of a metadata image at `offset` (the last offset it applied)."""

    at: Timed
    offset: int
    kind: str  # metadata | describe-cluster | dump | setup
    brokers: Mapping[int, BrokerView] | None = None  # every registered broker, when known
    unfenced: frozenset[int] | None = None  # every unfenced broker, when known
    partitions: Mapping[str, PartitionView] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QuorumView:
    """A DescribeQuorum answer of the node `at.node`; leader and epoch -1 when it failed."""

    at: Timed
    leader: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Barrier:
    at: Timed
    offset: int


@dataclass
class Setup:
    session_timeout_ms: int = 9_000
    heartbeat_interval_ms: int = 2_000
    fence_slack_ms: int | None = None
    brokers: tuple[int, ...] = ()
    nodes: dict[str, int] = field(default_factory=dict)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {topic_id, replicas}
    time: int = 0

    def replicas(self) -> dict[str, tuple[int, ...]]:
        """topic/partition -> its replicas, as the workload created them."""
        out = {}
        for name, topic in self.topics.items():
            for p, ids in (topic.get("replicas") or {}).items():
                out[partition_key(name, int(p))] = tuple(int(i) for i in ids)
        return out


@dataclass
class BrokerHistory:
    setup: Setup
    registrations: list[Registration]
    heartbeats: list[Heartbeat]
    alters: list[Alter]
    images: list[ImageRead]
    quorum: list[QuorumView]
    barriers: list[Barrier]
    fault_spans: list[tuple[str, int, int]]  # (kind, start, end) of every nemesis fault window
    end_time: int
    dumps: list[str] = field(default_factory=list)  # image dump files read
    # (kind, start, end, nodes it hit or None when unknown) of every fault window; a simulator's targeted
    # fault ("buggify") counts as the fault it did (partition, kill, lose_unsynced)
    fault_hits: list[tuple[str, int, int, frozenset[str] | None]] = field(default_factory=list)

    def faults_between(self, start: int, end: int, *, ignore: Iterable[str] = TIME_NEUTRAL_FAULTS) -> list[str]:
        """Kinds of fault windows (other than `ignore`) overlapping [start, end]."""
        skip = set(ignore)
        return sorted({k for k, s, e in self.fault_spans if k not in skip and s <= end and e >= start})

    def faults_on(self, node: str, start: int, end: int, *, ignore: Iterable[str] = TIME_NEUTRAL_FAULTS) -> list[str]:
        """Kinds of fault windows (other than `ignore`) overlapping [start, end] that hit `node` (or nodes
        nobody recorded): what can distort that node's own timers."""
        skip = set(ignore)
        return sorted(
            {
                k
                for k, s, e, nodes in self.fault_hits
                if k not in skip and s <= end and e >= start and (nodes is None or node in nodes)
            }
        )


# --- parsing ---------------------------------------------------------------------------------------


def _timed(op: Op) -> Timed:
    return Timed(op.id, op.process, op.node, op.invoke_time, op.complete_time if op.type != "info" else None)


def _get(value: Any, name: str, op: Op, kind: type | tuple[type, ...] = int, optional: bool = False) -> Any:
    if not isinstance(value, Mapping):
        raise BrokerOpsError(f"op {op.id} ({op.f}): value must be an object, got {value!r}")
    item = value.get(name)
    if item is None and optional:
        return None
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
        raise BrokerOpsError(f"op {op.id} ({op.f}): {name!r} must be {_kind_name(kind)}, got {item!r}")
    return item


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {int: "an integer", bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(k, k.__name__)
        for k in kinds
    )


def _ints(value: Any, what: str, op: Op | None) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        where = f"op {op.id} ({op.f})" if op is not None else "image dump"
        raise BrokerOpsError(f"{where}: {what} must be a list of integers, got {value!r}")
    return tuple(value)


def _partition_view(obj: Any, op: Op | None, what: str) -> PartitionView:
    where = f"op {op.id} ({op.f})" if op is not None else "image dump"
    if not isinstance(obj, Mapping):
        raise BrokerOpsError(f"{where}: {what} must be an object, got {obj!r}")
    try:
        leader, le, pe = int(obj["leader"]), int(obj["leader_epoch"]), int(obj["partition_epoch"])
    except (KeyError, TypeError, ValueError):
        raise BrokerOpsError(f"{where}: {what} needs integer leader, leader_epoch, partition_epoch: {obj!r}") from None
    replicas = obj.get("replicas")
    return PartitionView(
        leader,
        le,
        _ints(obj.get("isr"), f"{what}.isr", op),
        pe,
        None if replicas is None else _ints(replicas, f"{what}.replicas", op),
    )


def _error(op: Op) -> str | None:
    if op.type == "ok":
        return None
    value = op.value if isinstance(op.value, Mapping) else {}
    return value.get("error") or (str(op.error) if op.error is not None else None)


def _setup(op: Op) -> Setup:
    v = op.value
    if op.type != "ok" or not isinstance(v, Mapping):
        raise BrokerOpsError(f"op {op.id} (setup): must be ok with an object value")
    setup = Setup(
        session_timeout_ms=_get(v, "session_timeout_ms", op),
        heartbeat_interval_ms=_get(v, "heartbeat_interval_ms", op),
        fence_slack_ms=_get(v, "fence_slack_ms", op, optional=True),
        brokers=_ints(v.get("brokers", []), "brokers", op),
        nodes={str(k): int(i) for k, i in (v.get("nodes") or {}).items()},
        topics=dict(v.get("topics") or {}),
        time=op.invoke_time,
    )
    return setup


def read_broker_history(history: History, dumps: str | Path | None = None) -> BrokerHistory:
    """Typed observations of a history (see the module docstring); `dumps` is a run directory (or its
    `nodes/` folder) whose image dumps are added as observations after the end of the history."""
    setup = Setup()
    regs: list[Registration] = []
    beats: list[Heartbeat] = []
    alters: list[Alter] = []
    images: list[ImageRead] = []
    quorum: list[QuorumView] = []
    barriers: list[Barrier] = []
    for op in history.ops:
        f = op.f
        if f == "setup":
            if op.type != "ok":
                continue
            setup = _setup(op)
            for r in op.value.get("registrations") or []:
                at = Timed(None, "setup", None, op.invoke_time, op.invoke_time)
                reg = Registration(at, "ok", _get(r, "broker", op), str(r.get("incarnation")), _get(r, "epoch", op))
                regs.append(reg)
            continue
        v = op.invoke_value
        if f == "register":
            epoch = _get(op.value, "epoch", op) if op.type == "ok" else None
            regs.append(
                Registration(
                    _timed(op), op.type, _get(v, "broker", op), str(_get(v, "incarnation", op, str)), epoch, _error(op)
                )
            )
        elif f == "heartbeat":
            done = op.value if op.type == "ok" else {}
            beats.append(
                Heartbeat(
                    _timed(op),
                    op.type,
                    _get(v, "broker", op),
                    v.get("incarnation"),
                    _get(v, "epoch", op),
                    _get(v, "offset", op),
                    bool(v.get("want_fence")),
                    bool(v.get("want_shut_down")),
                    _get(done, "fenced", op, bool) if op.type == "ok" else None,
                    bool(done.get("caught_up")) if op.type == "ok" else None,
                    bool(done.get("shut_down")) if op.type == "ok" else None,
                    _error(op),
                )
            )
        elif f == "alter":
            result = (
                _partition_view(op.value.get("result") if isinstance(op.value, Mapping) else None, op, "result")
                if op.type == "ok"
                else None
            )
            from_isr = v.get("from_isr") if isinstance(v, Mapping) else None
            alters.append(
                Alter(
                    _timed(op),
                    op.type,
                    partition_key(_get(v, "topic", op, str), _get(v, "partition", op)),
                    _get(v, "broker", op),
                    _get(v, "broker_epoch", op),
                    _get(v, "leader_epoch", op),
                    _get(v, "partition_epoch", op),
                    _ints(v.get("isr"), "isr", op),
                    None if from_isr is None else _ints(from_isr, "from_isr", op),
                    result,
                    _error(op),
                )
            )
        elif f in ("metadata", "describe-cluster") and op.type == "ok":
            images.append(_image_read(op))
        elif f == "quorum" and op.type == "ok":
            quorum.append(QuorumView(_timed(op), _get(op.value, "leader", op), _get(op.value, "epoch", op)))
        elif f == "quorum":  # not answered as the leader (or not at all): breaks a run of answers
            quorum.append(QuorumView(_timed(op), -1, -1))
        elif f == "barrier" and op.type == "ok":
            barriers.append(Barrier(_timed(op), _get(op.value, "offset", op)))
    end = history.end_time
    windows = fault_windows(history)
    spans = [(w.kind, w.start, w.end + w.aftereffect_ns if w.end is not None else end + 1) for w in windows]
    hits = [(_fault_kind(w), s, e, _fault_nodes(w)) for w, (_, s, e) in zip(windows, spans, strict=True)]
    bh = BrokerHistory(setup, regs, beats, alters, images, quorum, barriers, spans, end, fault_hits=hits)
    if dumps is not None:
        for node, path in find_image_dumps(dumps).items():
            bh.images.append(load_image_dump(path, node, end + 1))
            bh.dumps.append(str(path))
    return bh


def _fault_kind(w: Any) -> str:
    """A window's kind; a targeted fault of the simulator's ("buggify") is the fault it did."""
    value = w.value if isinstance(w.value, Mapping) else {}
    fault = value.get("fault")
    return fault if w.kind == "buggify" and isinstance(fault, str) else w.kind


def _fault_nodes(w: Any) -> frozenset[str] | None:
    """The nodes a window's start named as its targets (None: not recorded, so possibly any)."""
    value = w.value if isinstance(w.value, Mapping) else {}
    targets = value.get("targets")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        return None
    return frozenset(targets)


def _image_read(op: Op) -> ImageRead:
    v = op.value
    offset = _get(v, "offset", op)
    at = _timed(op)
    if op.f == "metadata":
        unfenced = frozenset(_ints(v.get("brokers", []), "brokers", op))
        parts = v.get("partitions") or {}
        if not isinstance(parts, Mapping):
            raise BrokerOpsError(f"op {op.id} (metadata): partitions must be an object")
        views = {str(k): _partition_view(p, op, f"partitions[{k!r}]") for k, p in parts.items()}
        return ImageRead(at, offset, "metadata", unfenced=unfenced, partitions=views)
    brokers = v.get("brokers") or {}
    if not isinstance(brokers, Mapping):
        raise BrokerOpsError(f"op {op.id} (describe-cluster): brokers must be an object")
    views_b = {}
    for k, b in brokers.items():
        views_b[int(k)] = BrokerView(_get(b, "epoch", op), _get(b, "fenced", op, bool))
    unfenced = frozenset(i for i, b in views_b.items() if not b.fenced)
    return ImageRead(at, offset, "describe-cluster", brokers=views_b, unfenced=unfenced)


def dumps_of(history: History, args: Any) -> Path | None:
    """Where a checker finds the image dumps: `--dumps`, else the history's own directory."""
    dumps = getattr(args, "dumps", None)
    if dumps is None and history.source not in ("<memory>", ""):
        return Path(history.source).parent
    return None if dumps is None else Path(dumps)


def find_image_dumps(directory: str | Path) -> dict[str, Path]:
    """node -> metadata-image.json under a run directory, its `nodes/` folder, or a folder of nodes."""
    root = Path(directory)
    if (root / "nodes").is_dir():
        root = root / "nodes"
    if not root.is_dir():
        return {}
    return {c.name: c / IMAGE_DUMP_NAME for c in sorted(root.iterdir()) if (c / IMAGE_DUMP_NAME).is_file()}


def load_image_dump(path: Path, node: str, time: int) -> ImageRead:
    """One node's final image as an observation at `time` (after every op of the history)."""
    try:
        doc = json.loads(path.read_text())
        image = doc["image"]
        offset = int(doc["last_offset"])
        brokers = {
            int(b["broker_id"]): BrokerView(
                int(b["broker_epoch"]), bool(b["fenced"]), bool(b["in_controlled_shutdown"])
            )
            for b in image["brokers"]
        }
        parts = {}
        for topic in image["topics"]:
            for p in topic["partitions"]:
                parts[partition_key(topic["name"], int(p["partition_id"]))] = _partition_view(p, None, "partition")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BrokerOpsError(f"{path}: not a metadata image dump ({type(exc).__name__}: {exc})") from None
    at = Timed(None, "image dump", node, time, time)
    unfenced = frozenset(i for i, b in brokers.items() if not b.fenced)
    return ImageRead(at, offset, "dump", brokers=brokers, unfenced=unfenced, partitions=parts)


# --- the offset clock -------------------------------------------------------------------------------


class OffsetClock:
    """Relates real time to metadata-log offsets from what the history shows.

    - An acknowledged registration's epoch is the offset of its record: appended after the op was
      invoked, committed before it completed.
    - An image read at offset o completed after offsets up to o were committed.
    - A barrier invoked at t answered an offset at least that of every record committed before t.

    `after(t)`: an offset every record committed before `t` is at or below (INF: none known).
    `before(t)`: an offset certainly committed before `t`, so every record appended at or after `t`
    lies above it (-1: none known).
    """

    def __init__(self, bh: BrokerHistory) -> None:
        anchors: list[tuple[int, int]] = []  # (invoke time, offset at or above everything committed before)
        done: list[tuple[int, int]] = []  # (completion time, offset committed by then)
        for r in bh.registrations:
            if r.outcome == "ok" and r.epoch is not None and r.at.op_id is not None:
                anchors.append((r.at.inv, r.epoch))
            if r.outcome == "ok" and r.epoch is not None and r.at.cmp is not None:
                done.append((r.at.cmp, r.epoch))
        for b in bh.barriers:
            anchors.append((b.at.inv, b.offset))
            if b.at.cmp is not None:
                done.append((b.at.cmp, b.offset))
        for img in bh.images:
            if img.at.cmp is not None and img.kind != "dump":
                done.append((img.at.cmp, img.offset))
        anchors.sort()
        done.sort()
        # after(t) = min offset over anchors invoked strictly after t: a suffix minimum
        self._a_times = [t for t, _ in anchors]
        self._a_min = [0] * len(anchors)
        low = INF
        for i in range(len(anchors) - 1, -1, -1):
            low = min(low, anchors[i][1])
            self._a_min[i] = low  # type: ignore[call-overload]
        # before(t) = max offset over completions strictly before t: a prefix maximum
        self._d_times = [t for t, _ in done]
        self._d_max = []
        high = -1
        for _, o in done:
            high = max(high, o)
            self._d_max.append(high)

    def after(self, t: int) -> float:
        i = bisect_right(self._a_times, t)
        return self._a_min[i] if i < len(self._a_min) else INF

    def before(self, t: int) -> int:
        i = bisect_left(self._d_times, t)
        return self._d_max[i - 1] if i > 0 else -1


# --- anomalies --------------------------------------------------------------------------------------


class Anomalies:
    """Named violations with a count, an explanation and a few examples each."""

    def __init__(self, explanations: Mapping[str, str]) -> None:
        self.explanations = explanations
        self.found: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, name: str, example: dict[str, Any]) -> None:
        assert name in self.explanations, name
        self.found[name].append(example)

    def __bool__(self) -> bool:
        return bool(self.found)

    def to_json(self) -> dict[str, Any]:
        return {
            name: {
                "count": len(examples),
                "explanation": self.explanations[name],
                "examples": examples[:MAX_EXAMPLES],
            }
            for name, examples in sorted(self.found.items())
        }


def summarize_anomalies(
    checker: str, valid: Any, details: Mapping[str, Any], headline: Callable[[Mapping[str, Any]], str]
) -> list[str]:
    """Console lines: the verdict, a headline made from the counts, then each anomaly with its first
    example (or the reason nothing was checked)."""
    if "reason" in details:
        return [f"{checker}: {valid} ({details['reason']})"]
    word = {True: "valid", False: "INVALID"}.get(valid, "unknown")
    lines = [f"{checker}: {word} — {headline(details['counts'])}"]
    for name, found in (details.get("anomalies") or {}).items():
        lines.append(f"  {name}: {found['count']} — {found['explanation']}")
        if found["examples"]:
            lines.append(f"    e.g. {found['examples'][0].get('why', json.dumps(found['examples'][0], default=str))}")
    for note in details.get("notes") or []:
        lines.append(f"  note: {note}")
    return lines
