"""The etcd workloads' client: etcd's v3 gRPC JSON gateway (`POST /v3/kv/...`) over httpx, on the run's loop.

Why the gateway and not a gRPC library (docs/concepts/suts.md): httpx tells the two
transport failures apart that decide a history's `fail` vs `info` — a connection refused or not made
before anything was sent (`httpx.ConnectError`/`ConnectTimeout`/`PoolTimeout`) against a request sent
whose answer never came (`ReadTimeout`, `ReadError`, `RemoteProtocolError`, `WriteError`) — where
gRPC reports both as UNAVAILABLE. And it is pure Python (no grpcio/protobuf build).

Errors are mapped as Jepsen's etcd client maps them (`EtcdError.definite`):
- definite (the op certainly did not happen → `fail`): not connected before sending; the server's
  "too many requests", "raft: stopped", "duplicate key", "compacted", NOT_FOUND; an explicit failed
  compare is not an error at all (the caller turns a Txn's `succeeded: false` into `fail`);
- indefinite (`info`): timeouts, a connection lost after sending, UNAVAILABLE ("request timed out",
  "no leader", ...), "leader changed", and anything not recognised.
Reads change nothing, so every failed read is `fail` (Jepsen's "idempotent" ops; `failed`).

Keys and values are strings here; the gateway wants them base64 in JSON, and its 64-bit integers
(revisions) arrive as JSON strings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vocab.invocation import Completion, DoneFn, error_text
from vocab.workload import WorkloadRun

CLIENT_PORT = 2379
# gRPC status codes the gateway returns in {"code": N, "message": ...}
GRPC_INVALID_ARGUMENT = 3
GRPC_NOT_FOUND = 5
GRPC_OUT_OF_RANGE = 11
DEFINITE_MESSAGES = ("too many requests", "raft: stopped", "duplicate key", "has been compacted")


class EtcdError(Exception):
    """A request that did not succeed; `definite` when it certainly had no effect."""

    def __init__(self, message: str, *, definite: bool) -> None:
        super().__init__(message)
        self.definite = definite


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def unb64(text: str | None) -> str:
    return base64.b64decode(text or "").decode()


def prefix_end(prefix: str) -> str:
    """The range end that covers every key starting with `prefix` (its last byte plus one)."""
    raw = prefix.encode()
    return (raw[:-1] + bytes([raw[-1] + 1])).decode()


@dataclass(frozen=True, slots=True)
class KV:
    """One key's state as a response shows it."""

    key: str
    value: str
    mod_revision: int
    create_revision: int
    version: int


def kv_of(doc: Mapping[str, Any]) -> KV:
    return KV(
        unb64(doc.get("key")),
        unb64(doc.get("value")),
        int(doc.get("mod_revision", 0)),
        int(doc.get("create_revision", 0)),
        int(doc.get("version", 0)),
    )


def server_error(status: int, doc: Mapping[str, Any]) -> EtcdError:
    """An answer with a gRPC error in it, classified as Jepsen's client does (module docstring)."""
    message = str(doc.get("message") or doc.get("error") or f"HTTP {status}")
    code = int(doc.get("code", -1))
    definite = code in (GRPC_NOT_FOUND, GRPC_OUT_OF_RANGE) or any(m in message for m in DEFINITE_MESSAGES)
    return EtcdError(f"{message} (grpc code {code})", definite=definite)


def transport_error(exc: BaseException) -> EtcdError:
    """httpx's exceptions: definite only when nothing was sent."""
    import httpx

    definite = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    return EtcdError(error_text(exc), definite=definite)


class Gateway:
    """One keep-alive httpx client per member (`addresses`: node -> host), on the caller's loop."""

    def __init__(self, addresses: Mapping[str, str], timeout_s: float, connect_timeout_s: float = 1.0) -> None:
        import httpx

        timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s, pool=connect_timeout_s)
        self._clients = {
            node: httpx.AsyncClient(base_url=f"http://{host}:{CLIENT_PORT}", timeout=timeout)
            for node, host in addresses.items()
        }
        self.timeout_s = timeout_s

    @property
    def nodes(self) -> list[str]:
        return list(self._clients)

    async def call(self, node: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST `body` to the member's gateway; the answer's JSON, or EtcdError."""
        import httpx

        try:
            response = await self._clients[node].post(path, json=body)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from None
        try:
            doc = response.json()
        except ValueError:
            raise EtcdError(f"HTTP {response.status_code}: not JSON", definite=False) from None
        if response.status_code != 200 or "error" in doc or ("code" in doc and "header" not in doc):
            raise server_error(response.status_code, doc)
        return doc

    async def get(self, node: str, key: str, *, serializable: bool = False) -> tuple[KV | None, int]:
        """The key's state (None when absent) and the revision the read was served at."""
        doc = await self.call(node, "/v3/kv/range", {"key": b64(key), "serializable": serializable})
        kvs = doc.get("kvs") or []
        return (kv_of(kvs[0]) if kvs else None), int(doc["header"].get("revision", 0))

    async def put(self, node: str, key: str, value: str) -> int:
        """The revision the put was committed at."""
        doc = await self.call(node, "/v3/kv/put", {"key": b64(key), "value": b64(value)})
        return int(doc["header"]["revision"])

    async def txn(
        self, node: str, compare: Sequence[Mapping[str, Any]], success: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """A Txn; the raw answer (`succeeded` is absent when false, as protobuf's JSON leaves defaults out)."""
        return await self.call(node, "/v3/kv/txn", {"compare": list(compare), "success": list(success)})

    async def watch(
        self, node: str, prefix: str, start_revision: int, duration_s: float, until_revision: int | None = None
    ) -> list[KV]:
        """The events of keys under `prefix` from `start_revision` on, as the member streams them, for
        `duration_s` or until one at `until_revision` or later arrived (protobuf's JSON stream, one
        message a line). A cancelled watch (compacted, ...) is an EtcdError."""
        events: list[KV] = []
        body = {
            "create_request": {
                "key": b64(prefix),
                "range_end": b64(prefix_end(prefix)),
                "start_revision": start_revision,
            }
        }

        async def stream() -> None:
            import httpx

            try:
                async with self._clients[node].stream("POST", "/v3/watch", json=body) as response:
                    async for line in response.aiter_lines():
                        if not line.strip():
                            continue
                        doc = json.loads(line)
                        if "error" in doc:
                            raise server_error(response.status_code, doc["error"])
                        result = doc.get("result") or {}
                        if result.get("canceled"):
                            raise EtcdError(f"watch cancelled: {result.get('cancel_reason', '')}", definite=True)
                        events.extend(kv_of(e["kv"]) for e in result.get("events") or [])
                        if until_revision is not None and events and events[-1].mod_revision >= until_revision:
                            return
            except httpx.HTTPError as exc:
                raise transport_error(exc) from None

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream(), duration_s)
        return events

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


def range_op(key: str, *, serializable: bool = False) -> dict[str, Any]:
    return {"request_range": {"key": b64(key), "serializable": serializable}}


def put_op(key: str, value: str) -> dict[str, Any]:
    return {"request_put": {"key": b64(key), "value": b64(value)}}


def compare_mod_revision(key: str, revision: int) -> dict[str, Any]:
    """True when the key's mod revision is `revision` (0: the key does not exist)."""
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}


def compare_value(key: str, value: str) -> dict[str, Any]:
    return {"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value)}


def txn_kvs(answer: Mapping[str, Any]) -> list[KV | None]:
    """The results of a Txn's range ops, in order (None for a key that is absent)."""
    out: list[KV | None] = []
    for response in answer.get("responses") or []:
        if "response_range" in response:
            kvs = response["response_range"].get("kvs") or []
            out.append(kv_of(kvs[0]) if kvs else None)
    return out


def failed(error: BaseException, node: str | None, *, read: bool = False) -> Completion:
    """`fail` for a definite error or any failed read, `info` otherwise (module docstring)."""
    definite = read or (isinstance(error, EtcdError) and error.definite)
    text = str(error) if isinstance(error, EtcdError) else error_text(error)
    return Completion("fail" if definite else "info", node=node, error=text)


class GatewayHandler:
    """Runs one coroutine per op on the run's loop; an exception becomes `failed(...)`."""

    def __init__(self, gateway: Gateway, loop: asyncio.AbstractEventLoop) -> None:
        self.gateway = gateway
        self.loop = loop

    def run(self, coro: Coroutine[Any, Any, Completion], done: DoneFn, node: str | None, *, read: bool = False) -> None:
        task = self.loop.create_task(coro)

        def finished(t: asyncio.Task[Completion]) -> None:
            if t.cancelled():
                done(failed(asyncio.CancelledError("cancelled"), node, read=read))
            elif t.exception() is not None:
                done(failed(t.exception(), node, read=read))  # type: ignore[arg-type]
            else:
                done(t.result())

        task.add_done_callback(finished)

    def close(self) -> None:
        if self.loop.is_closed() or self.loop.is_running():
            return
        self.loop.run_until_complete(asyncio.wait_for(self.gateway.aclose(), 10))


def make_gateway(env: Any, timeout_ms: int) -> tuple[Gateway, asyncio.AbstractEventLoop]:
    """A gateway over every member of the run's etcd cluster, on the run's loop."""
    db, loop = env.db, getattr(env.scheduler, "loop", None)
    if loop is None or getattr(db, "name", "") != "etcd":
        raise ValueError("the etcd workloads need --sut etcd on a real backend (netns, docker, ssh)")
    addresses = {node: env.backend.address(node) for node in db.nodes}
    return Gateway(addresses, timeout_ms / 1000), loop


class EtcdWorkloadRun(WorkloadRun):
    """A workload run on etcd: nothing to set up, one `Gateway` on the run's loop made on first use."""

    env: Any
    timeout_ms: int
    _handler: GatewayHandler | None = None

    def setup(self) -> None:
        self.handler()  # a workload that cannot run on this cluster says so before the run phase

    def handler(self) -> GatewayHandler:
        if self._handler is None:
            self._handler = GatewayHandler(*make_gateway(self.env, self.timeout_ms))
        return self._handler

    def close(self) -> None:
        if self._handler is not None:
            self._handler.close()
