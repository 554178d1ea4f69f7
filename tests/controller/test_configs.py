"""IncrementalAlterConfigs, AlterConfigs and DescribeConfigs on the controller."""

from __future__ import annotations

from node.metadata.records import ConfigRecord
from node.process.ports import BarrierOutcome
from node.protocol.admin import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.errors import ErrorCode
from tests.controller.harness import Harness

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
SET, DELETE, APPEND, SUBTRACT = (
    ConfigOperation.SET,
    ConfigOperation.DELETE,
    ConfigOperation.APPEND,
    ConfigOperation.SUBTRACT,
)


def _harness() -> Harness:
    h = Harness()
    h.online_broker(1)
    h.call(CreateTopicsRequest((CreatableTopic("t", 1, 1), CreatableTopic("u", 1, 1))))
    return h


Resource = tuple[int, str, tuple[tuple[str, int, str | None], ...]]


def _request(*resources: Resource) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        tuple(
            IncrementalAlterConfigsResource(rtype, name, tuple(AlterableConfig(*c) for c in changes))
            for rtype, name, changes in resources
        )
    )


def _alter(h: Harness, *resources: Resource):
    return h.call(_request(*resources))


def _codes(response) -> list[int]:
    return [r.error_code for r in response.responses]


def test_set_and_delete_on_topics_and_brokers() -> None:
    h = _harness()
    response = _alter(
        h,
        (TOPIC, "t", (("retention.ms", SET, "1000"), ("min.insync.replicas", SET, "2"))),
        (BROKER, "", (("log.retention.ms", SET, "5"),)),
        (BROKER, "1", (("num.io.threads", SET, "4"),)),
    )
    assert _codes(response) == [ErrorCode.NONE] * 3
    image = h.port.image
    assert dict(image.configs(TOPIC, "t")) == {"retention.ms": "1000", "min.insync.replicas": "2"}
    assert image.config(BROKER, "", "log.retention.ms") == "5"
    assert image.config(BROKER, "1", "num.io.threads") == "4"
    assert _codes(_alter(h, (TOPIC, "t", (("retention.ms", DELETE, None),)))) == [ErrorCode.NONE]
    assert dict(h.port.image.configs(TOPIC, "t")) == {"min.insync.replicas": "2"}


def test_all_changes_of_one_request_are_one_batch() -> None:
    h = _harness()
    h.send(
        _request(
            (TOPIC, "t", (("retention.ms", SET, "1"), ("segment.ms", SET, "2"))),
            (TOPIC, "u", (("retention.ms", SET, "3"),)),
        )
    )
    assert len(h.port.appends) == 1
    assert len([r for r in h.port.appends[0].records if isinstance(r, ConfigRecord)]) == 3
    assert h.port.image.config(TOPIC, "t", "retention.ms") is None  # not before the commit
    h.port.commit()
    assert h.port.image.config(TOPIC, "u", "retention.ms") == "3"


def test_a_bad_change_fails_its_whole_resource_and_nothing_of_it_is_written() -> None:
    h = _harness()
    response = _alter(
        h,
        (TOPIC, "t", (("retention.ms", SET, "1"), ("retention.ms", SET, "2"))),  # repeated key
        (TOPIC, "u", (("retention.ms", SET, "7"), ("no.such.config", SET, "1"))),
        (TOPIC, "nope", (("retention.ms", SET, "1"),)),
        (ConfigResourceType.UNKNOWN, "x", (("retention.ms", SET, "1"),)),
        (BROKER, "abc", (("num.io.threads", SET, "1"),)),
        (TOPIC, "t", ()),  # the same resource twice
    )
    assert _codes(response) == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert not h.port.image.configs(TOPIC, "u") and not h.port.image.configs(TOPIC, "t")


def test_values_are_validated_with_invalid_config() -> None:
    h = _harness()
    for name, value in [
        ("retention.ms", "soon"),
        ("min.insync.replicas", "0"),
        ("cleanup.policy", "delete,shred"),
        ("compression.type", "brotli"),
        ("preallocate", "maybe"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("segment.bytes", str(2**40)),
    ]:
        assert _codes(_alter(h, (TOPIC, "t", ((name, SET, value),)))) == [ErrorCode.INVALID_CONFIG], name
    assert _codes(_alter(h, (TOPIC, "t", (("retention.ms", 9, "1"),)))) == [ErrorCode.INVALID_REQUEST]
    assert not h.port.image.configs(TOPIC, "t")
    # a bad broker-config value is INVALID_REQUEST in Kafka (an unknown name stays INVALID_CONFIG here)
    assert _codes(_alter(h, (BROKER, "1", (("log.cleaner.threads", SET, "x"),)))) == [ErrorCode.INVALID_REQUEST]
    assert _codes(_alter(h, (BROKER, "1", (("no.such.config", SET, "1"),)))) == [ErrorCode.INVALID_CONFIG]
    assert not h.port.image.configs(BROKER, "1")


def test_kafka_4_topic_configs_and_their_rules() -> None:
    """The topic configs Kafka 4.1 has and checks as it does (found by benchmarks/kafka_differential.py):
    gzip's level is 1..9 or -1, tiered storage cannot be turned on, down-conversion is gone (KIP-724)."""
    h = _harness()
    for name, value in [
        ("compression.gzip.level", "-1"),
        ("compression.gzip.level", "9"),
        ("local.retention.ms", "-2"),
    ]:
        assert _codes(_alter(h, (TOPIC, "t", ((name, SET, value),)))) == [ErrorCode.NONE], (name, value)
    for name, value in [
        ("compression.gzip.level", "0"),
        ("compression.zstd.level", "23"),
        ("message.timestamp.after.max.ms", "-1"),
        ("remote.storage.enable", "true"),
        ("message.downconversion.enable", "false"),
    ]:
        assert _codes(_alter(h, (TOPIC, "u", ((name, SET, value),)))) == [ErrorCode.INVALID_CONFIG], (name, value)


def test_append_and_subtract_on_list_configs() -> None:
    h = _harness()
    # APPEND starts from the default ("delete") when nothing is set, and adds only what is missing.
    assert _codes(_alter(h, (TOPIC, "t", (("cleanup.policy", APPEND, "compact,delete"),)))) == [ErrorCode.NONE]
    assert h.port.image.config(TOPIC, "t", "cleanup.policy") == "delete,compact"
    assert _codes(_alter(h, (TOPIC, "t", (("cleanup.policy", SUBTRACT, "delete"),)))) == [ErrorCode.NONE]
    assert h.port.image.config(TOPIC, "t", "cleanup.policy") == "compact"
    replicas = "leader.replication.throttled.replicas"
    _alter(h, (TOPIC, "t", ((replicas, APPEND, "0:1, 1:2"),)))
    _alter(h, (TOPIC, "t", ((replicas, APPEND, "2:3"),)))
    _alter(h, (TOPIC, "t", ((replicas, SUBTRACT, "1:2,9:9"),)))
    assert h.port.image.config(TOPIC, "t", replicas) == "0:1,2:3"
    _alter(h, (TOPIC, "t", ((replicas, SUBTRACT, "0:1,2:3"),)))
    assert h.port.image.config(TOPIC, "t", replicas) == ""
    # Not a list, or a bad item: INVALID_CONFIG.
    assert _codes(_alter(h, (TOPIC, "t", (("retention.ms", APPEND, "5"),)))) == [ErrorCode.INVALID_CONFIG]
    assert _codes(_alter(h, (TOPIC, "t", ((replicas, APPEND, "x"),)))) == [ErrorCode.INVALID_CONFIG]


def test_consecutive_appends_in_flight_see_each_other() -> None:
    h = _harness()
    _alter(h, (TOPIC, "t", (("cleanup.policy", SET, ""),)))
    for item in ("delete", "compact"):
        cid = h.send(_request((TOPIC, "t", (("cleanup.policy", APPEND, item),))))
        assert h.answer(cid) is None
    assert len(h.port.appends) == 2
    h.port.commit()
    assert h.port.image.config(TOPIC, "t", "cleanup.policy") == "delete,compact"


def test_alter_configs_replaces_the_whole_dynamic_config() -> None:
    h = _harness()
    _alter(h, (TOPIC, "t", (("retention.ms", SET, "1"), ("segment.ms", SET, "2"))))
    response = h.call(
        AlterConfigsRequest((AlterConfigsResource(TOPIC, "t", (("segment.ms", "3"), ("preallocate", "true"))),))
    )
    assert [r.error_code for r in response.responses] == [ErrorCode.NONE]
    assert dict(h.port.image.configs(TOPIC, "t")) == {"segment.ms": "3", "preallocate": "true"}
    bad = h.call(AlterConfigsRequest((AlterConfigsResource(TOPIC, "t", (("bogus", "1"),)),)))
    assert [r.error_code for r in bad.responses] == [ErrorCode.INVALID_CONFIG]
    assert dict(h.port.image.configs(TOPIC, "t")) == {"segment.ms": "3", "preallocate": "true"}


def test_validate_only_writes_nothing() -> None:
    h = _harness()
    request = IncrementalAlterConfigsRequest(
        (IncrementalAlterConfigsResource(TOPIC, "t", (AlterableConfig("retention.ms", SET, "1"),)),), validate_only=True
    )
    assert [r.error_code for r in h.call(request).responses] == [ErrorCode.NONE]
    assert not h.port.image.configs(TOPIC, "t")


def test_describe_configs_waits_for_the_read_barrier_and_the_image() -> None:
    h = _harness()
    _alter(h, (TOPIC, "t", (("retention.ms", SET, "1"),)))
    # A write in flight, then a read: the barrier's offset covers it, so the answer waits for it.
    cid_write = h.send(_request((TOPIC, "t", (("retention.ms", SET, "2"),))))
    cid = h.send(DescribeConfigsRequest((DescribeConfigsResource(TOPIC, "t", ("retention.ms", "segment.ms")),)))
    assert h.answer(cid) is None and len(h.port.barriers) == 1
    h.port.barriers.pop()(BarrierOutcome(True, h.port.end_offset))
    assert h.answer(cid) is None  # the image has not applied the barrier's offset yet
    h.port.commit()
    assert h.answer(cid_write) is not None
    answer = h.answer(cid)
    configs = {c.name: (c.value, c.config_source) for c in answer.results[0].configs}
    assert configs == {
        "retention.ms": ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "segment.ms": ("604800000", ConfigSource.DEFAULT_CONFIG),
    }
    assert answer.metadata_offset == h.port.image.last_offset
    # A failed barrier: NOT_CONTROLLER.
    cid = h.send(DescribeConfigsRequest((DescribeConfigsResource(TOPIC, "t"),)))
    h.port.barriers.pop()(BarrierOutcome(False, error=ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert h.answer(cid).results[0].error_code == ErrorCode.NOT_CONTROLLER
