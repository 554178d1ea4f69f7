"""What the admin client takes and returns: plain dataclasses, with per-resource errors as typed errors.

A request about several resources (topics, config resources, ACLs, partitions) can succeed for some
and fail for others; each `Outcome` carries its own `error` (a `KafkaError`, definite or not), and
`raise_first` turns a batch into "all succeeded or raise". Reads carry `metadata_offset`: the prefix of
the metadata log the answer reflects (-1 when the server did not say).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from node.client.errors import KafkaError
from node.protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from node.protocol.admin import ConfigOperation, ConfigResourceType, ConfigSource

# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A topic, a broker ("1"), or the cluster-wide broker default (a broker named "")."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str = "") -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(broker_id))

    def __str__(self) -> str:
        kind = {ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker"}.get(self.type, self.type.name)
        return f"{kind}:{self.name or '<default>'}"


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One IncrementalAlterConfigs change: SET and APPEND/SUBTRACT take a value, DELETE none."""

    name: str
    op: ConfigOperation
    value: str | None = None

    @classmethod
    def set(cls, name: str, value: str) -> AlterConfigOp:
        return cls(name, ConfigOperation.SET, value)

    @classmethod
    def delete(cls, name: str) -> AlterConfigOp:
        return cls(name, ConfigOperation.DELETE, None)

    @classmethod
    def append(cls, name: str, value: str) -> AlterConfigOp:
        return cls(name, ConfigOperation.APPEND, value)

    @classmethod
    def subtract(cls, name: str, value: str) -> AlterConfigOp:
        return cls(name, ConfigOperation.SUBTRACT, value)


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the controller's num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)  # partition -> replicas
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who may (ALLOW) or may not (DENY) do what on which resources, from which host.

    The client's one binding type for CreateAcls, DescribeAcls and DeleteAcls answers; its fields are in
    the order of the wire's AclCreation (the client relies on that).
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Which ACLs a DescribeAcls or DeleteAcls matches; None / ANY match everything.

    Fields in the order of the wire's DescribeAclsRequest and DeleteAclsFilter (the client relies on that).
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """An AlterPartition entry: the ISR a partition leader asks for, naming the epochs it knows."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


# --- outcomes --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    error: KafkaError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise self.error


def raise_first(outcomes: Iterable[Outcome]) -> None:
    """Raise the first outcome's error, preferring an indefinite one (it must not be reported as `fail`)."""
    errors = [o.error for o in outcomes if o.error is not None]
    indefinite = [e for e in errors if not e.definite]
    if errors:
        raise (indefinite or errors)[0]


@dataclass(frozen=True, slots=True)
class TopicCreation(Outcome):
    name: str
    topic_id: uuid.UUID
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class TopicDeletion(Outcome):
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class LeaderElection(Outcome):
    """One partition's answer to ElectLeaders (KIP-460); `error` None: its leader was moved."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ConfigAlteration(Outcome):
    resource: ConfigResource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive config
    source: ConfigSource
    read_only: bool = False
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class ResourceConfig(Outcome):
    resource: ConfigResource
    entries: dict[str, ConfigEntry] = field(default_factory=dict)

    def values(self) -> dict[str, str | None]:
        return {name: entry.value for name, entry in self.entries.items()}


@dataclass(frozen=True, slots=True)
class ConfigsDescription:
    resources: dict[ConfigResource, ResourceConfig]
    metadata_offset: int
    server: str  # who answered


@dataclass(frozen=True, slots=True)
class AclCreation(Outcome):
    binding: AclBinding


@dataclass(frozen=True, slots=True)
class AclDeletion(Outcome):
    filter: AclFilter
    deleted: tuple[AclBinding, ...] = ()
    # a matching ACL the server could not delete, with its error
    failed: tuple[tuple[AclBinding, KafkaError], ...] = ()


@dataclass(frozen=True, slots=True)
class AclsDescription:
    bindings: tuple[AclBinding, ...]
    metadata_offset: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    epoch: int = -1  # the broker epoch (its registration record's offset); -1 when not reported

    @property
    def state(self) -> str:
        return "fenced" if self.fenced else "online"


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    metadata_offset: int


@dataclass(frozen=True, slots=True)
class PartitionInfo(Outcome):
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TopicDescription(Outcome):
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: dict[str, TopicDescription]
    metadata_offset: int


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True)
class PartitionChangeResult(Outcome):
    topic_id: uuid.UUID
    partition: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


__all__ = [
    "AclBinding",
    "AclCreation",
    "AclDeletion",
    "AclFilter",
    "AclsDescription",
    "AlterConfigOp",
    "BrokerInfo",
    "ClusterDescription",
    "ClusterMetadata",
    "ConfigAlteration",
    "ConfigEntry",
    "ConfigResource",
    "ConfigsDescription",
    "HeartbeatResult",
    "LeaderElection",
    "NewTopic",
    "Outcome",
    "PartitionChange",
    "PartitionChangeResult",
    "PartitionInfo",
    "ResourceConfig",
    "TopicCreation",
    "TopicDeletion",
    "TopicDescription",
    "raise_first",
]
