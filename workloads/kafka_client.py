"""The config workloads through confluent-kafka (librdkafka): a client nobody here wrote.

Selected with `workload_options = { client = "confluent-kafka" }` (or `kchaos run --client
confluent-kafka`); the default, `kraft-chaos`, is our own admin client (`workloads/calls.py`).
`KafkaCalls` is a `Calls`: the workloads build the same requests and read the same answers, and this
module turns each request into an AdminClient call and librdkafka's results back into our response
dataclasses, so the histories have the same shape and the same checkers judge them.

- Writes: IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT). Through a broker: an AdminClient
  bootstrapped on that broker, which librdkafka sends to the "controller" Metadata names (a live
  broker, which forwards it, KIP-590). At the controllers: an AdminClient bootstrapped on the
  controller listeners, which list the voters and the active controller (KIP-919's view).
- Controller reads: DescribeConfigs through the controllers' AdminClient: librdkafka sends it to the
  active controller, which answers after a read barrier (linearizable).
- Broker reads (`read-broker`) stay on our client: Kafka's DescribeConfigs answer carries no metadata
  offset, and `image-reads` judges a broker read against the committed image at that offset.

The AdminClient's calls return futures at once and librdkafka's own threads do the I/O; the run's
asyncio loop waits for them (`asyncio.wrap_future`) with a bound: the call's `request_timeout`, and
`GRACE_S` more before the op is given up as `info`. One AdminClient per target (each broker, the
controllers) serves every worker: librdkafka is thread-safe and pipelines requests. `close()`
destroys them (librdkafka's rd_kafka_destroy, run when the last reference goes).

Outcomes (`definite`): see `FAIL_CODES`, `FAIL_LOCAL` and docs/internals/kafka-protocol.md.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from node.client.errors import KafkaError as OurKafkaError
from node.protocol.admin import (
    AlterConfigsResourceResponse,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from node.protocol.errors import ErrorCode
from vocab.workload import client_login
from workloads.calls import Answer, Calls, Done, RealCalls

OURS = "kraft-chaos"
CONFLUENT = "confluent-kafka"
CLIENTS = (OURS, CONFLUENT)
GRACE_S = 2.0  # beyond the request timeout, before the loop stops waiting for librdkafka

log = logging.getLogger("kchaos.librdkafka")  # librdkafka's own log lines (reconnects, timeouts)
log.addHandler(logging.NullHandler())  # not on the run's terminal unless logging is configured
log.propagate = False

# Error codes a Kafka server returns after validating a request and before applying any of it: the
# same request sent again would get the same answer, so even a retry librdkafka made behind our back
# cannot have been applied. `fail`.
FAIL_CODES: dict[str, str] = {
    "INVALID_CONFIG": "the value does not validate",
    "UNKNOWN_TOPIC_OR_PART": "no such topic",
    "POLICY_VIOLATION": "refused by the alter-config policy",
    "INVALID_REQUEST": "the request is malformed",
    "TOPIC_AUTHORIZATION_FAILED": "the principal may not alter/describe the topic",
    "CLUSTER_AUTHORIZATION_FAILED": "the principal may not act on the cluster",
    "UNSUPPORTED_VERSION": "the server does not serve the version",
    "TOPIC_EXCEPTION": "the topic name is invalid",
    "SASL_AUTHENTICATION_FAILED": "the login was refused before any request",
}
# librdkafka's local errors that mean nothing was sent. `fail`.
FAIL_LOCAL: dict[str, str] = {
    "_INVALID_ARG": "librdkafka refused the arguments",
    "_UNSUPPORTED_FEATURE": "the broker does not support the API (per ApiVersions)",
    "_AUTHENTICATION": "the SASL login failed before any request",
    "_INVALID_TYPE": "librdkafka refused an argument's type",
}
# How librdkafka's admin layer words a timeout in the states before it sends (looking up the
# controller, or the broker a resource names). Not "Failed while waiting for response from broker:",
# which comes after the send: that one is indefinite. librdkafka goes back to looking up the controller
# only after a NOT_CONTROLLER answer, which Kafka (and this cluster) gives before applying anything.
NOT_SENT_MESSAGES = ("Failed while waiting for controller:", "Timed out waiting for broker")


class LibrdkafkaError(OurKafkaError):
    """A librdkafka error as our client's error type, so `workloads.calls.failed` reads `definite`."""

    def __init__(self, name: str, code: int, message: str, *, definite: bool) -> None:
        super().__init__(code, f"{name}: {message}", definite=definite)
        self.librdkafka_name = name


def is_definite(name: str, message: str = "") -> bool:
    """True when librdkafka's error (by code name, e.g. "_TIMED_OUT", "INVALID_CONFIG") says the request
    certainly did not take effect: a validation/authorization answer, a local error raised before
    sending, or an admin op that never found a node to send to. Everything else (timeouts, transport
    errors, REQUEST_TIMED_OUT, NOT_CONTROLLER, retriable codes after a possible send) is indefinite."""
    if name in FAIL_CODES or name in FAIL_LOCAL:
        return True
    return name == "_TIMED_OUT" and message.startswith(NOT_SENT_MESSAGES)


def from_librdkafka(exc: BaseException) -> LibrdkafkaError:
    """Our typed error for whatever a confluent-kafka future raised."""
    err = exc.args[0] if exc.args else None
    if hasattr(err, "name") and hasattr(err, "code"):
        name, message = err.name(), err.str()
        definite = is_definite(name, message)
        return LibrdkafkaError(name, err.code(), message, definite=definite)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return LibrdkafkaError("_TIMED_OUT", -185, "no result from librdkafka within the bound", definite=False)
    return LibrdkafkaError(type(exc).__name__, -1, str(exc), definite=False)


def client_choice(env: Any) -> str:
    """The run's `client` option, checked: a one-line ValueError for an unknown one, or confluent-kafka
    on the simulator (librdkafka needs real sockets)."""
    client = str(env.option("client", OURS))
    if client not in CLIENTS:
        raise ValueError(f"workload option client={client!r}: expected one of {', '.join(CLIENTS)}")
    if client == CONFLUENT and getattr(env.db, "sim", None) is not None:
        raise ValueError("workload option client=confluent-kafka needs a real backend (netns, docker, ssh), not sim")
    return client


def admin_config(bootstrap: list[str], login: Mapping[str, str], timeout_ms: int, name: str) -> dict[str, Any]:
    """librdkafka settings of one AdminClient: SASL/PLAIN when the cluster has logins, reconnects and
    metadata refreshes quick enough to follow kills and partitions within a short run."""
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(bootstrap),
        "client.id": f"kchaos-{name}",
        "socket.connection.setup.timeout.ms": 1_000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1_000,
        "topic.metadata.refresh.interval.ms": 2_000,
        "socket.timeout.ms": max(1_000, timeout_ms),
        "logger": log,
    }
    if login:
        conf.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": login["username"],
                "sasl.password": login["password"],
            }
        )
    return conf


# --- requests -> AdminClient calls, results -> our responses ---------------------------------------


def _ck() -> Any:
    import confluent_kafka.admin as ck

    return ck


def incremental_resources(request: IncrementalAlterConfigsRequest) -> list[Any]:
    """confluent-kafka ConfigResources for our IncrementalAlterConfigs request (operations keep their
    Kafka numbers: SET 0, DELETE 1, APPEND 2, SUBTRACT 3)."""
    ck = _ck()
    resources = []
    for r in request.resources:
        resource = ck.ConfigResource(ck.ResourceType(int(r.resource_type)), r.resource_name)
        for c in r.configs:
            op = ck.AlterConfigOpType(int(c.config_operation))
            resource.add_incremental_config(ck.ConfigEntry(c.name, c.value, incremental_operation=op))
        resources.append(resource)
    return resources


def describe_resources(request: DescribeConfigsRequest) -> list[Any]:
    ck = _ck()
    return [ck.ConfigResource(ck.ResourceType(int(r.resource_type)), r.resource_name) for r in request.resources]


Outcome = tuple[Any, BaseException | None]  # (resource, exception raised by its future or None)


def _resource_error(exc: BaseException) -> tuple[int, str] | LibrdkafkaError:
    """A per-resource failure: a definite server code goes into the response (the workload reads it as
    Kafka's error code); anything else fails the whole request with our typed error."""
    error = from_librdkafka(exc)
    if error.definite and error.code >= 0:
        return error.code, str(error)
    return error


def alter_response(outcomes: list[tuple[Any, Any, BaseException | None]]) -> IncrementalAlterConfigsResponse:
    """Our IncrementalAlterConfigs answer from (resource, result, exception) per resource; raises the
    typed error when one resource's outcome is not a definite server answer (the request may have
    been applied: the whole op is unknown)."""
    responses = []
    for resource, _, exc in outcomes:
        code, message = int(ErrorCode.NONE), None
        if exc is not None:
            error = _resource_error(exc)
            if isinstance(error, LibrdkafkaError):
                raise error
            code, message = error
        rtype = ConfigResourceType(resource.restype_int)
        responses.append(AlterConfigsResourceResponse(code, message, rtype, resource.name))
    return IncrementalAlterConfigsResponse(tuple(responses))


def _source(source: Any) -> ConfigSource:
    value = int(getattr(source, "value", source))
    return ConfigSource(value) if value in ConfigSource._value2member_map_ else ConfigSource.UNKNOWN


def describe_response(outcomes: list[tuple[Any, Any, BaseException | None]]) -> DescribeConfigsResponse:
    """Our DescribeConfigs answer (no metadata offset: Kafka's has none) from (resource, {name:
    ConfigEntry}, exception) per resource."""
    results = []
    for resource, entries, exc in outcomes:
        rtype = ConfigResourceType(resource.restype_int)
        if exc is not None:
            error = _resource_error(exc)
            if isinstance(error, LibrdkafkaError):
                raise error
            results.append(DescribeConfigsResult(error[0], error[1], rtype, resource.name))
            continue
        configs = tuple(
            DescribeConfigsResourceResult(
                e.name, e.value, bool(e.is_read_only), _source(e.source), bool(e.is_sensitive)
            )
            for e in entries.values()
        )
        results.append(DescribeConfigsResult(int(ErrorCode.NONE), None, rtype, resource.name, configs))
    return DescribeConfigsResponse(tuple(results))


class KafkaCalls(Calls):
    """`Calls` through confluent-kafka AdminClients (see the module docstring); broker reads through
    our own client (`RealCalls`), made on first use."""

    def __init__(self, env: Any, timeout_ms: int) -> None:
        ck = _ck()
        db = env.db
        self.env = env
        self.db = db
        self.loop = env.scheduler.loop
        self.timeout_ms = timeout_ms
        self.brokers = list(db.brokers)
        login = client_login(db)
        self._admins = {
            b: ck.AdminClient(admin_config([db.broker_address(b)], login, timeout_ms, b)) for b in db.brokers
        }
        controllers = [db.controller_address(c) for c in db.controllers]
        self._controllers = ck.AdminClient(admin_config(controllers, login, timeout_ms, "controllers"))
        self._ours: RealCalls | None = None

    def _call(self, admin: Any, request: Any) -> tuple[dict[Any, Future[Any]], Callable[[Any], Any]]:
        """Start the AdminClient call for `request`: its futures by resource, and how to build the answer."""
        timeout_s = self.timeout_ms / 1000
        if isinstance(request, IncrementalAlterConfigsRequest):
            futures = admin.incremental_alter_configs(
                incremental_resources(request), request_timeout=timeout_s, validate_only=request.validate_only
            )
            return futures, alter_response
        if isinstance(request, DescribeConfigsRequest):
            return admin.describe_configs(describe_resources(request), request_timeout=timeout_s), describe_response
        raise TypeError(f"the confluent-kafka client does not send {type(request).__name__}")

    def _run(self, admin: Any, request: Any, done: Done, node: str | None) -> None:
        try:
            futures, build = self._call(admin, request)
        except Exception as exc:  # librdkafka refused the call (definite per the table), or a bug here (info)
            done(Answer(None, from_librdkafka(exc), node))
            return

        async def wait() -> Answer:
            resources = list(futures)
            waiting = [asyncio.wrap_future(futures[r]) for r in resources]
            try:
                results = await asyncio.wait_for(
                    asyncio.gather(*waiting, return_exceptions=True), self.timeout_ms / 1000 + GRACE_S
                )
            except TimeoutError as exc:
                return Answer(None, from_librdkafka(exc), node)
            outcomes = [
                (r, None, res) if isinstance(res, BaseException) else (r, res, None)
                for r, res in zip(resources, results)
            ]
            try:
                return Answer(build(outcomes), None, node)
            except OurKafkaError as exc:
                return Answer(None, exc, node)
            finally:
                admin.poll(0)  # hand librdkafka's queued log lines to `log`

        def finished(task: asyncio.Task[Answer]) -> None:
            if task.cancelled() or task.exception() is not None:
                error = task.exception() if not task.cancelled() else asyncio.CancelledError("cancelled")
                done(Answer(None, from_librdkafka(error or RuntimeError("no answer")), node))
            else:
                done(task.result())

        self.loop.create_task(wait()).add_done_callback(finished)

    def to_broker(self, node: str, request: Any, *, idempotent: bool, done: Done) -> None:
        if isinstance(request, DescribeConfigsRequest):  # a broker read: needs the image's offset
            self.ours().to_broker(node, request, idempotent=idempotent, done=done)
            return
        self._run(self._admins[node], request, done, node)

    def to_controllers(self, request: Any, *, idempotent: bool, done: Done) -> None:
        self._run(self._controllers, request, done, None)

    def ours(self) -> RealCalls:
        if self._ours is None:
            self._ours = RealCalls(self.env, self.timeout_ms)
        return self._ours

    def close(self) -> None:
        """Destroy the AdminClients (librdkafka closes their connections and threads) and our client."""
        self._admins.clear()
        self._controllers = None
        gc.collect()
        if self._ours is not None:
            self._ours.close()
