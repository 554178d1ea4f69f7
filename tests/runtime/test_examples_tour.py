"""The README's tour of real nodes, run as it stands against the configs in `examples/`: three
controllers and a broker, a combined node, and a combined node with SASL and the authorizer.

Every node is a real process started with `kchaos node start`, stopped by its own PID (SIGTERM, then
SIGKILL), its data under a temporary working directory (the examples' data dirs are relative).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.runtime.local_cluster import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KCHAOS = [sys.executable, "-m", "harness"]
CONTROLLERS = "127.0.0.2:9093,127.0.0.3:9093,127.0.0.4:9093"


def kchaos(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KCHAOS, *argv], capture_output=True, text=True, timeout=60, cwd=cwd)


def succeeds(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str] | None:
    proc = kchaos(*argv, cwd=cwd)
    return proc if proc.returncode == 0 else None


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Start the examples named by the test (`start(...)`); stop every one of them by PID afterwards."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def start(procs: list[subprocess.Popen[str]], cwd: Path, *configs: str) -> None:
    for config in configs:
        log = (cwd / f"{Path(config).stem}.log").open("w")
        procs.append(
            subprocess.Popen(
                [*KCHAOS, "node", "start", "--config", str(EXAMPLES / config)], cwd=cwd, stderr=log, text=True
            )
        )


def test_three_controllers_and_a_broker_from_the_examples(tmp_path: Path, nodes) -> None:
    start(nodes, tmp_path, "controller-1.properties", "controller-2.properties", "controller-3.properties")
    start(nodes, tmp_path, "broker-4.properties")
    status = wait_for(
        lambda: succeeds("quorum", "describe", "--status", "--bootstrap-server", CONTROLLERS, cwd=tmp_path),
        30,
        what="the quorum's status",
    )
    assert "CurrentVoters:          [1, 2, 3]" in status.stdout
    leader = next(line.split()[-1] for line in status.stdout.splitlines() if line.startswith("LeaderId:"))
    for one in (*CONTROLLERS.split(","), "127.0.0.5:9092"):  # followers and the broker ask the leader for us
        alone = succeeds("quorum", "describe", "--status", "--bootstrap-server", one, cwd=tmp_path)
        assert alone is not None and f"LeaderId:               {leader}" in alone.stdout, one
    argv = ("admin", "--bootstrap-server", "127.0.0.5:9092", "topics", "--create", "--topic", "t", "--partitions", "3")
    created = wait_for(lambda: succeeds(*argv, cwd=tmp_path), 30, what="a topic created through the broker")
    assert created.stdout.startswith("Created topic t")
    listed = wait_for(
        lambda: (
            "t"
            in kchaos("admin", "--bootstrap-server", "127.0.0.5:9092", "topics", "--list", cwd=tmp_path).stdout.split()
        ),
        30,
        what="the topic in the broker's image",
    )
    assert listed
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["node-1", "node-2", "node-3", "node-4"]
    assert all(p.poll() is None for p in nodes)  # nobody died on the way


def test_a_combined_node_and_a_sasl_combined_node_from_the_examples(tmp_path: Path, nodes) -> None:
    start(nodes, tmp_path, "combined.properties", "sasl/combined.properties")
    argv = ("admin", "--bootstrap-server", "127.0.0.6:9092", "topics", "--create", "--topic", "c", "--partitions", "1")
    plain = wait_for(lambda: succeeds(*argv, cwd=tmp_path), 30, what="a topic on the combined node")
    assert plain.stdout.startswith("Created topic c")
    admin = ("--bootstrap-server", "127.0.0.7:9092", "--user", "admin", "--password", "admin-secret")
    sasl = wait_for(
        lambda: succeeds("admin", *admin, "topics", "--create", "--topic", "s", "--partitions", "1", cwd=tmp_path),
        30,
        what="a topic on the SASL node as admin",
    )
    assert sasl.stdout.startswith("Created topic s")
    alice = ("--bootstrap-server", "127.0.0.7:9092", "--user", "alice", "--password", "alice-secret")
    refused = kchaos("admin", *alice, "topics", "--create", "--topic", "s2", "--partitions", "1", cwd=tmp_path)
    assert refused.returncode == 254 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr
    login = ("--user", "admin", "--password", "admin-secret")
    quorum = kchaos("quorum", "describe", "--replication", "--bootstrap-server", "127.0.0.7:9093", *login, cwd=tmp_path)
    assert quorum.returncode == 0 and "Leader" in quorum.stdout, quorum.stderr
    anonymous = kchaos("quorum", "describe", "--status", "--bootstrap-server", "127.0.0.7:9093", "--timeout-ms", "1000",
                       cwd=tmp_path)  # fmt: skip
    assert anonymous.returncode == 254 and "ILLEGAL_SASL_STATE" in anonymous.stderr and "--user" in anonymous.stderr
    assert "Traceback" not in refused.stderr
    no_login = kchaos(
        "admin", "--bootstrap-server", "127.0.0.7:9092", "--timeout", "3000", "topics", "--list", cwd=tmp_path
    )
    assert no_login.returncode == 254 and "does this listener need --user and --password?" in no_login.stderr
    assert all(p.poll() is None for p in nodes)
