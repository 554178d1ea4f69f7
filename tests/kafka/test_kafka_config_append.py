"""config-append on Kafka without a cluster: its ops, how an answer becomes a completion, and the
stale-list-reads checker (both verdicts)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from checkers.stale_list_reads import check_stale_list_reads
from harness.plugins import get_workload
from tests.kafka.histories import paired
from vocab.generators.core import Op, Rng
from workloads.config_append import LIST_CONFIGS
from workloads.kafka_config_append import append_outcome, kafka_op_maker


def test_kafka_config_append_is_judged_as_serializable_with_its_stale_reads_measured():
    kafka = get_workload("config-append", "kafka")
    assert kafka is not get_workload("config-append", "kraft")
    assert kafka.checkers == ("elle-list-append", "committed-loss", "stale-list-reads")
    assert kafka.checker_options["elle-list-append"] == {"consistency_model": "serializable"}


def test_each_read_covers_both_list_configs_of_one_topic():
    keys = [f"append-{t}/{c}" for t in range(4) for c in LIST_CONFIGS]
    make = kafka_op_maker(keys, 0.5, 4, 0, 6, 16)
    rng = Rng(3)
    ops: list[Op] = [make(rng, i) for i in range(200)]
    reads = [op for op in ops if all(m[0] == "r" for m in op.value)]
    appends = [op for op in ops if all(m[0] == "append" for m in op.value)]
    assert reads and appends and len(reads) + len(appends) == len(ops)
    for op in reads:
        assert len({k.split("/")[0] for _, k, _ in op.value}) == 1
        assert [k.split("/")[1] for _, k, _ in op.value] == list(LIST_CONFIGS)
    elements = [m[2] for op in appends for m in op.value]
    assert len(elements) == len(set(elements))  # unique elements, Kafka's partition:broker items
    assert all(e.endswith(":0") and e[:-2].isdigit() for e in elements)


def test_an_append_is_ok_fail_or_info_as_its_resources_certainly_did_or_did_not_apply():
    mops = [["append", "a/x", "1:0"], ["append", "b/x", "2:0"]]
    refused = KafkaException(KafkaError(KafkaError.INVALID_CONFIG))
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    assert append_outcome(mops, ["a", "b"], [None, None]).type == "ok"
    partial = append_outcome(mops, ["a", "b"], [None, refused])
    assert partial.type == "ok" and partial.value == [mops[0]]
    assert append_outcome(mops, ["a", "b"], [refused, refused]).type == "fail"
    assert append_outcome(mops, ["a", "b"], [None, timed_out]).type == "info"  # may have been applied


def _history(ops: list[tuple[Any, ...]]) -> Any:
    """(process, mops, start ms, end ms, type, node) -> a paired history of txn ops."""
    events: list[dict[str, Any]] = []
    for process, mops, start, end, kind, node in ops:
        invoke = [[f, k, None if f == "r" else v] for f, k, v in mops]
        events.append({"time": start * 10**6, "process": process, "type": "invoke", "f": "txn", "value": invoke})
        events.append({"time": end * 10**6, "process": process, "type": kind, "f": "txn", "value": mops, "node": node})
    return paired(events)


def test_stale_but_growing_reads_are_valid_and_the_window_is_measured():
    h = _history(
        [
            (0, [["append", "k", "1:0"]], 0, 10, "ok", None),
            (0, [["append", "k", "2:0"]], 20, 30, "ok", None),
            (1, [["r", "k", ["1:0"]]], 40, 41, "ok", "n3"),  # stale: 2:0 was acknowledged at 30 ms
            (1, [["r", "k", ["1:0", "2:0"]]], 50, 51, "ok", "n3"),
            (2, [["r", "k", []]], 5, 6, "ok", "n1"),  # before any acknowledgement: not stale
        ]
    )
    v = check_stale_list_reads(h)
    assert v.valid is True
    assert v.details["stale_reads"] == 1 and v.details["stale_window"]["max_ms"] == 10.0
    assert v.details["by_node"]["n3"]["stale_window"]["count"] == 1


def test_a_node_showing_less_than_it_showed_before_is_invalid():
    h = _history(
        [
            (0, [["append", "k", "1:0"]], 0, 10, "ok", None),
            (1, [["r", "k", ["1:0"]]], 20, 21, "ok", "n2"),
            (1, [["r", "k", []]], 30, 31, "ok", "n2"),  # went back
            (2, [["r", "k", []]], 32, 33, "ok", "n3"),  # another node may lag: stale, not invalid
        ]
    )
    v = check_stale_list_reads(h)
    assert v.valid is False
    assert v.details["anomaly_counts"] == {"went-back": 1}
    assert v.details["stale_reads"] == 2
