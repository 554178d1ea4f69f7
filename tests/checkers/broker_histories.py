"""Hand-built histories of the registrations / isr-changes workloads (formats: `checkers.broker_ops`).

`BrokerHistoryBuilder` places ops at explicit times (ms) with their answers; `valid_run()` builds one
correct story (registrations, heartbeats, a crash with a probe, a restart with a new incarnation, a
refused duplicate, a stale heartbeat, a controlled shutdown, AlterPartitions and reads) that the bad
variants in the tests change one answer of.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from checkers.history import History, pair, read_events

MS = 1_000_000
SESSION_MS = 3_000
SLACK_MS = 1_000
B0, B1, B2 = 1000, 1001, 1002
TOPIC = "isr-0"
P0 = f"{TOPIC}/0"
TOPIC_ID = "00000000-0000-0000-0000-000000000001"


class BrokerHistoryBuilder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.processes = itertools.count()
        self.op_index: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}

    def op(
        self,
        f: str,
        value: Any,
        result: Any = None,
        *,
        inv: float,
        cmp: float | None = None,
        type: str = "ok",
        node: str | None = "c1",
        key: Any = None,
        name: str | None = None,
    ) -> None:
        """One op invoked at `inv` ms, completed at `cmp` ms (default inv + 5) with `type`; an ok or
        fail value is the invoke value updated with `result`; `type="pending"` leaves it open."""
        process = next(self.processes)
        invoke = {"time": int(inv * MS), "process": process, "type": "invoke", "f": f, "value": value, "key": key}
        self.events.append(invoke)
        done = None
        if type != "pending":
            final = {**value, **(result or {})} if type in ("ok", "fail") and isinstance(value, dict) else value
            done = {
                "time": int((cmp if cmp is not None else inv + 5) * MS),
                "process": process,
                "type": type,
                "f": f,
                "value": final,
                "key": key,
                "node": node,
            }
            self.events.append(done)
        if name:
            self.op_index[name] = (invoke, done)

    def answer(self, name: str, **changes: Any) -> None:
        """Change the completion of the op called `name` (its value, type or node)."""
        _, done = self.op_index[name]
        assert done is not None
        value = changes.pop("value", None)
        if value:
            done["value"] = {**done["value"], **value}
        done.update(changes)

    def history(self) -> History:
        ordered = sorted(self.events, key=lambda e: (e["time"], e["type"] != "invoke"))
        lines = [{**e, "index": i} for i, e in enumerate(ordered)]
        return pair(read_events(lines))

    def write(self, path: Path) -> Path:
        ordered = sorted(self.events, key=lambda e: (e["time"], e["type"] != "invoke"))
        path.write_text("".join(json.dumps({**e, "index": i}) + "\n" for i, e in enumerate(ordered)))
        return path

    # --- the workload's ops --------------------------------------------------------------------

    def setup(self) -> None:
        value = {
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": 500,
            "fence_slack_ms": SLACK_MS,
            "brokers": [B0, B1, B2],
            "nodes": {"c1": 1, "c2": 2, "c3": 3, "b1": 4},
            "topics": {TOPIC: {"topic_id": TOPIC_ID, "replicas": {"0": [B0, B1, B2]}}},
            "registrations": [
                {"broker": B0, "incarnation": "i0", "epoch": 5},
                {"broker": B1, "incarnation": "i1", "epoch": 6},
                {"broker": B2, "incarnation": "i2", "epoch": 7},
            ],
        }
        self.op("setup", {"workload": "test"}, value, inv=0, cmp=0, node=None)

    def register(self, broker: int, incarnation: str, epoch: int | None, *, at: float, **kw: Any) -> None:
        result = {"epoch": epoch} if epoch is not None else {"error": kw.pop("error", "DUPLICATE_BROKER_REGISTRATION")}
        kw.setdefault("type", "ok" if epoch is not None else "fail")
        value = {"broker": broker, "incarnation": incarnation, "kind": "start"}
        self.op("register", value, result, inv=at, key=broker, **kw)

    def beat(
        self,
        broker: int,
        epoch: int,
        *,
        at: float,
        offset: int | None = None,
        fenced: bool = False,
        incarnation: str | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
        shut_down: bool = False,
        **kw: Any,
    ) -> None:
        value = {
            "broker": broker,
            "incarnation": incarnation or {B0: "i0", B1: "i1", B2: "i2"}[broker],
            "epoch": epoch,
            "offset": epoch + 100 if offset is None else offset,
            "want_fence": want_fence,
            "want_shut_down": want_shut_down,
            "kind": "beat",
        }
        result = kw.pop("result", None) or {
            "fenced": fenced,
            "caught_up": value["offset"] >= epoch,
            "shut_down": shut_down,
        }
        self.op("heartbeat", value, result, inv=at, key=broker, **kw)

    def quorum(self, *, at: float, node: str = "c1", leader: int = 1, epoch: int = 3) -> None:
        self.op("quorum", {"node": node}, {"leader": leader, "epoch": epoch}, inv=at, node=node)

    def cluster(
        self, offset: int, brokers: dict[int, tuple[int, bool]], *, at: float, node: str = "b1", **kw: Any
    ) -> None:
        value = {"offset": offset, "brokers": {str(b): {"epoch": e, "fenced": f} for b, (e, f) in brokers.items()}}
        self.op("describe-cluster", {"node": node}, value, inv=at, node=node, **kw)

    def metadata(
        self,
        offset: int,
        *,
        at: float,
        leader: int,
        isr: list[int],
        le: int,
        pe: int,
        unfenced: list[int] = (B0, B1, B2),  # type: ignore[assignment]
        node: str = "b1",
        **kw: Any,
    ) -> None:
        part = {"leader": leader, "leader_epoch": le, "isr": isr, "partition_epoch": pe, "replicas": [B0, B1, B2]}
        value = {"offset": offset, "brokers": list(unfenced), "partitions": {P0: part}}
        self.op("metadata", {"node": node}, value, inv=at, node=node, **kw)

    def alter(
        self,
        *,
        at: float,
        le: int,
        pe: int,
        isr: list[int],
        from_isr: list[int] | None,
        result: dict[str, Any] | None = None,
        broker: int = B0,
        broker_epoch: int = 5,
        **kw: Any,
    ) -> None:
        value = {
            "topic": TOPIC,
            "partition": 0,
            "topic_id": TOPIC_ID,
            "broker": broker,
            "broker_epoch": broker_epoch,
            "leader_epoch": le,
            "partition_epoch": pe,
            "isr": isr,
            "from_isr": from_isr,
            "kind": "cas",
        }
        if result is None and kw.get("type", "ok") == "ok":
            result = {"result": {"leader": broker, "leader_epoch": le, "isr": isr, "partition_epoch": pe + 1}}
        self.op("alter", value, result, inv=at, key=P0, **kw)

    def barrier(self, offset: int, *, at: float, **kw: Any) -> None:
        self.op("barrier", {}, {"offset": offset}, inv=at, **kw)


def valid_run() -> BrokerHistoryBuilder:
    """A correct story; names of ops the tests change are given in comments."""
    h = BrokerHistoryBuilder()
    h.setup()
    h.quorum(at=10)
    h.metadata(8, at=20, leader=B0, isr=[B0, B1, B2], le=0, pe=0)
    h.cluster(8, {B0: (5, False), B1: (6, False), B2: (7, False)}, at=30)
    # heartbeats every 500 ms; B0 stops at 2000 (a crash)
    for t in range(100, 12_000, 500):
        if t <= 2_000:
            h.beat(B0, 5, at=t)
        if t < 10_000:
            h.beat(B1, 6, at=t + 10)
        h.beat(B2, 7, at=t + 20)
        h.quorum(at=t + 30)
    # an AlterPartition shrinks the ISR, then grows it back
    h.alter(at=300, le=0, pe=0, isr=[B0, B1], from_isr=[B0, B1, B2], name="shrink")
    h.alter(
        at=400, le=0, pe=0, isr=[B0], from_isr=[B0, B1, B2], type="fail", result={"error": "INVALID_UPDATE_VERSION"}
    )
    h.alter(at=600, le=0, pe=1, isr=[B0, B1, B2], from_isr=[B0, B1], name="grow")
    h.metadata(12, at=700, leader=B0, isr=[B0, B1, B2], le=0, pe=2)
    h.metadata(12, at=710, leader=B0, isr=[B0, B1, B2], le=0, pe=2, node="c2")
    # a duplicate incarnation of B1 while it is live: refused
    h.register(B1, "i1-dup", None, at=3_000, name="duplicate")
    # the crashed B0 is fenced by the controller (leadership moves to B1, B0 leaves the ISR)
    h.metadata(16, at=5_600, leader=B1, isr=[B1, B2], le=1, pe=3, unfenced=[B1, B2], name="after-fence")
    h.cluster(16, {B0: (5, True), B1: (6, False), B2: (7, False)}, at=5_610)
    # the probe after session + slack + margin: fenced
    h.beat(B0, 5, at=7_000, offset=-1, fenced=True, name="probe")
    # a new incarnation of B0: epoch 20; lagging first, then caught up
    h.register(B0, "i0-b", 20, at=7_500, name="restart")
    h.beat(B0, 20, at=7_600, offset=19, fenced=True, incarnation="i0-b", name="lagging")
    h.alter(
        at=7_700, le=1, pe=3, isr=[B1, B2, B0], from_isr=[B1, B2], broker=B1, broker_epoch=6,
        type="fail", result={"error": "INELIGIBLE_REPLICA"}, name="add-lagging",
    )  # fmt: skip
    for t in range(8_000, 12_000, 500):
        h.beat(B0, 20, at=t + 40, incarnation="i0-b", name=f"b0-{t}")
    h.beat(B0, 5, at=8_300, offset=5, type="fail", result={"error": "STALE_BROKER_EPOCH"}, name="stale-beat")
    h.cluster(24, {B0: (20, False), B1: (6, False), B2: (7, False)}, at=8_200)
    # B1 (the leader) shuts down: leadership moves to B2
    h.beat(B1, 6, at=10_000, want_shut_down=True, shut_down=True, name="shutdown")
    h.barrier(41, at=10_100, name="anchor")  # every record committed before it is at or below 41
    h.metadata(42, at=10_300, leader=B2, isr=[B2], le=2, pe=4, unfenced=[B0, B1, B2], name="after-shutdown")
    h.barrier(44, at=12_100)
    h.metadata(44, at=12_200, leader=B2, isr=[B2], le=2, pe=4, unfenced=[B0, B1, B2])
    return h
