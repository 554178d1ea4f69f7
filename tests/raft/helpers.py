"""Small builders for driving a `RaftNode` by hand in unit tests.

Every node gets a seeded `random.Random`, so a test always sees the same timeouts. The helpers feed
real events through `handle()`; they never poke at private state, so a node "in a role" got there
the way it would in a cluster.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import TypeVar

from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from node.raft.actions import Action, Flush, SendRequest
from node.raft.config import RaftConfig
from node.raft.events import FlushCompleted, RequestReceived, ResponseReceived, Start, Tick
from node.raft.node import RaftNode
from node.raft.quorum_state import QuorumStateData, Role
from node.raft.records import RecordBatch
from node.raft.storage import LoadedState

T = TypeVar("T")

# Far enough past any election timeout of the default config (1000 ms + up to 1000 ms of jitter).
LATE = 10_000


def of_type(actions: Iterable[Action], kind: type[T]) -> list[T]:
    return [a for a in actions if isinstance(a, kind)]


def one(actions: Iterable[Action], kind: type[T]) -> T:
    found = of_type(actions, kind)
    assert len(found) == 1, f"expected one {kind.__name__}, got {found}"
    return found[0]


def index_of(actions: Sequence[Action], kind: type) -> int:
    return next(i for i, a in enumerate(actions) if isinstance(a, kind))


def sent(actions: Iterable[Action], kind: type[T], to: int | None = None) -> list[SendRequest]:
    """SendRequest actions carrying a `kind` message (optionally to one destination)."""
    return [
        a for a in of_type(actions, SendRequest) if isinstance(a.message, kind) and (to is None or a.destination == to)
    ]


def batch(base: int, epoch: int, n: int = 1, tag: str = "r") -> RecordBatch:
    return RecordBatch(base, epoch, tuple(f"{tag}{base + i}".encode() for i in range(n)))


def chain(*spec: tuple[int, int]) -> tuple[RecordBatch, ...]:
    """Batches laid end to end: `chain((2, 1), (1, 3))` is 2 records of epoch 1 then 1 of epoch 3."""
    out, offset = [], 0
    for n, epoch in spec:
        out.append(batch(offset, epoch, n))
        offset += n
    return tuple(out)


def make_node(
    node_id: int = 1,
    voters: Iterable[int] = (1, 2, 3),
    *,
    quorum_state: QuorumStateData | None = None,
    batches: Sequence[RecordBatch] = (),
    cluster_id: str | None = None,
    seed: int = 0,
    start: bool = True,
    **config: int,
) -> RaftNode:
    # These tests drive KIP-595's election: a timeout makes a voter a candidate at once. Pre-vote
    # (KIP-996, on by default) puts a prospective round before that; test_pre_vote.py turns it on.
    config.setdefault("pre_vote", False)
    cfg = RaftConfig(node_id, frozenset(voters), **config)
    node = RaftNode(cfg, LoadedState(quorum_state, tuple(batches), cluster_id), random.Random(seed))
    if start:
        node.handle(0, Start())
    return node


def request(node: RaftNode, now: int, message: Request, reply_to: object = "peer", cid: int = 7) -> list[Action]:
    return node.handle(now, RequestReceived(reply_to, cid, message))


def answer(node: RaftNode, now: int, req: SendRequest, message: Response) -> list[Action]:
    return node.handle(now, ResponseReceived(req.destination, req.correlation_id, message))


def flush(node: RaftNode, now: int) -> list[Action]:
    """Complete the fsync of everything the node has written so far."""
    return node.handle(now, FlushCompleted(node.log_end_offset))


def flush_all(node: RaftNode, now: int, actions: list[Action]) -> list[Action]:
    """Answer every Flush in `actions` (and any Flush those answers ask for)."""
    out: list[Action] = []
    pending = of_type(actions, Flush)
    while pending:
        more = node.handle(now, FlushCompleted(pending.pop(0).end_offset))
        out.extend(more)
        pending.extend(of_type(more, Flush))
    return out


def make_candidate(
    node_id: int = 1, voters: Iterable[int] = (1, 2, 3), now: int = LATE, **kw
) -> tuple[RaftNode, list[Action]]:
    """A voter whose election timeout fired: candidate of epoch (known epoch + 1)."""
    node = make_node(node_id, voters, **kw)
    actions = node.handle(now, Tick())
    assert node.role is Role.CANDIDATE, node.role
    return node, actions


def grant(node: RaftNode, now: int, actions: list[Action], voter: int) -> list[Action]:
    req = sent(actions, VoteRequest, to=voter)[-1]
    return answer(node, now, req, VoteResponse(int(ErrorCode.NONE), -1, node.epoch, True))


def _collect_votes(node: RaftNode, now: int, actions: list[Action]) -> list[Action]:
    """Grant the candidate's Vote requests in `actions`, lowest-numbered voter first, until it leads."""
    after: list[Action] = []
    for voter in sorted(v for v in node.voters if v != node.node_id):
        if node.role is Role.LEADER:
            break
        after += grant(node, now, actions, voter)
    assert node.role is Role.LEADER, node.role
    return after


def win_election(node: RaftNode, now: int) -> list[Action]:
    """A node whose election or fetch timeout has passed by `now` stands and wins with the votes of
    the lowest-numbered other voters. Returns every action from the votes on."""
    actions = node.handle(now, Tick())
    assert node.role is Role.CANDIDATE, node.role
    return _collect_votes(node, now, actions)


def make_leader(
    node_id: int = 1, voters: Iterable[int] = (1, 2, 3), now: int = LATE, **kw
) -> tuple[RaftNode, list[Action]]:
    """A leader that won with the votes of the lowest-numbered other voters and fsynced its
    LeaderChange record. Returns the node and every action of the election after the votes."""
    voters = tuple(voters)
    node = make_node(node_id, voters, **kw)
    actions = node.handle(now, Tick())  # a single voter wins its election right here
    after = _collect_votes(node, now, actions)  # nothing to collect for a single voter: it won at the Tick
    if voters == (node_id,):
        after = list(actions)
    after += flush_all(node, now, after)
    return node, after


def fetch(
    replica: int,
    epoch: int,
    offset: int,
    last_epoch: int,
    cluster_id: str | None = None,
    max_wait_ms: int = 0,
) -> FetchRequest:
    return FetchRequest(cluster_id, replica, epoch, offset, last_epoch, max_wait_ms)


def make_follower(
    node_id: int = 2,
    leader: int = 1,
    epoch: int = 1,
    voters: Iterable[int] = (1, 2, 3),
    now: int = 100,
    **kw,
) -> tuple[RaftNode, list[Action]]:
    """A node that accepted `leader`'s BeginQuorumEpoch for `epoch` (observers: learnt it from a Fetch)."""
    node = make_node(node_id, voters, start=False, **kw)
    actions = node.handle(0, Start())
    if node.is_voter:
        actions = request(node, now, BeginQuorumEpochRequest(node.cluster_id, leader, epoch))
    else:
        req = sent(actions, FetchRequest)[-1]
        actions = answer(node, now, req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), leader, epoch, 0))
    assert node.role is Role.FOLLOWER and node.leader_id == leader, (node.role, node.leader_id)
    return node, actions


def fetch_response(node: RaftNode, actions: list[Action], now: int, response: FetchResponse) -> list[Action]:
    """Answer the node's latest outstanding Fetch."""
    req = sent(actions, FetchRequest)[-1]
    return answer(node, now, req, response)
