"""Packet faults (loss, delay ± jitter) and pauses on a real 3-node netns setup, measured from outside:
UDP echo probes count and time round trips on affected and unaffected links; TCP echo for pauses."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.netns import NetnsBackend
from harness.backends.procs import read_stat
from tests.harness_netns.conftest import (
    HERE,
    PORT,
    heal_if_left,
    leftovers,
    marked_pids,
    needs_root,
    new_marker,
    reach_matrix,
    root_reaches,
    wait_reachable,
)
from vocab.faults import grudges
from vocab.faults.kinds import ClockFault, DiskFault, FaultNotSupported, PacketFault

pytestmark = [pytest.mark.root, needs_root]
NODES = ["n1", "n2", "n3"]
UDP_PORT = 7001


def probe(backend: NetnsBackend, src: str, dst: str, count: int = 200, interval_ms: float = 2) -> dict:
    """Round trips of `count` datagrams src -> dst -> src (what came back, and how long it took)."""
    argv = [sys.executable, str(HERE / "udp_probe.py"), backend.address(dst), str(UDP_PORT)]
    out = backend.exec(src, [*argv, str(count), str(interval_ms), "1"], timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def namespaces_of(backend: NetnsBackend) -> set[int]:
    """The inodes of the backend's network namespaces (they name a namespace after `ip netns del` too)."""
    return {os.stat(f"/run/netns/{host.netns}").st_ino for host in backend.hosts.values()}


def delay_processes(namespaces: set[int]) -> list[int]:
    """The delay daemons running in these namespaces (other tests on other workers run their own)."""
    found = []
    for pid in marked_pids("harness.backends.delayd"):
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}/ns/net").st_ino in namespaces:
                found.append(pid)
    return found


def echo(backend: NetnsBackend, node: str, marker: str) -> list[str]:
    return [sys.executable, str(HERE / "dual_echo.py"), backend.address(node), str(PORT), str(UDP_PORT), marker]


@pytest.fixture(params=["nft"])
def backend(tmp_path, request) -> Iterator[NetnsBackend]:
    marker = new_marker()
    backend = NetnsBackend(tmp_path / "run", NODES, firewall=request.param)
    try:
        backend.setup()
        for node in NODES:
            backend.start(node, echo(backend, node, marker))
        for node in NODES:
            wait_reachable(backend.address(node))
        namespaces = namespaces_of(backend)
        yield backend
    finally:
        backend.teardown()
        heal_if_left(tmp_path / "run")
    assert not leftovers(backend.bridge)
    assert not marked_pids(marker) and not delay_processes(namespaces)


def received(result: dict) -> float:
    return result["received"] / result["sent"]


def test_loss_drops_about_p_of_the_packets_on_the_affected_links_only(backend):
    backend.packet({"n2": frozenset({"n1"})}, PacketFault(loss=0.3))
    assert len(backend.packet_rules("n2")) == 1 and "statistic" in backend.packet_rules("n2")[0]
    assert backend.packet_rules("n1") == backend.packet_rules("n3") == []
    # n1 -> n2 is lossy, and so is the answer of n2 -> n1's round trip (it comes back over n1 -> n2)
    for src, dst in [("n1", "n2"), ("n2", "n1")]:
        assert 0.6 <= received(probe(backend, src, dst, count=1000, interval_ms=1)) <= 0.8, (src, dst)
    for src, dst in [("n1", "n3"), ("n3", "n1"), ("n3", "n2"), ("n2", "n3")]:
        assert received(probe(backend, src, dst)) >= 0.99, (src, dst)
    assert all(root_reaches(backend.address(n)) for n in NODES)  # the harness's own traffic is spared

    backend.heal_packet()
    assert received(probe(backend, "n1", "n2", count=1000, interval_ms=1)) >= 0.99
    assert backend.packet_rules("n2") == []


def test_loss_on_every_link_between_nodes(backend):
    backend.packet(None, PacketFault(loss=0.2))
    assert all(len(backend.packet_rules(n)) == 2 for n in NODES)
    for src, dst in [("n1", "n2"), ("n3", "n1")]:
        assert 0.52 <= received(probe(backend, src, dst, count=1000, interval_ms=1)) <= 0.76  # 0.8 * 0.8
    backend.heal_packet()
    assert received(probe(backend, "n3", "n1")) >= 0.99


def test_delay_adds_the_mean_plus_minus_jitter_on_the_affected_links_only(backend):
    backend.packet({"n2": frozenset({"n1"})}, PacketFault(delay_ms=100, jitter_ms=20))
    assert len(delay_processes(namespaces_of(backend))) == 1  # one daemon, in n2's namespace
    delayed = probe(backend, "n1", "n2", count=100, interval_ms=10)["rtt_ms"]
    assert len(delayed) == 100
    # Uniform in [80, 120] plus the way back. A load only adds time, so the lower bounds are exact and
    # the upper ones are judged on the fastest of many probes (which a busy machine still gets).
    assert min(delayed) >= 78 and max(delayed) - min(delayed) >= 15
    assert min(delayed) <= 125
    assert min(probe(backend, "n1", "n3")["rtt_ms"]) < 30
    assert min(probe(backend, "n3", "n2")["rtt_ms"]) < 30

    backend.packet(None, PacketFault(delay_ms=50))  # replaces it: every link, both ways of a round trip
    assert len(delay_processes(namespaces_of(backend))) == 3
    both_ways = probe(backend, "n1", "n2", count=50, interval_ms=10)["rtt_ms"]
    assert 98 <= min(both_ways) <= 150

    backend.heal_packet()
    assert not delay_processes(namespaces_of(backend))
    assert min(probe(backend, "n1", "n2")["rtt_ms"]) < 30


@pytest.mark.parametrize("backend", ["nft", "iptables"], indirect=True)
def test_packet_faults_replace_each_other_and_sit_behind_partitions(backend):
    backend.partition(grudges.isolate("n3", NODES))
    backend.packet({"n2": frozenset({"n1", "n3"})}, PacketFault(loss=0.5))
    assert received(probe(backend, "n3", "n2", count=50)) == 0  # partitioned: dropped, whatever the loss
    assert 0.3 <= received(probe(backend, "n1", "n2", count=500, interval_ms=1)) <= 0.7
    backend.packet({"n1": frozenset({"n2"})}, PacketFault(loss=1.0))
    assert backend.packet_rules("n2") == [] and len(backend.packet_rules("n1")) == 1
    assert received(probe(backend, "n2", "n1", count=50)) == 0
    backend.heal_network()
    backend.heal_packet()
    assert all(reach_matrix(backend, [(a, b) for a in NODES for b in NODES if a != b]).values())


def test_pause_stops_a_node_answering_until_resume(backend):
    ledger = backend.ledger
    assert ledger is not None
    proc = backend.process("n2")
    assert proc is not None
    backend.pause("n2")
    assert read_stat(proc.pid).state == "T" and backend.is_paused("n2")
    assert ledger.outstanding()[0].kind == "paused"
    reach = reach_matrix(backend, [("n1", "n2"), ("n1", "n3")])
    assert reach == {("n1", "n2"): False, ("n1", "n3"): True}
    assert not root_reaches(backend.address("n2"))
    assert backend.is_alive("n2")  # stopped, not dead

    backend.resume("n2")
    assert read_stat(proc.pid).state != "T" and not backend.is_paused("n2")
    assert "paused" not in [e.kind for e in ledger.outstanding()]
    assert root_reaches(backend.address("n2"))

    # a paused node can be killed and restarted; the pause ends with the process
    backend.pause("n2")
    backend.kill("n2")
    backend.restart("n2")
    wait_reachable(backend.address("n2"))
    assert not backend.is_paused("n2")
    backend.resume("n2")  # nothing paused: a no-op
    assert "paused" not in [e.kind for e in ledger.outstanding()]
    backend.kill("n3")
    backend.pause("n3")  # not running: nothing to pause
    assert not backend.is_paused("n3")


def _environ_once_execed(pid: int, timeout_s: float = 10.0) -> list[bytes]:
    """The process's environment. `ip netns exec` execs the node in its own place, and read in the
    middle of that exec the file is empty (a full-suite run once read it so); read it again then."""
    deadline = time.monotonic() + timeout_s
    while True:
        environ = [e for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if e]
        if environ or time.monotonic() > deadline:
            return environ
        time.sleep(0.05)


def test_clock_and_disk_faults_need_enable_faults_before_the_node_starts(backend):
    backend.clock_reset("n1")  # the heals are no-ops when nothing was enabled
    backend.disk_heal("n1")
    with pytest.raises(FaultNotSupported, match="not enabled"):
        backend.clock("n1", ClockFault("bump", delta_ms=1_000))
    with pytest.raises(FaultNotSupported, match="not enabled"):
        backend.disk("n1", DiskFault("stall", delay_ms=10))
    backend.enable_faults(["clock", "disk_fail"])
    with pytest.raises(FaultNotSupported, match="started before"):
        backend.clock("n1", ClockFault("bump", delta_ms=1_000))
    backend.kill("n1")
    backend.restart("n1")  # started again: now under the preloads
    proc = backend.process("n1")
    assert proc is not None
    environ = _environ_once_execed(proc.pid)
    preload = next((e for e in environ if e.startswith(b"LD_PRELOAD=")), None)
    assert preload is not None, environ
    assert b"kchaos_disk" in preload and b"kchaos_clock" in preload and b"libfaketime" in preload
    backend.clock("n1", ClockFault("bump", delta_ms=1_000))
    backend.disk("n1", DiskFault("fail"))
    with pytest.raises(FaultNotSupported, match="not enabled"):
        backend.disk("n1", DiskFault("stall", delay_ms=10))  # only disk_fail was enabled
