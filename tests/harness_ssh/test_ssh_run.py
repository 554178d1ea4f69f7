"""Whole `kchaos run`s over SSH on a 3+2 reference cluster (five sshd hosts in network namespaces): a
chaos run with partition, kill, pause and clock faults that is valid and leaves nothing on the hosts,
and a run with a planted bug that the checkers catch over SSH too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.procs import FAKETIME_SHM_NAMES, SHM_DIR
from harness.backends.ssh import LATENCY_FILE
from harness.db.kafka.dist import KAFKA_VERSION, installed_jars
from harness.runner import run_test
from harness.test_spec import Cluster
from tests.harness_run.helpers import sim_spec
from tests.harness_ssh.sshd_hosts import SshHosts, needs_sshd, sshd_hosts
from tests.harness_ssh.test_ssh_backend import node_processes

pytestmark = [pytest.mark.root, needs_sshd]
NODES = ("c1", "c2", "c3", "b1", "b2")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[SshHosts]:
    with sshd_hosts(tmp_path_factory.mktemp("ssh"), ["h1", "h2", "h3", "h4", "h5"]) as found:
        yield found


def run_tag(run_dir: Path) -> str:
    """The backend's tag for a run, from its ledger (the packet filter table is named after it)."""
    for line in (run_dir / "ledger.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "ssh_firewall":
            return rec["name"].removeprefix("kchaos_").removeprefix("KC_")
    raise AssertionError(f"{run_dir}: no ssh_firewall in the ledger")


def spec(hosts: SshHosts, **changes):
    base = dict(
        seed=21,
        backend="ssh",
        inventory=str(hosts.inventory),
        cluster=Cluster(controllers=3, brokers=2),
        nemesis=("partition", "kill", "pause", "clock"),
        time_limit_s=20.0,
        nemesis_interval_s=2.0,
        nemesis_duration_s=3.0,
        concurrency=5,
        rate=30.0,
    )
    return sim_spec(**{**base, **changes})


def test_chaos_run_over_ssh_is_valid_and_leaves_nothing(hosts, tmp_path):
    # Every kind must start at least once. On a loaded machine a fault over SSH takes longer to apply, so
    # fewer fit in the run (20 s at load 16 fitted 7 starts), and a random draw with seed 21 drew its first
    # kill eighth. Dealt (`nemesis_draw="deck"`), the first four starts are one of each kind.
    result = run_test(
        spec(hosts, seed=7, time_limit_s=30.0, nemesis_interval_s=1.5, nemesis_draw="deck"),
        root=tmp_path,
        say=lambda _: None,
        progress=False,
    )
    assert result.error is None, result.error
    run = result.run.path
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    kinds = {e["f"] for e in events if e["process"] == "nemesis" and e["type"] == "info"}
    assert {"start-partition", "start-kill", "start-pause", "start-clock"} <= kinds, kinds
    assert sum(1 for e in events if e["process"] != "nemesis" and e["type"] == "ok") > 50
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    test = json.loads((run / "test.json").read_text())
    assert test["backend"] == "ssh" and test["inventory"] == str(hosts.inventory)
    ids = {"c1": 1, "c2": 2, "c3": 3, "b1": 4, "b2": 5}
    for node in NODES:
        node_dir = run / "nodes" / node
        assert (node_dir / "committed-log.jsonl").is_file()
        log = (node_dir / "stderr.log").read_text()
        assert f"node {ids[node]} stopped" in log  # stopped cleanly by SIGTERM over SSH, log fetched
        assert "__cluster_metadata-0" in (node_dir / "data-dir.txt").read_text().split()
    figures = json.loads((run / LATENCY_FILE).read_text())
    assert {"partition", "heal_network", "kill", "pause", "clock"} <= set(figures["faults"])
    tag = run_tag(run)
    assert not node_processes(tag)
    tables = "".join(hosts.net.exec(h, ["nft", "list", "tables"]).stdout for h in hosts.roots)
    assert f"kchaos_{tag}" not in tables
    assert list(hosts.root.iterdir()) == []  # nothing reached the hosts' files through a local path
    # every node incarnation (kill faults restart them) left no libfaketime files on its host
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    pids = {rec["pid"] for rec in ledger if rec.get("op") == "update" and "pid" in rec}
    assert len(pids) > len(NODES)
    assert not [name for pid in pids for name in FAKETIME_SHM_NAMES if (SHM_DIR / name.format(pid=pid)).exists()]
    assert (hosts.roots["h1"] / "runs" / tag / "nodes" / "c1" / "server.properties").is_file()


def test_a_planted_bug_is_caught_over_ssh_through_the_cli(hosts, tmp_path, capsys):
    from harness.cli import main

    # One controller, so the forger's Envelope (sent to a random controller) always reaches the active one;
    # the forger cycles through its five kinds every 2 s, so 14 s send each at least once.
    argv = ["run", "--backend", "ssh", "--inventory", str(hosts.inventory), "--nodes", "1+2", "--nemesis", "none",
            "--bug", "ctl-envelope-unauthorized", "--time-limit", "14s", "--seed", "32",
            "--results", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "verdict: INVALID (exit 1)" in out and "forgery: False" in out, out
    run = Path(out.split("run directory: ", 1)[1].split()[0])
    checkers = json.loads((run / "results.json").read_text())["checkers"]
    assert checkers["forgery"]["valid"] is False
    assert json.loads((run / "test.json").read_text())["bugs"] == ["ctl-envelope-unauthorized"]
    assert not node_processes(run_tag(run))


def test_etcd_over_ssh_is_valid_and_its_logs_and_status_come_back(hosts, tmp_path):
    """The second system under test on this backend: one etcd member per host, started and stopped
    over SSH like any node, its log, status and data-dir listing fetched back into the run directory."""
    etcd = spec(
        hosts,
        sut="etcd",
        cluster=Cluster(combined=3),
        workload="register",
        nemesis=("partition", "kill", "pause"),
        seed=1,
        nemesis_draw="deck",  # the first three starts are one of each kind (seed 3 at random: its first kill fourth)
    )
    result = run_test(etcd, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    assert result.error is None, result.error
    run = result.run.path
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert {"start-partition", "start-kill", "start-pause"} <= {e["f"] for e in events if e["process"] == "nemesis"}
    assert sum(1 for e in events if e["process"] != "nemesis" and e["type"] == "ok") > 100
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    for node in ("n1", "n2", "n3"):
        assert '"msg":"starting an etcd server"' in (run / "nodes" / node / "stderr.log").read_text()
        assert json.loads((run / "nodes" / node / "etcd-status.json").read_text())["version"].startswith("3.4")
    assert not node_processes(run_tag(run))


@pytest.mark.skipif(not installed_jars(), reason="needs the Kafka jars (bash setup.sh)")
def test_kafka_over_ssh_runs_on_the_hosts_java_with_the_jars_shipped_to_them(hosts, tmp_path):
    """Apache Kafka as the system under test over SSH: each host's own `java`, the jars uploaded into the
    host's root, the storage format run on the host; config-register under kill -9 and partitions,
    judged by every checker, nothing left running. (That a second run ships nothing: test_ssh_backend.)"""
    kafka = spec(
        hosts,
        name="kafka-over-ssh",
        sut="kafka",
        cluster=Cluster(combined=3),
        workload="config-register",
        nemesis=("kill", "partition"),
        nemesis_interval_s=5.0,
        nemesis_duration_s=5.0,
        seed=5,
        recovery_s=5.0,
    )
    result = run_test(kafka, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    assert result.error is None, result.error
    run = result.run.path
    assert not node_processes(run_tag(run))
    shipped = {h: sorted((root / "opt").glob(f"kafka-{KAFKA_VERSION}-*")) for h, root in hosts.roots.items()}
    used = {h: dirs for h, dirs in shipped.items() if dirs}
    assert len(used) == 3 and all(len(d) == 1 and (d[0] / ".complete").is_file() for d in used.values()), shipped
    assert {p.name for p in next(iter(used.values()))[0].glob("*.jar")} == {p.name for p in installed_jars()}
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    started = next(e for e in ledger if e.get("kind") == "ssh_process" and e.get("node") == "n1")
    argv, host = started["argv"], started["host"]["name"]
    assert argv[0] == "java" and argv[argv.index("-cp") + 1] == f"{hosts.root}/opt/{used[host][0].name}/*"
    assert not any(str(tmp_path) in a for a in argv)  # every file it names is on the host

    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    kills = [e for e in events if e["process"] == "nemesis" and e["f"] == "start-kill" and e["type"] == "info"]
    assert any(e["value"].get("targets") for e in kills)  # a Kafka node was killed over SSH
    ok = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok"]
    assert {e["node"] for e in ok if e["f"] == "read"} == {"n1", "n2", "n3"}
    verdicts = json.loads((run / "results.json").read_text())["checkers"]
    assert verdicts["prefix-reads"]["reads"] > 0 and verdicts["prefix-reads"]["valid"] is True
    assert verdicts["committed-loss"]["valid"] is True
    for node in ("n1", "n2", "n3"):
        assert "Kafka Server started" in (run / "nodes" / node / "stdout.log").read_text()
        assert "__cluster_metadata-0" in (run / "nodes" / node / "data-dir.txt").read_text()
        assert "Formatting" in (run / "nodes" / node / "format.log").read_text()


def test_a_member_that_exits_at_start_on_its_host_is_quoted_from_the_hosts_log(hosts, tmp_path):
    """The logs of a remote member stay on its host until collect; a member that exits while the cluster
    is awaited still stops the run within seconds in its own words, read from the end of its log there."""
    etcd = spec(
        hosts, sut="etcd", cluster=Cluster(combined=3), workload="register", sut_settings={"heartbeat-interval": "soon"}
    )
    result = run_test(etcd, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    assert result.error is not None and result.exit_code != 0
    assert "etcd node n" in result.error and " exited; its output ends: " in result.error, result.error
    assert 'invalid value "soon" for flag -heartbeat-interval' in result.error, result.error
    assert not node_processes(run_tag(result.run.path))
