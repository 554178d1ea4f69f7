"""The simulator's building blocks: event queue, clocks, network, trace, and the world's plumbing
(timers, pause, crash, partitions) driven by a trivial fake node. Disks: tests/sim/test_disk.py."""

from __future__ import annotations

import random

import pytest

from node.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from node.raft import actions as act
from node.raft.events import RequestFailed, RequestReceived, ResponseReceived, Start, Tick
from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.sim.clock import NodeClock
from node.sim.network import LinkModel, Network
from node.sim.scheduler import EventQueue
from node.sim.trace import Trace, summarize
from node.sim.world import SimConfig, Simulation


def batch(base: int, epoch: int, n: int = 1) -> RecordBatch:
    return RecordBatch(base, epoch, tuple(f"{base + i}".encode() for i in range(n)))


# --- event queue ----------------------------------------------------------------------------------


def test_queue_orders_by_time_then_insertion():
    q = EventQueue()
    seen: list[str] = []
    q.schedule(10, seen.append, "b")
    q.schedule(5, seen.append, "a")
    q.schedule(10, seen.append, "c")
    q.schedule(10, seen.append, "d")
    while len(q):
        fn, args = q.pop()
        fn(*args)
    assert seen == ["a", "b", "c", "d"]
    assert q.now == 10


def test_queue_never_schedules_in_the_past():
    q = EventQueue()
    q.schedule(100, lambda: None)
    q.pop()
    q.schedule(50, lambda: None)
    assert q.next_time() == 100


# --- clocks ---------------------------------------------------------------------------------------


def test_clock_offset_and_rate():
    c = NodeClock(offset_ms=1000)
    assert c.local(0) == 1000
    assert c.local(500) == 1500
    c.set(500, rate=2.0)
    assert c.local(600) == 1700
    assert c.virtual_for(1900, 600) == 700


def test_clock_backward_jump_stands_still_instead_of_going_back():
    c = NodeClock()
    assert c.local(1000) == 1000
    c.set(1000, jump_ms=-300)
    assert c.local(1100) == 1000  # raw 800: held at the floor
    assert c.local(1400) == 1100
    values = [c.local(t) for t in range(1000, 2000, 7)]
    assert values == sorted(values)


def test_clock_virtual_for_is_the_earliest_moment():
    c = NodeClock(rate=0.5)
    at = c.virtual_for(101, 0)
    assert c.local(at) >= 101
    assert NodeClock(rate=0.5).local(at - 1) < 101


# --- network --------------------------------------------------------------------------------------


def test_network_grudge_is_directional():
    net = Network(random.Random(1))
    net.partition({1: [2]})
    assert net.transit(2, 1) is None  # 1 cannot hear 2
    assert net.transit(1, 2) is not None
    net.heal()
    assert net.transit(2, 1) is not None


def test_network_drop_probability_and_delay_range():
    net = Network(random.Random(7), LinkModel(drop=0.3, delay_min_ms=10, delay_max_ms=20))
    delays = [net.transit(1, 2) for _ in range(2000)]
    lost = sum(d is None for d in delays)
    assert 450 < lost < 750
    assert all(10 <= d <= 20 for d in delays if d is not None)


def test_network_exponential_delays_reorder():
    net = Network(random.Random(3), LinkModel(delay_min_ms=1, delay_max_ms=41, exponential=True))
    delays = [net.transit(1, 2) for _ in range(500)]
    assert min(delays) >= 1
    assert max(delays) > 41  # a long tail
    assert delays != sorted(delays)


def test_network_stop_loss_keeps_delays():
    net = Network(random.Random(2), LinkModel(drop=0.5, delay_min_ms=7, delay_max_ms=7))
    net.set_link(1, 2, LinkModel(drop=1.0, delay_min_ms=9, delay_max_ms=9))
    assert net.lossy
    net.stop_loss()
    assert not net.lossy
    assert [net.transit(1, 2) for _ in range(20)] == [9] * 20
    assert [net.transit(2, 1) for _ in range(20)] == [7] * 20


def test_link_model_rejects_bad_ranges():
    with pytest.raises(ValueError):
        LinkModel(drop=1.5)
    with pytest.raises(ValueError):
        LinkModel(delay_min_ms=5, delay_max_ms=1)


# --- trace ----------------------------------------------------------------------------------------


def test_trace_digest_is_sha256_of_the_file(tmp_path):
    import hashlib

    path = tmp_path / "t.jsonl"
    trace = Trace(str(path))
    trace.record(1, 2, "Tick", "Tick()")
    trace.record(5, "nemesis", "kill", 'node "2"')
    trace.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == trace.digest
    import json

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[1] == {"i": 1, "t": 5, "node": "nemesis", "ev": "kill", "s": 'node "2"'}


def test_summaries_reduce_records_to_offsets():
    text = summarize(act.AppendBatches((batch(0, 3, 2), batch(2, 3))))
    assert text == "AppendBatches(batches=[0..3)e3x2)"


# --- the world, driven by a fake node --------------------------------------------------------------


class PingNode:
    """A stand-in core: pings every other node each `period` ms and answers pings."""

    period = 100

    def __init__(self, config, loaded, rng, cluster_id_factory=None):
        self.node_id = config.node_id
        self.peers = sorted(config.voter_ids - {config.node_id})
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id = -1
        self.voted_id = -1
        self.high_watermark = 0
        self.log_end_offset = 0
        self.last_epoch = 0
        self.events: list[tuple[int, object]] = []
        self.cid = 0

    def handle(self, now, event):
        self.events.append((now, event))
        out: list[act.Action] = []
        if isinstance(event, Start | Tick):
            for peer in self.peers:
                self.cid += 1
                out.append(act.SendRequest(peer, self.cid, DescribeQuorumRequest()))
            out.append(act.SetTimer(now + self.period))
        elif isinstance(event, RequestReceived):
            out.append(act.Respond(event.reply_to, event.correlation_id, DescribeQuorumResponse(0, -1, 0, 0)))
        return out

    def of(self, kind):
        return [(t, e) for t, e in self.events if isinstance(e, kind)]


def ping_world(**kw) -> Simulation:
    sim = Simulation(SimConfig(seed=kw.pop("seed", 1), voters=3, node_factory=PingNode, **kw))
    sim.start()
    return sim


def test_fake_nodes_exchange_pings_and_ticks_follow_timers():
    sim = ping_world(start_stagger_ms=0)
    sim.run_until(1000)
    node = sim.raft(1)
    ticks = [t for t, _ in node.of(Tick)]
    assert ticks == list(range(100, 1001, 100))
    assert len(node.of(ResponseReceived)) >= 18
    assert len(node.of(RequestReceived)) >= 18


def test_clock_rate_makes_timers_fire_faster_in_virtual_time():
    sim = ping_world(start_stagger_ms=0)
    sim.run_until(1000)
    sim.skew(1, rate=2.0)
    before = len(sim.raft(1).of(Tick))
    sim.run_until(2000)
    assert len(sim.raft(1).of(Tick)) - before in (19, 20, 21)
    nows = [t for t, _ in sim.raft(1).events]
    assert nows == sorted(nows)


def test_pause_queues_events_and_delivers_them_late_in_order():
    sim = ping_world(start_stagger_ms=0)
    sim.run_until(250)
    sim.pause(2)
    sim.run_until(900)
    n_paused = len(sim.raft(2).events)
    assert sim.node(2).buffered  # pings from 1 and 3 piled up
    sim.resume(2)
    sim.run_for(1)
    late = sim.raft(2).events[n_paused:]
    assert late and all(t == 900 for t, _ in late[: len(late) - 1])


def test_requests_to_a_killed_node_fail_fast_but_partitions_are_silent():
    sim = ping_world(start_stagger_ms=0)
    sim.run_until(150)
    sim.kill(3)
    sim.run_until(450)
    failed = [e.destination for t, e in sim.raft(1).of(RequestFailed) if t > 150]
    assert failed and set(failed) == {3}
    assert all(t % 100 <= 2 for t, e in sim.raft(1).of(RequestFailed) if t > 150)  # refused at once
    sim.restart(3)
    sim.run_until(650)
    sim.partition({1: [2], 2: [1]})
    n_fail = len(sim.raft(1).of(RequestFailed))
    n_resp_from_2 = sum(e.source == 2 for _, e in sim.raft(1).of(ResponseReceived))
    sim.run_until(1000)
    assert len(sim.raft(1).of(RequestFailed)) == n_fail
    assert sum(e.source == 2 for _, e in sim.raft(1).of(ResponseReceived)) == n_resp_from_2
    assert sum(e.source == 3 for _, e in sim.raft(1).of(ResponseReceived)) > 0


def test_restart_builds_a_new_core_and_old_messages_do_not_reach_it():
    sim = ping_world(start_stagger_ms=0)
    sim.run_until(120)
    old = sim.raft(2)
    sim.kill(2)
    sim.restart(2)
    assert sim.raft(2) is not old
    sim.run_until(125)
    # pings sent to the old incarnation are not delivered to the new one
    assert not sim.raft(2).of(RequestReceived)


def test_world_is_deterministic_for_a_seed():
    def digest(seed):
        sim = ping_world(seed=seed, link=LinkModel(drop=0.1, delay_min_ms=1, delay_max_ms=30))
        sim.run_until(3000)
        return sim.trace.digest

    assert digest(5) == digest(5)
    assert digest(5) != digest(6)
