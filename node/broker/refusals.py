"""An error answer for any request a broker serves, shaped as that request's response.

`node.controller.errors.whole_request_error` covers the admin writes and the reads with a top-level
or per-resource error code; Metadata has neither a top-level error nor resources to name when it
asks for every topic, so its refusal names each asked topic with the code, or reflects no metadata
at all (no brokers, no controller, metadata offset -1).

While a broker is not ONLINE it refuses clients with BROKER_NOT_AVAILABLE: retriable (the client
tries another broker or waits) and definite (nothing was done), as a fenced Kafka broker is simply
left out of Metadata answers and so not used.
"""

from __future__ import annotations

from node.controller.errors import whole_request_error
from node.protocol.admin import MetadataRequest, MetadataResponse, MetadataResponseTopic
from node.protocol.common import NO_BROKER, ZERO_UUID
from node.protocol.errors import ErrorCode

UNAVAILABLE = ErrorCode.BROKER_NOT_AVAILABLE


def refuse(request: object, error_code: int, message: str | None = None) -> object:
    """`request`'s response saying `error_code` for every item it names (and nothing else)."""
    code = int(error_code)
    if isinstance(request, MetadataRequest):
        topics = tuple(MetadataResponseTopic(code, name, ZERO_UUID) for name in request.topics or ())
        return MetadataResponse((), None, NO_BROKER, topics)
    return whole_request_error(request, code, message)


__all__ = ["UNAVAILABLE", "refuse"]
