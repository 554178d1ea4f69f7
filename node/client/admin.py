"""The asyncio admin client: every admin API of the cluster, plus the calls a broker makes to a controller.

    async with AdminClient("127.0.0.2:9092,127.0.0.3:9092", username="alice", password="secret") as admin:
        topic_id = await admin.create_topic("t", partitions=3, replication_factor=3)
        await admin.incremental_alter_config(ConfigResource.topic("t"), [AlterConfigOp.set("retention.ms", "1")])
        configs = await admin.describe_configs([ConfigResource.topic("t")], linearizable=True)

Routing. Each call goes to one bootstrap server at a time, starting with the one that last answered
that kind of call (sticky). A server that cannot be reached, does not serve the API (per its
ApiVersions), or refuses as a whole with a "not here" error (NOT_CONTROLLER, BROKER_NOT_AVAILABLE) is
skipped for the next one; after a round the client backs off (`retry_backoff_ms`, doubling) and tries
again until the call's deadline (`request_timeout_ms` from the call's start: connecting, retries and
all; `attempt_timeout_ms` bounds one server's turn at a read). Calls for the active controller
(`linearizable=True` DescribeConfigs; broker registration, heartbeats and AlterPartition) only go to
controller endpoints, the ones whose ApiVersions list the controller APIs; giving every controller's
address finds the active one as NOT_CONTROLLER answers move the call along.

Errors and retries follow the table in `node.client.errors`: every failure is a `KafkaError` whose
`definite` tells a history `fail` from `info`. A write is retried elsewhere only after a definite
failure, so it is applied at most once; a read is also retried after an indefinite one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from node.client.connection import Address, Connection, api_key_of, parse_addresses
from node.client.errors import (
    AuthenticationError,
    ClientTimeoutError,
    InvalidRequestError,
    KafkaError,
    ProtocolError,
    UnsupportedApiError,
    server_error,
)
from node.client.results import (
    AclBinding,
    AclCreation,
    AclDeletion,
    AclFilter,
    AclsDescription,
    AlterConfigOp,
    BrokerInfo,
    ClusterDescription,
    ClusterMetadata,
    ConfigAlteration,
    ConfigEntry,
    ConfigResource,
    ConfigsDescription,
    HeartbeatResult,
    LeaderElection,
    NewTopic,
    PartitionChange,
    PartitionChangeResult,
    PartitionInfo,
    ResourceConfig,
    TopicCreation,
    TopicDeletion,
    TopicDescription,
    raise_first,
)
from node.protocol import acls as A
from node.protocol import admin as M
from node.protocol import broker_api as B
from node.protocol.codec import BinaryCodec
from node.protocol.common import ZERO_UUID
from node.protocol.errors import ErrorCode
from node.protocol.registry import API_KEYS, API_NAMES, READ_REQUESTS
from node.protocol.session import ApiVersionsRequest, ApiVersionsResponse

T = TypeVar("T")

# Only a controller endpoint serves broker registration: how ApiVersions tells a controller from a broker.
CONTROLLER_ONLY_API = API_KEYS[B.BrokerRegistrationRequest]
# A whole-request answer made only of these codes means "ask another server" (nothing was applied).
RETRY_ELSEWHERE: frozenset[int] = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.BROKER_NOT_AVAILABLE})
_READS: frozenset[type] = READ_REQUESTS | {ApiVersionsRequest}


class Target(Enum):
    ANY = "any"  # any bootstrap server that serves the API
    CONTROLLER = "controller"  # controller endpoints only (the active one answers; others: NOT_CONTROLLER)


class AdminClient:
    """An asyncio admin client for a kraft-chaos cluster (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        username: str | None = None,
        password: str | None = None,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 5_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        attempt_timeout_ms: int | None = None,
    ) -> None:
        text = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        self.addresses: tuple[Address, ...] = parse_addresses(text)
        for name, value in (
            ("request_timeout_ms", request_timeout_ms),
            ("connect_timeout_ms", connect_timeout_ms),
            ("retry_backoff_ms", retry_backoff_ms),
            ("retry_backoff_max_ms", retry_backoff_max_ms),
            ("attempt_timeout_ms", 1 if attempt_timeout_ms is None else attempt_timeout_ms),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, not {value}")
        if (username is None) != (password is None):
            raise ValueError("give both a SASL username and a password, or neither")
        if username == "":
            raise ValueError("the SASL username must not be empty")
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        # How long one server gets to answer a read before the next is asked (None: the whole deadline).
        # A write always waits until the call's deadline: after it was sent it cannot go elsewhere.
        self.attempt_timeout_ms = attempt_timeout_ms
        self.username = username
        self._credentials = (username, password) if username is not None and password is not None else None
        self._codec = BinaryCodec()
        self._connections: dict[Address, Connection] = {}
        self._opening: dict[Address, asyncio.Lock] = {}
        self._preferred: dict[Target, Address] = {}

    @property
    def principal(self) -> str:
        return f"User:{self.username}" if self.username is not None else "User:ANONYMOUS"

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            await conn.close()

    # --- routing -----------------------------------------------------------------------------------

    async def send(
        self,
        request: Any,
        *,
        target: Target = Target.ANY,
        idempotent: bool | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send any request and return its raw response (transport failures raise typed errors).

        `idempotent` (default: true for reads) allows a retry on another server after an indefinite
        failure. A response whose every error code is NOT_CONTROLLER / BROKER_NOT_AVAILABLE is retried
        elsewhere; any other response is returned as it is, error codes included.
        """
        response, _ = await self._send(request, target, idempotent, timeout_ms)
        return response

    async def send_with_server(
        self,
        request: Any,
        *,
        target: Target = Target.ANY,
        idempotent: bool | None = None,
        timeout_ms: int | None = None,
    ) -> tuple[Any, str]:
        """`send`, also returning the server (host:port) that answered (a history names the node)."""
        return await self._send(request, target, idempotent, timeout_ms)

    async def _send(
        self, request: Any, target: Target, idempotent: bool | None, timeout_ms: int | None
    ) -> tuple[Any, str]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms or self.request_timeout_ms) / 1000
        try:
            api_key = api_key_of(request)
        except KeyError:
            raise TypeError(f"{type(request).__name__} is not a request") from None
        retry_after_unknown = type(request) in _READS if idempotent is None else idempotent
        last: KafkaError | None = None
        kept = (-1.0, "")  # the longest any server held the request, and which: a timeout blames it
        for round_no in itertools.count():
            if round_no:
                pause = min(self.retry_backoff_max_ms, self.retry_backoff_ms << min(round_no - 1, 20)) / 1000
                if loop.time() + pause >= deadline:
                    break
                await asyncio.sleep(pause)
            candidates = self._candidates(target)
            unfit = 0
            for address in candidates:
                if loop.time() >= deadline:
                    break
                try:
                    conn = await self._connection(address, deadline)
                except AuthenticationError:
                    raise  # the same credentials would fail everywhere
                except KafkaError as exc:  # definite: nothing of this request was written
                    last = exc
                    continue
                if not conn.serves(api_key) or (
                    target is Target.CONTROLLER and conn.served and CONTROLLER_ONLY_API not in conn.served
                ):
                    unfit += 1
                    what = "a controller endpoint" if conn.serves(api_key) else f"serving {API_NAMES[api_key]}"
                    last = UnsupportedApiError(f"not {what} (per its ApiVersions)", server=str(address))
                    continue
                attempt_deadline = deadline
                if retry_after_unknown and self.attempt_timeout_ms is not None:
                    attempt_deadline = min(deadline, loop.time() + self.attempt_timeout_ms / 1000)
                sent_at = loop.time()
                try:
                    response = await conn.request(request, attempt_deadline)
                except InvalidRequestError:
                    raise  # cannot be encoded: no server would get it either
                except KafkaError as exc:
                    kept = max(kept, (loop.time() - sent_at, str(address)))
                    if isinstance(exc, ClientTimeoutError) and not exc.definite and exc.server != kept[1]:
                        exc = ClientTimeoutError(exc.message, sent=True, server=kept[1])
                    if not exc.definite and not retry_after_unknown:
                        raise exc from None
                    last = exc
                    continue
                kept = max(kept, (loop.time() - sent_at, str(address)))
                refusal = whole_refusal(response, str(address))
                if refusal is None:
                    self._preferred[target] = address
                    return response, str(address)
                last = refusal
            if unfit == len(candidates) and last is not None:
                raise last  # no bootstrap server serves this call at all: waiting will not help
        if last is not None:
            raise last
        raise ClientTimeoutError("the deadline passed before any server was asked", sent=False)

    def _candidates(self, target: Target) -> list[Address]:
        addresses = list(self.addresses)
        preferred = self._preferred.get(target)
        if preferred in addresses:
            i = addresses.index(preferred)
            addresses = addresses[i:] + addresses[:i]
        return addresses

    async def _connection(self, address: Address, deadline: float) -> Connection:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        async with self._opening.setdefault(address, asyncio.Lock()):
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise ClientTimeoutError("deadline passed while connecting", sent=False, server=str(address))
            conn = Connection(address, self._codec, self._credentials)
            await conn.open(min(self.connect_timeout_ms / 1000, remaining))
            self._connections[address] = conn
            return conn

    # --- cluster view ------------------------------------------------------------------------------

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max version) as the first reachable bootstrap server serves them."""
        response, server = await self._send(ApiVersionsRequest(), Target.ANY, None, None)
        assert isinstance(response, ApiVersionsResponse)
        _raise_top(response.error_code, None, server)
        return {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}

    async def describe_cluster(self, *, include_fenced: bool = True) -> ClusterDescription:
        response, server = await self._send(M.DescribeClusterRequest(include_fenced), Target.ANY, None, None)
        _raise_top(response.error_code, response.error_message, server)
        brokers = tuple(
            sorted(
                (
                    BrokerInfo(b.broker_id, b.host, b.port, b.rack, b.is_fenced, b.broker_epoch)
                    for b in response.brokers
                ),
                key=lambda b: b.broker_id,
            )
        )
        return ClusterDescription(response.cluster_id, response.controller_id, brokers, response.metadata_offset)

    async def list_brokers(self) -> tuple[BrokerInfo, ...]:
        """Every registered broker, fenced ones included, with its broker epoch."""
        return (await self.describe_cluster(include_fenced=True)).brokers

    async def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        request = M.MetadataRequest(tuple(topics) if topics is not None else None)
        response, server = await self._send(request, Target.ANY, None, None)
        described = {t.name: _topic_description(t, server) for t in response.topics}
        brokers = tuple(BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers)
        return ClusterMetadata(
            response.cluster_id, response.controller_id, brokers, described, response.metadata_offset
        )

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        """Topics with their partitions; an unknown name is there with an UnknownTopicError outcome."""
        described = (await self.metadata(names)).topics
        for name in names or ():
            described.setdefault(name, _missing(TopicDescription, name, name=name, topic_id=ZERO_UUID))
        return described

    # --- topics ------------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, TopicCreation]:
        creatable = tuple(_creatable(t) for t in topics)
        request = M.CreateTopicsRequest(creatable, self.request_timeout_ms, validate_only)
        response, server = await self._send(request, Target.ANY, False, None)
        results = {
            r.name: TopicCreation(
                name=r.name,
                topic_id=r.topic_id,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                error=_resource_error(r.error_code, r.error_message, server, f"topic:{r.name}"),
            )
            for r in response.topics
        }
        return _complete(results, (t.name for t in topics), TopicCreation, name_field=True, topic_id=ZERO_UUID)

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        *,
        configs: Mapping[str, str] | None = None,
        assignments: Mapping[int, Sequence[int]] | None = None,
    ) -> uuid.UUID:
        """Create one topic and return its id; raises the topic's error."""
        topic = NewTopic(name, partitions, replication_factor, dict(assignments or {}), dict(configs or {}))
        result = (await self.create_topics([topic]))[name]
        result.raise_for_error()
        return result.topic_id

    async def delete_topics(self, names: Sequence[str]) -> dict[str, TopicDeletion]:
        request = M.DeleteTopicsRequest(tuple(names), self.request_timeout_ms)
        response, server = await self._send(request, Target.ANY, False, None)
        results = {
            r.name: TopicDeletion(
                name=r.name,
                topic_id=r.topic_id,
                error=_resource_error(r.error_code, r.error_message, server, f"topic:{r.name}"),
            )
            for r in response.responses
        }
        return _complete(results, names, TopicDeletion, name_field=True, topic_id=ZERO_UUID)

    async def delete_topic(self, name: str) -> None:
        (await self.delete_topics([name]))[name].raise_for_error()

    # --- leaders -----------------------------------------------------------------------------------

    async def elect_leaders(
        self, election_type: M.ElectionType, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], LeaderElection]:
        """KIP-460: a preferred or unclean election for each (topic, partition), or for every partition
        (None: then only the partitions where an election was tried are answered)."""
        asked: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            asked.setdefault(topic, []).append(partition)
        topics = (
            None if partitions is None else tuple(M.ElectLeadersTopicPartitions(t, tuple(p)) for t, p in asked.items())
        )
        response, server = await self._send(
            M.ElectLeadersRequest(election_type, topics, self.request_timeout_ms), Target.ANY, False, None
        )
        _raise_top(response.error_code, None, server)
        results = {
            (t.topic, p.partition_id): LeaderElection(
                topic=t.topic,
                partition=p.partition_id,
                error=_resource_error(p.error_code, p.error_message, server, f"partition:{t.topic}-{p.partition_id}"),
            )
            for t in response.replica_election_results
            for p in t.partition_result
        }
        for topic, partition in partitions or ():
            if (topic, partition) not in results:
                error = _unanswered(server, f"partition:{topic}-{partition}")
                results[(topic, partition)] = LeaderElection(topic=topic, partition=partition, error=error)
        return results

    # --- configs -----------------------------------------------------------------------------------

    async def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool = False
    ) -> dict[ConfigResource, ConfigAlteration]:
        """SET / DELETE / APPEND / SUBTRACT per resource; the server applies one request as one batch."""
        resources = tuple(
            M.IncrementalAlterConfigsResource(
                resource.type,
                resource.name,
                tuple(M.AlterableConfig(op.name, op.op, op.value) for op in ops),
            )
            for resource, ops in changes.items()
        )
        request = M.IncrementalAlterConfigsRequest(resources, validate_only)
        response, server = await self._send(request, Target.ANY, False, None)
        return self._alterations(response.responses, changes, server)

    async def incremental_alter_config(self, resource: ConfigResource, ops: Sequence[AlterConfigOp]) -> None:
        """One resource's changes; raises its error."""
        (await self.incremental_alter_configs({resource: ops}))[resource].raise_for_error()

    async def alter_configs(
        self, configs: Mapping[ConfigResource, Mapping[str, str | None]], *, validate_only: bool = False
    ) -> dict[ConfigResource, ConfigAlteration]:
        """Legacy AlterConfigs: each resource's dynamic config becomes exactly `configs[resource]`."""
        resources = tuple(
            M.AlterConfigsResource(resource.type, resource.name, tuple(values.items()))
            for resource, values in configs.items()
        )
        response, server = await self._send(M.AlterConfigsRequest(resources, validate_only), Target.ANY, False, None)
        return self._alterations(response.responses, configs, server)

    @staticmethod
    def _alterations(
        answers: Sequence[M.AlterConfigsResourceResponse], asked: Iterable[ConfigResource], server: str
    ) -> dict[ConfigResource, ConfigAlteration]:
        results: dict[ConfigResource, ConfigAlteration] = {}
        for r in answers:
            resource = ConfigResource(r.resource_type, r.resource_name)
            error = _resource_error(r.error_code, r.error_message, server, str(resource))
            results[resource] = ConfigAlteration(resource=resource, error=error)
        return _complete(results, asked, ConfigAlteration)

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] | None = None,
        linearizable: bool = False,
    ) -> ConfigsDescription:
        """Configs of `resources` (only `keys` when given). `linearizable`: ask the active controller,
        which answers after a read barrier; otherwise any server answers from its metadata image."""
        request = M.DescribeConfigsRequest(
            tuple(
                M.DescribeConfigsResource(r.type, r.name, tuple(keys) if keys is not None else None) for r in resources
            )
        )
        target = Target.CONTROLLER if linearizable else Target.ANY
        response, server = await self._send(request, target, None, None)
        results: dict[ConfigResource, ResourceConfig] = {}
        for r in response.results:
            resource = ConfigResource(r.resource_type, r.resource_name)
            entries = {
                c.name: ConfigEntry(c.name, c.value, c.config_source, c.read_only, c.is_sensitive) for c in r.configs
            }
            error = _resource_error(r.error_code, r.error_message, server, str(resource))
            results[resource] = ResourceConfig(resource=resource, entries=entries, error=error)
        return ConfigsDescription(_complete(results, resources, ResourceConfig), response.metadata_offset, server)

    async def describe_config(self, resource: ConfigResource, *, linearizable: bool = False) -> dict[str, str | None]:
        """One resource's config values; raises its error."""
        result = (await self.describe_configs([resource], linearizable=linearizable)).resources[resource]
        result.raise_for_error()
        return result.values()

    # --- ACLs --------------------------------------------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreation]:
        creations = tuple(A.AclCreation(*_values(b)) for b in bindings)
        response, server = await self._send(A.CreateAclsRequest(creations), Target.ANY, False, None)
        outcomes = [
            AclCreation(binding=b, error=_resource_error(r.error_code, r.error_message, server, _acl_text(b)))
            for b, r in zip(bindings, response.results)
        ]
        outcomes += [AclCreation(binding=b, error=_unanswered(server, _acl_text(b))) for b in bindings[len(outcomes) :]]
        return outcomes

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletion]:
        wire = tuple(A.DeleteAclsFilter(*_values(f)) for f in filters)
        response, server = await self._send(A.DeleteAclsRequest(wire), Target.ANY, False, None)
        outcomes: list[AclDeletion] = []
        for f, r in zip(filters, response.filter_results):
            deleted: list[AclBinding] = []
            failed: list[tuple[AclBinding, KafkaError]] = []
            for m in r.matching_acls:
                binding = AclBinding(
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
                error = _resource_error(m.error_code, m.error_message, server, _acl_text(binding))
                if error is None:
                    deleted.append(binding)
                else:
                    failed.append((binding, error))
            error = _resource_error(r.error_code, r.error_message, server, "acl filter")
            outcomes.append(AclDeletion(filter=f, deleted=tuple(deleted), failed=tuple(failed), error=error))
        outcomes += [AclDeletion(filter=f, error=_unanswered(server, "acl filter")) for f in filters[len(outcomes) :]]
        return outcomes

    async def describe_acls(self, acl_filter: AclFilter | None = None) -> AclsDescription:
        request = A.DescribeAclsRequest(*_values(acl_filter or AclFilter()))
        response, server = await self._send(request, Target.ANY, None, None)
        _raise_top(response.error_code, response.error_message, server)
        bindings = tuple(
            AclBinding(
                r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type
            )
            for r in response.resources
            for a in r.acls
        )
        return AclsDescription(bindings, response.metadata_offset)

    # --- broker-side calls (a workload playing a broker) --------------------------------------------

    async def register_broker(
        self,
        broker_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        listeners: Sequence[B.Listener],
        *,
        features: Sequence[B.BrokerRegistrationFeature] = (),
        rack: str | None = None,
    ) -> int:
        """Register with the active controller; returns the broker epoch."""
        request = B.BrokerRegistrationRequest(
            broker_id, cluster_id, incarnation_id, tuple(listeners), tuple(features), rack
        )
        response, server = await self._send(request, Target.CONTROLLER, False, None)
        _raise_top(response.error_code, None, server, f"broker:{broker_id}")
        return response.broker_epoch

    async def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        *,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> HeartbeatResult:
        request = B.BrokerHeartbeatRequest(broker_id, broker_epoch, current_metadata_offset, want_fence, want_shut_down)
        response, server = await self._send(request, Target.CONTROLLER, False, None)
        _raise_top(response.error_code, None, server, f"broker:{broker_id}")
        return HeartbeatResult(response.is_caught_up, response.is_fenced, response.should_shut_down)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[PartitionChange]
    ) -> dict[tuple[uuid.UUID, int], PartitionChangeResult]:
        """KIP-497 AlterPartition as the partitions' leader; per partition: the new state or its error."""
        by_topic: dict[uuid.UUID, list[B.AlterPartitionPartitionData]] = {}
        for c in changes:
            data = B.AlterPartitionPartitionData(c.partition, c.leader_epoch, tuple(c.new_isr), c.partition_epoch)
            by_topic.setdefault(c.topic_id, []).append(data)
        request = B.AlterPartitionRequest(
            broker_id, broker_epoch, tuple(B.AlterPartitionTopicData(t, tuple(ps)) for t, ps in by_topic.items())
        )
        response, server = await self._send(request, Target.CONTROLLER, False, None)
        _raise_top(response.error_code, None, server, f"broker:{broker_id}")
        results: dict[tuple[uuid.UUID, int], PartitionChangeResult] = {}
        for topic in response.topics:
            for p in topic.partitions:
                error = _resource_error(p.error_code, None, server, f"partition:{topic.topic_id}-{p.partition_index}")
                results[(topic.topic_id, p.partition_index)] = PartitionChangeResult(
                    topic_id=topic.topic_id,
                    partition=p.partition_index,
                    leader_id=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    isr=p.isr,
                    partition_epoch=p.partition_epoch,
                    error=error,
                )
        for c in changes:
            key = (c.topic_id, c.partition)
            if key not in results:
                where = f"partition:{c.topic_id}-{c.partition}"
                results[key] = PartitionChangeResult(
                    topic_id=c.topic_id, partition=c.partition, error=_unanswered(server, where)
                )
        return results


# --- conversions -------------------------------------------------------------------------------------


def _values(record: object) -> tuple[Any, ...]:
    """A dataclass's field values in order: AclBinding and AclFilter list theirs in the wire types' order."""
    return tuple(getattr(record, f.name) for f in dataclasses.fields(record))  # type: ignore[arg-type]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a message class's field names (asked for every answer)


def _error_codes(message: object) -> Iterator[int]:
    """Every error code in a response, top-level and per resource."""
    cls = type(message)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(message))  # type: ignore[arg-type]
    for name in names:
        value = getattr(message, name)
        if name == "error_code":
            yield int(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _error_codes(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _error_codes(value)


def whole_refusal(response: object, server: str) -> KafkaError | None:
    """A "not here" error when the whole response refuses with RETRY_ELSEWHERE codes only."""
    first = None
    for code in _error_codes(response):
        if code not in RETRY_ELSEWHERE:
            return None  # something in it was answered here: not a refusal of the whole
        if first is None:
            first = code
    if first is None:
        return None
    return server_error(first, f"{type(response).__name__} refused", server=server)


def _raise_top(code: int, message: str | None, server: str, resource: str | None = None) -> None:
    if code != ErrorCode.NONE:
        raise server_error(code, message, server=server, resource=resource)


def _resource_error(code: int, message: str | None, server: str, resource: str) -> KafkaError | None:
    return None if code == ErrorCode.NONE else server_error(code, message, server=server, resource=resource)


def _unanswered(server: str, resource: str) -> KafkaError:
    """The server answered the request but not this resource: its fate is unknown."""
    return ProtocolError(f"the answer does not mention {resource}", server=server)


def _missing(cls: type[T], resource: str, **fields: Any) -> T:
    error = server_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "not in the metadata", resource=f"topic:{resource}")
    return cls(error=error, **fields)


def _complete(
    results: dict[Any, T], asked: Iterable[Any], cls: type[T], *, name_field: bool = False, **extra: Any
) -> dict[Any, T]:
    """Add an indefinite outcome for each asked-for resource the answer left out."""
    for key in asked:
        if key not in results:
            fields = {"name": key, **extra} if name_field else {"resource": key, **extra}
            results[key] = cls(error=ProtocolError(f"the answer does not mention {key}"), **fields)
    return results


def _creatable(topic: NewTopic) -> M.CreatableTopic:
    assignments = tuple(
        M.CreatableReplicaAssignment(partition, tuple(replicas))
        for partition, replicas in sorted(topic.assignments.items())
    )
    if assignments:
        return M.CreatableTopic(topic.name, -1, -1, assignments, tuple(topic.configs.items()))
    return M.CreatableTopic(
        topic.name, topic.num_partitions, topic.replication_factor, (), tuple(topic.configs.items())
    )


def _topic_description(topic: M.MetadataResponseTopic, server: str) -> TopicDescription:
    partitions = tuple(
        PartitionInfo(
            partition=p.partition_index,
            leader=p.leader_id,
            leader_epoch=p.leader_epoch,
            replicas=p.replica_nodes,
            isr=p.isr_nodes,
            partition_epoch=p.partition_epoch,
            error=_resource_error(p.error_code, None, server, f"partition:{topic.name}-{p.partition_index}"),
        )
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
    )
    error = _resource_error(topic.error_code, None, server, f"topic:{topic.name}")
    return TopicDescription(name=topic.name, topic_id=topic.topic_id, partitions=partitions, error=error)


def _acl_text(b: AclBinding) -> str:
    return f"acl:{b.permission.name} {b.principal} {b.operation.name} {b.resource_type.name}:{b.resource_name}"


__all__ = ["CONTROLLER_ONLY_API", "RETRY_ELSEWHERE", "AdminClient", "Target", "raise_first", "whole_refusal"]
