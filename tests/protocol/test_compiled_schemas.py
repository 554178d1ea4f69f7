"""Each schema's compiled encoder and decoder (straight-line code, `fields._compile_*`) against the
reference `Schema.encode_into` / `Schema.decode` methods: the same bytes, the same values, and the same
error (type and message) for every example message of both registries, every truncation of its body,
every single-byte change, and bad field values."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.protocol import fields as F
from node.protocol.codec import BinaryCodec
from node.protocol.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, VoteRequest, VoteResponse
from tests.protocol import test_admin_messages as admin
from tests.protocol import test_codec as quorum

CODEC = BinaryCodec()
EXAMPLES = quorum.EXAMPLES + admin.EXAMPLES
SCHEMAS = [schema for versions in F.SCHEMA_VERSIONS.values() for schema in versions.values()]


@contextlib.contextmanager
def reference() -> Iterator[None]:
    """Every schema on the reference methods (the compiled functions are instance attributes)."""
    saved = {schema: (schema.__dict__.pop("encode_into"), schema.__dict__.pop("decode")) for schema in SCHEMAS}
    try:
        yield
    finally:
        for schema, (encode_into, decode) in saved.items():
            schema.encode_into, schema.decode = encode_into, decode  # type: ignore[method-assign]


def outcome(call) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        return "ok", call()
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)


def both(call) -> tuple[tuple[str, object], tuple[str, object]]:  # type: ignore[no-untyped-def]
    compiled = outcome(call)
    with reference():
        return compiled, outcome(call)


def test_every_schema_is_compiled():
    assert all("decode" in s.__dict__ and "encode_into" in s.__dict__ for s in SCHEMAS)


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_same_bytes_and_values_and_errors_on_every_truncation_and_byte_change(msg):
    frame = admin.encode(msg)
    with reference():
        assert admin.encode(msg) == frame
    frames = [quorum.reframe(frame[:cut]) for cut in range(quorum.HEADER_LEN, len(frame))]
    for i in range(quorum.HEADER_LEN, len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF, frame[i] ^ 0x01):
            frames.append(frame[:i] + bytes([value]) + frame[i + 1 :])
    compiled_outcomes = [outcome(lambda f=f: CODEC.decode(f)) for f in frames]
    with reference():
        ref_outcomes = [outcome(lambda f=f: CODEC.decode(f)) for f in frames]
    assert compiled_outcomes == ref_outcomes
    # the damage was seen, not only passed over (a message without a body has nothing to damage)
    assert any(kind != "ok" for kind, _ in compiled_outcomes) or not frames


@pytest.mark.parametrize(
    "msg",
    [
        VoteRequest(None, 2**31, 1, 1, 1),
        VoteResponse(4242, 1, 1, True),
        VoteResponse(0, 1, 1, 1),
        BeginQuorumEpochRequest("x" * 40000, 1, 1),
        BeginQuorumEpochRequest(b"not a str", 1, 1),  # type: ignore[arg-type]
        EndQuorumEpochRequest(None, 1, 1, 1, (2**40,)),
        EndQuorumEpochRequest(None, 1, 1, 1, None),  # type: ignore[arg-type]
    ],
    ids=lambda m: type(m).__name__,
)
def test_bad_values_fail_to_encode_with_the_same_message(msg):
    encode = CODEC.encode_response if type(msg).__name__.endswith("Response") else CODEC.encode_request
    compiled, ref = both(lambda: encode(1, msg))
    assert compiled[0] != "ok"
    assert compiled == ref


@settings(max_examples=200, deadline=None)
@given(msg=quorum.any_message, correlation_id=st.integers(0, 2**31 - 1))
def test_random_messages_encode_to_the_same_bytes(msg, correlation_id):
    compiled, ref = both(lambda: admin.encode(msg, correlation_id))
    assert compiled == ref
    assert CODEC.decode(compiled[1]).message == msg  # type: ignore[arg-type]
