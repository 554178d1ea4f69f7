"""KIP-590 forwarding: a broker sends a client's admin write to the active controller in an Envelope.

The Envelope carries the client's request frame with the client's correlation id (the bytes as they
arrived when the runtime has them, else the request encoded again), and the client's principal, host,
listener and security protocol, so the controller authorizes the client (after the forwarding broker
itself). The controller's inner response goes back to the client as is: when the runtime reads
frames, as the encoded bytes themselves once their header shows they answer this request (no decode
and encode again on the broker); else decoded and checked.

Every forwarded request is applied at most once, and the client is told which of its failures are
definite:

- NOT_CONTROLLER in the Envelope answer: that controller refused it unapplied; the broker waits for a
  new controller (or `retry.backoff.ms`, as a newly elected one answers NOT_CONTROLLER until it is
  active) and sends it again, until `request.timeout.ms` after it arrived. So does a request that
  never left the broker (`on_reply(NOT_SENT)`: no connection to that controller, e.g. it was just
  killed): it certainly was not applied.
- No answer (`on_reply(None)`): it may have been applied. It is never sent again; the client gets
  REQUEST_TIMED_OUT (ambiguous). So does a request still unanswered at its deadline (a late answer
  is dropped).
- Deadline reached while not in flight (never sent, or every attempt refused with NOT_CONTROLLER):
  certainly not applied; the client gets NOT_CONTROLLER (definite, retriable).
- CLUSTER_AUTHORIZATION_FAILED: the forwarding broker lacks ClusterAction, a setup error the client
  cannot fix: UNKNOWN_SERVER_ERROR, as the KIP says. UNSUPPORTED_VERSION is passed on; any other
  Envelope error (INVALID_REQUEST, PRINCIPAL_DESERIALIZATION_FAILURE) is UNKNOWN_SERVER_ERROR.

Metrics (KIP-590's names where it has them): pending forwards (num-client-forwarding-to-controller),
forwarded requests (num-messages-redirected), authorization failures, queue time (arrival or
re-queueing to send), remote time (send to answer), queue length, retries and timeouts.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.broker.clock import Clock
from node.broker.config import BrokerConfig
from node.broker.refusals import refuse
from node.process.ports import NOT_SENT, ProcessPort, RequestContext
from node.protocol.broker_api import EnvelopeRequest, EnvelopeResponse
from node.protocol.codec import BinaryCodec, Codec, EncodedResponse, FrameKind, response_header
from node.protocol.errors import ErrorCode
from node.protocol.fields import FrameError
from node.protocol.forwarding import wrap
from node.protocol.registry import API_KEYS, RESPONSE_FOR


@dataclass(slots=True)
class _Forward:
    reply_to: Hashable
    correlation_id: int
    request: object
    envelope: EnvelopeRequest
    deadline_ms: int
    queued_at_ms: int  # when it arrived or was put back after NOT_CONTROLLER
    retry_at_ms: int = 0
    in_flight: bool = False
    sent_at_ms: int = -1
    attempts: int = 0
    passthrough: bool = False  # the runtime reads frames: the controller's answer may go back as encoded


class _Timing:
    """Count, sum and max of one duration, in ms."""

    __slots__ = ("count", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.max = 0

    def add(self, ms: int) -> None:
        ms = max(0, ms)
        self.count += 1
        self.total += ms
        self.max = max(self.max, ms)

    def into(self, out: dict[str, float | int], prefix: str) -> None:
        out[f"{prefix}_avg"] = self.total / self.count if self.count else 0.0
        out[f"{prefix}_max"] = self.max


class ForwardingManager:
    """Pending forwarded requests by id; each is answered exactly once through `port.respond`."""

    def __init__(self, port: ProcessPort, config: BrokerConfig, clock: Clock, codec: Codec | None = None) -> None:
        self._port = port
        self._config = config
        self._clock = clock
        self._codec = codec or BinaryCodec()
        self._pending: dict[int, _Forward] = {}
        self._next_id = 0
        self._queue_time = _Timing()
        self._remote_time = _Timing()
        self.counters = {
            "requests": 0,  # num-messages-redirected-count
            "responses": 0,  # answered from the controller's inner response
            "retries": 0,  # resent after NOT_CONTROLLER, or after an attempt that never left the broker
            "not_sent": 0,  # attempts that never reached the controller (no connection)
            "timeouts_definite": 0,  # deadline passed before (re)sending: NOT_CONTROLLER
            "timeouts_ambiguous": 0,  # no answer, or none by the deadline: REQUEST_TIMED_OUT
            "authorization_failures": 0,  # request-forwarding-to-controller-authorization-fail-count
            "errors": 0,  # other Envelope errors or undecodable inner responses
            "late_answers": 0,  # answers to requests already answered (dropped)
        }

    def forward(
        self, now_ms: int, ctx: RequestContext, reply_to: Hashable, correlation_id: int, request: object
    ) -> None:
        frame = ctx.frame  # the client's own bytes, when the runtime has them (KIP-590: byte for byte)
        if frame is None:
            try:
                frame = self._codec.encode_request(correlation_id, request)
            except (TypeError, ValueError) as e:
                self._port.respond(reply_to, correlation_id, refuse(request, ErrorCode.INVALID_REQUEST, str(e)))
                return
        envelope = wrap(frame, ctx.principal, ctx.client_host, ctx.listener_name, ctx.security_protocol)
        self._next_id += 1
        fid = self._next_id
        deadline = now_ms + self._config.request_timeout_ms
        self._pending[fid] = _Forward(
            reply_to, correlation_id, request, envelope, deadline, now_ms, passthrough=ctx.frame is not None
        )
        self.counters["requests"] += 1
        self._port.wake_at(deadline)
        self._send(fid, now_ms)

    def on_leader_change(self, now_ms: int) -> None:
        for f in self._pending.values():
            f.retry_at_ms = 0
        self.on_tick(now_ms)

    def on_tick(self, now_ms: int) -> None:
        for fid, f in list(self._pending.items()):
            if now_ms >= f.deadline_ms:
                if f.in_flight:
                    # Sent and unanswered: the controller may still apply it. Never resend.
                    self.counters["timeouts_ambiguous"] += 1
                    self._finish(fid, refuse(f.request, ErrorCode.REQUEST_TIMED_OUT))
                else:
                    self.counters["timeouts_definite"] += 1
                    self._finish(fid, refuse(f.request, ErrorCode.NOT_CONTROLLER))
            elif not f.in_flight:
                self._send(fid, now_ms)

    # --- sending and answers -----------------------------------------------------------------------

    def _send(self, fid: int, now_ms: int) -> None:
        f = self._pending[fid]
        leader = self._port.leader_id
        if leader < 0:
            return  # on_leader_change
        if now_ms < f.retry_at_ms:
            self._port.wake_at(f.retry_at_ms)
            return
        f.in_flight = True
        f.sent_at_ms = now_ms
        f.attempts += 1
        self._queue_time.add(now_ms - f.queued_at_ms)
        self._port.send(leader, f.envelope, lambda reply: self._on_reply(fid, leader, reply))

    def _on_reply(self, fid: int, target: int, reply: object | None) -> None:
        f = self._pending.get(fid)
        if f is None or not f.in_flight:
            self.counters["late_answers"] += 1
            return
        now = self._clock.now_ms
        f.in_flight = False
        self._remote_time.add(now - f.sent_at_ms)
        if reply is NOT_SENT:  # never reached it: certainly unapplied, as good as a refusal
            self.counters["not_sent"] += 1
            reply = EnvelopeResponse(ErrorCode.NOT_CONTROLLER)
        elif not isinstance(reply, EnvelopeResponse) and "broker-forward-resend-ambiguous" in self._config.bugs:
            reply = EnvelopeResponse(ErrorCode.NOT_CONTROLLER)  # taken for a refusal: sent again below
        if not isinstance(reply, EnvelopeResponse):
            # Sent, and no (proper) answer: it may have been applied. At most once: do not resend.
            self.counters["timeouts_ambiguous"] += 1
            self._finish(fid, refuse(f.request, ErrorCode.REQUEST_TIMED_OUT))
            return
        code = reply.error_code
        if code == ErrorCode.NOT_CONTROLLER:
            # Definitely refused unapplied: queue it again for the next controller.
            self.counters["retries"] += 1
            f.queued_at_ms = now
            leader = self._port.leader_id
            if leader < 0:
                return  # on_leader_change sends it
            if leader == target:  # maybe not yet active, or our view is stale: back off
                f.retry_at_ms = now + self._config.retry_backoff_ms
                self._port.wake_at(f.retry_at_ms)
                return
            self._send(fid, now)
            return
        if code == ErrorCode.NONE:
            self._finish(fid, self._inner_response(f, reply.response_data))
            return
        if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            self.counters["authorization_failures"] += 1
            self._finish(fid, refuse(f.request, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        self.counters["errors"] += 1
        passed_on = (
            ErrorCode.UNSUPPORTED_VERSION if code == ErrorCode.UNSUPPORTED_VERSION else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        self._finish(fid, refuse(f.request, passed_on))

    def _inner_response(self, f: _Forward, data: bytes | None) -> object:
        expected = RESPONSE_FOR[type(f.request)]
        if f.passthrough and data is not None and response_header(data) == (API_KEYS[expected], f.correlation_id):
            # The runtime writes frames: the controller's answer goes back to the client as encoded
            # (its header says it answers this very request; the client decodes the body).
            self.counters["responses"] += 1
            return EncodedResponse(data)
        try:
            if data is None:
                raise FrameError("successful Envelope answer without response data")
            frame = self._codec.decode(data)
            if frame.kind is not FrameKind.RESPONSE or type(frame.message) is not expected:
                raise FrameError(f"inner response is a {type(frame.message).__name__}, not a {expected.__name__}")
        except FrameError as e:
            # The controller did answer, so the outcome is not a timeout; the client cannot know more.
            self.counters["errors"] += 1
            return refuse(f.request, ErrorCode.UNKNOWN_SERVER_ERROR, f"forwarded request's answer: {e}")
        self.counters["responses"] += 1
        return frame.message

    def _finish(self, fid: int, response: object) -> None:
        f = self._pending.pop(fid)
        self._port.respond(f.reply_to, f.correlation_id, response)

    # --- observing ---------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._pending)

    def metrics(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "forwarding.pending": len(self._pending),  # num-client-forwarding-to-controller-count
            "forwarding.queue_length": sum(1 for f in self._pending.values() if not f.in_flight),
            "forwarding.in_flight": sum(1 for f in self._pending.values() if f.in_flight),
        }
        for name, value in self.counters.items():
            out[f"forwarding.{name}_total"] = value
        self._queue_time.into(out, "forwarding.queue_time_ms")
        self._remote_time.into(out, "forwarding.remote_time_ms")
        return out


__all__ = ["ForwardingManager"]
