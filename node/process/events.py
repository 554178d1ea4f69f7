"""What a runtime feeds into `NodeProcess.handle(now_ms, event)` beyond the Raft core's own events.

The Raft events `Start`, `Tick`, `ResponseReceived`, `RequestFailed` and `FlushCompleted` (and the
snapshot events) are fed to a process unchanged; inbound requests come as `InboundRequest`, which
says who sent them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.process.ports import RequestContext
from node.raft.events import ResponseReceived

_DIRECT = RequestContext()  # an unauthenticated client on the default listener


@dataclass(frozen=True, slots=True)
class InboundRequest:
    """A request from a connection; `reply_to` is the runtime's token for it (echoed in `Respond`)."""

    reply_to: Hashable
    correlation_id: int
    message: object
    context: RequestContext = _DIRECT


@dataclass(frozen=True, slots=True)
class InboundRequests:
    """Several requests that arrived together (one read from one connection), handled in order as
    one event: the process may join their appends into one Raft batch (`append_batch`)."""

    requests: tuple[InboundRequest, ...]


@dataclass(frozen=True, slots=True)
class ResponsesReceived:
    """Several answers that arrived together (one read from one connection), handled in order as one
    event (a broker's burst of Envelope answers)."""

    responses: tuple[ResponseReceived, ...]


@dataclass(frozen=True, slots=True)
class BeginShutdown:
    """A graceful stop (SIGTERM): a broker shuts down through the controller, a leader resigns."""


__all__ = ["BeginShutdown", "InboundRequest", "InboundRequests", "ResponsesReceived"]
