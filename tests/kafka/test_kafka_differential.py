"""The differential check (benchmarks/kafka_differential.py): the same admin operations through
confluent-kafka against Apache Kafka 4.1.1 and the reference cluster, both real processes on
loopback. The differences must be exactly the listed ones, each explained in the docs; a new
difference (or a listed one that went away) fails here."""

from __future__ import annotations

from pathlib import Path

from benchmarks.kafka_differential import (
    DIFFERING_KEYS,
    KNOWN_DIFFERENCES,
    Outcome,
    Row,
    differential,
    table,
    unexplained,
)

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
    """The comparison itself: an unlisted difference, a listed one that disappeared, and a listed one
    in other keys than the listed ones all count."""

    def as_listed() -> list[Row]:
        rows = []
        for op in KNOWN_DIFFERENCES:
            if op in DIFFERING_KEYS:
                ours = {key: [1, "DEFAULT_CONFIG"] for key in [*DIFFERING_KEYS[op], "retention.ms"]}
                theirs = {**ours, **{key: [2, "DEFAULT_CONFIG"] for key in DIFFERING_KEYS[op]}}
                rows.append(Row(op, Outcome(theirs), Outcome(ours)))
            else:
                rows.append(Row(op, Outcome("ok"), Outcome("_UNSUPPORTED_FEATURE")))
        return rows

    assert unexplained(as_listed()) == []
    new = [*as_listed(), Row("create topic", Outcome("ok"), Outcome("TOPIC_ALREADY_EXISTS"))]
    assert unexplained(new) == ["create topic"]
    assert "DIFFERENT" in table(new) and "TOPIC_ALREADY_EXISTS" in table(new)
    gone = as_listed()
    gone[0] = Row(gone[0].operation, Outcome("ok"), Outcome("ok"))
    assert unexplained(gone) == [gone[0].operation]
    keyed = next(op for op in DIFFERING_KEYS)
    other_keys = [
        Row(r.operation, r.kafka, Outcome({**r.reference.answer, "retention.ms": [3, "DEFAULT_CONFIG"]}))  # type: ignore[dict-item]
        if r.operation == keyed
        else r
        for r in as_listed()
    ]
    assert unexplained(other_keys) == [keyed]
