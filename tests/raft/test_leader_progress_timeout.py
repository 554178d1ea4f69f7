"""KIP-595 "Leader Progress Timeout": a leader cut off from a majority starts an election."""

from __future__ import annotations

from node.protocol.messages import VoteRequest
from node.raft.events import Tick
from node.raft.quorum_state import Role
from tests.raft.helpers import LATE, fetch, make_leader, request, sent


def test_leader_progress_timeout_zombie_leader_starts_election():
    leader, _ = make_leader(1)
    timeout = leader.config.fetch_timeout_ms
    leader.handle(LATE + timeout - 1, Tick())
    assert leader.role is Role.LEADER
    out = leader.handle(LATE + timeout, Tick())
    assert leader.role is Role.CANDIDATE and leader.epoch == 2
    assert {r.destination for r in sent(out, VoteRequest)} == {2, 3}


def test_leader_progress_timeout_fetches_from_a_majority_keep_it_leader():
    leader, _ = make_leader(1, cluster_id="c")
    timeout = leader.config.fetch_timeout_ms
    end = leader.log_end_offset
    for period in range(1, 6):
        now = LATE + period * timeout
        request(leader, now - timeout // 2, fetch(2, leader.epoch, end, leader.epoch))
        leader.handle(now, Tick())
        assert leader.role is Role.LEADER and leader.epoch == 1


def test_leader_progress_timeout_fetches_from_a_minority_are_not_enough():
    leader, _ = make_leader(1, voters=(1, 2, 3, 4, 5), cluster_id="c")
    timeout = leader.config.fetch_timeout_ms
    request(leader, LATE + 10, fetch(2, leader.epoch, 0, 0))  # leader + 2 = 2 of 5
    request(leader, LATE + 10, fetch(9, leader.epoch, 0, 0))  # observers do not count
    leader.handle(LATE + timeout, Tick())
    assert leader.role is Role.CANDIDATE


def test_leader_progress_timeout_single_voter_leader_stays():
    leader, _ = make_leader(1, voters=(1,))
    leader.handle(LATE + 60_000, Tick())
    assert leader.role is Role.LEADER
