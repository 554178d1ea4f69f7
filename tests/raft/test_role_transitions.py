"""Each role owns its state, and only the role changes of `ENTERED_FROM` happen (after Kafka's
QuorumState): anything else is an IllegalStateError, also under `python -O` (no asserts)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from node.protocol.errors import ErrorCode
from node.protocol.messages import BeginQuorumEpochRequest, FetchResponse
from node.raft.actions import AppendFailed, ReadBarrierFailed, Respond
from node.raft.events import Append, ReadBarrier
from node.raft.quorum_state import (
    ENTERED_FROM,
    Candidate,
    Follower,
    IllegalStateError,
    Leader,
    Resigned,
    Role,
    Unattached,
    check_transition,
)
from tests.raft.helpers import LATE, fetch, make_follower, make_leader, of_type, request


def test_parked_fetches_barriers_and_unwritten_appends_live_in_the_leader_and_go_with_it():
    leader, _ = make_leader()
    epoch = leader.epoch
    leader.handle(LATE + 1, Append("a1", (b"x",)))  # written, its flush in flight
    leader.handle(LATE + 1, Append("a2", (b"y",)))  # waits for that flush
    end = leader.log_end_offset
    parked = request(leader, LATE + 1, fetch(9, epoch, end, epoch, max_wait_ms=500), reply_to="observer", cid=9)
    assert not of_type(parked, Respond)  # nothing new: parked
    leader.handle(LATE + 1, ReadBarrier("r"))  # waits for a2's commit
    state = leader.state
    assert isinstance(state, Leader)
    assert [p.correlation_id for p in state.parked] == [9]
    assert [p.handle for p in state.pending] == ["a2"] and [b.handle for b in state.barriers] == ["r"]

    out = request(leader, LATE + 2, BeginQuorumEpochRequest(leader.cluster_id, 2, epoch + 1))

    assert leader.role is Role.FOLLOWER
    assert [a.handle for a in of_type(out, AppendFailed)] == ["a2"]
    assert [a.handle for a in of_type(out, ReadBarrierFailed)] == ["r"]
    answered = [a for a in of_type(out, Respond) if isinstance(a.message, FetchResponse)]
    assert [(a.correlation_id, a.message.error_code) for a in answered] == [(9, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert not hasattr(leader.state, "parked") and not hasattr(leader.state, "barriers")


def test_a_follower_cannot_win_an_election():
    follower, _ = make_follower()
    with pytest.raises(IllegalStateError, match="winning an election needs the candidate role, not follower"):
        follower._become_leader(LATE)
    assert follower.role is Role.FOLLOWER  # refused before anything changed


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (Follower(3, 2, 0), Resigned(3, 1, 0, ()), "illegal role change follower -> resigned"),
        (Unattached(3, 0), Leader(3, 0, {}, {}, set(), (), 0), "illegal role change unattached -> leader"),
        (Candidate(3, 1, 0), Leader(4, 0, {}, {}, set(), (), 0), "leader must keep epoch 3"),
        (Unattached(3, 0), Candidate(5, 1, 0), "bump epoch 3 by one"),
    ],
)
def test_illegal_transitions_raise(old, new, message):
    with pytest.raises(IllegalStateError, match=message):
        check_transition(old, new)


def test_every_legal_transition_passes():
    check_transition(Candidate(3, 1, 0), Leader(3, 0, {}, {}, set(), (), 0))
    check_transition(Leader(3, 0, {}, {}, set(), (), 0), Resigned(3, 1, 0, ()))
    check_transition(Leader(3, 0, {}, {}, set(), (), 0), Follower(4, 2, 0))
    assert ENTERED_FROM[Role.LEADER] == {Role.CANDIDATE} and ENTERED_FROM[Role.RESIGNED] == {Role.LEADER}


def test_the_checks_survive_python_O():
    """`assert` vanishes under -O; the role checks must not."""
    code = (
        "from tests.raft.helpers import make_follower\n"
        "from node.raft.quorum_state import IllegalStateError\n"
        "f, _ = make_follower()\n"
        "try:\n    f._become_leader(10_000)\nexcept IllegalStateError:\n    print('refused')\n"
        "else:\n    print('became', f.role.value)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused"
