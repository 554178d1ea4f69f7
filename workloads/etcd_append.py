"""list-append (etcd): Elle list-append transactions on etcd keys, each carried out as Jepsen's etcd test does.

A transaction is 1..`max_txn_length` micro-ops, each `["r", k, None]` or `["append", k, n]` (n unique
in the run); reads and appends mix freely. Each key holds its list as JSON text. One op, at a random
member (workloads/etcd_client.py):
1. one Txn of range requests for every key the transaction touches (a linearizable read at one
   revision), which gives each key's list and mod revision;
2. a read-only transaction completes `ok` with those lists;
3. otherwise the micro-ops are applied to those lists in order (a read after an append of the same
   key sees it), and one Txn writes the appended keys' new lists guarded by a compare of *every*
   touched key's mod revision with the one read (mod revision 0: the key still does not exist). A
   failed compare is an explicit, definite `fail`; success makes the whole transaction one atomic
   step at the Txn's revision, so the history must be strict serializable.
Keys rotate as in Jepsen: an op picks among `active_keys` consecutive keys, and that window slides by
one key every `key_span_ops` ops, so lists stay short. Final reads: every key used, in read-only
transactions of at most 100 keys (under etcd's default --max-txn-ops of 128).

Checkers: `elle-list-append` (strict serializable), `committed-loss` (list-append: the final reads
hold every acknowledged append).
Options: `active_keys` (6), `key_span_ops` (16), `max_txn_length` (4), `read_fraction` (0.5, of the
micro-ops), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from vocab.generators import Op, Rng, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, register_workload
from workloads.etcd_client import (
    EtcdError,
    EtcdWorkloadRun,
    GatewayHandler,
    compare_mod_revision,
    put_op,
    range_op,
    txn_kvs,
)

NAME = "list-append"
TXN = "txn"
GENERATION = 1_000_000_000  # elements of the n-th generator start at n * GENERATION
FINAL_READ_KEYS = 100


def key_name(index: int) -> str:
    return f"append/{index}"


def op_maker(
    active: int, span: int, max_txn_length: int, read_fraction: float, base: int = 0, used: set[int] | None = None
) -> Callable[[Rng, int], Op]:
    """Transactions over the sliding key window (see the module docstring); keys used go into `used`."""

    def make(rng: Rng, i: int) -> Op:
        start = (base + i) // span
        mops: list[list[Any]] = []
        for j in range(1 + rng.below(max_txn_length)):
            index = start + rng.below(active)
            if used is not None:
                used.add(index)
            if rng.random() < read_fraction:
                mops.append(["r", key_name(index), None])
            else:
                mops.append(["append", key_name(index), base + i * max_txn_length + j + 1])
        return Op(TXN, mops)

    return make


class AppendClient:
    def __init__(self, handler: GatewayHandler, seed: int) -> None:
        self.handler = handler
        self.gateway = handler.gateway
        self.rng = random.Random(seed ^ 0xA99E)

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f != TXN:
            done(Completion("fail", error=f"list-append has no op {op.f!r}"))
            return
        node = self.rng.choice(self.gateway.nodes)
        read_only = all(m[0] == "r" for m in op.value)
        self.handler.run(self._txn(node, op.value), done, node, read=read_only)

    async def _txn(self, node: str, mops: list[list[Any]]) -> Completion:
        keys = list(dict.fromkeys(m[1] for m in mops))
        try:
            answer = await self.gateway.txn(node, [], [range_op(k) for k in keys])
        except EtcdError as exc:  # nothing was written yet: whatever happened, the transaction did not
            raise EtcdError(f"reading before the write: {exc}", definite=True) from None
        kvs = dict(zip(keys, txn_kvs(answer)))
        lists = {k: (json.loads(kv.value) if kv is not None else []) for k, kv in kvs.items()}
        done: list[list[Any]] = []
        appended: list[str] = []
        for f, key, value in mops:
            if f == "r":
                done.append([f, key, list(lists[key])])
            else:
                lists[key].append(value)
                appended.append(key)
                done.append([f, key, value])
        if not appended:
            return Completion("ok", done, node=node)
        compare = [compare_mod_revision(k, kv.mod_revision if kv is not None else 0) for k, kv in kvs.items()]
        writes = [put_op(k, json.dumps(lists[k])) for k in dict.fromkeys(appended)]
        result = await self.gateway.txn(node, compare, writes)
        if result.get("succeeded"):
            return Completion("ok", done, node=node)
        return Completion("fail", node=node, error="compare failed: a key changed between the read and the write")


class EtcdListAppend(EtcdWorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.active = int(env.option("active_keys", 6))
        self.span = int(env.option("key_span_ops", 16))
        self.max_txn_length = int(env.option("max_txn_length", 4))
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        if self.active < 1 or self.span < 1 or not 1 <= self.max_txn_length <= 64:
            raise ValueError("list-append needs active_keys, key_span_ops >= 1 and 1 <= max_txn_length <= 64")
        self._generations = 0
        self._used: set[int] = set()

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(op_maker(self.active, self.span, self.max_txn_length, self.read_fraction, base, self._used))

    def final_generator(self) -> Any:
        keys = [key_name(i) for i in sorted(self._used)]
        chunks = [keys[i : i + FINAL_READ_KEYS] for i in range(0, len(keys), FINAL_READ_KEYS)]
        return seq(*(Op(TXN, [["r", k, None] for k in chunk]) for chunk in chunks))

    def client(self) -> Handler:
        return AppendClient(self.handler(), self.env.seed)


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("elle-list-append", "committed-loss"),
        EtcdListAppend,
        "etcd: Elle list-append transactions (a Txn guarded by every key's mod revision), strict serializable",
        checker_options={
            "elle-list-append": {"consistency_model": "strict-serializable"},
            "committed-loss": {"loss_model": "list-append"},
        },
        suts=("etcd",),
    )
)
