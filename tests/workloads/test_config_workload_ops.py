"""The config workloads' ops: what they generate, the requests they send, how answers become completions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from node.client.errors import ClientTimeoutError, ConnectError
from node.protocol.admin import (
    AlterConfigsResourceResponse,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsResponse,
)
from node.protocol.errors import ErrorCode
from vocab.generators import Rng
from workloads.calls import Answer
from workloads.config_append import (
    BROKER_READ,
    GENERATION,
    LIST_CONFIGS,
    append_answer,
    append_request,
    op_maker,
    planned_topics,
    window,
)
from workloads.config_register import op_maker as register_ops
from workloads.config_requests import described_values, key_of

KEYS = [key_of(f"append-{t}", c) for t in range(8) for c in LIST_CONFIGS]


def _ops(maker: Any, n: int, seed: int = 1) -> list[Any]:
    rng = Rng(seed)
    return [maker(rng, i) for i in range(n)]


def test_appended_elements_are_unique_across_the_run_and_its_later_generators() -> None:
    first = _ops(op_maker(KEYS, 0.5, 0.3, 4), 500)
    again = _ops(op_maker(KEYS, 0.5, 0.3, 4, base=GENERATION), 500)
    elements = [m[2] for op in first + again if op.f == "txn" for m in op.value if m[0] == "append"]
    assert len(elements) > 500 and len(elements) == len(set(elements))
    assert all(e.endswith(":0") and e[:-2].isdigit() for e in elements)  # valid throttled-replica items


def test_ops_are_appends_controller_reads_and_broker_reads_over_the_active_window() -> None:
    ops = _ops(op_maker(KEYS, 0.5, 0.3, 4, active=6, span=16), 800)
    kinds = {"append": 0, "read": 0, "broker": 0}
    for i, op in enumerate(ops):
        active = set(window(KEYS, 6, 16, i))
        if op.f == BROKER_READ:
            kinds["broker"] += 1
            keys = [m[1] for m in op.value["reads"]]
        else:
            assert op.f == "txn" and 1 <= len(op.value) <= 4
            kinds["read" if op.value[0][0] == "r" else "append"] += 1
            assert len({m[0] for m in op.value}) == 1  # all appends or all reads: one request each
            keys = [m[1] for m in op.value]
            if op.value[0][0] == "r":
                assert all(m[2] is None for m in op.value)
        assert set(keys) <= active
        if op.f == BROKER_READ or op.value[0][0] == "r":
            assert len(keys) == len(set(keys))  # a read names each key once
    assert all(count > 80 for count in kinds.values()), kinds


def test_the_window_slides_and_wraps() -> None:
    assert window(KEYS, 3, 10, 0) == KEYS[:3] and window(KEYS, 3, 10, 25) == KEYS[2:5]
    assert window(KEYS, 3, 10, 10 * (len(KEYS) - 1)) == [KEYS[-1], KEYS[0], KEYS[1]]
    assert window(KEYS[:2], 6, 10, 0) == KEYS[:2]


def test_enough_topics_for_the_test_rate_and_duration() -> None:
    spec = SimpleNamespace(rate=50.0, time_limit_s=60.0, recovery_s=10.0)
    assert planned_topics(spec, 6, 16) == 40  # 3500 ops / 16 per slide + 6 keys = 113 topics: capped
    assert planned_topics(SimpleNamespace(rate=10, time_limit_s=20, recovery_s=5), 6, 16) == 11
    assert planned_topics(SimpleNamespace(rate=0, time_limit_s=60, recovery_s=10), 6, 16) == 3


def test_one_append_per_key_one_resource_per_topic_in_one_request() -> None:
    a0, a1 = KEYS[0], KEYS[1]  # two configs of append-0
    b0 = KEYS[2]  # append-1
    request = append_request(
        [["append", a0, "1:0"], ["append", b0, "2:0"], ["append", a0, "3:0"], ["append", a1, "4:0"]]
    )
    by_topic = {r.resource_name: r for r in request.resources}
    assert list(by_topic) == ["append-0", "append-1"]
    assert all(r.resource_type == ConfigResourceType.TOPIC for r in request.resources)
    changes = {c.name: (c.config_operation, c.value) for c in by_topic["append-0"].configs}
    assert changes == {
        LIST_CONFIGS[0]: (ConfigOperation.APPEND, "1:0,3:0"),
        LIST_CONFIGS[1]: (ConfigOperation.APPEND, "4:0"),
    }


def _altered(*codes: tuple[str, int]) -> Answer:
    responses = tuple(AlterConfigsResourceResponse(c, None, ConfigResourceType.TOPIC, t) for t, c in codes)
    return Answer(IncrementalAlterConfigsResponse(responses), None, "b1")


def test_append_answers_become_ok_fail_or_info() -> None:
    mops = [["append", KEYS[0], "1:0"], ["append", KEYS[2], "2:0"]]
    ok = append_answer(mops, _altered(("append-0", 0), ("append-1", 0)))
    assert (ok.type, ok.value, ok.node) == ("ok", mops, "b1")
    refused = append_answer(
        mops, _altered(("append-0", ErrorCode.NOT_CONTROLLER), ("append-1", ErrorCode.NOT_CONTROLLER))
    )
    assert refused.type == "fail"
    timed_out = append_answer(mops, Answer(None, ClientTimeoutError("no answer", sent=True), "b2"))
    assert timed_out.type == "info" and timed_out.node == "b2"
    assert append_answer(mops, Answer(None, ConnectError("refused"), "b2")).type == "fail"
    ambiguous = append_answer(
        mops, _altered(("append-0", ErrorCode.REQUEST_TIMED_OUT), ("append-1", ErrorCode.REQUEST_TIMED_OUT))
    )
    assert ambiguous.type == "info"


def test_a_partial_answer_completes_with_the_appends_that_were_applied() -> None:
    mops = [["append", KEYS[0], "1:0"], ["append", KEYS[2], "2:0"], ["append", KEYS[1], "3:0"]]
    partial = append_answer(mops, _altered(("append-0", 0), ("append-1", ErrorCode.INVALID_CONFIG)))
    assert partial.type == "ok" and partial.value == [mops[0], mops[2]]
    assert "partially applied" in partial.error and "append-1" in partial.error


def _entry(name: str, value: str, source: ConfigSource) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(name, value, False, source)


def test_described_values_are_the_dynamic_values_only() -> None:
    result = DescribeConfigsResult(
        0,
        None,
        ConfigResourceType.TOPIC,
        "append-0",
        (
            _entry(LIST_CONFIGS[0], "1:0,2:0", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            _entry(LIST_CONFIGS[1], "", ConfigSource.DEFAULT_CONFIG),
        ),
    )
    values = described_values(DescribeConfigsResponse((result,), 17), KEYS[:2])
    assert values == {KEYS[0]: "1:0,2:0", KEYS[1]: None}


def test_config_register_also_reads_from_broker_images() -> None:
    ops = _ops(register_ops(["r/a", "r/b"], 0.5, 0.3, base=10), 400)
    fs = {op.f for op in ops}
    assert fs == {"read", "write", BROKER_READ}
    broker = next(op for op in ops if op.f == BROKER_READ)
    assert broker.value == {"reads": [["r", broker.key, None]]}
    writes = [op.value for op in ops if op.f == "write"]
    assert len(writes) == len(set(writes)) and min(writes) > 10
