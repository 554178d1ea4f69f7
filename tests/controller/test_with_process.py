"""The controller inside a real `NodeProcess` over a real single-voter Raft core (no fake port)."""

from __future__ import annotations

import random
import uuid

from node.controller import ControllerConfig, QuorumController
from node.process.events import InboundRequest
from node.process.ports import RequestContext
from node.process.process import NodeProcess
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
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
from node.raft.actions import Flush, Respond, SetTimer
from node.raft.config import RaftConfig
from node.raft.events import FlushCompleted, Start, Tick
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.raft.storage import LoadedState
from tests.raft.helpers import LATE, make_node


class Node:
    def __init__(self) -> None:
        raft = make_node(1, (1,), start=False)
        self.proc = NodeProcess(raft, controller=lambda port: QuorumController(port, ControllerConfig()))
        self.now = 0
        self.answers: dict[int, object] = {}
        self._cid = 0
        self._pump(self.proc.handle(0, Start()))
        self.now = LATE
        self._pump(self.proc.handle(self.now, Tick()))
        assert self.proc.controller is not None and self.proc.controller.active

    def _pump(self, actions: list[object]) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, Flush):
                queue += self.proc.handle(self.now, FlushCompleted(action.end_offset))
            elif isinstance(action, Respond):
                self.answers[action.correlation_id] = action.message

    def call(self, message: object) -> object:
        self._cid += 1
        ctx = RequestContext(principal="User:broker")
        self._pump(self.proc.handle(self.now, InboundRequest("conn", self._cid, message, ctx)))
        return self.answers.get(self._cid)


def test_register_unfence_create_alter_and_describe_through_the_process() -> None:
    node = Node()
    image = node.proc.image
    assert image.feature_level("metadata.version") == 1 and image.cluster_id
    registration = BrokerRegistrationRequest(
        1,
        image.cluster_id,
        uuid.uuid4(),
        (Listener("PLAINTEXT", "127.0.0.1", 9092, 0),),
        (BrokerRegistrationFeature("metadata.version", 1, 1),),
    )
    response = node.call(registration)
    assert response.error_code == ErrorCode.NONE
    epoch = response.broker_epoch
    assert image.broker(1).broker_epoch == epoch  # the epoch is the registration record's offset
    heartbeat = node.call(BrokerHeartbeatRequest(1, epoch, image.last_offset))
    assert heartbeat.error_code == ErrorCode.NONE and not heartbeat.is_fenced
    created = node.call(CreateTopicsRequest((CreatableTopic("t", 2, 1),)))
    assert created.topics[0].error_code == ErrorCode.NONE
    change = AlterableConfig("cleanup.policy", ConfigOperation.APPEND, "compact")
    altered = node.call(
        IncrementalAlterConfigsRequest((IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, "t", (change,)),))
    )
    assert altered.responses[0].error_code == ErrorCode.NONE
    described = node.call(DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "t"),)))
    configs = {c.name: c.value for c in described.results[0].configs}
    assert configs["cleanup.policy"] == "delete,compact"
    assert described.metadata_offset == image.last_offset


class LowestRandom(random.Random):
    """Every random choice takes its lowest value: election timeouts of exactly the base, backoffs of 0."""

    def randint(self, a: int, b: int) -> int:
        return a


def test_a_deadline_due_now_is_armed_again_so_a_zero_backoff_candidate_is_not_stuck() -> None:
    """A candidate whose election times out and whose random backoff is 0 ms re-announces a deadline
    equal to now. The process must pass that SetTimer on, or the runtime never wakes it again and the
    voter stays a candidate for ever (found by a simulated run: a voter stuck 90 s after the heal)."""
    # KIP-595's election (without KIP-996's pre-vote round): the timeout makes a candidate at once.
    config = RaftConfig(1, frozenset({1, 2, 3}), pre_vote=False)
    raft = RaftNode(config, LoadedState(None, (), None), LowestRandom(1))
    proc = NodeProcess(raft)
    timers = [a.deadline_ms for a in proc.handle(0, Start()) if isinstance(a, SetTimer)]
    deadline = timers[-1]
    proc.handle(deadline, Tick())  # election timeout: a candidate of epoch 1, votes go out, no answer comes
    assert raft.role is Role.CANDIDATE and raft.epoch == 1
    vote_deadline = raft.state.election_deadline
    out = proc.handle(vote_deadline, Tick())  # the election failed: back off for 0 ms
    assert raft.state.backing_off_until == vote_deadline
    assert SetTimer(vote_deadline) in out  # the runtime is asked to wake it again at once
    proc.handle(vote_deadline, Tick())
    assert raft.role is Role.CANDIDATE and raft.epoch == 2  # it tries again instead of waiting for ever
