"""Targeted faults (node.sim.buggify): each strikes at its moment, only with the faults the run allows,
and they catch cores with a bug in exactly that window far more often than random fault timing does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from node.protocol.messages import VoteRequest
from node.raft import actions as act
from node.raft.events import RequestReceived, Tick
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.sim.buggify import LAYER, TRIGGERS, Buggify, BuggifyConfig
from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation


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
        responses = [a.message for a in moment.actions if isinstance(a, act.Respond)]
        assert responses and responses[0].vote_granted
        assert value["fault"] == "kill" and 1 <= value["restart_after_ms"] <= 300
    assert sim.stats.faults["buggify"] == len(hits)


def test_candidate_restarts_a_node_while_it_is_a_candidate():
    _sim, hits = strike("candidate", ("kill",))
    for moment, value in hits:
        assert moment.role is Role.CANDIDATE and isinstance(moment.event, Tick)
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


def test_elected_isolates_the_new_leader_until_the_heal():
    sim = Simulation(SimConfig(seed=4, voters=3))
    heard: list[tuple[int, int, int]] = []
    sim.on_delivery = lambda src, dst, _m: heard.append((sim.now, src, dst))
    fired: list[dict] = []
    config = BuggifyConfig(probability={"elected": 1.0})
    buggify = Buggify(sim, ("partition",), config, listener=lambda w, v: fired.append({**v, "at": sim.now, "what": w}))
    buggify.enable()
    sim.start()
    sim.run_until_true(lambda: len(fired) >= 2, 30_000)
    start, stop = fired[0], fired[1]
    assert start["what"] == "start" and stop["what"] == "stop" and start["trigger"] == "elected"
    leader = int(start["targets"][0])
    assert stop["at"] - start["at"] == start["heal_after_ms"]
    inside = [(t, s, d) for t, s, d in heard if start["at"] < t < stop["at"]]
    assert inside and not [x for x in inside if leader in x[1:]]  # it heard nothing and was not heard
    assert sim.network.layer(LAYER) is None  # healed


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
    assert set(Buggify(sim, ("partition",)).triggers) == {"elected", "established"}
    assert set(Buggify(sim, ("kill",)).triggers) == set(TRIGGERS) - {"elected", "established"}
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
        event = lines[i - 1]
        assert event["node"] == node and event["t"] == lines[i]["t"], (event, lines[i])  # the very moment
        after = lines[i + 1]
        assert "isolate" in lines[i]["s"] or (after["node"] == "nemesis" and after["ev"] == "kill")


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
        out = super().handle(now, event)
        if isinstance(event, Tick) and self.role is Role.CANDIDATE:
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
            assert "epoch went back" in result.violation.message, result.violation
            caught += 1
    return caught


@pytest.mark.parametrize("factory", [LazyVoteNode, LazyCandidateNode])
def test_a_bug_in_the_window_is_caught_thanks_to_the_targeted_fault(factory):
    seeds = range(20)
    with_targeted, random_only = catches(factory, seeds, True), catches(factory, seeds, False)
    assert with_targeted >= 8, (with_targeted, random_only)
    assert with_targeted >= random_only + 5, (with_targeted, random_only)


def test_the_correct_core_survives_the_same_runs():
    assert catches(RaftNode, range(10), True) == 0
