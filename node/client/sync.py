"""A blocking admin client: the asyncio client driven by a private event loop in the caller's thread.

    with SyncAdminClient("127.0.0.2:9092") as admin:
        admin.create_topic("t", partitions=1, replication_factor=1)

Every method is the `AdminClient` method of the same name and signature, run to completion. One
instance belongs to one thread (like httpx.Client); it cannot be used from inside a running event loop
(use `AdminClient` there).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from node.client.admin import AdminClient

P = ParamSpec("P")
R = TypeVar("R")


def _blocking(
    method: Callable[Concatenate[AdminClient, P], Awaitable[R]],
) -> Callable[Concatenate[SyncAdminClient, P], R]:
    @functools.wraps(method)
    def run(self: SyncAdminClient, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(method(self.async_client, *args, **kwargs))  # type: ignore[arg-type]

    return run


class SyncAdminClient:
    """Blocking twin of `AdminClient`; takes the same constructor arguments."""

    def __init__(self, bootstrap_servers: str | Sequence[str], **options: Any) -> None:
        self.async_client = AdminClient(bootstrap_servers, **options)
        self._loop = asyncio.new_event_loop()

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("this SyncAdminClient is closed")
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._loop.run_until_complete(self.async_client.close())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    def __enter__(self) -> SyncAdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def principal(self) -> str:
        return self.async_client.principal

    send = _blocking(AdminClient.send)
    send_with_server = _blocking(AdminClient.send_with_server)
    api_versions = _blocking(AdminClient.api_versions)
    describe_cluster = _blocking(AdminClient.describe_cluster)
    list_brokers = _blocking(AdminClient.list_brokers)
    metadata = _blocking(AdminClient.metadata)
    describe_topics = _blocking(AdminClient.describe_topics)
    create_topics = _blocking(AdminClient.create_topics)
    create_topic = _blocking(AdminClient.create_topic)
    delete_topics = _blocking(AdminClient.delete_topics)
    delete_topic = _blocking(AdminClient.delete_topic)
    elect_leaders = _blocking(AdminClient.elect_leaders)
    incremental_alter_configs = _blocking(AdminClient.incremental_alter_configs)
    incremental_alter_config = _blocking(AdminClient.incremental_alter_config)
    alter_configs = _blocking(AdminClient.alter_configs)
    describe_configs = _blocking(AdminClient.describe_configs)
    describe_config = _blocking(AdminClient.describe_config)
    create_acls = _blocking(AdminClient.create_acls)
    delete_acls = _blocking(AdminClient.delete_acls)
    describe_acls = _blocking(AdminClient.describe_acls)
    register_broker = _blocking(AdminClient.register_broker)
    broker_heartbeat = _blocking(AdminClient.broker_heartbeat)
    alter_partition = _blocking(AdminClient.alter_partition)


__all__ = ["SyncAdminClient"]
