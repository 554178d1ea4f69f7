"""A burst of requests handed to a process at once (`InboundRequests`, one read from one connection).

The controller's appends for the burst become one Raft batch (within the core's limits), in the
order the requests arrived, and no request is answered before that batch is flushed and committed.
"""

from __future__ import annotations

import uuid

import pytest

from node.controller import ControllerConfig, QuorumController
from node.process.append_batch import HeldAppend, group_held, shares
from node.process.events import InboundRequest, InboundRequests
from node.process.ports import AppendOutcome, RequestContext
from node.process.process import NodeProcess
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    Listener,
)
from node.protocol.errors import ErrorCode
from node.raft.actions import AppendBatches, Flush, Respond
from node.raft.events import FlushCompleted, Start, Tick
from node.raft.records import MAX_BATCH_BYTES
from tests.raft.helpers import LATE, make_node

TOPIC = "t"
KEY = "leader.replication.throttled.replicas"  # a list config: each APPEND adds one item at the end
CTX = RequestContext(principal="User:broker")


def append_item(item: str) -> IncrementalAlterConfigsRequest:
    change = AlterableConfig(KEY, ConfigOperation.APPEND, item)
    return IncrementalAlterConfigsRequest(
        (IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, TOPIC, (change,)),)
    )


class Controller:
    """A single-voter controller process; flushes complete only when `flush()` says so."""

    def __init__(self, append_max_records: int | None = None) -> None:
        limits = {} if append_max_records is None else {"append_max_records": append_max_records}
        raft = make_node(1, (1,), start=False, **limits)
        self.proc = NodeProcess(raft, controller=lambda port: QuorumController(port, ControllerConfig()))
        self.answers: dict[int, object] = {}
        self.batches: list[AppendBatches] = []
        self.flushes: list[Flush] = []
        self.cid = 0
        self.run(self.proc.handle(0, Start()))
        self.run(self.proc.handle(LATE, Tick()))
        self.flush_all()
        assert self.proc.controller is not None and self.proc.controller.active
        image = self.proc.image
        listener = (Listener("PLAINTEXT", "127.0.0.1", 9092, 0),)
        features = (BrokerRegistrationFeature("metadata.version", 1, 1),)
        (cid,) = self.send([BrokerRegistrationRequest(1, image.cluster_id, uuid.uuid4(), listener, features)])
        self.flush_all()
        self.send([BrokerHeartbeatRequest(1, self.answers[cid].broker_epoch, image.last_offset)])
        self.flush_all()
        (cid,) = self.send([CreateTopicsRequest((CreatableTopic(TOPIC, 1, 1),))])
        self.flush_all()
        assert self.answers[cid].topics[0].error_code == ErrorCode.NONE

    def run(self, actions: list[object]) -> None:
        for action in actions:
            if isinstance(action, Flush):
                self.flushes.append(action)
            elif isinstance(action, Respond):
                self.answers[action.correlation_id] = action.message
            elif isinstance(action, AppendBatches):
                self.batches.append(action)

    def flush(self) -> None:
        flush = self.flushes.pop(0)
        self.run(self.proc.handle(LATE, FlushCompleted(flush.end_offset)))

    def flush_all(self) -> None:
        while self.flushes:
            self.flush()

    def send(self, messages: list[object]) -> list[int]:
        cids = list(range(self.cid + 1, self.cid + 1 + len(messages)))
        self.cid += len(messages)
        requests = tuple(InboundRequest("conn", c, m, CTX) for c, m in zip(cids, messages, strict=True))
        event = requests[0] if len(requests) == 1 else InboundRequests(requests)
        self.run(self.proc.handle(LATE, event))
        return cids

    def items(self) -> list[str]:
        value = self.proc.image.config(ConfigResourceType.TOPIC, TOPIC, KEY)
        return value.split(",") if value else []


def records_in(batches: list[AppendBatches]) -> int:
    return sum(len(b.records) for action in batches for b in action.batches)


def test_a_burst_is_one_raft_batch_in_arrival_order_answered_only_after_the_flush():
    ctl = Controller()
    ctl.batches.clear()
    items = [f"{n}:{n % 3}" for n in range(40)]
    cids = ctl.send([append_item(i) for i in items])  # nothing else in flight: one batch for the burst
    assert [len(b.records) for action in ctl.batches for b in action.batches] == [len(items)]
    assert len(ctl.flushes) == 1
    assert not any(c in ctl.answers for c in cids), "answered before the flush"
    ctl.send([append_item("100:1")])  # arrives while that flush runs: waits for the next batch
    ctl.flush()
    assert all(ctl.answers[c].responses[0].error_code == ErrorCode.NONE for c in cids)
    assert ctl.items() == items  # applied in the order the requests arrived
    ctl.flush_all()
    assert ctl.items() == [*items, "100:1"]


def test_a_burst_is_split_at_the_cores_batch_limit_and_every_request_gets_its_own_offsets():
    ctl = Controller(append_max_records=7)
    ctl.batches.clear()
    items = [f"{n}:{n % 3}" for n in range(20)]
    cids = ctl.send([append_item(i) for i in items])
    ctl.flush_all()
    sizes = [len(b.records) for action in ctl.batches for b in action.batches]
    assert sum(sizes) == 20 and max(sizes) <= 7
    assert all(ctl.answers[c].responses[0].error_code == ErrorCode.NONE for c in cids)
    assert ctl.items() == items


def test_a_refused_request_inside_a_burst_changes_nothing_and_the_others_commit():
    ctl = Controller()
    bad = IncrementalAlterConfigsRequest(
        (
            IncrementalAlterConfigsResource(
                ConfigResourceType.TOPIC, TOPIC, (AlterableConfig("no.such.config", ConfigOperation.SET, "1"),)
            ),
        )
    )
    cids = ctl.send([append_item("1:1"), bad, append_item("2:1")])
    ctl.flush_all()
    codes = [ctl.answers[c].responses[0].error_code for c in cids]
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_CONFIG, ErrorCode.NONE]
    assert ctl.items() == ["1:1", "2:1"]


def test_a_burst_at_a_controller_that_is_not_active_is_refused_as_a_whole():
    raft = make_node(1, (1, 2, 3), start=False)  # a voter of 3 that never became leader
    proc = NodeProcess(raft, controller=lambda port: QuorumController(port, ControllerConfig()))
    proc.handle(0, Start())
    requests = tuple(InboundRequest("conn", c, append_item(f"{c}:1"), CTX) for c in (1, 2, 3))
    out = proc.handle(1, InboundRequests(requests))
    answers = {a.correlation_id: a.message for a in out if isinstance(a, Respond)}
    assert {c: a.responses[0].error_code for c, a in answers.items()} == {
        c: ErrorCode.NOT_CONTROLLER for c in (1, 2, 3)
    }
    assert not [a for a in out if isinstance(a, AppendBatches)]


def test_group_shares_and_limits():
    outcomes: list[tuple[str, AppendOutcome]] = []
    held = [
        HeldAppend((b"a", b"b"), lambda o: outcomes.append(("ab", o))),
        HeldAppend((b"c",), lambda o: outcomes.append(("c", o))),
        HeldAppend((b"d", b"e", b"f"), lambda o: outcomes.append(("def", o))),
    ]
    (group,) = group_held(held, max_records=10)
    assert group.records == (b"a", b"b", b"c", b"d", b"e", b"f")
    group.done(AppendOutcome(True, 100, 105))
    assert [(n, o.base_offset, o.last_offset) for n, o in outcomes] == [
        ("ab", 100, 101),
        ("c", 102, 102),
        ("def", 103, 105),
    ]
    outcomes.clear()
    group.done(AppendOutcome(False, error=int(ErrorCode.NOT_CONTROLLER)))
    assert [o.committed for _, o in outcomes] == [False, False, False]
    with pytest.raises(ValueError):
        shares(0, 3, [2, 1, 3])  # the core wrote 4 records for a group of 6: never hand out wrong offsets
    assert [len(g.members) for g in group_held(held, max_records=3)] == [2, 1]
    big = HeldAppend((b"x" * (MAX_BATCH_BYTES - 10),), lambda o: None)
    assert [len(g.members) for g in group_held([held[1], big, held[1]], max_records=100)] == [1, 1, 1]
