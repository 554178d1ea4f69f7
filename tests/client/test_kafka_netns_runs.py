"""Chaos runs whose workload goes through confluent-kafka (librdkafka), on netns (root, real processes):
`kchaos run --backend netns --client confluent-kafka` under partition + kill + pause is valid for the
correct cluster and invalid under a planted bug that breaks configs, with the anomaly that bug makes.

The planted bug is `ctl-config-change-not-atomic` (KIP-631: one request's records in one batch): with
it, an IncrementalAlterConfigs of several keys is written one batch per record, so a linearizable
read at the controller can see half of it: Elle's G-single (read skew) in config-append. The shape
(long append transactions on few active keys, only controller reads, 10 workers at 100 ops/s) makes
half-applied requests common enough to be caught in a 30 s run; docs/internals/kafka-protocol.md
gives the seeds tried and how many caught it.

The played-broker workloads (`registrations`, `isr-changes`) observe the brokers' images through
librdkafka (`kafka-metadata`, `kafka-describe-cluster`; workloads/kafka_observer.py) while their
inter-node writes stay on our client. Their planted bug is `ctl-fenced-replica-into-isr` (KIP-841 /
KIP-903: AlterPartition adds a fenced broker to an ISR), which shows in a single Metadata answer: an ISR
of two or more holding a broker the answer does not list as unfenced (`checkers/metadata_answers.py`).
`registrations` sends no AlterPartition by default, so its bug run adds them to its mix (`alter=10`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness_netns.conftest import heal_if_left, needs_root

pytestmark = [pytest.mark.root, needs_root]

REPO = Path(__file__).resolve().parents[2]
BASE = [
    "--backend",
    "netns",
    "--client",
    "confluent-kafka",
    "--nemesis",
    "partition,kill,pause",
    "--time-limit",
    "30s",
    "--no-forger",
]
# config-append's shape under which a non-atomic config change shows as read skew
APPEND_SHAPE = [
    *("--workload-option", "max_txn_length=8"),
    *("--workload-option", "active_keys=4"),
    *("--workload-option", "broker_read_fraction=0"),
    *("--concurrency", "10", "--rate", "100"),
]
BUG = "ctl-config-change-not-atomic"
BUG_SEED = 1


def run(tmp_path: Path, *args: str) -> tuple[int, dict, list[dict]]:
    """`kchaos run` with `args`; its exit code, results.json and history (a ledger left behind is healed)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "run", *BASE, "--results", str(tmp_path), *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    named = [line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("run directory:")]
    assert len(named) == 1, done.stdout + done.stderr
    run_dir = Path(named[0]) if Path(named[0]).is_absolute() else REPO / named[0]
    assert (run_dir / "results.json").exists(), done.stdout + done.stderr
    test = json.loads((run_dir / "test.json").read_text())
    assert test["workload_options"]["client"] == "confluent-kafka"
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return done.returncode, json.loads((run_dir / "results.json").read_text()), history


def client_ops(history: list[dict], kind: str) -> list[dict]:
    return [e for e in history if e["process"] != "nemesis" and e["type"] == kind]


@pytest.mark.parametrize(
    ("workload", "seed", "shape"),
    [
        ("config-register", 1, []),
        ("config-append", 1, APPEND_SHAPE),
        # seed 2 kills the whole cluster: a restarted broker once answered librdkafka's Metadata with
        # no brokers, and librdkafka waited ~18 s to ask again (availability failed; kafka_codec.py)
        ("config-register", 2, []),
    ],
    ids=["register", "append", "register-whole-cluster-kill"],
)
def test_the_correct_cluster_is_valid_through_confluent_kafka(tmp_path, workload, seed, shape):
    code, results, history = run(tmp_path, "--workload", workload, "--seed", str(seed), *shape)
    assert code == 0 and results["valid"] is True, {k: v.get("valid") for k, v in results["checkers"].items()}
    ok = client_ops(history, "ok")
    writes = [e for e in ok if e["f"] == "write" or (e["f"] == "txn" and e["value"][0][0] == "append")]
    reads = [e for e in ok if e["f"] == "read" or (e["f"] == "txn" and e["value"][0][0] == "r")]
    assert len(writes) > 100 and len(reads) > 100
    assert any(e["process"] == "nemesis" and e["type"] == "info" for e in history)  # faults were applied
    # what went wrong went wrong in librdkafka's words, mapped by workloads/kafka_client.py
    failures = client_ops(history, "info") + client_ops(history, "fail")
    assert all("ClientTimeoutError" not in str(e.get("error")) or e["f"] == "read-broker" for e in failures)


def test_a_planted_config_bug_is_caught_through_confluent_kafka(tmp_path):
    code, results, _ = run(
        tmp_path, "--workload", "config-append", "--seed", str(BUG_SEED), "--bug", BUG, *APPEND_SHAPE
    )
    elle = results["checkers"]["elle-list-append"]
    assert code == 1 and elle["valid"] is False
    assert "G-single" in elle["anomaly_types"], elle["anomaly_types"]


PLAYED = ["registrations", "isr-changes"]
PLAYED_BUG = "ctl-fenced-replica-into-isr"
PLAYED_SHAPE = {"registrations": ["--workload-option", "mix=alter=10"], "isr-changes": []}


def oks(history: list[dict], f: str) -> list[dict]:
    return [e for e in client_ops(history, "ok") if e["f"] == f]


@pytest.mark.parametrize("workload", PLAYED)
def test_the_played_broker_workloads_observe_through_confluent_kafka(tmp_path, workload):
    code, results, history = run(tmp_path, "--workload", workload, "--seed", "1")
    assert code == 0 and results["valid"] is True, {k: v.get("valid") for k, v in results["checkers"].items()}
    metadata = oks(history, "kafka-metadata")
    cluster = oks(history, "kafka-describe-cluster")
    assert len(metadata) > 50 and len(cluster) > 10
    # librdkafka's answers, from the brokers: no offset, the played brokers among the unfenced
    assert all(e["node"] in ("b1", "b2") and "offset" not in e["value"] for e in metadata + cluster)
    assert any(set(e["value"]["brokers"]) >= {1000, 1001} and e["value"]["partitions"] for e in metadata)
    # our client still writes (registrations, heartbeats) and reads the controllers' images
    assert len(oks(history, "heartbeat")) > 50 and oks(history, "metadata")
    answers = results["checkers"]["metadata-answers"]
    assert answers["valid"] is True and answers["counts"]["answers"]["kafka-metadata"] == len(metadata)


@pytest.mark.parametrize("workload", PLAYED)
def test_a_fenced_replica_in_an_isr_is_seen_through_confluent_kafka(tmp_path, workload):
    code, results, _ = run(
        tmp_path, "--workload", workload, "--seed", "1", "--bug", PLAYED_BUG, *PLAYED_SHAPE[workload]
    )
    answers = results["checkers"]["metadata-answers"]
    assert code == 1 and answers["valid"] is False
    assert "fenced-in-isr" in answers["anomalies"], answers["anomalies"]
    assert answers["counts"]["anomalous_answers"]["kafka-metadata"] > 0  # librdkafka's answers show it
