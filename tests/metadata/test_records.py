"""Metadata records: every type round-trips, the encoding is canonical, and garbage is refused cleanly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.metadata.records import (
    RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_record,
    decode_records,
    encode_record,
    encode_records,
)

i8 = st.integers(-(2**7), 2**7 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.uuids().map(str)
text = st.text(max_size=20)
int_arrays = st.lists(i32, max_size=70).map(tuple)  # past 64 elements too (the uncached struct path)
opt_arrays = st.none() | int_arrays
endpoints = st.lists(st.builds(BrokerEndpoint, text, text, st.integers(0, 65535), i16), max_size=3).map(tuple)
features = st.dictionaries(text, st.tuples(i16, i16), max_size=3)

RECORDS = {
    RegisterBrokerRecord: st.builds(
        RegisterBrokerRecord, i32, uuids, i64, endpoints, features, st.none() | text, st.booleans(), st.booleans()
    ),
    UnregisterBrokerRecord: st.builds(UnregisterBrokerRecord, i32, i64),
    TopicRecord: st.builds(TopicRecord, text, uuids),
    PartitionRecord: st.builds(
        PartitionRecord, i32, uuids, int_arrays, int_arrays, int_arrays, int_arrays, i32, i32, i32
    ),
    ConfigRecord: st.builds(ConfigRecord, i8, text, text, st.none() | text),
    PartitionChangeRecord: st.builds(
        PartitionChangeRecord, i32, uuids, opt_arrays, st.none() | i32, opt_arrays, opt_arrays, opt_arrays
    ),
    FenceBrokerRecord: st.builds(FenceBrokerRecord, i32, i64),
    UnfenceBrokerRecord: st.builds(UnfenceBrokerRecord, i32, i64),
    RemoveTopicRecord: st.builds(RemoveTopicRecord, uuids),
    FeatureLevelRecord: st.builds(FeatureLevelRecord, text, i16),
    BrokerRegistrationChangeRecord: st.builds(
        BrokerRegistrationChangeRecord, i32, i64, st.none() | st.booleans(), st.none() | st.booleans()
    ),
    AccessControlEntryRecord: st.builds(AccessControlEntryRecord, uuids, i8, text, i8, text, text, i8, i8),
    RemoveAccessControlEntryRecord: st.builds(RemoveAccessControlEntryRecord, uuids),
}
any_record = st.one_of(*RECORDS.values())


def test_every_record_type_has_a_strategy_and_a_distinct_kafka_api_key() -> None:
    assert set(RECORDS) == set(RECORD_TYPES)
    keys = [cls.API_KEY for cls in RECORD_TYPES]
    assert len(set(keys)) == len(keys)
    # Kafka's numbers for the records KIP-631 names
    assert (RegisterBrokerRecord.API_KEY, TopicRecord.API_KEY, PartitionRecord.API_KEY) == (0, 2, 3)
    assert (ConfigRecord.API_KEY, PartitionChangeRecord.API_KEY, FenceBrokerRecord.API_KEY) == (4, 5, 7)
    assert (UnfenceBrokerRecord.API_KEY, RemoveTopicRecord.API_KEY, FeatureLevelRecord.API_KEY) == (8, 9, 12)
    assert (AccessControlEntryRecord.API_KEY, RemoveAccessControlEntryRecord.API_KEY) == (18, 19)


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(cls: type, data: st.DataObject) -> None:
    record = data.draw(RECORDS[cls])
    encoded = encode_record(record)
    assert encoded[:4] == cls.API_KEY.to_bytes(2, "big") + cls.VERSION.to_bytes(2, "big")
    decoded = decode_record(encoded)
    assert decoded == record
    assert type(decoded) is cls
    assert encode_record(decoded) == encoded


@settings(max_examples=50, deadline=None)
@given(st.lists(any_record, min_size=1, max_size=5))
def test_a_batch_of_records_round_trips(records: list) -> None:
    assert decode_records(encode_records(records)) == records


def test_features_encode_in_name_order_so_equal_records_give_equal_bytes() -> None:
    a = RegisterBrokerRecord(1, "00000000-0000-0000-0000-000000000001", 5, (), {"b": (0, 1), "a": (1, 2)})
    b = RegisterBrokerRecord(1, "00000000-0000-0000-0000-000000000001", 5, (), {"a": (1, 2), "b": (0, 1)})
    assert encode_record(a) == encode_record(b)


def _decode_outcome(data: bytes) -> None:
    try:
        record = decode_record(data)
    except MetadataRecordError as exc:
        assert str(exc)  # a reason, one line
        assert "\n" not in str(exc)
        return
    assert encode_record(record) == data  # whatever decodes is canonical


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_raises_only_metadata_record_error(data: bytes) -> None:
    _decode_outcome(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60), st.sampled_from([cls.API_KEY for cls in RECORD_TYPES]))
def test_garbage_behind_a_valid_header_raises_only_metadata_record_error(body: bytes, key: int) -> None:
    _decode_outcome(key.to_bytes(2, "big") + b"\x00\x00" + body)


@settings(max_examples=200, deadline=None)
@given(any_record, st.data())
def test_truncated_or_mutated_records_are_refused_or_canonical(record: object, data: st.DataObject) -> None:
    encoded = encode_record(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(MetadataRecordError):
        decode_record(encoded[:cut])
    with pytest.raises(MetadataRecordError):
        decode_record(encoded + b"\x00")
    pos = data.draw(st.integers(0, len(encoded) - 1))
    flipped = bytearray(encoded)
    flipped[pos] ^= data.draw(st.integers(1, 255))
    _decode_outcome(bytes(flipped))


def test_unknown_type_and_version_are_named() -> None:
    with pytest.raises(MetadataRecordError, match="unknown metadata record type 99"):
        decode_record(b"\x00\x63\x00\x00")
    good = encode_record(FenceBrokerRecord(1, 2))
    with pytest.raises(MetadataRecordError, match="FenceBrokerRecord version 7"):
        decode_record(good[:2] + b"\x00\x07" + good[4:])


@pytest.mark.parametrize(
    "record",
    [
        TopicRecord("t", "not-a-uuid"),
        TopicRecord("t", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"),  # not canonical (upper case)
        FenceBrokerRecord(2**31, 1),
        FeatureLevelRecord("x", 2**15),
        ConfigRecord(2, "t", "k\ud800", "v"),  # a lone surrogate is not UTF-8
        TopicRecord(None, "6ba7b810-9dad-11d1-80b4-00c04fd430c8"),  # type: ignore[arg-type]
        "not a record",
    ],
)
def test_records_that_cannot_be_encoded_raise_metadata_record_error(record: object) -> None:
    with pytest.raises(MetadataRecordError):
        encode_record(record)  # type: ignore[arg-type]
