"""Every fault of the catalogue on the sim backend, its effect watched from outside the node: what the
simulated network delivers, what a node handles, what its clock reads, whether it runs."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from harness.backends.sim import SimBackend
from harness.db.kraft import KraftDB
from harness.test_spec import Cluster
from nemesis.nemesis import Nemesis
from vocab.faults.catalogue import PARTITION_MODES
from vocab.faults.kinds import FAULT_KINDS
from vocab.faults.options import all_options


@dataclass
class Rig:
    backend: SimBackend
    db: KraftDB
    nemesis: Nemesis

    @property
    def sim(self) -> Any:
        return self.backend.simulation

    def id(self, node: str) -> int:
        return self.backend.id_of(node)


def rig(
    tmp_path, options: dict[str, dict[str, Any]] | None = None, seed: int = 5, cluster: Cluster | None = None
) -> Rig:
    cluster = cluster or Cluster(controllers=3, brokers=2)
    backend = SimBackend(controllers=cluster.controllers, brokers=cluster.brokers, seed=seed)
    backend.setup()
    db = KraftDB(cluster)
    db.install(backend, tmp_path)
    db.wait_ready(60)
    opts = all_options(list(FAULT_KINDS), None, options)
    return Rig(backend, db, Nemesis(backend, db, backend.scheduler(), seed, opts))


@contextmanager
def deliveries(sim: Any) -> Iterator[Counter]:
    """(src, dst) -> messages the simulated network delivered while the block ran."""
    seen: Counter = Counter()
    sim.on_delivery = lambda src, dst, _msg: seen.update([(src, dst)])
    try:
        yield seen
    finally:
        sim.on_delivery = None


@contextmanager
def transits(sim: Any) -> Iterator[list[tuple[int, int, int | None]]]:
    """(src, dst, delay or None when lost) of every message sent while the block ran."""
    sent: list[tuple[int, int, int | None]] = []
    network = sim.network
    original = network.transit

    def watch(src: int, dst: int) -> int | None:
        delay = original(src, dst)
        sent.append((src, dst, delay))
        return delay

    network.transit = watch
    try:
        yield sent
    finally:
        del network.transit


@pytest.mark.parametrize("mode", PARTITION_MODES)
def test_a_partitioned_node_receives_nothing_from_the_grudges_sources(tmp_path, mode):
    # 5 controllers: on a ring of 3, the one cut link is between two followers, which never talk
    r = rig(tmp_path, cluster=Cluster(controllers=5, brokers=1) if mode == "majorities-ring" else None)
    with deliveries(r.sim) as before:
        r.sim.run_for(3_000)
    done = r.nemesis.start("partition", {"mode": mode})
    assert done.type == "info" and done.value["mode"] == mode
    cut = {(r.id(src), r.id(dst)) for dst, srcs in done.value["grudge"].items() for src in srcs}
    assert cut & set(before)  # links that carried messages are cut
    r.sim.run_for(200)  # messages already in flight are dropped on arrival too
    with deliveries(r.sim) as seen:
        r.sim.run_for(3_000)
    assert not cut & set(seen), f"delivered across the cut: {sorted(cut & set(seen))}"
    assert sum(seen.values()) > 10  # the rest of the cluster kept talking
    r.nemesis.stop("partition")
    with deliveries(r.sim) as seen:
        r.sim.run_for(5_000)
    heard_again = {src for src, _dst in seen} & {dst for _src, dst in seen}
    assert {dst for _src, dst in cut} <= heard_again  # healed: every node that lost a peer talks again


def test_packet_loss_drops_about_p_on_the_targets_links_and_nothing_elsewhere(tmp_path):
    r = rig(tmp_path, {"packet": {"loss": 0.3, "delay_ms": 0}})
    done = r.nemesis.start("packet", {"mode": "leader"})
    target = r.id(done.value["targets"][0])
    with transits(r.sim) as sent:
        r.sim.run_for(100_000)
    affected = [d for s, t, d in sent if target in (s, t) and s > 0 and t > 0]
    others = [d for s, t, d in sent if target not in (s, t)]
    # Since pre-vote a lossy voter no longer sets off elections (and their Vote storms): its links
    # carry its Fetches only, a few hundred in 100 s, enough to measure the loss rate.
    assert len(affected) > 200 and len(others) > 200
    lost = sum(d is None for d in affected) / len(affected)
    assert 0.25 <= lost <= 0.35, lost
    assert all(d is not None for d in others)


def test_packet_delay_makes_messages_on_affected_links_arrive_at_least_delay_later(tmp_path):
    r = rig(tmp_path, {"packet": {"loss": 0.0, "delay_ms": 300, "jitter_ms": 0}})
    done = r.nemesis.start("packet", {"mode": "one-broker"})
    target = r.id(done.value["targets"][0])
    with transits(r.sim) as sent:
        r.sim.run_for(5_000)
    affected = [d for s, t, d in sent if target in (s, t) and s > 0 and t > 0]
    others = [d for s, t, d in sent if target not in (s, t) and s > 0 and t > 0]
    assert affected and others
    assert min(affected) >= 300 + 1 and max(others) <= 5  # the link model's own 1..5 ms, plus the fault
    r.nemesis.stop("packet")
    with transits(r.sim) as sent:
        r.sim.run_for(2_000)
    assert all(d is not None and d <= 5 for _s, _t, d in sent)


def test_a_paused_node_handles_nothing_until_it_resumes_and_then_catches_up(tmp_path):
    r = rig(tmp_path)
    done = r.nemesis.start("pause", {"mode": "leader"})
    node = r.id(done.value["targets"][0])
    handled: Counter = Counter()
    r.sim.event_hooks.append(lambda n, _e: handled.update([n]))
    r.sim.run_for(5_000)
    assert handled[node] == 0 and sum(handled.values()) > 100
    assert r.backend.is_alive(done.value["targets"][0])  # paused, not dead
    assert len(r.sim.node(node).buffered) > 0  # what it was sent waits for it
    r.nemesis.stop("pause")
    r.sim.run_for(2_000)
    assert handled[node] > 0 and not r.sim.node(node).buffered


def test_a_killed_node_is_down_until_the_stop_restarts_it(tmp_path):
    r = rig(tmp_path)
    done = r.nemesis.start("kill", {"mode": "minority"})
    (victim,) = done.value["targets"]
    handled: Counter = Counter()
    r.sim.event_hooks.append(lambda n, _e: handled.update([n]))
    r.sim.run_for(5_000)
    assert not r.backend.is_alive(victim) and handled[r.id(victim)] == 0
    stop = r.nemesis.stop("kill")
    assert stop.value["restarted"] == [victim]
    r.sim.run_for(2_000)
    assert r.backend.is_alive(victim) and handled[r.id(victim)] > 0


def test_kill_leader_kills_the_current_leader(tmp_path):
    r = rig(tmp_path)
    leader = r.db.leader()
    assert leader is not None
    assert r.nemesis.start("kill", {"mode": "leader"}).value["targets"] == [leader]
    assert not r.backend.is_alive(leader)


@pytest.mark.parametrize("delta", [-90_000, 5_000])
def test_a_clock_bumped_node_reads_a_time_off_by_delta(tmp_path, delta):
    r = rig(tmp_path, {"clock": {"targets": ["one"], "delta_ms": delta}})
    done = r.nemesis.start("clock", {"mode": "bump"})
    (node,) = done.value["targets"]
    others = [n for n in r.db.nodes if n != node]
    r.sim.run_for(1_000)
    assert r.backend.wall_clock_ms(node) - r.sim.now == delta
    assert all(r.backend.wall_clock_ms(n) == r.sim.now for n in others)
    host = r.sim.node(r.id(node))
    # what the node's core is given never runs backwards: ahead by a forward bump, standing still after a back one
    local = host.clock.local(r.sim.now)
    assert local - r.sim.now == delta if delta > 0 else local < r.sim.now
    r.nemesis.stop("clock")
    assert r.backend.wall_clock_ms(node) == r.sim.now


def test_clock_rate_and_strobe(tmp_path):
    r = rig(tmp_path, {"clock": {"targets": ["leader"], "rate": 2.0, "delta_ms": 7_000, "period_ms": 500}})
    r.nemesis.start("clock", {"mode": "rate"})
    node = r.db.leader()
    before = r.backend.wall_clock_ms(node), r.sim.now
    r.sim.run_for(1_000)
    assert r.backend.wall_clock_ms(node) - before[0] == 2 * (r.sim.now - before[1])
    r.nemesis.stop("clock")
    r.sim.run_for(100)
    done = r.nemesis.start("clock", {"mode": "strobe"})
    (node,) = done.value["targets"]
    offsets = []
    for _ in range(8):
        offsets.append(r.backend.wall_clock_ms(node) - r.sim.now)
        r.sim.run_for(500)
    assert set(offsets) == {7_000, 0} and offsets[:4] == [7_000, 0, 7_000, 0]


@pytest.mark.parametrize("kind", ["pause", "disk_fail", "corrupt"])
def test_a_kind_the_backend_lacks_fails_and_changes_nothing(tmp_path, kind, monkeypatch):
    r = rig(tmp_path)
    monkeypatch.setattr(r.backend, "faults", SimBackend.faults - {kind})  # a backend without that kind
    done = r.nemesis.start(kind)
    assert done.type == "fail" and "cannot do" in done.error
    assert all(r.backend.is_alive(n) for n in r.db.nodes) and r.nemesis.active == []


def test_every_supported_kind_at_once_then_stop_all_leaves_a_healthy_cluster(tmp_path):
    r = rig(tmp_path)
    kinds = [k for k in FAULT_KINDS if k in SimBackend.faults]
    for kind in kinds:
        # a young cluster has no snapshot yet, so damage its log (the snapshot modes would find nothing)
        value = {"mode": "bitflip-log"} if kind == "corrupt" else None
        done = r.nemesis.start(kind, value)
        assert done.type == "info", (kind, done.error)
    assert r.nemesis.active == kinds
    r.sim.run_for(5_000)
    for kind in reversed(kinds):
        r.nemesis.stop(kind)
    assert not r.sim.network.partitioned and r.sim.network.packet_fault is None
    assert all(r.backend.is_alive(n) for n in r.db.nodes)
    r.db.wait_ready(60)  # raises if the cluster does not settle
    assert r.sim.violation is None
    assert not any(h.paused for h in r.sim.nodes.values())
    assert all(not h.clock.skewed for h in r.sim.nodes.values())


def test_targets_differ_between_seeds_and_repeat_for_one(tmp_path):
    def picks(seed: int) -> list[list[str]]:
        r = rig(tmp_path / str(seed), seed=seed)
        out = []
        for _ in range(6):
            out.append(r.nemesis.start("kill", {"mode": "one"}).value["targets"])
            r.nemesis.stop("kill")
        return out

    assert picks(1) == picks(1)
    assert len({tuple(itertools.chain(*picks(s))) for s in (1, 2, 3)}) > 1
