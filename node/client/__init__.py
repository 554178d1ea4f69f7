"""The admin client of a kraft-chaos cluster: `AdminClient` (asyncio), `SyncAdminClient` (blocking).

Errors are `node.client.errors.KafkaError`s; each says whether its request certainly did not happen
(`definite`), which is what a history needs to record `fail` versus `info`.

The names below are loaded on first use: importing one light submodule (the `kchaos admin` flags, the
Kafka-wire probes) should not load the client, its codec and its message schemas (~0.2 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "AdminClient": "admin",
    "Target": "admin",
    "KafkaError": "errors",
    "AclBinding": "results",
    "AclFilter": "results",
    "AlterConfigOp": "results",
    "ConfigResource": "results",
    "NewTopic": "results",
    "PartitionChange": "results",
    "raise_first": "results",
    "SyncAdminClient": "sync",
}

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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'node.client' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"node.client.{module}"), name)
    globals()[name] = value
    return value
