"""A real 3-node netns setup: servers in namespaces, partitions as nft/iptables DROPs, kill -9, restart."""

from __future__ import annotations

import itertools
import json
import random
import secrets
import subprocess
import sys

import pytest

from harness.backends.ledger import Ledger
from harness.backends.netns import NetnsBackend, used_networks
from harness.backends.procs import is_same_process
from harness.backends.shell import BackendError
from tests.harness_netns.conftest import (
    HERE,
    echo_argv,
    heal_if_left,
    marked_pids,
    needs_root,
    new_marker,
    new_tag,
    reach_matrix,
    root_reaches,
    snapshot,
    wait_reachable,
)
from vocab.faults import grudges

pytestmark = [pytest.mark.root, needs_root]
NODES = ["n1", "n2", "n3"]
PAIRS = [(a, b) for a, b in itertools.permutations(NODES, 2)]


@pytest.mark.parametrize("firewall", ["nft", "iptables"])
def test_partition_heal_kill_restart_and_clean_teardown(tmp_path, firewall):
    marker, tag = new_marker(), new_tag()
    backend = NetnsBackend(tmp_path / "run", NODES, firewall=firewall, tag=tag)
    before = snapshot(backend.bridge, marker)  # the bridge's name kcTAG prefixes all the run makes
    pids = []
    try:
        backend.setup()
        # the bridge sits on a subnet of its own, with the harness's address on it
        assert backend.subnet is not None
        during = snapshot(backend.bridge, marker)
        assert backend.bridge in during.links
        assert {backend.hosts[n].netns for n in NODES} <= during.netns
        assert len({backend.address(n) for n in NODES} | {backend.bridge_address}) == 4
        for node in NODES:
            pids.append(backend.start(node, echo_argv(backend.address(node), marker)).pid)
        for node in NODES:
            wait_reachable(backend.address(node))

        # everyone hears everyone
        assert all(reach_matrix(backend, PAIRS).values())

        # isolate n1: it can neither reach nor be reached by the others; n2 <-> n3 and the harness still work
        backend.partition(grudges.isolate("n1", NODES))
        reach = reach_matrix(backend, PAIRS)
        for (src, dst), ok in reach.items():
            assert ok == ("n1" not in (src, dst)), (src, dst, ok)
        assert all(root_reaches(backend.address(n)) for n in NODES)

        # a new partition replaces the old one: exactly the grudge's sources are blocked
        halves = grudges.random_halves(NODES, random.Random(3))
        backend.partition(halves)
        for node in NODES:
            assert backend.blocked_sources(node) == {backend.address(p) for p in halves[node]}

        backend.heal_network()
        assert all(not backend.blocked_sources(n) for n in NODES)
        assert all(reach_matrix(backend, PAIRS).values())

        # kill -9 and restart with the same command
        old = backend.process("n2")
        assert old is not None
        backend.kill("n2")
        assert not backend.is_alive("n2")
        assert not is_same_process(old.pid, old.starttime or 0)
        assert not root_reaches(backend.address("n2"), timeout=1.0)
        backend.restart("n2")
        assert backend.is_alive("n2")
        new = backend.process("n2")
        assert new is not None and new.pid != old.pid and new.spec.argv == old.spec.argv
        pids.append(new.pid)
        wait_reachable(backend.address("n2"))
    finally:
        backend.teardown()
        heal_if_left(tmp_path / "run")

    after = snapshot(backend.bridge, marker)
    assert after == before
    assert not marked_pids(marker)
    # nothing outstanding in the ledger, and a second teardown is a no-op
    assert not Ledger.load(backend.ledger_path).outstanding()
    assert backend.teardown().removed == []
    assert not any(backend.subnet.overlaps(n) for n in used_networks())


def test_logs_and_start_errors(tmp_path):
    with NetnsBackend(tmp_path / "run", ["a", "b"]) as backend:
        proc = backend.start("a", ["sh", "-c", "echo out; echo err >&2; ip -o -4 addr show eth0"])
        assert proc.popen.wait(timeout=10) == 0
        out = (tmp_path / "run" / "nodes" / "a" / "stdout.log").read_text()
        assert out.startswith("out\n") and backend.address("a") in out  # it ran inside the node's namespace
        assert (tmp_path / "run" / "nodes" / "a" / "stderr.log").read_text() == "err\n"
        with pytest.raises(BackendError, match="unknown node 'zz'"):
            backend.kill("zz")
        with pytest.raises(ValueError, match="unknown node 'zz'"):
            backend.partition({"a": frozenset({"zz"})})
        with pytest.raises(BackendError, match="never started"):
            backend.restart("b")
        # restarting a node whose process exited runs the same command again
        assert not backend.is_alive("a")
        backend.restart("a")
        assert backend.process("a").popen.wait(timeout=10) == 0
        assert (tmp_path / "run" / "nodes" / "a" / "stdout.log").read_text().count("out\n") == 2
        # the namespace has no route out: only the bridge's subnet is reachable
        routes = backend.exec("a", ["ip", "-4", "route"]).stdout
        assert "default" not in routes


def test_setup_refuses_a_run_dir_with_an_unhealed_ledger(tmp_path):
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    ledger.record("tmpdir", path=str(tmp_path / "kchaos-never-made"))
    with pytest.raises(Exception, match="kchaos heal"):
        NetnsBackend(tmp_path, ["a"]).setup()
    assert not (tmp_path / "nodes").exists()


def test_bridge_works_when_forward_policy_is_drop(tmp_path):
    """docker sets root FORWARD to DROP; bridged node traffic passes it, so the run allows its bridge.

    The check runs in a namespace of its own standing in for the root one, so the real root's rules are
    never changed by this test.
    """
    outer = f"kc{secrets.token_hex(3)}-outer"
    subprocess.run(["ip", "netns", "add", outer], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", outer, "iptables", "-w", "-P", "FORWARD", "DROP"], check=True)
        out = subprocess.run(
            ["ip", "netns", "exec", outer, sys.executable, str(HERE / "forward_drop_check.py"), str(tmp_path / "r")],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=HERE.parent.parent,
            check=True,
        ).stdout
    finally:
        subprocess.run(["ip", "netns", "del", outer], check=False)
        heal_if_left(tmp_path / "r")
    result = json.loads(out.splitlines()[-1])
    assert any("kchaos" in r and "ACCEPT" in r for r in result["rules_during"])
    assert result["with_rule"] is True
    assert result["without_rule"] is False
    assert result["rules_after"] == ["-P FORWARD DROP"]
    assert not Ledger.load(tmp_path / "r" / "ledger.jsonl").outstanding()
