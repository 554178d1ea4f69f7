"""KIP-996 in the simulator: a voter partitioned for a long time neither inflates the epoch nor, once
back, unseats the healthy leader. The same scenario without pre-vote shows what the test guards."""

from __future__ import annotations

import pytest

from tests.sim.scenarios import partitioned_voter


@pytest.mark.parametrize("voters", [3, 5])
def test_a_partitioned_voter_keeps_its_epoch_and_the_leader_keeps_leading(voters):
    out = partitioned_voter(seed=3, cut_ms=60_000, pre_vote=True, voters=voters)
    assert out.sim.violation is None
    assert out.voter_epoch_at_heal == out.epoch  # a minute of pre-vote rounds, no epoch bumped
    assert out.leader_epoch_at_heal == out.epoch
    assert (out.leader_after, out.epoch_after) == (out.leader, out.epoch)  # rejoined without an election
    assert out.sim.raft(out.voter).leader_id == out.leader


def test_without_pre_vote_the_same_voter_inflates_the_epoch_and_forces_an_election():
    out = partitioned_voter(seed=3, cut_ms=60_000, pre_vote=False)
    assert out.sim.violation is None
    assert out.voter_epoch_at_heal > out.epoch + 10  # one candidacy per election timeout and backoff
    assert out.epoch_after > out.epoch  # its epoch reached the others: a new election
