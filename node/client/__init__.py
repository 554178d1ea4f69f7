"""The admin client of a kraft-chaos cluster: `AdminClient` (asyncio), `SyncAdminClient` (blocking).

Errors are `node.client.errors.KafkaError`s; each says whether its request certainly did not happen
(`definite`), which is what a history needs to record `fail` versus `info`.
"""

from node.client.admin import AdminClient, Target
from node.client.errors import KafkaError
from node.client.results import (
    AclBinding,
    AclFilter,
    AlterConfigOp,
    ConfigResource,
    NewTopic,
    PartitionChange,
    raise_first,
)
from node.client.sync import SyncAdminClient

__all__ = [
    "AclBinding",
    "AclFilter",
    "AdminClient",
    "AlterConfigOp",
    "ConfigResource",
    "KafkaError",
    "NewTopic",
    "PartitionChange",
    "SyncAdminClient",
    "Target",
    "raise_first",
]
