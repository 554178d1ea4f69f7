"""The differential check (benchmarks/kafka_differential.py): the same admin operations through
confluent-kafka against Apache Kafka 4.1.1 and the reference cluster, both real processes on
loopback. The differences must be exactly the listed ones, each explained in the docs; a new
difference (or a listed one that went away) fails here."""

from __future__ import annotations

from pathlib import Path

from benchmarks.kafka_differential import KNOWN_DIFFERENCES, Outcome, Row, differential, table, unexplained

DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "suts.md"


def test_kafka_and_the_reference_cluster_differ_only_as_listed(tmp_path):
    rows = differential(tmp_path)
    print(table(rows))
    assert len(rows) >= 50
    assert unexplained(rows) == []
    same = {r.operation for r in rows if r.same}
    # the answers that matter most agree, errors included
    for operation in ("create topic again (duplicate)", "incremental SET, bad value", "describe ACLs after delete"):
        assert operation in same


def test_every_listed_difference_is_in_the_docs():
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### Differences from Kafka") :]
    for operation in KNOWN_DIFFERENCES:
        assert f"`{operation}`" in section, operation


def test_a_new_difference_is_reported():
    """The comparison itself: an unlisted difference, and a listed one that disappeared, both count."""
    listed = next(iter(KNOWN_DIFFERENCES))
    rows = [
        Row("create topic", Outcome("ok"), Outcome("TOPIC_ALREADY_EXISTS")),
        Row(listed, Outcome("ok"), Outcome("ok")),
        *(Row(op, Outcome(1), Outcome(2)) for op in KNOWN_DIFFERENCES if op != listed),
    ]
    assert unexplained(rows) == sorted(["create topic", listed])
    # a listed difference in other keys than the listed ones is a new difference
    every = "describe configs: every value and source"
    ok = {"min.insync.replicas": [1, "DEFAULT_CONFIG"], "retention.ms": [1, "DEFAULT_CONFIG"]}
    theirs = {"min.insync.replicas": [1, "DYNAMIC_DEFAULT_BROKER_CONFIG"], "retention.ms": [1, "DEFAULT_CONFIG"]}
    others = [Row(op, Outcome(1), Outcome(2)) for op in KNOWN_DIFFERENCES if op != every]
    assert unexplained([*others, Row(every, Outcome(theirs), Outcome(ok))]) == []
    worse = {**ok, "retention.ms": [2, "DEFAULT_CONFIG"]}
    assert unexplained([*others, Row(every, Outcome(theirs), Outcome(worse))]) == [every]
    assert "DIFFERENT" in table(rows) and "TOPIC_ALREADY_EXISTS" in table(rows)
