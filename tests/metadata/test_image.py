"""The metadata image: replay of hand-built record sequences, invariants, deltas and the canonical form."""

from __future__ import annotations

import pytest

from node.metadata.image import MetadataDelta, MetadataImage, MetadataImageError, build_image
from node.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    encode_records,
)
from node.protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from node.protocol.admin import ConfigResourceType
from node.raft.records import ClusterIdMessage, LeaderChangeMessage, RecordBatch, encode_control

T1 = "00000000-0000-4000-8000-000000000001"
T2 = "00000000-0000-4000-8000-000000000002"
INC = "11111111-1111-4111-8111-111111111111"
ACL = "22222222-2222-4222-8222-222222222222"
EP = (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, 0),)


class Log:
    """Appends batches at consecutive offsets, as the quorum leader would."""

    def __init__(self, epoch: int = 1) -> None:
        self.batches: list[RecordBatch] = []
        self.next_offset = 0
        self.epoch = epoch

    def append(self, *records: MetadataRecord) -> int:
        base = self.next_offset
        self.batches.append(RecordBatch(base, self.epoch, encode_records(records)))
        self.next_offset += len(records)
        return base

    def control(self, *payloads: bytes) -> int:
        base = self.next_offset
        self.batches.append(RecordBatch(base, self.epoch, payloads, control=True))
        self.next_offset += len(payloads)
        return base

    def image(self) -> MetadataImage:
        return build_image(self.batches)


def register(log: Log, broker_id: int, fenced: bool = True) -> int:
    epoch = log.next_offset
    log.append(RegisterBrokerRecord(broker_id, INC, epoch, EP, {"metadata.version": (1, 7)}, "r1", fenced))
    return epoch


def cluster_with_topic() -> tuple[Log, dict[int, int]]:
    log = Log()
    log.control(encode_control(LeaderChangeMessage(1, (1,))), encode_control(ClusterIdMessage("abc")))
    epochs = {b: register(log, b, fenced=False) for b in (1, 2, 3)}
    log.append(
        TopicRecord("orders", T1),
        PartitionRecord(0, T1, (1, 2, 3), (1, 2, 3), leader=1),
        PartitionRecord(1, T1, (2, 3, 1), (2, 3, 1), leader=2),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
    )
    return log, epochs


def test_registration_gives_the_broker_its_epoch_and_state() -> None:
    log = Log()
    log.append(FeatureLevelRecord("metadata.version", 7))
    epoch = register(log, 4)
    image = log.image()
    reg = image.brokers[4]
    assert reg.broker_epoch == epoch == 1
    assert (reg.incarnation_id, reg.endpoints, reg.rack, reg.fenced) == (INC, EP, "r1", True)
    assert dict(reg.features) == {"metadata.version": (1, 7)}
    assert image.features == {"metadata.version": 7}
    assert (image.last_offset, image.last_epoch) == (1, 1)


def test_fence_unfence_shutdown_and_unregister_follow_the_records() -> None:
    log = Log()
    epoch = register(log, 1)
    log.append(UnfenceBrokerRecord(1, epoch))
    assert not log.image().brokers[1].fenced
    log.append(BrokerRegistrationChangeRecord(1, epoch, in_controlled_shutdown=True))
    reg = log.image().brokers[1]
    assert (reg.fenced, reg.in_controlled_shutdown) == (False, True)
    log.append(FenceBrokerRecord(1, epoch))
    assert log.image().brokers[1].fenced
    log.append(UnregisterBrokerRecord(1, epoch))
    assert 1 not in log.image().brokers


def test_a_new_registration_replaces_the_old_one_with_a_higher_epoch() -> None:
    log = Log()
    first = register(log, 1, fenced=False)
    second = register(log, 1)
    reg = log.image().brokers[1]
    assert (reg.broker_epoch, reg.fenced) == (second, True) and second > first
    with pytest.raises(MetadataImageError, match=r"offset 2: FenceBrokerRecord: broker 1 has epoch 1, not 0"):
        log.append(FenceBrokerRecord(1, first))
        log.image()


def test_fencing_alone_leaves_isrs_alone_the_controller_writes_the_partition_changes() -> None:
    log, epochs = cluster_with_topic()
    log.append(FenceBrokerRecord(1, epochs[1]))
    image = log.image()
    assert image.brokers[1].fenced
    assert image.partitions(T1)[0].isr == (1, 2, 3)  # the image decides nothing
    # what the controller emits with the fence: broker 1 leaves every ISR and loses its leadership
    log.append(
        PartitionChangeRecord(0, T1, isr=(2, 3), leader=2),
        PartitionChangeRecord(1, T1, isr=(2, 3)),
    )
    image = log.image()
    p0, p1 = image.partitions(T1)[0], image.partitions(T1)[1]
    assert (p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ((2, 3), 2, 1, 1)
    assert (p1.isr, p1.leader, p1.leader_epoch, p1.partition_epoch) == ((2, 3), 2, 0, 1)
    assert all(1 not in p.isr for p in image.partitions(T1).values())


def test_partition_change_bumps_epochs_as_kafka_does() -> None:
    log, _ = cluster_with_topic()
    log.append(PartitionChangeRecord(0, T1))  # nothing changes but the partition epoch
    log.append(PartitionChangeRecord(0, T1, leader=1))  # re-electing the same leader bumps its epoch
    log.append(PartitionChangeRecord(0, T1, isr=(1,), leader=NO_LEADER))
    p = log.image().partitions(T1)[0]
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), NO_LEADER, 2, 3)


def test_unknown_partition_change_names_the_offset() -> None:
    log, _ = cluster_with_topic()
    offset = log.append(ConfigRecord(4, "", "k", "v"), PartitionChangeRecord(9, T1, isr=(1,)))
    with pytest.raises(MetadataImageError, match=rf"^offset {offset + 1}: PartitionChangeRecord: unknown partition"):
        log.image()


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (PartitionChangeRecord(0, T1, isr=(2, 3)), "leader 1 is not in the isr"),
        (PartitionChangeRecord(0, T1, isr=(1, 4)), "isr .* must be distinct members of replicas"),
        (PartitionChangeRecord(0, T1, replicas=(1, 1)), "must be distinct broker ids"),
        (PartitionChangeRecord(0, T1, leader=-5), "leader -5"),
        (PartitionRecord(0, T1, (1,), (1,), leader=1), "already exists"),
        (PartitionRecord(0, T2, (1,), (1,), leader=1), "unknown topic"),
        (TopicRecord("orders", T2), "topic 'orders' already exists"),
        (TopicRecord("other", T1), "already exists"),
        (RemoveTopicRecord(T2), "unknown topic"),
        (ConfigRecord(ConfigResourceType.TOPIC, "nope", "a", "b"), "unknown topic 'nope'"),
        (ConfigRecord(ConfigResourceType.BROKER, "x1", "a", "b"), "neither '' nor a broker id"),
        (ConfigRecord(3, "g", "a", "b"), "unsupported resource type 3"),
        (FenceBrokerRecord(7, 0), "broker 7 is not registered"),
        (UnregisterBrokerRecord(1, 99), "has epoch"),
        (RegisterBrokerRecord(2, INC, 1, EP, {}), "is not above"),
        (RegisterBrokerRecord(5, INC, 50, EP, {"f": (3, 1)}), "range 3..1 is empty"),
        (RemoveAccessControlEntryRecord(ACL), "unknown ACL"),
        (AccessControlEntryRecord(ACL, 1, "t", 3, "User:a", "*", 3, 3), "resource_type 1 is not a concrete"),
        (AccessControlEntryRecord(ACL, 2, "t", 2, "User:a", "*", 3, 3), "pattern_type 2"),
        (AccessControlEntryRecord(ACL, 2, "t", 3, "a", "*", 3, 3), "principal 'a'"),
        (FeatureLevelRecord("", 1), "feature ''"),
    ],
)
def test_records_a_correct_controller_never_writes_are_refused_and_the_image_is_unchanged(
    record: MetadataRecord, reason: str
) -> None:
    log, _ = cluster_with_topic()
    image = log.image()
    before = image.digest()
    bad = RecordBatch(log.next_offset, 1, encode_records([ConfigRecord(4, "", "ok", "1"), record]))
    with pytest.raises(MetadataImageError, match=reason) as caught:
        image.apply_batch(bad)
    assert str(caught.value).startswith(f"offset {log.next_offset + 1}: {type(record).__name__}: ")
    assert image.digest() == before  # the batch is atomic: its valid first record was not applied either


def test_batches_must_be_contiguous_and_epochs_must_not_go_back() -> None:
    log, _ = cluster_with_topic()
    image = log.image()
    with pytest.raises(MetadataImageError, match="does not follow the last applied offset"):
        image.apply_batch(RecordBatch(log.next_offset + 1, 1, encode_records([FeatureLevelRecord("f", 1)])))
    log.epoch = 3
    log.append(FeatureLevelRecord("f", 1))
    image.apply_batch(log.batches[-1])
    with pytest.raises(MetadataImageError, match="epoch 2 after epoch 3"):
        image.apply_batch(RecordBatch(log.next_offset, 2, encode_records([FeatureLevelRecord("f", 2)])))


def test_garbage_in_a_data_batch_names_the_offset() -> None:
    image = MetadataImage()
    with pytest.raises(MetadataImageError, match=r"^offset 1: unknown metadata record type"):
        image.apply_batch(RecordBatch(0, 1, (encode_records([FeatureLevelRecord("f", 1)])[0], b"\x7f\x00\x00\x00")))


def test_cluster_id_comes_from_the_control_record_and_cannot_change() -> None:
    log, _ = cluster_with_topic()
    image = log.image()
    assert image.cluster_id == "abc"
    log.control(encode_control(ClusterIdMessage("abc")))  # the same id again is harmless
    log.control(encode_control(ClusterIdMessage("xyz")))
    with pytest.raises(MetadataImageError, match="clusterId 'xyz' after clusterId 'abc'"):
        log.image()


def test_remove_topic_drops_partitions_and_configs_and_the_name_can_be_reused() -> None:
    log, _ = cluster_with_topic()
    log.append(RemoveTopicRecord(T1), TopicRecord("orders", T2), PartitionRecord(0, T2, (3,), (3,), leader=3))
    image = log.image()
    assert dict(image.topics) == {T2: "orders"}
    assert image.partitions(T1) == {}
    assert set(image.partitions(T2)) == {0}
    assert image.configs(ConfigResourceType.TOPIC, "orders") == {}


def test_configs_set_and_delete() -> None:
    log, _ = cluster_with_topic()
    log.append(
        ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.ms", "5"),
        ConfigRecord(ConfigResourceType.BROKER, "2", "log.retention.ms", "6"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", None),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "cleanup.policy", "compact"),
    )
    image = log.image()
    assert image.configs(ConfigResourceType.BROKER, "") == {"log.retention.ms": "5"}
    assert image.config(ConfigResourceType.BROKER, "2", "log.retention.ms") == "6"
    assert image.configs(ConfigResourceType.TOPIC, "orders") == {"cleanup.policy": "compact"}
    log.append(ConfigRecord(ConfigResourceType.BROKER, "2", "log.retention.ms", None))
    assert (ConfigResourceType.BROKER, "2") not in log.image().config_resources


def test_acls_are_stored_by_id_and_the_same_binding_twice_is_refused() -> None:
    log = Log()
    entry = (ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice", "*", AclOperation.READ)
    log.append(AccessControlEntryRecord(ACL, *entry, AclPermissionType.ALLOW))
    image = log.image()
    assert image.acls[ACL].principal == "User:alice"
    with pytest.raises(MetadataImageError, match=f"the same ACL already exists as {ACL}"):
        image.apply_batch(
            RecordBatch(1, 1, encode_records([AccessControlEntryRecord(T1, *entry, AclPermissionType.ALLOW)]))
        )
    log.append(RemoveAccessControlEntryRecord(ACL), AccessControlEntryRecord(T1, *entry, AclPermissionType.ALLOW))
    assert set(log.image().acls) == {T1}


def test_feature_level_zero_removes_the_feature() -> None:
    log = Log()
    log.append(FeatureLevelRecord("metadata.version", 3), FeatureLevelRecord("kraft.version", 1))
    log.append(FeatureLevelRecord("kraft.version", 0))
    assert log.image().features == {"metadata.version": 3}


def test_a_delta_validates_without_touching_the_image_and_commits_in_o_changed() -> None:
    log, epochs = cluster_with_topic()
    image = log.image()
    before = image.to_json()
    delta = MetadataDelta(image)
    offset = image.next_offset
    delta.replay(FenceBrokerRecord(1, epochs[1]), offset, 1)
    delta.replay(PartitionChangeRecord(0, T1, isr=(2, 3), leader=2), offset + 1, 1)
    assert delta.broker(1).fenced and delta.partition(T1, 0).leader == 2  # reads see the change
    assert image.to_json() == before  # the image does not
    stacked = MetadataDelta(delta)  # a second in-flight batch on top of the first
    stacked.replay(RemoveTopicRecord(T1), offset + 2, 1)
    assert stacked.partition(T1, 0) is None and delta.partition(T1, 0) is not None
    with pytest.raises(MetadataImageError, match="unknown partition"):
        MetadataDelta(stacked).replay(PartitionChangeRecord(0, T1), offset + 3, 1)
    stacked.commit()
    image.apply_delta(delta)
    assert image.last_offset == offset + 2
    assert image.topics == {} and image.brokers[1].fenced


def test_a_delta_on_a_moved_image_is_refused() -> None:
    log, _ = cluster_with_topic()
    image = log.image()
    delta = MetadataDelta(image)
    delta.replay(FeatureLevelRecord("f", 1), image.next_offset, 1)
    image.apply_batch(RecordBatch(image.next_offset, 1, encode_records([FeatureLevelRecord("g", 1)])))
    with pytest.raises(MetadataImageError, match="not built on this image"):
        image.apply_delta(delta)


def test_canonical_json_and_digest_do_not_depend_on_insertion_order() -> None:
    a, b = Log(), Log()
    a.append(FeatureLevelRecord("x", 1), FeatureLevelRecord("y", 2), ConfigRecord(4, "", "k1", "1"))
    a.append(ConfigRecord(4, "", "k2", "2"))
    b.append(ConfigRecord(4, "", "k2", "2"), FeatureLevelRecord("y", 2))
    b.append(ConfigRecord(4, "", "k1", "1"), FeatureLevelRecord("x", 1))
    ia, ib = a.image(), b.image()
    assert ia == ib and ia.to_json() == ib.to_json() and ia.digest() == ib.digest()
    assert ia.fingerprint() == ib.fingerprint()
    b.append(ConfigRecord(4, "", "k2", "3"))
    ib2 = b.image()
    assert ib2 != ia and ib2.digest(with_position=False) != ia.digest(with_position=False)
    assert ib2.fingerprint() != ia.fingerprint()


def _changed_once(image: MetadataImage, epochs: dict[int, int]) -> dict[str, MetadataImage]:
    """One image per kind of state, each differing from `image` in that state alone, at the same position."""
    out = {}
    for name, record in {
        "config": ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "2000"),
        "isr": PartitionChangeRecord(0, T1, isr=(1, 2)),
        "leader": PartitionChangeRecord(1, T1, leader=3),
        "fenced": FenceBrokerRecord(3, epochs[3]),
        "feature": FeatureLevelRecord("metadata.version", 8),
        "acl": AccessControlEntryRecord(
            ACL,
            ResourceType.TOPIC,
            "orders",
            PatternType.LITERAL,
            "User:a",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        "topic": TopicRecord("payments", T2),
    }.items():
        changed = image.copy()
        changed.apply_batch(RecordBatch(image.next_offset, 1, encode_records([record])))
        changed.set_position(image.last_offset, image.last_epoch)
        out[name] = changed
    return out


def test_fingerprint_tells_every_kind_of_state_apart_as_the_digest_does() -> None:
    log, epochs = cluster_with_topic()
    log.append(FeatureLevelRecord("metadata.version", 7))
    image = log.image()
    variants = _changed_once(image, epochs)
    assert image.copy().fingerprint() == image.fingerprint()
    for name, changed in variants.items():
        assert changed.digest() != image.digest(), name
        assert changed.fingerprint() != image.fingerprint(), name
    moved = image.copy()
    moved.set_position(image.last_offset + 1, image.last_epoch)
    assert moved.fingerprint() != image.fingerprint()  # the position counts, as in digest()


def test_accessors_are_read_only() -> None:
    log, _ = cluster_with_topic()
    image = log.image()
    with pytest.raises(TypeError):
        image.brokers[9] = image.brokers[1]  # type: ignore[index]
    with pytest.raises(TypeError):
        image.partitions(T1)[5] = image.partitions(T1)[0]  # type: ignore[index]
