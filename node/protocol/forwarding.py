"""Packing a client's request into an Envelope (KIP-590) and unpacking it on the controller.

The broker forwards the client's frame byte for byte, so the controller decodes the client's own
header (API key, version, correlation id) and body; the controller's answer carries the inner
response frame the broker hands back to the client unchanged. A bad inner frame is not the
forwarding broker's framing error: the outer connection stays up and the Envelope is answered with
INVALID_REQUEST.
"""

from __future__ import annotations

from node.protocol.broker_api import EnvelopeRequest, EnvelopeResponse
from node.protocol.codec import Codec, Frame, FrameKind
from node.protocol.errors import ErrorCode
from node.protocol.fields import FrameError
from node.protocol.registry import FORWARDABLE_REQUESTS, RESPONSE_FOR


class InvalidEnvelope(ValueError):
    """The inner request of an Envelope cannot be served; answer the Envelope with `error_code`."""

    def __init__(self, error_code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.error_code = error_code


def wrap(
    client_frame: bytes,
    principal: str,
    client_host_address: str,
    listener_name: str,
    security_protocol: str,
) -> EnvelopeRequest:
    """The Envelope a broker sends for `client_frame`, a whole request frame as the client sent it."""
    return EnvelopeRequest(bytes(client_frame), principal, client_host_address, listener_name, security_protocol)


def unwrap(codec: Codec, envelope: EnvelopeRequest) -> Frame:
    """The client's request inside `envelope`; raises InvalidEnvelope when it is not a forwardable request."""
    try:
        frame = codec.decode(envelope.request_data)
    except FrameError as e:
        raise InvalidEnvelope(ErrorCode.INVALID_REQUEST, f"envelope's inner frame: {e}") from None
    if frame.kind is not FrameKind.REQUEST:
        raise InvalidEnvelope(ErrorCode.INVALID_REQUEST, "envelope's inner frame is a response")
    if type(frame.message) not in FORWARDABLE_REQUESTS:
        raise InvalidEnvelope(
            ErrorCode.INVALID_REQUEST, f"{type(frame.message).__name__} cannot be forwarded in an envelope"
        )
    return frame


def answer(codec: Codec, inner: Frame, response: object) -> EnvelopeResponse:
    """The controller's successful Envelope answer: `response` framed for the client's correlation id."""
    expected = RESPONSE_FOR[type(inner.message)]
    if type(response) is not expected:
        raise TypeError(f"{type(response).__name__} does not answer {type(inner.message).__name__}")
    return EnvelopeResponse(ErrorCode.NONE, codec.encode_response(inner.correlation_id, response))


__all__ = ["InvalidEnvelope", "answer", "unwrap", "wrap"]
