"""Storage faults in the simulator, seen from outside: disk_stall slows acknowledgements, disk_fail
fail-stops the node (forgetting what it had not synced), lose_unsynced keeps exactly what was
fsynced, corrupt makes a restart refuse until undone; through `Simulation` and the `sim` backend;
the same seed gives the same trace with all of them on."""

from __future__ import annotations

import contextlib
import errno
import random
from types import SimpleNamespace

import pytest

from harness.backends.sim import SimBackend
from harness.db.kraft import KraftDB
from node.bugs import parse_bugs
from node.runtime.corruption import CORRUPT_MODES, NothingToCorrupt
from node.runtime.file_storage import FileStorage, snapshot_name
from node.sim.admin_client import SimAdminClient, broker_endpoints
from node.sim.cluster import ClusterConfig
from node.sim.cluster_run import settled
from node.sim.disk import SimDisk
from node.sim.runner import converged
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import settle, wait
from tests.sim_cluster.helpers import call, create_topic, set_config
from vocab.faults.kinds import DiskFault, FaultNotSupported


def started(seed: int = 1, **config) -> tuple[Simulation, int]:
    sim = Simulation(SimConfig(seed=seed, voters=3, **config))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    return sim, leader


def commit_latency(sim: Simulation, leader: int, tag: str) -> int:
    """Virtual ms from handing the leader an append to its acknowledgement."""
    start = sim.now
    handle = sim.submit_append(leader, (tag.encode(),))
    wait(sim, lambda: handle in sim.append_results, 30_000, f"append {tag}")
    assert type(sim.append_results[handle]).__name__ == "AppendCompleted"
    return sim.now - start


def test_a_disk_stall_delays_every_acknowledgement_by_about_its_delay():
    sim, leader = started(disk_latency_ms=(2, 5))
    before = max(commit_latency(sim, leader, f"a{i}") for i in range(5))
    for n in sim.nodes:
        sim.set_disk_fault(n, DiskFault("stall", ops=("fsync",), delay_ms=400))
    stalled = min(commit_latency(sim, leader, f"b{i}") for i in range(5))
    for n in sim.nodes:
        sim.clear_disk_fault(n)
    after = max(commit_latency(sim, leader, f"c{i}") for i in range(5))
    assert before < 100 and after < 100
    assert stalled >= 400
    assert sim.stats.faults["disk_stall"] == 3 and sim.stats.faults["disk_heal"] == 3
    settle(sim)


def test_a_failed_fsync_fail_stops_the_node_which_forgets_what_it_had_not_synced():
    sim, leader = started()
    followers = [n for n in sim.nodes if n != leader]
    sim.isolate([[leader, followers[0]], [followers[1]]])
    commit_latency(sim, leader, "durable")
    end = sim.raft(leader).log_end_offset
    sim.set_disk_fault(leader, DiskFault("fail", ops=("fsync",), errno="EIO"))
    handle = sim.submit_append(leader, (b"never-acknowledged",))
    assert not sim.node(leader).up  # its fsync failed while it handled the append: it exited
    assert handle not in sim.append_results or type(sim.append_results[handle]).__name__ == "AppendFailed"
    assert sim.stats.fail_stops == 1
    assert sim.node(leader).disk.end_offset == end  # the un-synced append went with the dirty pages
    sim.restart(leader)  # the disk still fails: start-up's own fsync fails, the node stays down
    assert not sim.node(leader).up and sim.stats.fail_stops == 2
    sim.clear_disk_fault(leader)
    sim.restart(leader)
    assert sim.node(leader).up
    assert sim.violation is None
    settle(sim)
    assert b"never-acknowledged" not in [r for b in sim.committed_log() for r in b.records]


def test_an_os_error_nobody_injected_is_a_bug_not_a_fail_stop():
    class BrokenFlush(FileStorage):
        def flush(self) -> None:
            raise OSError(errno.EIO, "not injected")

    sim = Simulation(SimConfig(seed=1, voters=3, disk_factory=lambda n: SimDisk(n, storage_factory=BrokenFlush)))
    sim.start()
    sim.run_for(5_000)
    assert sim.violation is not None and "raised OSError" in sim.violation.message
    assert sim.stats.fail_stops == 0


def test_enospc_on_writes_fail_stops_a_follower_on_its_next_append():
    sim, leader = started()
    follower = next(n for n in sim.nodes if n != leader)
    sim.set_disk_fault(follower, DiskFault("fail", ops=("write",), errno="ENOSPC"))
    commit_latency(sim, leader, "x")  # the other follower makes the majority
    wait(sim, lambda: not sim.node(follower).up, 5_000, "the follower failing its write")
    sim.clear_disk_fault(follower)
    settle(sim)
    assert sim.stats.fail_stops == 1


def test_a_disk_that_fails_sometimes_fails_some_nodes_and_the_cluster_stays_correct():
    sim, _ = started(seed=3)
    for n in sim.nodes:
        sim.set_disk_fault(n, DiskFault("fail", ops=("fsync", "write"), probability=0.02))
    sim.start_workload()
    for _ in range(20):
        sim.run_for(1_000)
        for n in sim.nodes:
            if not sim.node(n).up:
                sim.restart(n)  # a supervisor restarting what exited, like systemd
    sim.stop_workload()
    assert sim.stats.fail_stops > 0
    settle(sim)


def test_power_loss_keeps_what_was_fsynced_and_only_that():
    sim, leader = started(disk_latency_ms=(200, 200))
    commit_latency(sim, leader, "acknowledged")
    end = sim.raft(leader).log_end_offset
    sim.submit_append(leader, (b"written, not yet fsynced",))
    disk = sim.node(leader).disk
    assert disk.end_offset > end and disk.unsynced_writes > 0
    sim.kill(leader, lose_unsynced=True, keep_unsynced=0)
    assert disk.end_offset == end
    assert disk.durable_batches() == disk.batches()
    assert sim.stats.lost_unsynced_writes >= 1
    sim.restart(leader)
    settle(sim)


def test_the_sim_backend_carries_out_disk_faults_and_power_loss():
    backend = SimBackend(controllers=3, seed=2)
    backend.setup()
    assert {"disk_stall", "disk_fail", "lose_unsynced", "corrupt"} <= backend.faults
    sim = backend.simulation
    for node in backend.node_ids:
        backend.start(node)
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling")
    backend.disk("c1", DiskFault("stall", delay_ms=250))
    assert sim.node(1).disk_fault == DiskFault("stall", delay_ms=250)
    backend.disk("c2", DiskFault("fail", ops=("write",)))
    assert sim.node(2).disk.fs.fault == DiskFault("fail", ops=("write",))
    backend.disk_heal("c1")
    backend.disk_heal("c2")
    assert sim.node(1).disk_fault is None and sim.node(2).disk.fs.fault is None
    backend.lose_unsynced("c3")
    assert not backend.is_alive("c3")
    assert "lose_unsynced" in [line for line in sim.trace.last if "kill" in line][-1]
    backend.restart("c3")
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling again")
    assert sim.violation is None
    backend.teardown()


# --- corrupt -------------------------------------------------------------------------------------


def snapshotting_cluster(seed: int = 4) -> Simulation:
    """3 controllers + 1 broker with small segments and frequent snapshots, after 60 config writes."""
    sim = Simulation(
        SimConfig(
            seed=seed, segment_bytes=2048, cluster=ClusterConfig(controllers=3, brokers=1, snapshot_every_records=25)
        )
    )
    sim.start()
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling")
    client = SimAdminClient(sim, broker_endpoints((4,)))
    create_topic(sim, client, partitions=1, rf=1)
    for i in range(60):
        assert call(sim, client, set_config("t", "retention.ms", str(1000 + i))).ok
    return sim


def files_of(sim: Simulation, node: int) -> dict[str, bytes]:
    disk = sim.node(node).disk
    return {name: disk.fs.read_file(disk.log_dir / name) for name in disk.fs.listdir(disk.log_dir)}


@pytest.mark.parametrize("mode", CORRUPT_MODES)
def test_a_corrupted_node_refuses_to_start_until_uncorrupted(mode):
    sim = snapshotting_cluster()
    victim = next(n for n in (1, 2, 3) if n != sim.leader())
    outcomes = set()
    for seed in range(4):
        sim.kill(victim)
        before = files_of(sim, victim)
        corruption = sim.corrupt_storage(victim, mode, random.Random(seed))
        assert files_of(sim, victim) != before
        refused = sim.stats.refused_starts
        sim.restart(victim)
        if sim.node(victim).up:
            # Only a snapshot may be damaged and the node still start: an older one it never reads,
            # or one it set aside because the log still covers it. Never the damaged bytes.
            assert mode.endswith("-snapshot")
            loaded = sim.node(victim).disk.snapshot
            assert loaded is None or not corruption.path.endswith(snapshot_name(loaded.snapshot_id))
            outcomes.add("started")
        else:
            assert sim.stats.refused_starts == refused + 1
            assert '"ev":"refused"' in sim.trace.last[-1]
            outcomes.add("refused")
        assert sim.violation is None
        restored = sim.uncorrupt_storage(victim)
        if not sim.node(victim).up:
            assert restored == 1 and files_of(sim, victim) == before
            sim.restart(victim)
            assert sim.node(victim).up
        wait(sim, lambda: settled(sim), 60_000, "the cluster settling after the restart")
    assert outcomes == ({"refused"} if mode.endswith("-log") else {"refused", "started"})
    assert sim.violation is None


def test_corrupting_a_running_node_or_an_empty_one_is_refused():
    sim, leader = started()
    with pytest.raises(ValueError, match="is running"):
        sim.corrupt_storage(leader, "bitflip-log")
    sim.kill(leader)
    with pytest.raises(NothingToCorrupt, match="no snapshot file"):
        sim.corrupt_storage(leader, "bitflip-snapshot")


def test_kraft_db_corrupts_and_uncorrupts_on_the_sim_backend(tmp_path):
    backend = SimBackend(controllers=3, brokers=1, seed=5)
    db = KraftDB(SimpleNamespace(controllers=3, combined=0, brokers=1))
    backend.setup()
    db.install(backend, tmp_path)
    sim = backend.simulation
    db.wait_ready(30)
    sim.run_for(5_000)
    backend.kill("c2")
    described = db.corrupt("c2", "bitflip-log", random.Random(1))
    assert described["node"] == "c2" and described["mode"] == "bitflip-log"
    backend.restart("c2")
    assert not backend.is_alive("c2")
    db.uncorrupt("c2")
    backend.restart("c2")
    assert backend.is_alive("c2")
    with pytest.raises(FaultNotSupported, match="c2: nothing to corrupt"):
        backend.kill("c2")
        db.corrupt("c2", "truncate-snapshot", random.Random(1))
    backend.restart("c2")
    db.wait_ready(30)
    assert sim.violation is None


SEEDS = 24


def corrupt_and_restart(seed: int, bugs: tuple[str, ...] = ()) -> Simulation:
    sim, leader = started(seed=seed)
    sim.start_workload()
    sim.run_for(2_000)
    victim = next(n for n in sim.nodes if n != leader)
    sim.kill(victim)
    sim.nodes[victim].disk.bugs = parse_bugs(bugs)  # the restarted FileStorage runs with them
    sim.corrupt_storage(victim, "bitflip-log", random.Random(seed))
    sim.restart(victim)
    return sim


def test_a_storage_that_skips_the_crc_check_on_load_is_caught():
    """The planted bug `storage-crc-not-checked-on-load` (node/bugs.py) on the restarted node."""
    caught = []
    for seed in range(SEEDS):
        sim = corrupt_and_restart(seed, ("storage-crc-not-checked-on-load",))
        if sim.violation is not None:
            caught.append(sim.violation.message)
    assert caught and all("started on a damaged log without noticing" in m for m in caught)
    # Most flips land in a batch's header, where the offset, epoch and length checks still refuse;
    # a flip in a timestamp or a record passes only the CRC check.
    assert len(caught) >= 3


def test_the_correct_storage_refuses_the_same_damage():
    for seed in range(SEEDS):
        sim = corrupt_and_restart(seed)
        assert sim.violation is None and sim.stats.refused_starts == 1


# --- determinism -----------------------------------------------------------------------------------


def storage_fault_run(seed: int) -> str:
    sim = Simulation(SimConfig(seed=seed, voters=3, observers=1))
    sim.start()
    sim.start_workload()
    rng = random.Random(seed)
    for step in range(12):
        sim.run_for(700)
        node = rng.choice(list(sim.nodes))
        kind = step % 4
        if kind == 0:
            sim.set_disk_fault(node, DiskFault("stall", delay_ms=rng.randint(50, 500)))
        elif kind == 1:
            sim.set_disk_fault(node, DiskFault("fail", ops=("fsync", "write"), probability=0.3))
        elif kind == 2:
            sim.kill(node, lose_unsynced=True)
            if rng.random() < 0.5:
                with contextlib.suppress(NothingToCorrupt):
                    sim.corrupt_storage(node, rng.choice(CORRUPT_MODES))
            sim.restart(node)
        else:
            sim.heal_all()
    sim.stop_workload()
    sim.heal_all()
    wait(sim, lambda: converged(sim), 60_000, "convergence")
    assert sim.violation is None, sim.violation
    return sim.trace.digest


def test_same_seed_same_trace_with_storage_faults_on():
    first = storage_fault_run(11)
    assert storage_fault_run(11) == first
    assert storage_fault_run(12) != first
