"""The metadata-answers checker: each Metadata answer judged alone. Hand-made histories of both kinds of
answer (our client's `metadata`, librdkafka's `kafka-metadata`): states every committed image may show
are valid, each broken rule is its anomaly, and answers that carry no rule are counted, not judged."""

from __future__ import annotations

import pytest

from checkers.broker_ops import BrokerOpsError
from checkers.metadata_answers import EXPLANATIONS, check_metadata_answers, summarize
from tests.checkers.broker_histories import B0, B1, B2, MS, P0, BrokerHistoryBuilder

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


def test_with_eligible_leader_replicas_an_empty_isr_without_leader_is_valid():
    """KIP-966 (Kafka 4.1's default): the last ISR member, fenced, moves to the ELR, leaving the
    partition with no leader and an empty ISR (seen on Kafka 4.1.1: brokers [2, 3], leader -1, ISR [])."""
    h = BrokerHistoryBuilder()
    answer(h, [4, B0, B1, B2], B0, [B0], at=10)
    answer(h, [4, B1, B2], -1, [], at=20)
    assert check_metadata_answers(h.history(), elr=True).valid is True
    assert "empty-isr" in check_metadata_answers(h.history()).details["anomalies"]  # not without ELR
    answer(h, [4, B1, B2], B1, [], at=30)  # a leader with an empty ISR is wrong either way
    verdict = check_metadata_answers(h.history(), elr=True)
    assert verdict.valid is False and verdict.details["anomalies"]["empty-isr"]["count"] == 1


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


def nemesis(h: BrokerHistoryBuilder, f: str, value: dict, *, at: float) -> None:
    for kind in ("invoke", "info"):
        h.events.append({"time": int(at * MS), "process": "nemesis", "type": kind, "f": f, "value": value})


def kafka_answer(h: BrokerHistoryBuilder, node: str, me: int, brokers: list[int], leader: int, *, at: float) -> None:
    parts = {P0: {"leader": leader, "isr": [leader], "replicas": [1, 2, 3]}}
    value = {"brokers": brokers, "controller": 1, "answered_by": me, "partitions": parts}
    h.op("kafka-metadata", {"node": node}, value, inv=at, node=node)


def test_how_long_a_killed_broker_stays_listed_and_leader_is_measured_not_judged():
    """n3 (broker 3, as its own answers reveal) is killed at 1 s: n1 still lists it and names it the
    leader at 2 s, n2 lists it without leading at 5 s, unlists it at 7 s; n3's own answers do not count."""
    h = BrokerHistoryBuilder()
    kafka_answer(h, "n3", 3, [1, 2, 3], 3, at=500)
    nemesis(h, "start-kill", {"targets": ["n3"]}, at=1_000)
    kafka_answer(h, "n1", 1, [1, 2, 3], 3, at=2_000)
    kafka_answer(h, "n2", 2, [1, 2, 3], 1, at=5_000)
    kafka_answer(h, "n1", 1, [1, 2], 1, at=7_000)
    kafka_answer(h, "n2", 2, [1, 2], 1, at=8_000)
    nemesis(h, "stop-kill", {}, at=9_000)
    kafka_answer(h, "n1", 1, [1, 2], 1, at=9_500)  # after the fault: not counted
    verdict = check_metadata_answers(h.history())
    assert verdict.valid is True
    fencing = verdict.details["fencing"]
    (fault,) = fencing["per_fault"]
    assert (fault["node"], fault["broker"], fault["answers"], fault["unlisted_seen"]) == ("n3", 3, 4, True)
    assert (fault["first_unlisted_s"], fault["last_listed_s"], fault["last_led_s"]) == (6.005, 4.005, 1.005)
    assert fencing["max_last_listed_s"] == 4.005 and fencing["unlisted_seen"] == 1
    assert "fencing seen for 1 of 1" in summarize(verdict)[1]


def test_a_fault_shorter_than_the_session_shows_no_fencing_and_partitions_are_not_measured():
    h = BrokerHistoryBuilder()
    kafka_answer(h, "n2", 2, [1, 2, 3], 1, at=500)
    nemesis(h, "start-pause", {"targets": ["n2"]}, at=1_000)
    kafka_answer(h, "n1", 1, [1, 2, 3], 2, at=2_000)
    nemesis(h, "stop-pause", {}, at=3_000)
    nemesis(h, "start-partition", {"targets": ["n1"]}, at=4_000)
    kafka_answer(h, "n3", 3, [1, 2], 2, at=5_000)
    nemesis(h, "stop-partition", {}, at=6_000)
    fencing = check_metadata_answers(h.history()).details["fencing"]
    (fault,) = fencing["per_fault"]
    assert fault["fault"] == "pause" and fault["unlisted_seen"] is False and fault["last_led_s"] == 1.005
    assert fencing["max_last_listed_s"] is None  # only faults where fencing was seen count
