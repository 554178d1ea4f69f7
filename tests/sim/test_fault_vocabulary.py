"""`kchaos sim` speaks the harness's fault vocabulary; the simulator's clock, network and heal pieces the
faults are made of; and a fast sweep with every fault at once (the long one is test_sweep.py)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from node.sim.clock import NodeClock
from node.sim.faults import FaultConfig, FaultInjector
from node.sim.network import DegradedLinks, LinkModel, Network
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation
from vocab.faults.kinds import FAULT_KINDS, PacketFault

# What the simulator carries out without the simulated storage's disk faults and corruption.
SIM_KINDS = ("partition", "packet", "clock", "kill", "pause", "lose_unsynced", "disk_stall")


def test_the_clock_wall_and_local_times():
    clock = NodeClock()
    assert clock.local(1_000) == 1_000
    clock.set(1_000, jump_ms=-500)
    assert clock.wall(1_000) == 500 and clock.local(1_000) == 1_000  # the core's time never goes back
    assert clock.frozen(1_200) and clock.local(1_200) == 1_000  # it stands still ...
    assert not clock.frozen(1_600) and clock.local(1_600) == 1_100  # ... until the wall clock catches up
    clock.set(2_000, jump_ms=10_000, rate=2.0)
    assert clock.wall(2_500) == 1_500 + 10_000 + 1_000 == clock.local(2_500)  # the node has seen it
    clock.reset(3_000)
    assert clock.wall(3_000) == 3_000 and clock.rate == 1.0 and clock.frozen(3_000)
    clock.steady(3_100)  # normal speed from where the node's clock stands: no longer frozen
    assert not clock.frozen(3_100) and clock.wall(3_200) == clock.local(3_100) + 100


def test_packet_faults_and_grudge_layers_in_the_network():
    import random

    net = Network(random.Random(1), LinkModel(delay_min_ms=1, delay_max_ms=1))
    net.set_packet_fault(DegradedLinks(frozenset({(1, 2)}), PacketFault(loss=0.0, delay_ms=50, jitter_ms=0)))
    assert net.transit(1, 2) == 51 and net.transit(2, 1) == 1
    net.set_packet_fault(DegradedLinks(None, PacketFault(loss=1.0)))
    assert net.transit(3, 1) is None and net.transit(-1, 1) == 1  # clients outside the cluster are spared
    assert net.clear_packet_fault() and not net.clear_packet_fault() and net.transit(3, 1) == 1
    net.partition({1: [2]})
    net.set_layer("x", {2: [3]})
    assert not net.can_hear(1, 2) and not net.can_hear(2, 3) and net.can_hear(3, 2)
    net.heal()  # the nemesis's heal leaves the layer
    assert net.can_hear(1, 2) and not net.can_hear(2, 3)
    assert net.clear_layer("x") and net.can_hear(2, 3)


def test_heal_all_ends_every_fault_the_simulator_can_hold():
    sim = Simulation(SimConfig(seed=1))
    sim.start()
    sim.run_for(2_000)
    sim.partition({1: [2]})
    sim.network.set_layer("buggify", {2: [3]})
    sim.packet(None, 0.5, 100, 10)
    sim.skew(1, jump_ms=5_000)
    sim.reset_clock(1)  # back by 5 s: node 1 stands still
    sim.strobe_clock(2, 1_000, 100, 10_000)
    sim.pause(3)
    sim.heal_all()
    assert not sim.network.partitioned and sim.network.layer_names == [] and sim.network.packet_fault is None
    assert not any(h.paused or h.clock.frozen(sim.now) or h.clock.rate != 1.0 for h in sim.nodes.values())
    offset = sim.wall_clock(2) - sim.now
    sim.run_for(1_000)
    assert sim.wall_clock(2) - sim.now == offset  # the strobe stopped flipping


def test_every_sim_kind_is_injected_by_kchaos_sim():
    result = run(
        RunConfig(
            sim=SimConfig(seed=5, voters=3, observers=1),
            workload=WorkloadConfig(interval_ms=50),
            faults=FaultConfig(kinds=SIM_KINDS, interval_ms=(200, 800), duration_ms=(200, 2_000)),
            duration_ms=40_000,
        )
    )
    assert result.valid, result.failure
    injected = result.summary["faults_injected"]
    for kind in ("partition", "packet", "clock", "kill", "pause", "disk_stall"):
        assert injected.get(kind, 0) > 0, (kind, injected)
    assert result.summary["lost_unsynced_writes"] >= 0 and "lose_unsynced" in result.summary["faults"]


def test_kind_options_drive_the_injector():
    sim = Simulation(SimConfig(seed=2, voters=5))
    config = FaultConfig(kinds=("partition",), options={"partition": {"modes": ["isolate-each-controller"]}})
    injector = FaultInjector(sim, config)
    sim.start()
    injector.start()
    assert sim.run_until_true(lambda: sim.network.partitioned, 20_000)
    assert sim.network.grudge == {n: tuple(m for m in range(1, 6) if m != n) for n in range(1, 6)}
    with pytest.raises(ValueError, match="options for 'clock'"):
        FaultConfig(kinds=("partition",), options={"clock": {"weight": 1}})


def test_a_timer_due_while_paused_survives_a_backward_jump_before_the_resume():
    """Regression (sweep seed 105): an observer's fetch timer came due while it was paused, its clock was
    set back 10 s, and on resume the core got that Tick at a time before its deadline. The core re-arms
    only when its deadline changes, so the node never woke again and never found the new leader. A
    timer now fires only once the node's own clock reads its deadline, as in the real runtime."""
    sim = Simulation(SimConfig(seed=3, voters=3, observers=1))
    sim.start()
    assert sim.run_until_true(lambda: sim.leader() is not None, 30_000)
    sim.run_for(2_000)
    observer = 4
    host = sim.nodes[observer]
    assert host.timer_local is not None
    sim.pause(observer)
    sim.run_for(3_000)  # its timer comes due while it is paused
    sim.skew(observer, jump_ms=-10_000)
    sim.kill(sim.leader())  # a new leader the observer must discover by itself
    sim.run_for(1_000)
    sim.resume(observer)
    sim.reset_clock(observer)
    assert host.timer_local is not None and host.timer_at is not None  # still armed
    ticks_before = sim.stats.events
    sim.run_for(20_000)
    assert sim.stats.events > ticks_before
    leader = sim.leader()
    assert leader is not None and sim.raft(observer).leader_id == leader


def test_cli_fault_names_the_old_disk_alias_and_errors(capsys):
    assert main(["sim", "--seed", "1", "--duration", "3s", "--faults", "disk,kill", "--json"]) == 0
    captured = capsys.readouterr()
    assert "--faults disk is now called disk_stall" in captured.err
    assert json.loads(captured.out)["faults"] == ["disk_stall", "kill"]
    assert main(["sim", "--faults", "kill,meteor"]) == 254
    assert "--faults: unknown fault 'meteor'" in capsys.readouterr().err
    if not hasattr(Simulation, "set_disk_fault"):
        assert main(["sim", "--faults", "disk_fail", "--duration", "1s"]) == 254
        err = capsys.readouterr().err
        assert "disk_fail needs the simulated storage" in err and err.count("\n") == 1


def test_no_buggify_flag(capsys):
    args = ["sim", "--seed", "3", "--duration", "20s", "--faults", "kill,partition", "--json"]
    assert main(args) == 0
    assert sum(json.loads(capsys.readouterr().out)["buggify"].values()) > 0
    assert main([*args, "--no-buggify"]) == 0
    assert json.loads(capsys.readouterr().out)["buggify"] == {}


def test_vocabulary_is_the_harness_one():
    for kind in FAULT_KINDS:
        assert FaultConfig(kinds=(kind,)).kinds == (kind,)
    assert FaultConfig(kinds=("disk",)).kinds == ("disk_stall",)


@pytest.mark.parametrize("first", [0, 10])
def test_every_fault_at_once_fast_sweep(first):
    failures = []
    for seed in range(first, first + 10):
        result = run(
            RunConfig(
                sim=SimConfig(
                    seed=seed, voters=5 if seed % 4 == 3 else 3, observers=seed % 2,
                    link=LinkModel(drop=0.02 if seed % 5 == 0 else 0.0, delay_min_ms=1, delay_max_ms=5 + seed % 20),
                ),
                workload=WorkloadConfig(interval_ms=100),
                faults=FaultConfig(kinds=SIM_KINDS, interval_ms=(500, 3000), duration_ms=(200, 5000)),
                duration_ms=20_000,
                quiet_max_ms=30_000,
            )
        )  # fmt: skip
        if not result.valid:
            failures.append(f"seed {seed}: {result.failure}")
    assert not failures, "\n".join(failures)
