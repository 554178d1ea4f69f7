"""Targeted faults (node.sim.buggify): each strikes at its moment, only with the faults the run allows,
and they catch cores with a bug in exactly that window far more often than random fault timing does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from node.protocol.messages import VoteRequest
from node.raft import actions as act
from node.raft.events import RequestReceived, ResponseReceived, Tick
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.sim.buggify import LAYER, TRIGGERS, Buggify, BuggifyConfig
from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import figure8_by_buggify


@dataclass
class Moment:
    """What a node had just done when a targeted fault struck."""

    node: int
    event: Any
    actions: list[Any]
    role: Role
    log_end: int
    flushed_end: int
    trace_index: int  # the trace line of that event


def strike(trigger: str, allowed: tuple[str, ...], seed: int = 3) -> tuple[Simulation, list[tuple[Moment, dict]]]:
    """A 3-voter simulation with a client where only `trigger` fires (always, once quiet)."""
    sim = Simulation(SimConfig(seed=seed, voters=3, trace_path=None), WorkloadConfig(interval_ms=20))
    last: dict[int, Moment] = {}

    def watch(host: Any, event: Any, actions: list[Any]) -> None:
        raft = host.raft
        last[host.node_id] = Moment(
            host.node_id, event, list(actions), raft.role, raft.log_end_offset, raft.flushed_end_offset,
            sim.trace.count - 1,
        )  # fmt: skip

    sim.action_hooks.append(watch)  # before buggify's hook: sees the moment it strikes at
    hits: list[tuple[Moment, dict]] = []
    config = BuggifyConfig(probability={trigger: 1.0}, quiet_ms=1_000)
    buggify = Buggify(sim, allowed, config, listener=lambda what, value: what == "start" and hits.append(
        (last[int(value["targets"][0])], value)))  # fmt: skip
    buggify.enable()
    sim.start()
    sim.start_workload()
    sim.run_until(20_000)
    assert sim.violation is None, sim.violation
    assert hits, f"{trigger} never fired"
    return sim, hits


def test_vote_granted_crashes_the_voter_right_after_it_granted():
    sim, hits = strike("vote-granted", ("kill",))
    for moment, value in hits:
        assert isinstance(moment.event, RequestReceived) and isinstance(moment.event.message, VoteRequest)
        assert not moment.event.message.pre_vote, "a pre-vote grant persists nothing: no moment to strike"
        responses = [a.message for a in moment.actions if isinstance(a, act.Respond)]
        assert responses and responses[0].vote_granted and moment.role is Role.VOTED
        assert any(isinstance(a, act.PersistQuorumState) for a in moment.actions)
        assert value["fault"] == "kill" and 1 <= value["restart_after_ms"] <= 300
    assert sim.stats.faults["buggify"] == len(hits)


def test_candidate_restarts_a_node_while_it_is_a_candidate():
    _sim, hits = strike("candidate", ("kill",))
    for moment, value in hits:
        # On a timeout, or (KIP-996) on the pre-vote grant that makes a majority.
        assert moment.role is Role.CANDIDATE and isinstance(moment.event, Tick | ResponseReceived)
        assert any(isinstance(a, act.LeaderChanged) for a in moment.actions)
        assert value["fault"] == "kill"


def test_leader_append_is_a_power_loss_before_the_fsync_completed():
    _sim, hits = strike("leader-append", ("kill", "lose_unsynced"))
    for moment, value in hits:
        assert moment.role is Role.LEADER and any(isinstance(a, act.AppendBatches) for a in moment.actions)
        assert moment.log_end > moment.flushed_end  # written, not yet durable
        assert value["fault"] == "lose_unsynced"
    _sim, hits = strike("leader-append", ("kill",))
    assert {value["fault"] for _, value in hits} == {"kill"}  # without lose_unsynced: a kill -9


def first_partition(sim: Simulation, trigger: str, limit_ms: int) -> tuple[dict, dict, list[tuple[int, int, int]]]:
    """Run `sim` with only `trigger` on (partition faults) until its first firing has ended: (start,
    stop, every delivery as (time, source, destination))."""
    heard: list[tuple[int, int, int]] = []
    sim.on_delivery = lambda src, dst, _m: heard.append((sim.now, src, dst))
    fired: list[dict] = []
    config = BuggifyConfig(probability={trigger: 1.0})
    buggify = Buggify(sim, ("partition",), config, listener=lambda w, v: fired.append({**v, "at": sim.now, "what": w}))
    buggify.enable()
    sim.start()
    sim.run_until_true(lambda: len(fired) >= 2, limit_ms)
    return fired[0], fired[1], heard


def test_elected_isolates_the_new_leader_until_the_heal():
    sim = Simulation(SimConfig(seed=4, voters=3))
    start, stop, heard = first_partition(sim, "elected", 30_000)
    assert start["what"] == "start" and stop["what"] == "stop" and start["trigger"] == "elected"
    leader = int(start["targets"][0])
    assert stop["at"] - start["at"] == start["heal_after_ms"]
    inside = [(t, s, d) for t, s, d in heard if start["at"] < t < stop["at"]]
    assert inside and not [x for x in inside if leader in x[1:]]  # it heard nothing and was not heard
    assert sim.network.layer(LAYER) is None  # healed


def test_leader_cut_cuts_a_leader_off_from_the_voters_but_not_from_the_observers():
    """KAFKA-15489's partial partition: the other voters elect a new leader; observers still reach the old."""
    # its probability is per second: 1.0 makes it certain once a Fetch has been answered
    sim = Simulation(SimConfig(seed=4, voters=3, observers=2))
    start, stop, heard = first_partition(sim, "leader-cut", 60_000)
    assert start["trigger"] == "leader-cut" and start["fault"] == "partition" and stop["what"] == "stop"
    leader, voters, observers = int(start["targets"][0]), {1, 2, 3}, {4, 5}
    others = sorted(voters - {leader})
    assert start["grudge"] == {str(leader): [str(v) for v in others], **{str(v): [str(leader)] for v in others}}
    assert 6_000 <= start["heal_after_ms"] <= 14_000 and stop["at"] - start["at"] == start["heal_after_ms"]
    inside = [(s, d) for t, s, d in heard if start["at"] < t < stop["at"]]
    assert not [(s, d) for s, d in inside if leader in (s, d) and {s, d} <= voters]  # cut from the voters
    assert any(leader in (s, d) and {s, d} & observers for s, d in inside)  # the observers still reach it
    assert sim.network.layer(LAYER) is None


def test_leader_cut_draws_from_its_own_rng_so_the_other_triggers_fire_where_they_did(tmp_path):
    """A leader-cut that never fires leaves every other targeted fault exactly where it was."""

    def trace(probability: float) -> bytes:
        path = tmp_path / f"trace-{probability}.jsonl"
        config = BuggifyConfig(probability={**BuggifyConfig().probability, "leader-cut": probability})
        run(
            RunConfig(
                sim=SimConfig(seed=6, trace_path=str(path)),
                faults=FaultConfig(kinds=("partition", "kill"), buggify_config=config),
                duration_ms=20_000,
            )
        )
        return path.read_bytes()

    without, never = trace(0.0), trace(1e-12)
    assert b'"buggify"' in without and without == never


def test_established_cuts_a_leader_that_committed_in_its_epoch_off_from_the_other_voters_only():
    sim, hits = strike("established", ("partition",))
    epochs = set()
    for moment, value in hits:
        assert moment.role is Role.LEADER and value["fault"] == "partition"
        assert any(type(a) is act.HighWatermarkAdvanced for a in moment.actions)  # it just committed
        leader = int(value["targets"][0])
        assert sorted(int(n) for n in value["from"]) == [n for n in sorted(sim.config.voter_ids) if n != leader]
        assert 3_000 <= value["heal_after_ms"] <= 6_000  # past its check-quorum timeout
        epochs.add((leader, moment.trace_index))
    assert len(epochs) == len(hits)


def test_triggers_need_the_faults_the_run_allows():
    sim = Simulation(SimConfig(seed=1))
    assert set(Buggify(sim, ("pause", "clock")).triggers) == set()
    assert set(Buggify(sim, ("partition",)).triggers) == {"elected", "elected-behind", "established", "leader-cut"}
    assert set(Buggify(sim, ("kill",)).triggers) == set(TRIGGERS) - {
        "elected",
        "elected-behind",
        "established",
        "leader-cut",
    }
    with pytest.raises(ValueError, match="unknown buggify trigger"):
        BuggifyConfig(probability={"meteor": 0.5})


def test_the_trace_has_the_firing_right_after_the_event_it_struck_at(tmp_path):
    path = tmp_path / "trace.jsonl"
    result = run(
        RunConfig(
            sim=SimConfig(seed=2, trace_path=str(path)),
            faults=FaultConfig(kinds=("partition", "kill", "lose_unsynced")),
            duration_ms=30_000,
        )
    )
    assert result.valid and sum(result.summary["buggify"].values()) > 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    fired = [i for i, line in enumerate(lines) if line["ev"] == "buggify"]
    assert len(fired) == sum(result.summary["buggify"].values())
    for i in fired:
        node = int(lines[i]["s"].split(" node ")[1].split()[0].rstrip(","))
        j = i - 1
        while lines[j]["node"] == "nemesis" and lines[j]["ev"] == "heal" and "elected-behind" in lines[i]["s"]:
            j -= 1  # elected-behind first ends the targeted fault in progress
        event = lines[j]
        assert event["node"] == node and event["t"] == lines[i]["t"], (event, lines[i])  # the very moment
        after = lines[i + 1]
        partition = "isolate" in lines[i]["s"] or "cut node" in lines[i]["s"]
        assert partition or (after["node"] == "nemesis" and after["ev"] == "kill")


# --- planted bugs in the windows the targeted faults aim at ---------------------------------------------


class LazyVoteNode(RaftNode):
    """Grants a vote before its quorum-state is stored: the write goes out with its next event."""

    def handle(self, now: int, event: Any) -> list[Any]:
        held, self._held = getattr(self, "_held", []), []
        out = super().handle(now, event)
        if isinstance(event, RequestReceived) and isinstance(event.message, VoteRequest):
            self._held = [a for a in out if isinstance(a, act.PersistQuorumState)]
            out = [a for a in out if not isinstance(a, act.PersistQuorumState)]
        return held + out


class LazyCandidateNode(RaftNode):
    """Asks for votes before its new epoch is stored: the write goes out with its next event."""

    def handle(self, now: int, event: Any) -> list[Any]:
        held, self._held = getattr(self, "_held", []), []
        before = (self.role, self.epoch)
        out = super().handle(now, event)
        # It stands on a timeout, or (KIP-996) on the pre-vote that makes a majority.
        if self.role is Role.CANDIDATE and before != (Role.CANDIDATE, self.epoch):
            self._held = [a for a in out if isinstance(a, act.PersistQuorumState)]
            out = [a for a in out if not isinstance(a, act.PersistQuorumState)]
        return held + out


def catches(factory: type, seeds: range, buggify: bool) -> int:
    caught = 0
    for seed in seeds:
        result = run(
            RunConfig(
                sim=SimConfig(seed=seed, node_factory=factory),
                workload=WorkloadConfig(interval_ms=100),
                faults=FaultConfig(kinds=("partition", "kill"), buggify=buggify),
                duration_ms=30_000,
                quiet_max_ms=30_000,
            )
        )
        if result.violation is not None:
            message = result.violation.message
            assert "epoch went back" in message or "election safety" in message, result.violation
            caught += 1
    return caught


def test_a_bug_in_the_window_is_caught_thanks_to_the_targeted_fault():
    seeds = range(30)  # with KIP-996 a voter stands only when the leader is really gone: fewer candidacies
    with_targeted, random_only = catches(LazyCandidateNode, seeds, True), catches(LazyCandidateNode, seeds, False)
    assert with_targeted >= 8, (with_targeted, random_only)
    assert with_targeted >= random_only + 5, (with_targeted, random_only)


def test_a_vote_granted_before_it_is_stored_is_caught_at_the_election_it_decides():
    """The durable-votes invariant (votes are durable when they elect a leader) needs no crash to see LazyVoteNode:
    every run fails, targeted faults or not (before it, only a crash in the window showed it)."""
    assert catches(LazyVoteNode, range(5), False) == 5


def test_the_correct_core_survives_the_same_runs():
    assert catches(RaftNode, range(10), True) == 0


def test_elected_behind_isolates_a_leader_lacking_uncommitted_entries_and_stalls_their_holders():
    """The old leader holds X (uncommitted, cut off); the next leader lacks it: isolated at once for
    3-8 s, the old leader's fsyncs held back as long, then both healed; the correct core commits X only
    together with an entry of its new epoch and no invariant fails."""
    out = figure8_by_buggify()
    sim, start, stop = out.sim, out.fired[0], out.fired[1]
    assert start["what"] == "start" and stop["what"] == "stop", out.fired
    names = [str(out.behind_leader), str(out.old_leader)]
    assert start["targets"] == names and start["stalled"] == [str(out.old_leader)]
    assert 3_000 <= start["heal_after_ms"] <= 8_000 and stop["at"] - start["at"] == start["heal_after_ms"]
    assert out.stalled_until == start["at"] + start["heal_after_ms"]
    assert stop["targets"] == names and sim.network.layer(LAYER) is None
    assert sim.violation is None, sim.violation
    x = sim.checker.committed_batch(out.x)
    assert x is not None and x.records == (b"X",) and sim.checker.committed_end > out.x + 1


def test_elected_behind_without_disk_stall_only_isolates():
    out = figure8_by_buggify(allowed=("partition",))
    start = out.fired[0]
    assert start["targets"] == [str(out.behind_leader)] and "stalled" not in start
    assert out.stalled_until <= start["at"] and out.sim.violation is None


def test_elected_behind_ends_the_targeted_fault_in_progress_first():
    """A targeted crash that still holds a node down is ended (its node restarted, its stop recorded)
    before the isolation starts: one targeted fault at a time, in the history too."""

    def crash_the_old_leader(sim: Simulation, buggify: Buggify, a: int) -> None:
        buggify.config = BuggifyConfig(probability={"elected-behind": 1.0}, restart_ms=(60_000, 60_000))
        buggify._fire("leader-append", "kill", sim.nodes[a], buggify.rng)  # down for a minute, X in its page cache

    out = figure8_by_buggify(allowed=("partition", "disk_stall", "kill"), before=crash_the_old_leader)
    kinds = [(f["what"], f["trigger"] if f["what"] == "start" else None) for f in out.fired[:3]]
    assert kinds == [("start", "leader-append"), ("stop", None), ("start", "elected-behind")], out.fired
    assert out.fired[1]["at"] == out.fired[2]["at"] < 60_000
    assert all(host.up for host in out.sim.nodes.values()) and out.sim.violation is None
