"""register (etcd): per-key read / write / compare-and-set registers, checked for linearizability.

Each op goes to a random member's gateway (workloads/etcd_client.py):
- write: a put of a fresh integer (unique in the run);
- cas: a Txn comparing the key's value with the last value the generator wrote to it, putting a fresh
  integer on success; `succeeded: false` is an explicit failed compare: `fail`;
- read: a Range, linearizable (etcd's default: a ReadIndex round through the leader) or, with
  `reads=serializable`, served from the member's own state machine — which may be stale (Jepsen's
  etcd analysis; etcd's docs say so). The linearizable checker must find those stale reads: the
  known positive this workload exists for.
Keys rotate as Jepsen's independent keys do: `keys` keys are in use at a time and each window of
`key_ops` ops moves to fresh keys, so no key's sub-history grows too long for the checker.
Final reads: every key used, linearizable whatever `reads` says, after the cluster recovered; in the
same linearizability check, they show a lost acknowledged write. (The `committed-loss` checker's
register model knows blind writes only, and would take a value written by a cas for an unknown one.)

Options (`[workload_options]`): `reads` (linearizable | serializable), `keys` (5), `key_ops` (400),
`read_fraction` (0.5), `cas_fraction` (0.2), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from vocab.generators import Op, Rng, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, register_workload
from workloads.etcd_client import EtcdWorkloadRun, GatewayHandler, compare_value, put_op

NAME = "register"
READ_MODES = ("linearizable", "serializable")
GENERATION = 1_000_000_000  # write values of the n-th generator start at n * GENERATION + 1


def key_name(window: int, slot: int) -> str:
    return f"register/{window}/{slot}"


def op_maker(
    keys: int, key_ops: int, read_fraction: float, cas_fraction: float, base: int = 0, used: set[str] | None = None
) -> Callable[[Rng, int], Op]:
    """Reads, writes and cas of the current window's keys (added to `used`); write values unique
    (base + i + 1); a cas expects the value this generator last wrote to that key."""
    last: dict[str, int] = {}

    def make(rng: Rng, i: int) -> Op:
        key = key_name((base + i) // key_ops, rng.below(keys))
        if used is not None:
            used.add(key)
        draw = rng.random()
        if draw < read_fraction:
            return Op("read", None, key=key)
        value = base + i + 1
        if draw < read_fraction + cas_fraction and key in last:
            op = Op("cas", [last[key], value], key=key)
        else:
            op = Op("write", value, key=key)
        last[key] = value
        return op

    return make


class RegisterClient:
    def __init__(self, handler: GatewayHandler, serializable: bool, seed: int) -> None:
        self.handler = handler
        self.gateway = handler.gateway
        self.serializable = serializable
        self.rng = random.Random(seed ^ 0xE7CD)

    def invoke(self, op: Op, done: DoneFn) -> None:
        node = self.rng.choice(self.gateway.nodes)
        if op.f == "read":
            self.handler.run(self._read(node, str(op.key), self.serializable), done, node, read=True)
        elif op.f == "write":
            self.handler.run(self._write(node, str(op.key), op.value), done, node)
        elif op.f == "cas":
            self.handler.run(self._cas(node, str(op.key), *op.value), done, node)
        else:
            done(Completion("fail", error=f"register has no op {op.f!r}"))

    async def _read(self, node: str, key: str, serializable: bool) -> Completion:
        kv, _ = await self.gateway.get(node, key, serializable=serializable)
        return Completion("ok", None if kv is None else int(kv.value), node=node)

    async def _write(self, node: str, key: str, value: int) -> Completion:
        await self.gateway.put(node, key, str(value))
        return Completion("ok", node=node)

    async def _cas(self, node: str, key: str, expected: int, value: int) -> Completion:
        answer = await self.gateway.txn(node, [compare_value(key, str(expected))], [put_op(key, str(value))])
        if answer.get("succeeded"):
            return Completion("ok", node=node)
        return Completion("fail", node=node, error="compare failed")


class EtcdRegister(EtcdWorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        reads = str(env.option("reads", "linearizable"))
        if reads not in READ_MODES:
            raise ValueError(f"reads must be one of {', '.join(READ_MODES)}, got {reads!r}")
        self.serializable = reads == "serializable"
        self.keys = int(env.option("keys", 5))
        self.key_ops = int(env.option("key_ops", 400))
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.cas_fraction = float(env.option("cas_fraction", 0.2))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        if self.keys < 1 or self.key_ops < 1 or not 0 <= self.read_fraction + self.cas_fraction <= 1:
            raise ValueError("register needs keys >= 1, key_ops >= 1 and read_fraction + cas_fraction <= 1")
        self._generations = 0
        self._used: set[str] = set()
        self._client: RegisterClient | None = None

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(op_maker(self.keys, self.key_ops, self.read_fraction, self.cas_fraction, base, self._used))

    def final_generator(self) -> Any:
        """Every key used, read linearizably (the client switches its read mode here)."""
        if self._client is not None:
            self._client.serializable = False
        return seq(*(Op("read", None, key=key) for key in sorted(self._used)))

    def client(self) -> Handler:
        self._client = RegisterClient(self.handler(), self.serializable, self.env.seed)
        return self._client


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("linearizable",),
        EtcdRegister,
        "etcd: per-key read/write/cas registers at random members (reads=linearizable|serializable)",
        checker_options={"linearizable": {"model": "register"}},
        suts=("etcd",),
    )
)
