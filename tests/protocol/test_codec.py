"""The framed binary codec: round trips, and every kind of bad input ends in FrameError only."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.protocol.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    SUPPORTED_VERSIONS,
    BinaryCodec,
    Codec,
    FrameError,
    FrameKind,
    FrameReader,
)
from node.protocol.errors import ErrorCode
from node.protocol.fields import INT32, STRING, Schema
from node.protocol.messages import (
    API_KEYS,
    REQUESTS,
    RESPONSES,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from node.raft.records import RecordBatch, encode_batch

CODEC = BinaryCodec()
HEADER_LEN = 13  # length int32 + api key int16 + version int16 + correlation id int32 + flags int8

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
errors = st.sampled_from(list(ErrorCode))
cluster_ids = st.none() | st.text(max_size=40)
batches = st.builds(
    RecordBatch,
    base_offset=st.integers(0, 2**62),
    epoch=i32,
    records=st.lists(st.binary(max_size=64), min_size=1, max_size=5).map(tuple),
    control=st.booleans(),
    timestamp_ms=i64,
)
replicas = st.builds(
    ReplicaState, replica_id=i32, log_end_offset=i64, last_fetch_timestamp=i64, last_caught_up_timestamp=i64
)

MESSAGES: dict[type, st.SearchStrategy] = {
    VoteRequest: st.builds(VoteRequest, cluster_ids, i32, i32, i32, i64, st.booleans()),
    VoteResponse: st.builds(VoteResponse, errors, i32, i32, st.booleans()),
    BeginQuorumEpochRequest: st.builds(BeginQuorumEpochRequest, cluster_ids, i32, i32),
    BeginQuorumEpochResponse: st.builds(BeginQuorumEpochResponse, errors, i32, i32),
    EndQuorumEpochRequest: st.builds(
        EndQuorumEpochRequest, cluster_ids, i32, i32, i32, st.lists(i32, max_size=7).map(tuple)
    ),
    EndQuorumEpochResponse: st.builds(EndQuorumEpochResponse, errors, i32, i32),
    FetchRequest: st.builds(FetchRequest, cluster_ids, i32, i32, i64, i32, i32, i32),
    FetchResponse: st.builds(
        FetchResponse,
        errors,
        i32,
        i32,
        i64,
        i64,
        st.none() | st.builds(EpochEndOffset, i32, i64),
        st.lists(batches, max_size=3).map(tuple),
    ),
    DescribeQuorumRequest: st.just(DescribeQuorumRequest()),
    DescribeQuorumResponse: st.builds(
        DescribeQuorumResponse,
        errors,
        i32,
        i32,
        i64,
        st.lists(replicas, max_size=4).map(tuple),
        st.lists(replicas, max_size=4).map(tuple),
        cluster_ids,
        i64,
    ),
}
any_message = st.one_of(*MESSAGES.values())

# One rich instance of each type, for the exhaustive byte-by-byte tests.
EXAMPLES = [
    VoteRequest("cluster-ü", 7, 2, 6, 1234),
    VoteResponse(ErrorCode.FENCED_LEADER_EPOCH, 1, 7, True),
    BeginQuorumEpochRequest("c", 1, 7),
    BeginQuorumEpochResponse(ErrorCode.NONE, 1, 7),
    EndQuorumEpochRequest(None, 1, 1, 7, (3, 2)),
    EndQuorumEpochResponse(ErrorCode.NONE, -1, 7),
    FetchRequest("c", 3, 7, 100, 6, 500, 1 << 20),
    FetchResponse(
        ErrorCode.NONE,
        1,
        7,
        99,
        0,
        EpochEndOffset(5, 90),
        (RecordBatch(100, 7, (b"abc", b"")), RecordBatch(102, 7, (b"x" * 20,), control=True)),
    ),
    DescribeQuorumRequest(),
    DescribeQuorumResponse(
        ErrorCode.NONE, 1, 7, 99, (ReplicaState(1, 99, 5, 5), ReplicaState(2, 80)), (ReplicaState(9, 10),), "c", 1000
    ),
    VoteRequest("cluster-ü", 7, 2, 6, 1234, pre_vote=True),
]


def encode(msg, correlation_id: int = 42) -> bytes:
    if type(msg) in REQUESTS:
        return CODEC.encode_request(correlation_id, msg)
    return CODEC.encode_response(correlation_id, msg)


def assert_decodes_or_frame_error(frame: bytes) -> None:
    """Damaged input may still decode (e.g. a changed integer); any other outcome is a FrameError."""
    try:
        decoded = CODEC.decode(frame)
    except FrameError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert type(decoded.message) in MESSAGES


def reframe(frame: bytes) -> bytes:
    """Fix the length prefix after editing a frame, so the body decoder itself meets the damage."""
    return struct.pack(">i", len(frame) - 4) + frame[4:]


def test_every_message_type_has_a_strategy_and_an_example():
    assert set(MESSAGES) == set(REQUESTS) | set(RESPONSES)
    assert {type(m) for m in EXAMPLES} == set(MESSAGES)


def test_binary_codec_satisfies_the_codec_interface():
    codec: Codec = BinaryCodec()
    assert codec.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msg=any_message, correlation_id=i32)
def test_round_trip_every_message(msg, correlation_id):
    frame = CODEC.decode(encode(msg, correlation_id))
    assert frame.message == msg
    assert type(frame.message) is type(msg)
    assert frame.correlation_id == correlation_id
    assert frame.api_key == API_KEYS[type(msg)]
    assert frame.api_version == (2 if getattr(msg, "pre_vote", False) else 0)  # KIP-996: VoteRequest v2
    assert frame.kind == (FrameKind.REQUEST if type(msg) in REQUESTS else FrameKind.RESPONSE)


def test_frame_header_layout():
    frame = CODEC.encode_response(9, VoteResponse(ErrorCode.NONE, 1, 2, True))
    length, api_key, version, corr, flags = struct.unpack_from(">ihhib", frame)
    assert (length, api_key, version, corr, flags) == (len(frame) - 4, 52, 0, 9, 1)
    assert frame[HEADER_LEN:] == struct.pack(">hiib", 0, 1, 2, 1)


def test_a_pre_vote_goes_out_as_vote_request_v2_and_a_standard_vote_as_v0():
    """KIP-996 adds PreVote to VoteRequest v2; a standard vote keeps v0's bytes, so a peer that knows
    only v0 still understands it."""
    standard = CODEC.encode_request(5, VoteRequest("c", 7, 2, 6, 1234))
    pre_vote = CODEC.encode_request(5, VoteRequest("c", 7, 2, 6, 1234, pre_vote=True))
    assert struct.unpack_from(">ihhib", standard)[2] == 0 and struct.unpack_from(">ihhib", pre_vote)[2] == 2
    assert pre_vote[HEADER_LEN:] == standard[HEADER_LEN:] + b"\x01"  # v2 = v0's fields, then PreVote
    assert CODEC.decode(standard).message.pre_vote is False
    assert CODEC.decode(pre_vote).message.pre_vote is True
    assert SUPPORTED_VERSIONS[52] == (0, 2)
    v1 = bytearray(standard)
    v1[6:8] = struct.pack(">h", 1)  # KIP-853's v1 is not spoken here
    with pytest.raises(FrameError, match=r"unsupported version 1 of api key 52 .*supported: \(0, 2\)"):
        CODEC.decode(bytes(v1))


def test_an_older_layout_must_be_a_prefix_whose_missing_fields_have_defaults():
    with pytest.raises(TypeError, match="VoteRequest"):
        Schema(VoteRequest, (("cluster_id", STRING), ("candidate_id", INT32)), older=True)
    with pytest.raises(TypeError, match="FetchRequest"):
        Schema(FetchRequest, (("cluster_id", STRING),), older=True)  # the fields it leaves out have no default


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_truncation_at_every_byte_raises_frame_error(msg):
    frame = encode(msg)
    for cut in range(len(frame)):
        with pytest.raises(FrameError):
            CODEC.decode(frame[:cut])
        if cut >= HEADER_LEN:  # a consistent prefix: the body decoder must notice the missing bytes
            with pytest.raises(FrameError):
                CODEC.decode(reframe(frame[:cut]))


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_single_byte_change_decodes_or_raises_frame_error(msg):
    frame = encode(msg)
    for i in range(len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF, frame[i] ^ 0x01):
            damaged = frame[:i] + bytes([value]) + frame[i + 1 :]
            assert_decodes_or_frame_error(damaged)


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_trailing_bytes_are_refused(msg):
    with pytest.raises(FrameError, match="trailing"):
        CODEC.decode(reframe(encode(msg) + b"\x00"))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_garbage_only_raises_frame_error(data):
    assert_decodes_or_frame_error(data)


@settings(max_examples=500, deadline=None)
@given(
    api_key=st.sampled_from(sorted(set(API_KEYS.values()))),
    flags=st.sampled_from([0, 1]),
    body=st.binary(max_size=120),
)
def test_garbage_body_behind_a_valid_header_only_raises_frame_error(api_key, flags, body):
    frame = struct.pack(">ihhib", 9 + len(body), api_key, 0, 1, flags) + body
    assert_decodes_or_frame_error(frame)


def test_crc_flip_in_a_record_batch_is_detected():
    msg = FetchResponse(ErrorCode.NONE, 1, 3, 10, 0, None, (RecordBatch(0, 3, (b"hello", b"world")),))
    frame = bytearray(encode(msg))
    frame[frame.index(b"world")] ^= 0x20
    with pytest.raises(FrameError, match="CRC32C"):
        CODEC.decode(bytes(frame))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda f: f[:-1] + b"\x02", "bad boolean 2"),  # VoteResponse.vote_granted
        (lambda f: f[:HEADER_LEN] + struct.pack(">h", 12345) + f[HEADER_LEN + 2 :], "unknown error code 12345"),
        (lambda f: f[:12] + b"\x03" + f[13:], "bad frame flags 0x03"),
        (lambda f: f[:4] + struct.pack(">h", 999) + f[6:], "unknown api key 999"),
        (lambda f: f[:6] + struct.pack(">h", 3) + f[8:], "unsupported version 3 of api key 52"),
    ],
)
def test_bad_enums_and_header_fields_name_what_is_wrong(edit, reason):
    frame = CODEC.encode_response(1, VoteResponse(ErrorCode.NONE, 1, 2, True))
    with pytest.raises(FrameError, match=reason):
        CODEC.decode(edit(frame))


def test_bad_presence_flag_and_bad_string_length():
    frame = encode(FetchResponse(ErrorCode.NONE, 1, 1, 0))
    presence_at = HEADER_LEN + 2 + 4 + 4 + 8 + 8
    assert frame[presence_at] == 0
    with pytest.raises(FrameError, match="presence flag 7"):
        CODEC.decode(frame[:presence_at] + b"\x07" + frame[presence_at + 1 :])
    frame = encode(BeginQuorumEpochRequest("abc", 1, 1))
    with pytest.raises(FrameError, match="bad string length -2"):
        CODEC.decode(frame[:HEADER_LEN] + struct.pack(">h", -2) + frame[HEADER_LEN + 2 :])
    with pytest.raises(FrameError, match="invalid UTF-8"):
        CODEC.decode(frame[: HEADER_LEN + 2] + b"\xff\xfe\xfd" + frame[HEADER_LEN + 5 :])


def test_huge_array_count_is_refused_without_allocating():
    frame = encode(EndQuorumEpochRequest(None, 1, 1, 1, (2,)))
    count_at = len(frame) - 8
    with pytest.raises(FrameError, match="bad array count 2147483647"):
        CODEC.decode(frame[:count_at] + struct.pack(">i", 2**31 - 1) + frame[count_at + 4 :])


def test_oversized_length_prefix_is_refused_before_the_body_arrives():
    reader = FrameReader(max_frame_bytes=1024)
    assert reader.feed(struct.pack(">i", 1024)[:3]) == []
    with pytest.raises(FrameError, match="over the 1024-byte limit"):
        reader.feed(struct.pack(">i", 1025)[3:])  # only the last prefix byte: no body was sent
    with pytest.raises(FrameError, match="already failed"):
        reader.feed(b"\x00" * 20)
    with pytest.raises(FrameError, match="over the"):
        FrameReader().feed(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameError, match="bad frame length -5"):
        FrameReader().feed(struct.pack(">i", -5))
    with pytest.raises(FrameError, match="over the 64-byte limit"):
        BinaryCodec(max_frame_bytes=64).decode(encode(EXAMPLES[7]))


def test_encoding_past_the_frame_limit_is_refused():
    big = FetchResponse(ErrorCode.NONE, 1, 1, 0, 0, None, (RecordBatch(0, 1, (b"x" * 2000,)),))
    with pytest.raises(ValueError, match="over the 1000-byte limit"):
        BinaryCodec(max_frame_bytes=1000).encode_response(1, big)


@pytest.mark.parametrize(
    "msg",
    [
        VoteRequest(None, 2**31, 1, 1, 1),  # int32 overflow
        VoteResponse(ErrorCode.NONE, 1, 1, 1),  # not a bool
        VoteResponse(4242, 1, 1, True),  # unknown error code
        BeginQuorumEpochRequest("x" * 40000, 1, 1),  # string over int16 length
        EndQuorumEpochRequest(None, 1, 1, 1, (2**40,)),
    ],
)
def test_encoding_bad_field_values_raises_value_error(msg):
    with pytest.raises(ValueError, match="cannot encode"):
        encode(msg)


def test_direction_is_checked_on_encode():
    with pytest.raises(TypeError):
        CODEC.encode_response(1, DescribeQuorumRequest())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CODEC.encode_request(1, VoteResponse(ErrorCode.NONE, 1, 1, True))  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=st.lists(any_message, min_size=1, max_size=6), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_frame_reader_splits_any_chunking_into_the_same_frames(msgs, cuts):
    frames = [encode(m, i) for i, m in enumerate(msgs)]
    stream = b"".join(frames)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    reader = FrameReader()
    got = []
    for a, b in itertools.pairwise(points):
        got.extend(reader.feed(stream[a:b]))
    assert got == frames
    assert reader.buffered == 0
    assert [CODEC.decode(f).message for f in got] == msgs


def test_frame_reader_keeps_a_partial_frame_until_it_completes():
    frame = encode(EXAMPLES[7])
    reader = FrameReader()
    for i in range(len(frame) - 1):
        assert reader.feed(frame[i : i + 1]) == []
    assert reader.buffered == len(frame) - 1
    assert reader.feed(frame[-1:]) == [frame]


def test_large_fetch_response_round_trips():
    batch = RecordBatch(0, 1, tuple(bytes([i % 251]) * 1024 for i in range(1024)))
    msg = FetchResponse(ErrorCode.NONE, 1, 1, 1024, 0, None, (batch,))
    frame = encode(msg)
    assert len(frame) > 1 << 20
    assert encode_batch(batch) in frame
    assert CODEC.decode(frame).message == msg
