"""The broker (KIP-500 / KIP-631 / KIP-590 / KIP-497), a sans-IO state machine behind a `ProcessPort`.

It glues four parts that each own one job: `Lifecycle` (registration, heartbeats, states),
`ForwardingManager` (admin writes to the active controller in Envelopes), `IsrManager` (replica
heartbeats and AlterPartition as a partition leader) and `ReadHandler` (reads from the image).

Routing of what the process hands it:
- ReplicaHeartbeat (broker <-> broker, needs ClusterAction): the ISR manager, in every state;
- admin writes: forwarded; reads: answered from the image, with the metadata offset they reflect;
- while not ONLINE (OFFLINE, FENCED, STOPPING) clients get BROKER_NOT_AVAILABLE (retriable, definite);
- anything else: INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

from node.broker.clock import Clock
from node.broker.config import BrokerConfig
from node.broker.forwarding import ForwardingManager
from node.broker.isr import IsrManager
from node.broker.lifecycle import BrokerState, Lifecycle
from node.broker.reads import ReadHandler
from node.broker.refusals import UNAVAILABLE, refuse
from node.controller.config_catalog import DEFAULTS
from node.metadata.describe import ConfigDefaults
from node.process.ports import ProcessPort, RequestContext
from node.protocol.broker_api import Listener
from node.protocol.codec import Codec
from node.protocol.errors import ErrorCode
from node.protocol.registry import FORWARDABLE_REQUESTS, READ_REQUESTS
from node.protocol.replication import ReplicaHeartbeatRequest, ReplicaHeartbeatResponse
from node.security.authorizer import Authorizer


class Broker:
    def __init__(
        self,
        port: ProcessPort,
        config: BrokerConfig,
        incarnation_id: uuid.UUID,
        listeners: tuple[Listener, ...],
        cluster_id: str | None = None,
        *,
        authorizer: Authorizer | None = None,
        config_defaults: ConfigDefaults | None = None,
        codec: Codec | None = None,
    ) -> None:
        """`cluster_id`: what to register with; None: the cluster id of the metadata log (port.image),
        once the image has it. `authorizer` None: every read is allowed (the controller still
        authorizes forwarded writes). `config_defaults`: static config values DescribeConfigs shows
        for keys not set dynamically; None: the controller's catalog, so both answer alike."""
        if config.node_id != port.node_id:
            raise ValueError(f"broker config is for node {config.node_id}, the process is node {port.node_id}")
        self._port = port
        self._clock = Clock()
        self._lifecycle = Lifecycle(
            port, config, self._clock, incarnation_id, listeners, cluster_id, on_registered=self._on_registered
        )
        self._forwarding = ForwardingManager(port, config, self._clock, codec)
        self._isr = IsrManager(port, config, self._clock, self._lifecycle)
        self._reads = ReadHandler(
            port, authorizer, DEFAULTS if config_defaults is None else config_defaults, config.bugs
        )

    # --- what the process reads --------------------------------------------------------------------

    @property
    def state(self) -> BrokerState:
        return self._lifecycle.state

    @property
    def broker_epoch(self) -> int:
        return self._lifecycle.broker_epoch

    @property
    def shut_down_reason(self) -> str | None:
        """Why the broker asked the process to stop (None: it has not)."""
        return self._lifecycle.shut_down_reason

    def maximal_isr(self, topic_id: str, partition: int) -> tuple[int, ...]:
        """The ISR this broker assumes as the partition's leader (KIP-497), in-flight changes included."""
        return self._isr.maximal_isr(topic_id, partition)

    # --- component interface -----------------------------------------------------------------------

    def start(self, now_ms: int) -> None:
        self._lifecycle.start(self._clock.advance(now_ms))

    def begin_shutdown(self, now_ms: int) -> None:
        self._lifecycle.begin_shutdown(self._clock.advance(now_ms))

    def handle_request(
        self, now_ms: int, ctx: RequestContext, reply_to: Hashable, correlation_id: int, message: Any
    ) -> None:
        now = self._clock.advance(now_ms)
        kind = type(message)
        if kind is ReplicaHeartbeatRequest:
            if not self._reads.may_cluster_action(ctx):
                response: object = ReplicaHeartbeatResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                response = self._isr.on_replica_heartbeat(now, message)
            self._port.respond(reply_to, correlation_id, response)
            return
        if kind not in FORWARDABLE_REQUESTS and kind not in READ_REQUESTS:
            try:
                response = refuse(message, ErrorCode.INVALID_REQUEST)
            except (KeyError, TypeError):
                return  # no response shape to refuse with: the sender times out
            self._port.respond(reply_to, correlation_id, response)
            return
        if self._lifecycle.state is not BrokerState.ONLINE:
            self._port.respond(reply_to, correlation_id, refuse(message, UNAVAILABLE))
            return
        if kind in FORWARDABLE_REQUESTS:
            self._forwarding.forward(now, ctx, reply_to, correlation_id, message)
            return
        self._port.respond(reply_to, correlation_id, self._reads.answer(ctx, message))

    def on_committed(self, now_ms: int) -> None:
        now = self._clock.advance(now_ms)
        self._lifecycle.poll(now)  # the cluster id may just have become known
        self._isr.on_committed(now)

    def on_leader_change(self, now_ms: int) -> None:
        now = self._clock.advance(now_ms)
        self._lifecycle.on_leader_change(now)
        self._forwarding.on_leader_change(now)
        self._isr.poll(now)

    def on_tick(self, now_ms: int) -> None:
        now = self._clock.advance(now_ms)
        self._lifecycle.poll(now)
        self._forwarding.on_tick(now)
        self._isr.poll(now)

    def metrics(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "broker.state": int(self._lifecycle.state),
            "broker.epoch": self._lifecycle.broker_epoch,
            "broker.metadata_offset": self._port.image.last_offset,
        }
        for name, value in self._lifecycle.counters.items():
            out[f"broker.{name}_total"] = value
        out.update(self._forwarding.metrics())
        out.update(self._isr.metrics())
        return out

    def _on_registered(self) -> None:
        self._isr.poll(self._clock.now_ms)


__all__ = ["Broker", "BrokerState"]
