"""What a node process offers the controller and broker state machines that run inside it.

A process (`node.process.process.NodeProcess`) owns one Raft node: a voter when it is a controller,
an observer when it is only a broker. The controller and the broker never see the Raft core, a
socket or a clock: they are called with `now_ms` and act through a `ProcessPort`. Every effect is
recorded by the process and turned into actions for its runtime, so both runtimes (asyncio and the
simulator) drive the same logic.

Callbacks replace correlation ids: `send` and `append` take the function to call with the outcome.
They are plain Python and are always called later, from a later `handle` of the process, never
from inside the call that registered them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.metadata.image import MetadataImage

ANONYMOUS = "User:ANONYMOUS"


class _NotSent:
    """The `on_reply` value of a request that certainly never reached its destination."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_SENT"


NOT_SENT = _NotSent()


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and how: KIP-590's Envelope carries these for a forwarded request."""

    principal: str = ANONYMOUS  # "User:alice"; a connection that did not authenticate is ANONYMOUS
    client_host: str = "127.0.0.1"
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"  # or "SASL_PLAINTEXT"
    # The broker that forwarded this request inside an Envelope, as its own principal; None when the
    # request came straight from the client.
    forwarded_by: str | None = None
    # The request's frame exactly as it arrived, when the runtime reads frames (the real one does; the
    # simulator hands over objects): a broker forwards these bytes in the Envelope instead of
    # encoding the request again, and may hand the controller's encoded answer back as it is.
    frame: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """How an `append` ended. `committed` is definite both ways: the Raft core decides a pending
    append only once the high watermark passes its offset (or it was never written)."""

    committed: bool
    base_offset: int = -1
    last_offset: int = -1
    error: int = 0  # an ErrorCode when not committed (NOT_CONTROLLER-like: leadership was lost)


@dataclass(frozen=True, slots=True)
class BarrierOutcome:
    """A read barrier's end: when `ok`, the committed image read at `read_offset` or later is linearizable."""

    ok: bool
    read_offset: int = -1
    error: int = 0


class ProcessPort(Protocol):
    """The process as its controller and broker see it."""

    @property
    def node_id(self) -> int: ...

    @property
    def image(self) -> MetadataImage:
        """The committed metadata image: every committed record applied, nothing else."""

    @property
    def leader_id(self) -> int:
        """The quorum leader (the active controller) as this node knows it; -1 when unknown."""

    @property
    def leader_epoch(self) -> int: ...

    @property
    def controller_ids(self) -> tuple[int, ...]:
        """The voters: where broker-to-controller requests go."""

    def respond(self, reply_to: Hashable, correlation_id: int, message: object) -> None:
        """Answer an inbound request (the `reply_to` and `correlation_id` it came with)."""

    def send(self, destination: int, message: object, on_reply: Callable[[object | None], None]) -> None:
        """Send a request to node `destination`. `on_reply(response)`; `on_reply(NOT_SENT)` when it
        certainly never reached `destination` (no connection), so it had no effect there;
        `on_reply(None)` when it failed or timed out after it may have been received (ambiguous)."""

    def next_append_offset(self) -> int:
        """The offset the next `append`'s first record will get; valid only on the active controller."""

    def append(self, records: Sequence[bytes], on_done: Callable[[AppendOutcome], None]) -> int:
        """Append `records` (encoded by `node.metadata.records.encode_record`: the caller has already
        encoded them to check the batch's size) as one atomic batch; returns their predicted base offset."""

    def read_barrier(self, on_done: Callable[[BarrierOutcome], None]) -> None:
        """Confirm leadership with a majority after this call (see `node.raft.events.ReadBarrier`)."""

    def wake_at(self, deadline_ms: int) -> None:
        """Call the component's `on_tick` at or after `deadline_ms` (deadlines accumulate; earliest wins)."""

    def shut_down(self, reason: str, requested: bool = False) -> None:
        """The process must stop: `requested` when a controlled shutdown the runtime asked for has
        finished (a clean exit), else the node refuses to go on (e.g. a duplicate broker id)."""


__all__ = ["ANONYMOUS", "AppendOutcome", "BarrierOutcome", "ProcessPort", "RequestContext"]
