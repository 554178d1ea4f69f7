"""Each planted Raft bug changes what the core does, and the correct core does the right thing."""

from __future__ import annotations

from node.bugs import Bugs
from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from node.raft.actions import AppendBatches, Flush, PersistQuorumState, ReadBarrierCompleted, Respond
from node.raft.events import ReadBarrier, Tick
from node.raft.quorum_state import NO_ID, QuorumStateData, Role
from tests.raft.helpers import (
    LATE,
    batch,
    chain,
    fetch,
    fetch_response,
    make_follower,
    make_leader,
    make_node,
    of_type,
    one,
    request,
    sent,
)


def bugs(*names: str) -> Bugs:
    return Bugs(frozenset(names))


def test_hwm_before_leader_change_committed_commits_an_old_epoch_entry_kafka_12619() -> None:
    """A leader of epoch 2 inherits records of epoch 1 at [0, 2); its LeaderChange is at 2. A follower
    fetching at offset 2 holds the old records but not the LeaderChange: a majority holds [0, 2)."""

    def leader_after_partial_fetch(on: Bugs) -> int:
        node, _ = make_leader(1, (1, 2, 3), batches=(batch(0, 1, 2),), bugs=on)
        assert node.epoch == 2 and node.epoch_start_offset == 2
        request(node, LATE + 1, fetch(2, node.epoch, 2, 1))
        return node.high_watermark

    assert leader_after_partial_fetch(Bugs()) == 0  # waits for the LeaderChange (offset 2) to commit
    assert leader_after_partial_fetch(bugs("raft-hwm-before-leader-change-committed")) == 2


def test_leader_reelected_in_the_same_epoch_after_a_restart_kafka_10527() -> None:
    state = QuorumStateData(leader_id=1, leader_epoch=5, voted_id=1, current_voters=(1, 2, 3))
    correct = make_node(1, quorum_state=state, batches=(batch(0, 5, 2),))
    assert correct.role is Role.RESIGNED and correct.epoch == 5
    buggy = make_node(1, quorum_state=state, batches=(batch(0, 5, 2),), bugs=bugs("raft-leader-reelected-same-epoch"))
    assert buggy.role is Role.LEADER and buggy.epoch == 5  # leads the epoch it led before the restart
    assert buggy.log.batch_at(2).epoch == 5  # and writes a second LeaderChange under epoch 5


def test_leader_never_resigns_without_fetches_from_a_majority_kafka_15489() -> None:
    def role_after_silence(on: Bugs) -> Role:
        node, _ = make_leader(1, (1, 2, 3), bugs=on)
        for step in range(1, 6):  # five fetch timeouts without a single Fetch
            node.handle(LATE + step * node.config.fetch_timeout_ms + 1, Tick())
        return node.role

    assert role_after_silence(Bugs()) is Role.CANDIDATE
    assert role_after_silence(bugs("raft-leader-never-resigns")) is Role.LEADER


def test_vote_not_persisted_lets_a_restarted_voter_vote_twice_in_one_epoch() -> None:
    def votes(on: Bugs) -> tuple[int, bool]:
        voter = make_node(1, (1, 2, 3), bugs=on)
        actions = request(voter, 100, VoteRequest(None, 1, 2, 0, 0))
        persisted = of_type(actions, PersistQuorumState)[-1].state  # what is on disk when it grants
        assert voter.voted_id == 2  # in memory the vote is there either way
        restarted = make_node(1, (1, 2, 3), quorum_state=persisted, bugs=on)
        second = request(restarted, 200, VoteRequest(None, 1, 3, 0, 0))
        return persisted.voted_id, sent_vote_granted(second)

    assert votes(Bugs()) == (2, False)
    assert votes(bugs("raft-vote-not-persisted")) == (NO_ID, True)


def sent_vote_granted(actions: list) -> bool:
    response = one(actions, Respond).message
    return bool(response.vote_granted) and response.error_code == ErrorCode.NONE


def test_follower_fetch_before_flush_acknowledges_unsynced_records_kafka_10533() -> None:
    def fetches_before_fsync(on: Bugs) -> list[FetchRequest]:
        follower, actions = make_follower(2, 1, 1, bugs=on)
        records = (batch(0, 1, 3),)
        after = fetch_response(follower, actions, 200, FetchResponse(int(ErrorCode.NONE), 1, 1, 0, records=records))
        assert of_type(after, AppendBatches) and of_type(after, Flush)  # appended, fsync started
        return [s.message for s in sent(after, FetchRequest)]

    assert fetches_before_fsync(Bugs()) == []  # the next Fetch waits for the fsync
    early = fetches_before_fsync(bugs("raft-follower-fetch-before-flush"))
    assert [f.fetch_offset for f in early] == [3]  # acknowledges offsets [0, 3) before they are durable


def test_read_barrier_counts_late_fetches_confirms_a_read_with_fetches_sent_before_it() -> None:
    """A committed leader gets a read; then a Fetch at the log end it had already shipped (one that
    may have waited in its socket since before the read, as after SIGSTOP). The bug completes the
    read on it; the correct core waits for an acknowledgement of an entry appended after the read."""

    def completes_on_an_old_fetch(on: Bugs) -> bool:
        leader, _ = make_leader(1, (1, 2, 3), bugs=on)
        request(leader, LATE + 1, fetch(2, leader.epoch, 0, 0))
        end = leader.log_end_offset
        request(leader, LATE + 1, fetch(2, leader.epoch, end, leader.epoch))
        leader.handle(LATE + 2, ReadBarrier("read"))
        out = request(leader, LATE + 3, fetch(3, leader.epoch, end, leader.epoch))
        return bool(of_type(out, ReadBarrierCompleted))

    assert completes_on_an_old_fetch(bugs("raft-read-barrier-counts-late-fetches"))
    assert not completes_on_an_old_fetch(Bugs())


def test_vote_of_an_older_epoch_granted_moves_the_voter_back() -> None:
    """KIP-595 Vote Request Handling 2: an unattached voter of epoch 5 gets a VoteRequest of epoch 3."""

    def answer(on: Bugs) -> tuple[int, bool, int]:
        state = QuorumStateData(leader_id=NO_ID, leader_epoch=5, voted_id=NO_ID, current_voters=(1, 2, 3))
        voter = make_node(1, (1, 2, 3), quorum_state=state, bugs=on)
        response = one(request(voter, 100, VoteRequest(None, 3, 2, 0, 0)), Respond).message
        return response.error_code, response.vote_granted, voter.epoch

    assert answer(Bugs()) == (ErrorCode.FENCED_LEADER_EPOCH, False, 5)
    assert answer(bugs("raft-vote-older-epoch-granted")) == (ErrorCode.NONE, True, 3)


def test_vote_granted_twice_in_one_epoch() -> None:
    """KIP-595 Vote Request Handling 3: two candidates of epoch 1, equally up to date, ask one voter."""

    def second_granted(on: Bugs) -> tuple[bool, bool]:
        voter = make_node(1, (1, 2, 3), bugs=on)
        first = sent_vote_granted(request(voter, 100, VoteRequest(None, 1, 2, 0, 0)))
        return first, sent_vote_granted(request(voter, 110, VoteRequest(None, 1, 3, 0, 0)))

    assert second_granted(Bugs()) == (True, False)
    assert second_granted(bugs("raft-vote-granted-twice-in-epoch")) == (True, True)


def test_leader_ignores_the_last_fetched_epoch_kafka_1211() -> None:
    """The leader (epoch 4) holds epoch 1 at [0, 2) and epoch 3 at 2; a follower fetches at 3 with its
    last epoch 2: its entry at 2 is not the leader's."""

    def answer(on: Bugs) -> FetchResponse:
        node, _ = make_leader(1, (1, 2, 3), batches=chain((2, 1), (1, 3)), bugs=on)
        assert node.epoch == 4
        return one(request(node, LATE + 1, fetch(2, node.epoch, 3, 2)), Respond).message

    correct = answer(Bugs())
    assert correct.diverging_epoch == EpochEndOffset(1, 2) and not correct.records
    buggy = answer(bugs("raft-leader-ignores-last-fetched-epoch"))
    assert buggy.diverging_epoch is None and buggy.records[0].base_offset == 3  # laid on the divergent entry


def test_follower_truncates_to_the_leaders_epoch_end_kafka_6361() -> None:
    """The follower holds epoch 1 at [0, 2) and a deposed leader's epoch 2 at 2 and 3; the leader's
    epoch 1 ends at 3. The follower's own epoch 1 ends at 2: everything from 2 goes."""

    def truncated_to(on: Bugs) -> int:
        node, actions = make_follower(2, leader=1, epoch=3, batches=chain((2, 1), (1, 2), (1, 2)), bugs=on)
        diverging = FetchResponse(int(ErrorCode.NONE), 1, 3, 0, diverging_epoch=EpochEndOffset(1, 3))
        fetch_response(node, actions, 200, diverging)
        return node.log_end_offset

    assert truncated_to(Bugs()) == 2
    assert truncated_to(bugs("raft-follower-truncates-to-leader-epoch-end")) == 3  # keeps epoch 2 at offset 2


def test_describe_quorum_answered_by_a_non_leader() -> None:
    def answer(on: Bugs) -> tuple[int, int]:
        node, _ = make_follower(2, leader=1, epoch=5, bugs=on)
        response = one(request(node, 200, DescribeQuorumRequest()), Respond).message
        return response.error_code, response.leader_id

    assert answer(Bugs()) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 1)
    assert answer(bugs("raft-describe-quorum-answered-by-non-leader")) == (ErrorCode.NONE, 1)


def test_election_majority_off_by_one() -> None:
    """KIP-595 Vote Response Handling 2: of three voters, a candidate needs two votes, its own and one more."""

    def role_after_timeout(on: Bugs) -> Role:
        node = make_node(1, (1, 2, 3), bugs=on)
        node.handle(LATE, Tick())
        return node.role

    assert role_after_timeout(Bugs()) is Role.CANDIDATE  # waits for a grant
    assert role_after_timeout(bugs("raft-election-majority-off-by-one")) is Role.LEADER  # its own vote was enough


def test_begin_epoch_accepts_older_epoch_takes_a_voter_back_to_a_stale_leader() -> None:
    """A BeginQuorumEpoch of epoch 1 delivered late (the redeliver fault's stale copy) to a follower of
    epoch 3: refused with FENCED_LEADER_EPOCH, or, with the bug, followed (the epoch goes back)."""

    def after_stale_begin(on: Bugs) -> tuple[int, int, int]:
        follower, _ = make_follower(2, leader=3, epoch=3, bugs=on)
        response = one(request(follower, 200, BeginQuorumEpochRequest(None, 1, 1)), Respond).message
        return response.error_code, follower.epoch, follower.leader_id

    assert after_stale_begin(Bugs()) == (ErrorCode.FENCED_LEADER_EPOCH, 3, 3)
    assert after_stale_begin(bugs("raft-begin-epoch-accepts-older-epoch")) == (ErrorCode.NONE, 1, 1)


def test_vote_skips_log_up_to_date_check_elects_a_candidate_missing_entries() -> None:
    """Voter 1 holds entries of epoch 1 up to offset 3; candidate 2 asks for epoch 2 with an empty log."""

    def grants(on: Bugs) -> bool:
        voter = make_node(1, (1, 2, 3), batches=(batch(0, 1, 3),), bugs=on)
        return sent_vote_granted(request(voter, 100, VoteRequest(None, 2, 2, 0, 0)))

    assert not grants(Bugs())
    assert grants(bugs("raft-vote-skips-log-up-to-date-check"))
