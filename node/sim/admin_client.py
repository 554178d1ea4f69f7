"""Admin clients in the simulator: `node.client.admin.AdminClient.send` over the simulated network.

A `SimAdminClient` sends any admin or broker API request to the cluster and reports how it ended
with the real client's own error types (`node.client.errors`), so a history built from a simulated
run means what one from a real run means:

- a response: returned as it is, error codes included (`CallResult.response`);
- refused before sending (the node is down): `ConnectError`, definite;
- no answer within the call's deadline after sending: `ClientTimeoutError(sent=True)`, indefinite;
- the node's process died (or exited) after the request went out: `ConnectionLostError`, indefinite.

Routing mirrors the real client: bootstrap endpoints are tried in turn starting with the last one that
answered; a definite failure or a whole-response NOT_CONTROLLER / BROKER_NOT_AVAILABLE moves the call
to the next endpoint, rounds are separated by a doubling backoff, and everything stops at the call's
deadline. An indefinite failure ends a write at once (it may have been applied: never sent twice) and
moves a read on. `Target.CONTROLLER` calls go to controller endpoints only.

Simplifications (documented, deliberate): there are no connections, SASL handshakes or ApiVersions
round trips; the principal is given directly and an endpoint's roles come from the cluster layout. A
request towards a node the client cannot hear is lost silently, so a partition shows up as a timeout
(indefinite) rather than as a connect timeout (definite): the conservative reading. Clients are in no
partition unless a test cuts them off (`sim.network.add_grudge({node: [client.address]})`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from node.client.admin import RETRY_ELSEWHERE, Target, whole_refusal
from node.client.errors import ClientTimeoutError, ConnectError, ConnectionLostError, KafkaError
from node.process.ports import RequestContext
from node.process.process import CONTROLLER_LISTENER
from node.protocol.registry import READ_REQUESTS
from node.protocol.session import ApiVersionsRequest
from node.sim.cluster import BROKER_LISTENER, SIM_PORT, host_address
from node.sim.world import Simulation

_READS: frozenset[type] = READ_REQUESTS | {ApiVersionsRequest}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A node and the listener the client uses there: "PLAINTEXT" reaches a broker (or the broker of a
    combined node), "CONTROLLER" a controller (KIP-919's "bootstrap controllers")."""

    node_id: int
    listener: str = BROKER_LISTENER

    def __str__(self) -> str:
        return f"{host_address(self.node_id)}:{SIM_PORT}/{self.listener}"


def broker_endpoints(node_ids: Sequence[int]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(n, BROKER_LISTENER) for n in node_ids)


def controller_endpoints(node_ids: Sequence[int]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(n, CONTROLLER_LISTENER) for n in node_ids)


@dataclass(slots=True)
class CallResult:
    """One `send`: `response` when a server answered it, else `error` (`error.definite` says whether it
    certainly did not happen)."""

    call_id: int
    request: Any
    invoked_ms: int
    response: Any = None
    error: KafkaError | None = None
    server: Endpoint | None = None  # who answered; without an answer, who kept the request longest
    completed_ms: int = -1
    attempts: int = 0

    @property
    def done(self) -> bool:
        return self.completed_ms >= 0

    @property
    def ok(self) -> bool:
        return self.done and self.error is None

    @property
    def status(self) -> str:
        """Jepsen's completion type: ok (answered; error codes inside are the caller's to read),
        fail (definitely not applied), info (unknown), pending."""
        if not self.done:
            return "pending"
        if self.error is None:
            return "ok"
        return "fail" if self.error.definite else "info"


@dataclass(slots=True)
class _Call:
    result: CallResult
    target: Target
    retry_after_unknown: bool
    deadline: int
    on_done: Callable[[CallResult], None] | None
    endpoints: tuple[Endpoint, ...]
    round_no: int = 0
    candidates: list[Endpoint] | None = None
    position: int = 0
    unfit: int = 0
    last: KafkaError | None = None
    correlation_id: int = -1  # of the attempt in flight, -1 when none
    sent_to: Endpoint | None = None
    sent_ms: int = 0  # when the attempt in flight (or the last one) was sent
    kept: tuple[int, Endpoint | None] = (-1, None)  # the longest any server held the request, and which

    def attempt_ended(self, now: int) -> None:
        """Count the attempt in flight's time towards `kept`."""
        if now - self.sent_ms > self.kept[0]:
            self.kept = (now - self.sent_ms, self.sent_to)


class SimAdminClient:
    """A client of the simulated cluster (see the module docstring); callbacks instead of awaits."""

    def __init__(
        self,
        sim: Simulation,
        bootstrap: Sequence[Endpoint | int],
        *,
        principal: str = "User:ANONYMOUS",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        security_protocol: str | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("a client needs at least one bootstrap endpoint")
        if request_timeout_ms <= 0 or retry_backoff_ms <= 0 or retry_backoff_max_ms <= 0:
            raise ValueError("timeouts and backoffs must be > 0")
        self.sim = sim
        self.endpoints = tuple(e if isinstance(e, Endpoint) else Endpoint(e) for e in bootstrap)
        self.principal = principal
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        cluster = sim.cluster
        self.security_protocol = security_protocol or (cluster.security_protocol if cluster else "PLAINTEXT")
        self.address = sim.add_client(self)
        self.name = f"client{-self.address}"
        self.results: list[CallResult] = []
        self._calls: dict[int, _Call] = {}  # correlation id of the attempt in flight -> call
        self._next_cid = 0
        self._next_call = 0
        self._preferred: dict[Target, Endpoint] = {}

    # --- the API -----------------------------------------------------------------------------------

    def send(
        self,
        request: Any,
        on_done: Callable[[CallResult], None] | None = None,
        *,
        target: Target = Target.ANY,
        idempotent: bool | None = None,
        timeout_ms: int | None = None,
        endpoints: Sequence[Endpoint] | None = None,
    ) -> CallResult:
        """Start a call; it completes in simulated time (watch `result.done`, or pass `on_done`).
        `endpoints` replaces the bootstrap list for this call."""
        self._next_call += 1
        now = self.sim.now
        result = CallResult(self._next_call, request, now)
        self.results.append(result)
        retry = type(request) in _READS if idempotent is None else idempotent
        deadline = now + (timeout_ms or self.request_timeout_ms)
        call = _Call(result, target, retry, deadline, on_done, tuple(endpoints or self.endpoints))
        self._trace("invoke", f"#{result.call_id} {type(request).__name__}")
        self._next_attempt(call)
        return result

    def send_to(self, endpoint: Endpoint | int, request: Any, **kwargs: Any) -> CallResult:
        """`send` to this one endpoint only (retried there until the deadline), e.g. a chosen broker."""
        only = endpoint if isinstance(endpoint, Endpoint) else Endpoint(endpoint)
        return self.send(request, endpoints=(only,), **kwargs)

    # --- routing -----------------------------------------------------------------------------------

    def _round(self, call: _Call) -> list[Endpoint]:
        endpoints = list(call.endpoints)
        preferred = self._preferred.get(call.target)
        if preferred in endpoints:
            i = endpoints.index(preferred)
            endpoints = endpoints[i:] + endpoints[:i]
        return endpoints

    def _next_attempt(self, call: _Call) -> None:
        now = self.sim.now
        if call.candidates is None or call.position >= len(call.candidates):
            if call.candidates is not None:
                if call.unfit == len(call.candidates) and call.last is not None:
                    self._finish(call, error=call.last)  # nobody serves this call: waiting will not help
                    return
                call.round_no += 1
                shift = min(call.round_no - 1, 20)
                pause = min(self.retry_backoff_max_ms, self.retry_backoff_ms << shift)
                call.candidates = None
                if now + pause >= call.deadline:
                    self._give_up(call)
                    return
                self.sim.queue.after(pause, self._next_attempt, call)
                return
            call.candidates, call.position, call.unfit = self._round(call), 0, 0
        if now >= call.deadline:
            self._give_up(call)
            return
        endpoint = call.candidates[call.position]
        call.position += 1
        if call.target is Target.CONTROLLER and not self._is_controller_endpoint(endpoint):
            call.unfit += 1
            call.last = ConnectError("not a controller endpoint", server=str(endpoint))
            self._next_attempt(call)
            return
        self._next_cid += 1
        cid = call.correlation_id = self._next_cid
        call.sent_to = endpoint
        call.sent_ms = now
        call.result.attempts += 1
        call.result.server = endpoint
        self._calls[cid] = call
        ctx = RequestContext(
            principal=self.principal,
            client_host=f"10.1.0.{-self.address}",
            listener_name=endpoint.listener,
            security_protocol=self.security_protocol,
        )
        self.sim.client_request(self.address, endpoint.node_id, cid, call.result.request, ctx)
        self.sim.queue.after(call.deadline - now, self._deadline_passed, cid)

    def _is_controller_endpoint(self, endpoint: Endpoint) -> bool:
        roles = self.sim.node(endpoint.node_id).roles
        controller = roles is None or roles.controller
        return controller and (endpoint.listener == CONTROLLER_LISTENER or not roles.broker)

    def _give_up(self, call: _Call) -> None:
        if call.last is not None:
            self._finish(call, error=call.last)
        else:
            self._finish(call, error=ClientTimeoutError("the deadline passed before any server was asked", sent=False))

    def _attempt_failed(self, call: _Call, error: KafkaError) -> None:
        call.correlation_id = -1
        if not error.definite and not call.retry_after_unknown:
            self._finish(call, error=error)
            return
        call.last = error
        self._next_attempt(call)

    def _finish(self, call: _Call, *, response: Any = None, error: KafkaError | None = None) -> None:
        result = call.result
        if result.done:
            return
        result.response, result.error, result.completed_ms = response, error, self.sim.now
        if error is None:
            self._trace("ok", f"#{result.call_id} from {call.sent_to}")
        else:
            self._trace(result.status, f"#{result.call_id}: {error}")
        if call.on_done is not None:
            call.on_done(result)

    # --- ClientEndpoint (called by the world) ------------------------------------------------------

    def on_response(self, node_id: int, correlation_id: int, message: object) -> None:
        call = self._calls.pop(correlation_id, None)
        if call is None or call.correlation_id != correlation_id or call.result.done:
            return  # a late answer after the deadline: the outcome stays unknown
        endpoint = call.sent_to
        assert endpoint is not None
        call.attempt_ended(self.sim.now)
        refusal = whole_refusal(message, str(endpoint))
        call.correlation_id = -1
        if refusal is None:
            self._preferred[call.target] = endpoint
            self._finish(call, response=message)
            return
        call.last = refusal  # NOT_CONTROLLER and the like: nothing was applied, ask the next one
        self._next_attempt(call)

    def on_connection_failed(self, node_id: int, correlation_id: int, sent: bool) -> None:
        call = self._calls.pop(correlation_id, None)
        if call is None or call.correlation_id != correlation_id or call.result.done:
            return
        server = str(call.sent_to)
        call.attempt_ended(self.sim.now)
        if sent:
            lost = ConnectionLostError("connection reset after the request was sent", server=server)
            self._attempt_failed(call, lost)
        else:
            self._attempt_failed(call, ConnectError("connection refused", server=server))

    def _deadline_passed(self, correlation_id: int) -> None:
        call = self._calls.pop(correlation_id, None)
        if call is None or call.correlation_id != correlation_id or call.result.done:
            return
        # The server blamed is the one that kept the request longest: a client that rotated (a leader
        # that resigned while holding it, then quick refusals) may reach its deadline while its last
        # attempt is still on the way to a server that had no time to answer.
        call.attempt_ended(self.sim.now)
        _, kept = call.kept
        call.result.server = kept
        timeout = ClientTimeoutError("no answer before the deadline", sent=True, server=str(kept))
        self._finish(call, error=timeout)

    def _trace(self, kind: str, summary: str) -> None:
        self.sim.trace.record(self.sim.now, self.name, kind, summary)


__all__ = [
    "RETRY_ELSEWHERE",
    "CallResult",
    "Endpoint",
    "SimAdminClient",
    "Target",
    "broker_endpoints",
    "controller_endpoints",
]
