"""The metadata-answers checker: each Metadata answer judged alone. Hand-made histories of both kinds of
answer (our client's `metadata`, librdkafka's `kafka-metadata`): states every committed image may show
are valid, each broken rule is its anomaly, and answers that carry no rule are counted, not judged."""

from __future__ import annotations

import pytest

from checkers.broker_ops import BrokerOpsError
from checkers.metadata_answers import EXPLANATIONS, check_metadata_answers, summarize
from tests.checkers.broker_histories import B0, B1, B2, P0, BrokerHistoryBuilder

REPLICAS = [B0, B1, B2]


def answer(h: BrokerHistoryBuilder, brokers, leader, isr, *, at: float, f: str = "kafka-metadata", **extra) -> None:
    parts = {P0: {"leader": leader, "isr": isr, "replicas": REPLICAS}}
    value = {"brokers": brokers, "partitions": parts, **extra}
    if f == "kafka-metadata":
        value = {"controller": 4, "answered_by": 4, **value}
    h.op(f, {"node": "b1"}, value, inv=at, node="b1")


def found(h: BrokerHistoryBuilder) -> dict:
    verdict = check_metadata_answers(h.history())
    return verdict.details.get("anomalies", {})


def test_states_a_correct_cluster_shows_under_faults_are_valid():
    """A lagging broker's old state, a leaderless partition whose last ISR member is fenced (Kafka keeps
    it), a fenced follower already out of the ISR, and answers in any order: each alone is consistent."""
    h = BrokerHistoryBuilder()
    answer(h, [4, B0, B1, B2], B0, [B0, B1, B2], at=10)
    answer(h, [4, B0, B1], B0, [B0, B1], at=20)  # B2 fenced: out of the ISR
    answer(h, [4, B0, B1, B2], B0, [B0, B1, B2], at=30)  # another broker, behind: the older state
    answer(h, [4], -1, [B1], at=40)  # every replica fenced: no leader, the last member stays
    answer(h, [4, B0], B0, [B0], at=50, f="metadata", offset=17)  # our client's answer, same rules
    h.op("kafka-describe-cluster", {"node": "b1"}, {"brokers": [4, 5], "controller": 4}, inv=60, node="b1")
    verdict = check_metadata_answers(h.history())
    assert verdict.valid is True, verdict.details["anomalies"]
    counts = verdict.details["counts"]
    assert counts["answers"] == {"metadata": 1, "kafka-metadata": 4, "kafka-describe-cluster": 1}
    assert counts["partitions_judged"] == 5
    assert "metadata-answers: valid" in summarize(verdict)[0]


@pytest.mark.parametrize(
    ("brokers", "leader", "isr", "anomaly"),
    [
        ([4, B0, B1], B2, [B2, B0], "fenced-leader"),
        ([4, B0, B1], B0, [B0, B1, B2], "fenced-in-isr"),
        ([4, B0, B1, B2], B0, [B1, B2], "leader-not-in-isr"),
        ([4, B0, B1, B2], -1, [], "empty-isr"),
        ([4, B0, B1, B2], B0, [B0, 1009], "isr-outside-replicas"),
        ([4, B0, B1, B2], B0, [B0, B0], "isr-outside-replicas"),
    ],
    ids=["fenced-leader", "fenced-in-isr", "leader-not-in-isr", "empty-isr", "not-a-replica", "twice"],
)
def test_each_broken_rule_is_its_anomaly(brokers, leader, isr, anomaly):
    h = BrokerHistoryBuilder()
    answer(h, [4, B0, B1, B2], B0, [B0, B1, B2], at=10)
    answer(h, brokers, leader, isr, at=20)
    verdict = check_metadata_answers(h.history())
    assert verdict.valid is False
    assert anomaly in verdict.details["anomalies"]
    assert verdict.details["counts"]["anomalous_answers"] == {"metadata": 0, "kafka-metadata": 1}
    example = verdict.details["anomalies"][anomaly]["examples"][0]
    assert example["partition"] == P0 and "kafka-metadata" in example["why"] and "answered by b1" in example["why"]
    assert set(verdict.details["anomalies"]) <= set(EXPLANATIONS)


def test_our_clients_answers_are_judged_by_the_same_rules():
    h = BrokerHistoryBuilder()
    answer(h, [4, B0, B1], B0, [B0, B1, B2], at=10, f="metadata", offset=40)
    verdict = check_metadata_answers(h.history())
    assert verdict.valid is False and "fenced-in-isr" in verdict.details["anomalies"]
    assert verdict.details["counts"]["anomalous_answers"] == {"metadata": 1, "kafka-metadata": 0}


def test_failed_and_unknown_answers_carry_no_state():
    h = BrokerHistoryBuilder()
    answer(h, [4, B0, B1, B2], B0, [B0, B1, B2], at=10)
    h.op("kafka-metadata", {"node": "b2"}, {"error": "librdkafka:_TIMED_OUT"}, inv=20, type="info", node="b2")
    h.op("kafka-metadata", {"node": "b2"}, {"error": "librdkafka:_TRANSPORT"}, inv=30, type="fail", node="b2")
    verdict = check_metadata_answers(h.history())
    assert verdict.valid is True and verdict.details["counts"]["answers"]["kafka-metadata"] == 1


def test_no_metadata_answer_is_unknown():
    h = BrokerHistoryBuilder()
    h.op("kafka-describe-cluster", {"node": "b1"}, {"brokers": [4], "controller": 4}, inv=10, node="b1")
    verdict = check_metadata_answers(h.history())
    assert verdict.valid == "unknown" and "no Metadata answers" in verdict.details["reason"]


def test_a_malformed_answer_is_a_one_line_error_naming_the_op():
    h = BrokerHistoryBuilder()
    h.op("kafka-metadata", {"node": "b1"}, {"brokers": "4,1000", "partitions": {}}, inv=10, node="b1")
    with pytest.raises(BrokerOpsError, match=r"^op \d+ \(kafka-metadata\): brokers must be a list"):
        check_metadata_answers(h.history())
