"""watch (etcd): puts to a few keys while watches stream the changes; every watch must show every
committed revision, in order, the same everywhere (checkers/watch_order.py).

The workload owns the keyspace: its puts are the only writes, so etcd's revisions advance by exactly
one per put and a watch of the prefix must show consecutive revisions. Ops at random members
(workloads/etcd_client.py):
- write: a put of a unique integer to one of `keys` keys; ok value `{"value": n, "revision": r}`;
- watch: a watch of the prefix from a start revision a little behind the newest revision the client
  has seen (0..`watch_lag` revisions back, so watches overlap), streamed for `watch_s` seconds; ok
  value `{"start": s, "events": [[revision, key, value], ...]}`. A failed watch changes nothing: `fail`;
- final reads: on every member, a watch from revision 1 until it shows the cluster's newest revision
  (a linearizable read at that member first); these must hold every acknowledged put.
Options: `keys` (3), `watch_fraction` (0.2), `watch_s` (1.0), `watch_lag` (20), `final_watch_s` (8),
`request_timeout_ms` (5000).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from vocab.generators import Op, Rng, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, register_workload
from workloads.etcd_client import EtcdWorkloadRun, GatewayHandler

NAME = "watch"
PREFIX = "watch/"
GENERATION = 1_000_000_000


def op_maker(keys: int, watch_fraction: float, base: int = 0) -> Callable[[Rng, int], Op]:
    def make(rng: Rng, i: int) -> Op:
        if rng.random() < watch_fraction:
            return Op("watch", None)
        return Op("write", base + i + 1, key=f"{PREFIX}{rng.below(keys)}")

    return make


class WatchClient:
    def __init__(self, handler: GatewayHandler, seed: int, watch_s: float, lag: int, final_s: float) -> None:
        self.handler = handler
        self.gateway = handler.gateway
        self.rng = random.Random(seed ^ 0x3A7C)
        self.watch_s, self.lag, self.final_s = watch_s, lag, final_s
        self.newest = 1  # the newest revision any answer showed

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == "write":
            node = self.rng.choice(self.gateway.nodes)
            self.handler.run(self._write(node, str(op.key), int(op.value)), done, node)
        elif op.f == "watch" and isinstance(op.value, dict) and op.value.get("final"):
            node = str(op.value["node"])
            self.handler.run(self._final(node), done, node, read=True)
        elif op.f == "watch":
            node = self.rng.choice(self.gateway.nodes)
            start = max(1, self.newest - self.rng.randint(0, self.lag))
            self.handler.run(self._watch(node, start, self.watch_s, None), done, node, read=True)
        else:
            done(Completion("fail", error=f"watch has no op {op.f!r}"))

    async def _write(self, node: str, key: str, value: int) -> Completion:
        revision = await self.gateway.put(node, key, str(value))
        self.newest = max(self.newest, revision)
        return Completion("ok", {"value": value, "revision": revision}, node=node)

    async def _watch(self, node: str, start: int, duration_s: float, until: int | None) -> Completion:
        events = await self.gateway.watch(node, PREFIX, start, duration_s, until)
        if events:
            self.newest = max(self.newest, events[-1].mod_revision)
        listed = [[e.mod_revision, e.key, int(e.value)] for e in events]
        return Completion("ok", {"start": start, "events": listed}, node=node)

    async def _final(self, node: str) -> Completion:
        _, revision = await self.gateway.get(node, PREFIX)
        completion = await self._watch(node, 1, self.final_s, revision)
        completion.value["until"] = revision
        return completion


class EtcdWatch(EtcdWorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.keys = int(env.option("keys", 3))
        self.watch_fraction = float(env.option("watch_fraction", 0.2))
        self.watch_s = float(env.option("watch_s", 1.0))
        self.lag = int(env.option("watch_lag", 20))
        self.final_s = float(env.option("final_watch_s", 8.0))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        if self.keys < 1 or self.lag < 0 or not 0 < self.watch_s < self.timeout_ms / 1000:
            raise ValueError("watch needs keys >= 1, watch_lag >= 0 and 0 < watch_s < request_timeout_ms")
        self._generations = 0

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(op_maker(self.keys, self.watch_fraction, base))

    def final_generator(self) -> Any:
        return seq(*(Op("watch", {"final": True, "node": node}) for node in self.env.db.nodes))

    def client(self) -> Handler:
        return WatchClient(self.handler(), self.env.seed, self.watch_s, self.lag, self.final_s)


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("watch-order",),
        EtcdWatch,
        "etcd: puts and watches; every watch shows every committed revision, in order, the same everywhere",
        suts=("etcd",),
    )
)
