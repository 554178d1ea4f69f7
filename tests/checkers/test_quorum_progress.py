"""quorum-progress (KIP-595 progress): a leader cut off from the voters resigns, and a node linked with a
healthy majority keeps up with the committed log. Both verdicts on hand-built histories, what the
fault model counts as linked, down or impaired, and the commit-times file."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from checkers.history import pair, read_events
from checkers.quorum_progress import (
    COMMITS_NAME,
    CommitTimes,
    CommitTimesError,
    Segment,
    check_from_args,
    check_quorum_progress,
    cut_from_majority,
    header_line,
    healthy_majority,
    point_line,
    read_commit_times,
    summarize,
)
from checkers.verdict import UNKNOWN
from tests.checkers.events import Events

VOTERS = ("c1", "c2", "c3")
IDS = {"c1": 1, "c2": 2, "c3": 3, "b1": 4, "b2": 5}
S = 1_000_000_000
CUT_C1 = {"c1": ["c2", "c3"], "c2": ["c1"], "c3": ["c1"]}  # c1 and the other controllers, both ways


def commits(*points: tuple[float, int]) -> CommitTimes:
    """Commit times: (seconds, end) points; F = R = 2 s."""
    c = CommitTimes(VOTERS, tuple(IDS), dict(IDS), 2000, 2000)
    for t, end in points:
        c.add(int(t * S), end)
    return c


def claim(e: Events, process: int, node: str, at_s: float, leader: str, epoch: int = 3) -> None:
    e.op(process, "quorum", at_s * 1000, at_s * 1000 + 5, value={"leader": IDS[leader], "epoch": epoch}, node=node)


def read(e: Events, process: int, node: str, at_s: float, offset: int) -> None:
    e.op(
        process, "read-broker", at_s * 1000, at_s * 1000 + 5, value={"metadata_offset": offset, "reads": []}, node=node
    )


def cut_leader(e: Events, start_s: float, end_s: float, grudge: dict[str, list[str]] | None = None) -> None:
    """The simulator's targeted cut of c1 from the other voters (brokers still reach it)."""
    value = {"kind": "buggify", "trigger": "leader-cut", "fault": "partition", "targets": ["c1"]}
    e.nemesis("start-buggify", start_s * 1000, {**value, "grudge": grudge or CUT_C1})
    e.nemesis("stop-buggify", end_s * 1000, {"kind": "buggify", "targets": ["c1"]})


# --- zombie-leader ----------------------------------------------------------------------------------------


def test_a_leader_that_still_says_it_leads_long_after_it_was_cut_off_is_a_zombie() -> None:
    e = Events()
    cut_leader(e, 10, 25)
    claim(e, 0, "c1", 1, "c1")  # before the cut: not judged
    claim(e, 1, "c1", 13, "c1")  # 3 s in: within 2 x F + R = 6 s
    claim(e, 2, "c1", 17, "c1")  # 7 s in: it should have resigned
    claim(e, 3, "c2", 17, "c2")  # the new leader, in the majority: fine
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["zombie-leader"]
    assert verdict.details["leadership_claims"] == 4 and verdict.details["claims_judged"] == 2
    (example,) = verdict.details["anomalies"]["zombie-leader"]
    assert example["node"] == "c1" and example["time_s"] == 17 and example["cut_off_since_s"] == 10
    assert "zombie-leader: c1 said it leads" in "\n".join(summarize(verdict))


def test_a_leader_that_resigned_in_time_is_valid() -> None:
    e = Events()
    cut_leader(e, 10, 25)
    claim(e, 1, "c1", 13, "c1")
    claim(e, 2, "c1", 17, "c2")  # after resigning it names the new leader: not a claim of its own
    claim(e, 3, "c1", 26, "c1")  # healed, led again
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["claims_judged"] == 1


def test_a_describe_quorum_answer_that_names_no_leader_is_flagged() -> None:
    """KIP-595: only the leader answers DescribeQuorum (a follower may hand back the leader's answer);
    an answer without an error that names nobody came from a node in an election. No fault needed."""
    e = Events()
    claim(e, 0, "c1", 1, "c1")
    claim(e, 1, "c3", 2, "c2")  # the leader's answer, forwarded by a follower
    e.op(2, "quorum", 3000, 3005, kind="fail", node="c3")  # a node in an election refusing: right
    assert check_quorum_progress(e.history(), commits((0, 10))).valid is True
    e.op(3, "quorum", 4000, 4005, value={"leader": -1, "epoch": 4}, node="c3")  # answering from its own view
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["leaderless-answer"]
    assert verdict.details["quorum_answers"] == 3
    (example,) = verdict.details["anomalies"]["leaderless-answer"]
    assert example["node"] == "c3" and example["epoch"] == 4
    assert "leaderless-answer: c3 answered DescribeQuorum" in "\n".join(summarize(verdict))


def test_a_cut_off_leader_whose_clock_was_skewed_is_not_judged() -> None:
    """Its check-quorum timer runs on its own clock: a slow or stopped clock may keep it legitimately."""
    e = Events()
    cut_leader(e, 10, 30)
    e.nemesis("start-clock", 11_000, {"kind": "clock", "mode": "rate", "rate": 0.5, "targets": ["c1"]})
    e.nemesis("stop-clock", 14_000, {"kind": "clock", "targets": ["c1"]})
    claim(e, 1, "c1", 18, "c1")  # 4 s after the clock came back: still within the allowance
    claim(e, 2, "c1", 21, "c1")  # 7 s after: a zombie
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["zombie-leader"]] == [21]


def test_a_silent_cut_off_controller_is_unanswered_unless_it_was_down() -> None:
    """A non-leader refuses at once; a crashed one answers nothing, and its silence proves nothing."""
    e = Events()
    cut_leader(e, 10, 40)
    e.op(1, "read", 18_000, 20_000, kind="info", node="c1")  # up, cut off 8 s: should have refused
    e.nemesis("start-kill", 24_000, {"kind": "kill", "targets": ["c1"]})
    e.nemesis("stop-kill", 30_000, {"kind": "kill", "targets": ["c1"], "restarted": ["c1"]})
    e.op(2, "read", 25_000, 27_000, kind="info", node="c1")  # down the whole time
    e.op(3, "read", 23_500, 25_500, kind="info", node="c1")  # went down while it had the request
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is False
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [18]
    assert verdict.details["silences_judged"] == 1  # the two the crash explains are not judged


def test_a_paused_controller_answers_nothing_and_is_not_judged() -> None:
    """A pause, like a crash, freezes the process: a request it held when the pause began may die with it."""
    e = Events()
    cut_leader(e, 10, 40)
    e.op(1, "write", 18_000, 23_000, kind="info", node="c1")  # up and running the whole time: judged
    e.nemesis("start-pause", 26_000, {"kind": "pause", "targets": ["c1"]})
    e.nemesis("stop-pause", 30_000, {"kind": "pause", "targets": ["c1"]})
    e.op(2, "write", 24_000, 29_000, kind="info", node="c1")  # paused while it held the request
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [18]
    assert verdict.details["silences_judged"] == 1


def test_a_restart_starts_a_cut_off_voters_clock_again() -> None:
    """Issue 24 (isr-changes 148 and 11 more): a killed process starts its timers over, so its time cut
    off counts from the restart, not from before the kill."""
    e = Events()
    cut_leader(e, 10, 40)
    e.nemesis("start-kill", 12_000, {"kind": "kill", "targets": ["c1"]})
    e.nemesis("stop-kill", 20_000, {"kind": "kill", "targets": ["c1"], "restarted": ["c1"]})
    e.op(1, "quorum", 20_500, 22_500, kind="info", node="c1")  # 0.5 s after its restart: may still forward
    claim(e, 2, "c1", 23, "c1")  # 3 s after its restart: within the allowance
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["silences_judged"] == 1 and verdict.details["claims_judged"] == 1
    e.op(3, "quorum", 26_000, 28_000, kind="info", node="c1")  # 6 s after: it should have refused
    claim(e, 4, "c1", 27, "c1")  # and it should have resigned
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [26]
    assert [a["time_s"] for a in verdict.details["anomalies"]["zombie-leader"]] == [27]


def test_a_silence_counts_until_the_client_gave_up_not_r_after_it_asked() -> None:
    """Issue 24 (config-register 78, 169, and seed 3): a read waits 5 s; the client blamed the node it
    last sent to, which was paused before the client gave up. The `info`'s own time ends the request."""
    e = Events()
    cut_leader(e, 10, 40)
    e.op(1, "read", 17_000, 22_000, kind="info", node="c1")  # paused 3 s in: the pause may explain it
    e.nemesis("start-pause", 20_000, {"kind": "pause", "targets": ["c1"]})
    e.nemesis("stop-pause", 21_000, {"kind": "pause", "targets": ["c1"]})
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["silences_judged"] == 0
    e.op(2, "read", 30_000, 35_000, kind="info", node="c1")  # up the whole 5 s: judged, and late
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [30]


def test_a_corrupt_start_kills_and_restarts_its_target_and_its_clock_starts_again() -> None:
    """Soak seed 398: a `corrupt` start kills its target, damages its files and starts it on them. A
    request the cut-off voter held then was reset by that kill: no silence. Until the stop, the node
    may still refuse its damaged files and stop, so nothing it leaves unanswered is judged; the stop
    kills and restarts it again, and its time cut off counts from there."""
    e = Events()
    cut_leader(e, 8, 40)
    e.op(1, "txn", 14_667, 15_001, kind="info", node="c1")  # cut off 6.7 s; reset when the kill came
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [14.667]  # no fault: judged
    damage = {"c1": {"node": "c1", "mode": "truncate-snapshot"}}
    e.nemesis("start-corrupt", 15_000, {"kind": "corrupt", "targets": ["c1"], "damage": damage})
    e.nemesis("stop-corrupt", 20_000, {"kind": "corrupt", "targets": ["c1"], "restarted": ["c1"]})
    e.op(2, "txn", 17_000, 19_000, kind="info", node="c1")  # under its corruption: may have stopped
    e.op(3, "txn", 23_000, 25_000, kind="info", node="c1")  # 3 s after the stop's restart: in time
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["silences_judged"] == 1
    e.op(4, "txn", 27_000, 29_000, kind="info", node="c1")  # 7 s after that restart: should have refused
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [27]


def test_a_failing_disk_may_stop_a_node_unrecorded_so_its_silence_is_not_judged() -> None:
    """A failed fsync or write fail-stops the node at a moment the history does not show; the stop of
    the fault starts again the nodes that stopped (`restarted`), and their time cut off with them."""
    e = Events()
    cut_leader(e, 8, 40)
    e.nemesis("start-disk_fail", 12_000, {"kind": "disk_fail", "targets": ["c1"], "ops": "fsync"})
    e.nemesis("stop-disk_fail", 20_000, {"kind": "disk_fail", "targets": ["c1"], "restarted": ["c1"]})
    e.op(1, "write", 16_000, 18_000, kind="info", node="c1")  # cut off 8 s, its disk failing: not judged
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True and verdict.details["silences_judged"] == 0, verdict.details
    e.op(2, "write", 27_000, 29_000, kind="info", node="c1")  # 7 s after its restart: judged, and late
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [27]


def majority_killed_then_back(e: Events, start_s: float, end_s: float) -> None:
    """c2 and c3 killed and restarted: c1, up, reaches no majority while they are down."""
    e.nemesis("start-kill", start_s * 1000, {"kind": "kill", "targets": ["c2", "c3"]})
    e.nemesis("stop-kill", end_s * 1000, {"kind": "kill", "targets": ["c2", "c3"], "restarted": ["c2", "c3"]})


def test_a_voter_that_rejoined_a_majority_while_asked_is_not_judged_by_its_old_stretch() -> None:
    """Soak seed 280: c1, cut off since 10 s (then alone among the live voters), refused a read at once
    on each attempt; c2 and c3 came back at 23 s and elected c1, which was cut off again at 24 s; the
    client's last attempt reached it 0.1 s later and was held until the client gave up at 24.5 s. The
    invoke 9.5 s into the first stretch says nothing about the second."""
    e = Events()
    cut_leader(e, 10, 18.001)
    majority_killed_then_back(e, 18, 23)
    cut_leader(e, 24, 27)
    e.op(1, "read", 19_500, 24_500, kind="info", node="c1")
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["silences_judged"] == 0


def test_a_voter_cut_off_for_the_whole_request_is_still_judged_across_the_others_restart() -> None:
    """The other verdict: the same stretch, but the client gave up before c2 and c3 came back, and a
    later read fell wholly inside the new stretch's allowance: the first is late, the second is not."""
    e = Events()
    cut_leader(e, 10, 18.001)
    majority_killed_then_back(e, 18, 23)
    cut_leader(e, 24, 40)
    e.op(1, "read", 17_500, 22_500, kind="info", node="c1")  # 7.5 s into the stretch, which lasts past 22.5 s
    e.op(2, "read", 25_000, 28_000, kind="info", node="c1")  # 1 s into the new stretch: within the allowance
    e.op(3, "read", 30_000, 35_000, kind="info", node="c1")  # 6 s into it: should have refused
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["unanswered"]] == [17.5, 30]
    assert [a["cut_off_since_s"] for a in verdict.details["anomalies"]["unanswered"]] == [10, 24]
    assert verdict.details["silences_judged"] == 3


def test_a_pause_stops_a_cut_off_voters_clock_without_starting_it_again() -> None:
    """A frozen process does nothing, and its timers come due the moment it thaws: the time it was
    paused does not count, the time before it does."""
    e = Events()
    cut_leader(e, 10, 40)
    e.nemesis("start-pause", 13_000, {"kind": "pause", "targets": ["c1"]})
    e.nemesis("stop-pause", 20_000, {"kind": "pause", "targets": ["c1"]})
    claim(e, 1, "c1", 21, "c1")  # 3 s before the pause + 1 s after: 4 s of its time
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True, verdict.details
    assert verdict.details["claims_judged"] == 1
    claim(e, 2, "c1", 23, "c1")  # 3 + 3 = 6 s of its time: it should have resigned
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    (zombie,) = verdict.details["anomalies"]["zombie-leader"]
    assert zombie["time_s"] == 23 and zombie["cut_off_since_s"] == 17  # 10, moved on by the 7 s paused


def test_a_combined_voter_may_hold_a_forward_it_cannot_deliver() -> None:
    """A write to a combined node's broker side is forwarded (KIP-590): cut off from the active
    controller, it may rightly wait until it times out. A zombie claim is still judged."""
    e = Events()
    cut_leader(e, 10, 40)
    e.op(1, "write", 18_000, 23_000, kind="info", node="c1")
    claim(e, 2, "c1", 21, "c1")
    combined = commits((0, 10))
    combined.brokers = frozenset(VOTERS)
    verdict = check_quorum_progress(e.history(), combined)
    assert "unanswered" not in verdict.details["anomalies"]
    assert [a["time_s"] for a in verdict.details["anomalies"]["zombie-leader"]] == [21]
    assert verdict.details["silences_judged"] == 0
    assert check_quorum_progress(e.history(), commits((0, 10))).details["anomalies"]["unanswered"]


def test_a_one_way_link_counts_as_support() -> None:
    """A leader that still hears a follower's Fetches (its answers lost) may keep leading."""
    e = Events()
    cut_leader(e, 10, 30, grudge={"c1": ["c3"], "c2": ["c1"], "c3": ["c1"]})  # c1 hears c2; c2 does not hear c1
    claim(e, 1, "c1", 20, "c1")
    verdict = check_quorum_progress(e.history(), commits((0, 10)))
    assert verdict.valid is True and verdict.details["claims_judged"] == 0


# --- stale-image ----------------------------------------------------------------------------------------


def broker_cut_with_reads(*reads: tuple[str, float, int]) -> Any:
    """b1 cut off from every controller 10 s -> 20 s; the controllers commit offsets 20..24 at 13.7 s;
    brokers read. Back at 20 s, b1 is judged from 20 + 2 x (F + R) = 28 s."""
    e = Events()
    grudge = {"b1": ["c1", "c2", "c3"], **{c: ["b1"] for c in VOTERS}}
    e.nemesis("start-partition", 10_000, {"kind": "partition", "mode": "x", "targets": ["b1"], "grudge": grudge})
    e.nemesis("stop-partition", 20_000, {"kind": "partition", "targets": ["b1"]})
    for i, (node, at_s, offset) in enumerate(reads):
        read(e, i, node, at_s, offset)
    return check_quorum_progress(e.history(), commits((0, 20), (13.7, 25)))


def test_a_broker_that_does_not_catch_up_once_linked_again_is_stale() -> None:
    verdict = broker_cut_with_reads(
        ("b1", 5, 19),  # before the cut (within 2 x (F + R) of the start): not judged
        ("b1", 15, 19),  # cut off: may lag
        ("b1", 25, 19),  # linked again 5 s ago: not judged before 28 s
        ("b1", 29, 19),  # stale: offsets below 25 committed at 13.7 s, 5 s past the 4 s it had from 24 s
        ("b2", 29, 24),  # caught up
    )
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["stale-image"]
    (example,) = verdict.details["anomalies"]["stale-image"]
    assert example["node"] == "b1" and example["time_s"] == 29 and example["offset"] == 19
    assert example["voters"] == ["c1", "c2", "c3"] and example["linked_since_s"] == 20
    assert example["first_missing_committed_s"] == pytest.approx(13.7)
    assert verdict.details["reads_judged"] == 2 and verdict.details["max_lag_ms"] == pytest.approx(5000)
    assert "stale-image: b1 answered from offset 19" in "\n".join(summarize(verdict))


def test_brokers_that_caught_up_are_valid() -> None:
    verdict = broker_cut_with_reads(("b1", 25, 19), ("b1", 29, 24), ("b2", 29, 24))
    assert verdict.valid is True, verdict.details
    assert verdict.details["reads_judged"] == 2


def test_reads_while_a_live_voter_is_cut_off_from_the_others_are_not_judged() -> None:
    """A cut-off voter may be a candidate whose inflated epoch an observer adopts (KIP-595's disruptive
    voters): the observer's lag then says nothing about the leader it should follow."""
    e = Events()
    cut_leader(e, 10, 40)
    read(e, 0, "b1", 35, 19)
    verdict = check_quorum_progress(e.history(), commits((0, 20), (13.7, 25)))
    assert verdict.valid is True and verdict.details["reads_judged"] == 0


def test_a_broker_cut_off_from_the_majority_may_lag() -> None:
    e = Events()
    grudge = {"b1": ["c2", "c3"], "c2": ["b1"], "c3": ["b1"]}  # b1 reaches only the old leader
    e.nemesis("start-partition", 10_000, {"kind": "partition", "mode": "x", "targets": ["b1"], "grudge": grudge})
    e.nemesis("stop-partition", 30_000, {"kind": "partition", "targets": ["b1"]})
    read(e, 0, "b1", 25, 19)
    verdict = check_quorum_progress(e.history(), commits((0, 20), (13.7, 25)))
    assert verdict.valid is True and verdict.details["reads_judged"] == 0


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("pause", {"kind": "pause", "targets": ["c2"]}),  # a majority member impaired: no healthy majority
        ("clock", {"kind": "clock", "mode": "bump", "delta_ms": 100, "targets": ["b1"]}),  # the reader
        ("packet", {"kind": "packet", "targets": ["c3"]}),
        ("disk_stall", {"kind": "disk_stall", "targets": ["c2"]}),
        ("meteor", {"kind": "meteor"}),  # unknown, no targets: everything impaired
    ],
)
def test_faults_that_impair_the_reader_or_the_majority_make_reads_unjudged(kind: str, value: dict) -> None:
    e = Events()
    e.nemesis(f"start-{kind}", 10_000, value)
    e.nemesis(f"stop-{kind}", 30_000, {"kind": kind})
    read(e, 0, "b1", 25, 19)
    verdict = check_quorum_progress(e.history(), commits((0, 20), (13.7, 25)))
    assert verdict.valid is True and verdict.details["reads_judged"] == 0


def test_a_dead_old_leader_does_not_hold_the_others_back_but_a_restart_of_the_reader_does() -> None:
    e = Events()
    e.nemesis("start-kill", 10_000, {"kind": "kill", "targets": ["c1"]})  # c1 down: M = c2, c3 at once
    e.nemesis("stop-kill", 30_000, {"kind": "kill", "targets": ["c1"]})
    read(e, 0, "b1", 19, 19)  # 9 s after (judged from 10 + 2 x (F + R) = 18 s; no live outsider), stale
    e.nemesis("start-kill", 20_000, {"kind": "kill", "targets": ["b2"]})
    e.nemesis("stop-kill", 21_000, {"kind": "kill", "targets": ["b2"]})
    read(e, 1, "b2", 23, 19)  # restarted 2 s ago: not judged yet
    verdict = check_quorum_progress(e.history(), commits((0, 20), (10.5, 25)))
    assert [a["node"] for a in verdict.details["anomalies"]["stale-image"]] == ["b1"]


def test_a_failed_start_still_counts_as_a_moment_that_touched_every_node() -> None:
    """A `corrupt` start that found nothing to damage has killed and restarted its target first."""
    events = Events()
    read(events, 0, "c3", 9.1, 19)  # c3 restarted at 9 s and still loading: not judged
    read(events, 1, "c3", 18, 19)  # 9 s later: it had to catch up
    raw = events.raw()
    raw += [
        {"index": 90, "time": 9 * S, "process": "nemesis", "type": "invoke", "f": "start-corrupt", "value": None},
        {"index": 91, "time": 9 * S, "process": "nemesis", "type": "fail", "f": "start-corrupt", "value": {}},
    ]
    history = pair(read_events(sorted(raw, key=lambda ev: ev["time"])))
    verdict = check_quorum_progress(history, commits((0, 20), (2.4, 25)))
    assert [a["time_s"] for a in verdict.details["anomalies"]["stale-image"]] == [18]


def test_played_broker_reads_count_as_image_reads() -> None:
    e = Events()
    e.op(0, "metadata", 15_000, 15_005, invoke={"node": "b1"}, value={"offset": 19, "brokers": []}, node="b1")
    e.op(1, "describe-cluster", 15_000, 15_005, invoke={"node": "b2"}, value={"offset": 24}, node="b2")
    e.op(2, "barrier", 15_000, 15_005, value={"offset": 3}, node="c1")  # linearizable, not an image read
    verdict = check_quorum_progress(e.history(), commits((0, 20), (2.0, 25)))
    assert verdict.details["image_reads"] == 2
    assert [a["node"] for a in verdict.details["anomalies"]["stale-image"]] == ["b1"]


# --- the fault model --------------------------------------------------------------------------------------


def segment(cut: dict[str, set[str]] | None = None, down=(), impaired=()) -> Segment:
    return Segment(0, 1, {k: frozenset(v) for k, v in (cut or {}).items()}, frozenset(down), frozenset(impaired))


def test_the_healthy_majority_is_the_only_set_that_can_elect() -> None:
    assert healthy_majority(VOTERS, segment()) == frozenset(VOTERS)
    cut = {"c1": {"c2", "c3"}, "c2": {"c1"}, "c3": {"c1"}}
    assert healthy_majority(VOTERS, segment(cut)) == frozenset({"c2", "c3"})
    assert healthy_majority(VOTERS, segment({"c1": {"c2"}})) is None  # c1 half-linked with c2: ambiguous
    ring = {"c1": {"c3"}, "c3": {"c1"}}  # c1-c2-c3 a path: no majority with the third cut off from it
    assert healthy_majority(VOTERS, segment(ring)) is None
    assert healthy_majority(VOTERS, segment(down=["c3"])) == frozenset({"c1", "c2"})
    assert healthy_majority(VOTERS, segment(impaired=["c3"])) is None
    five = ("c1", "c2", "c3", "c4", "c5")
    split = {"c4": {"c1", "c2", "c3"}, "c5": {"c1", "c2", "c3"}, **{c: {"c4", "c5"} for c in ("c1", "c2", "c3")}}
    assert healthy_majority(five, segment(split)) == frozenset({"c1", "c2", "c3"})


def test_cut_from_a_majority_counts_links_either_way() -> None:
    assert cut_from_majority("c1", VOTERS, segment({"c1": {"c2", "c3"}, "c2": {"c1"}, "c3": {"c1"}})) is True
    assert cut_from_majority("c1", VOTERS, segment({"c1": {"c3"}, "c3": {"c1"}, "c2": {"c1"}})) is False
    assert cut_from_majority("c1", VOTERS, segment(down=["c2", "c3"])) is True
    assert cut_from_majority("c1", VOTERS, segment(down=["c1"])) is None  # down: its timers start over
    assert cut_from_majority("c1", VOTERS, segment(impaired=["c1"])) is False  # lossy links: its timer still runs
    untimed = Segment(0, 1, {}, frozenset(), frozenset({"c1"}), frozenset({"c1"}))  # paused or clock-skewed
    assert cut_from_majority("c1", VOTERS, untimed) is None


# --- the commit-times file ---------------------------------------------------------------------------------


def write(path: Path, *lines: Any) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_commit_times_round_trip_and_answer_questions(tmp_path: Path) -> None:
    header = header_line(VOTERS, IDS, 2000, 1500, brokers=("b1", "b2"))
    path = write(tmp_path / COMMITS_NAME, header, point_line(100, 5), point_line(200, 4), point_line(300, 9), '{"ti')
    c = read_commit_times(path)  # the torn last line is dropped; ends never go back
    assert c.voters == VOTERS and c.ids == IDS and c.request_timeout_ms == 1500
    assert c.brokers == {"b1", "b2"}
    assert [c.end_at(t) for t in (50, 100, 250, 1000)] == [0, 5, 5, 9]
    assert [c.committed_at(o) for o in (0, 4, 5, 8, 9)] == [100, 100, 300, 300, None]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ((), "empty"),
        (({"voters": []},), ":1: the header needs"),
        (({"voters": ["c1"], "fetch_timeout_ms": 0, "request_timeout_ms": 1},), ":1: the header needs"),
        (({**header_line(VOTERS, IDS, 1, 1), "brokers": "b1"},), ":1: the header needs"),
        ((header_line(VOTERS, IDS, 1, 1), "nope", point_line(1, 1)), ":2: not valid JSON"),
        ((header_line(VOTERS, IDS, 1, 1), {"time": "1", "end": 2}), ":2: expected"),
        ((header_line(VOTERS, IDS, 1, 1), point_line(5, 1), point_line(4, 2)), ":3: commit times go back"),
    ],
)
def test_a_bad_commit_times_file_is_one_line_naming_the_place(tmp_path: Path, lines, message) -> None:
    path = write(tmp_path / COMMITS_NAME, *lines)
    with pytest.raises(CommitTimesError, match=message) as info:
        read_commit_times(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_without_commit_times_the_verdict_is_unknown(tmp_path: Path) -> None:
    args = SimpleNamespace(history=tmp_path / "history.jsonl", dumps=None, commit_times=None, catch_up_ms=None)
    verdict = check_from_args(Events().history(), args)
    assert verdict.valid == UNKNOWN and "no commit times" in verdict.details["reason"]
    write(tmp_path / COMMITS_NAME, header_line(VOTERS, IDS, 2000, 2000), point_line(0, 3))
    assert check_from_args(Events().history(), args).valid is True
