"""config-append: transactions of appends to list-valued topic configs, checked as an Elle list-append history.

Keys are `<topic>/<config>` for the two topic configs that take lists of arbitrary items,
`leader.replication.throttled.replicas` and `follower.replication.throttled.replicas` (Kafka's
`partition:broker` items; the catalog accepts any `\\d+:\\d+`, node/controller/config_catalog.py). An
element is a unique integer n written as the item `"n:0"`; elements are compared as those strings.

- append transaction, f "txn", `[["append", k, "n:0"], ...]`: one IncrementalAlterConfigs request with
  an APPEND per key (two elements of one key in one APPEND `"a:0,b:0"`, in order), one resource per
  topic. The controller writes the records of one request as one batch, so the request is atomic
  across keys and topics. Sent through a random broker (forwarded, KIP-590) or, with probability
  `controller_write_fraction`, straight to the controllers.
- read transaction, f "txn", `[["r", k, [..]], ...]`: one DescribeConfigs of several keys at the
  active controller, after a read barrier: linearizable, in the same history as the appends.
- read-broker, `{"metadata_offset": o, "reads": [["r", k, [..]], ...]}`: one DescribeConfigs of several
  keys at a random broker, from its metadata image (one image, so one offset for every key).

Checkers: `elle-list-append` (strict serializable: appends and controller reads), `committed-loss`
(list-append: every acknowledged append in the reads that follow it), `image-reads` (broker reads:
the committed log's image at their offset, never backwards). A request some of whose resources fail
(a partial answer) completes `ok` with only the appends that were applied, and the error names the rest.

Keys rotate as in Jepsen's list-append (every config record holds the whole list, so lists must stay
short): an op chooses among `active_keys` consecutive keys, and the window slides by one key every
`key_span_ops` ops, so a key gets ~20 elements while active. Topics for the test's rate and duration
are created at setup (in one CreateTopics, one partition, one replica each), at most 40 (each costs
the simulator time); past that the window wraps around and keys grow again (a 60 s run at 50 ops/s:
~110 elements a key).

Options (`[workload_options]`): `topics` (from rate x duration), `active_keys` (6), `key_span_ops`
(16), `max_txn_length` (4), `read_fraction` (0.5), `broker_read_fraction` (0.3 of the reads),
`controller_write_fraction` (0.2), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from node.protocol.admin import ConfigOperation
from vocab.generators import Op, Rng, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, register_workload
from workloads.calls import Answer, Calls, create_topics, failed
from workloads.calls_run import CallsWorkloadRun
from workloads.config_reads import BROKER_READ, broker_read, controller_read, image_read_invocation, requested
from workloads.config_requests import alter_errors, alter_request, key_of, split_key
from workloads.kafka_client import client_choice

NAME = "config-append"
TOPIC_PREFIX = "append-"
LIST_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
TXN = "txn"
MAX_MOPS = 10  # elements of one op: i * MAX_MOPS + j keeps them unique
GENERATION = 1_000_000_000  # elements of the n-th generator start at n * GENERATION
MAX_TOPICS = 40  # each topic costs the simulator (per-partition work, image digests); keys wrap past it


def element(n: int) -> str:
    return f"{n}:0"


def items(raw: str | None) -> list[str]:
    """A list config's items (Kafka's comma-separated syntax); no dynamic value is the empty list."""
    return [item.strip() for item in (raw or "").split(",") if item.strip()]


def window(keys: Sequence[str], active: int, span: int, i: int) -> list[str]:
    """The keys op i chooses from: `active` consecutive keys, sliding one key every `span` ops (and
    wrapping around), so each key gets a bounded number of appends while it is active."""
    start = (i // span) % len(keys)
    return [keys[(start + j) % len(keys)] for j in range(min(active, len(keys)))]


def op_maker(
    keys: Sequence[str],
    read_fraction: float,
    broker_read_fraction: float,
    max_txn_length: int,
    base: int = 0,
    active: int = 6,
    span: int = 16,
) -> Callable[[Rng, int], Op]:
    """Append transactions of 1..max_txn_length elements over random active keys (a key may get two),
    read transactions of 1..max_txn_length distinct active keys at the controller, or the same at a
    broker."""
    all_keys = tuple(keys)

    def make(rng: Rng, i: int) -> Op:
        keys = window(all_keys, active, span, i)
        n = 1 + rng.below(max_txn_length)
        if rng.random() < read_fraction:
            pool = list(keys)
            chosen = sorted((pool.pop(rng.below(len(pool))) for _ in range(min(n, len(keys)))), key=all_keys.index)
            if rng.random() < broker_read_fraction:
                return Op(BROKER_READ, image_read_invocation(chosen))
            return Op(TXN, [["r", k, None] for k in chosen])
        mops = []
        for j in range(n):
            key = mops[-1][1] if mops and rng.random() < 0.2 else rng.choice(keys)
            mops.append(["append", key, element(base + i * MAX_MOPS + j)])
        return Op(TXN, mops)

    return make


def append_request(mops: Sequence[Sequence[Any]]) -> Any:
    """One APPEND per key, its elements in the transaction's order."""
    per_key: dict[str, list[str]] = {}
    for _, key, value in mops:
        per_key.setdefault(key, []).append(value)
    return alter_request([(key, ConfigOperation.APPEND, ",".join(values)) for key, values in per_key.items()])


def append_answer(mops: list[list[Any]], answer: Answer) -> Completion:
    if answer.error is not None:
        return failed(answer.error, answer.node)
    errors = alter_errors(answer.response)
    refused = {topic: error for topic, error in errors.items() if error is not None}
    if not errors:
        return Completion("info", node=answer.node, error="empty IncrementalAlterConfigs answer")
    if not refused:
        return Completion("ok", mops, node=answer.node)
    applied = [m for m in mops if split_key(m[1])[0] not in refused]
    why = "; ".join(f"{topic}: {error}" for topic, error in refused.items())
    if applied:  # the resources that passed were written (one batch): the rest certainly were not
        return Completion("ok", applied, node=answer.node, error=f"partially applied; refused {why}")
    return failed(next(iter(refused.values())), answer.node)


class AppendClient:
    """Carries out config-append ops through `Calls` (either backend)."""

    def __init__(self, calls: Calls, seed: int, controller_write_fraction: float) -> None:
        self.calls = calls
        self.rng = random.Random(seed ^ 0xA99E)
        self.controller_write_fraction = controller_write_fraction

    def _broker(self) -> str:
        return self.calls.brokers[self.rng.randrange(len(self.calls.brokers))]

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == BROKER_READ:
            keys, node = requested(op.value)
            broker_read(self.calls, node or self._broker(), keys, items, done)
            return
        if op.f != TXN or not isinstance(op.value, list) or not op.value:
            done(Completion("fail", error=f"config-append has no op {op.f!r} {op.value!r}"))
            return
        mops = op.value
        if all(m[0] == "r" for m in mops):
            keys = [m[1] for m in mops]
            controller_read(self.calls, keys, lambda values: [["r", k, items(values[k])] for k in keys], done)
            return
        request = append_request(mops)
        finish = lambda answer: done(append_answer(mops, answer))  # noqa: E731
        if self.rng.random() < self.controller_write_fraction:
            self.calls.to_controllers(request, idempotent=False, done=finish)
        else:
            self.calls.to_broker(self._broker(), request, idempotent=False, done=finish)


def planned_topics(spec: Any, active: int, span: int) -> int:
    """Enough topics that no key becomes active twice in a run at the test's rate (at most MAX_TOPICS;
    past that the keys wrap around and grow longer)."""
    rate = float(getattr(spec, "rate", 0) or 0)
    seconds = float(getattr(spec, "time_limit_s", 60)) + float(getattr(spec, "recovery_s", 10))
    if rate <= 0:
        return max(3, (active + 1) // 2)
    keys = math.ceil(rate * seconds / span) + active
    return max(3, min(MAX_TOPICS, math.ceil(keys / len(LIST_CONFIGS))))


class AppendKeys:
    """config-append's options and keys, the same on every system under test (the module docstring)."""

    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.max_txn_length = int(env.option("max_txn_length", 4))
        self.active = int(env.option("active_keys", 6))
        self.span = int(env.option("key_span_ops", 16))
        topics = int(env.option("topics", planned_topics(env.spec, self.active, self.span)))
        if topics < 1 or self.active < 1 or self.span < 1 or not 1 <= self.max_txn_length <= MAX_MOPS:
            raise ValueError(
                f"config-append needs topics, active_keys, key_span_ops >= 1 and 1 <= max_txn_length <= {MAX_MOPS}"
            )
        self.topics = [f"{TOPIC_PREFIX}{i}" for i in range(topics)]
        self.keys = [key_of(t, c) for t in self.topics for c in LIST_CONFIGS]
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        self._generations = 0


class ConfigAppend(AppendKeys, CallsWorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        super().__init__(env)
        self.broker_read_fraction = float(env.option("broker_read_fraction", 0.3))
        self.controller_write_fraction = float(env.option("controller_write_fraction", 0.2))
        client_choice(env)  # an unknown `client` stops the run before it starts

    def setup(self) -> None:
        create_topics(self.env, self.topics, replicas=1)

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(
            op_maker(
                self.keys,
                self.read_fraction,
                self.broker_read_fraction,
                self.max_txn_length,
                base,
                self.active,
                self.span,
            )
        )

    def final_generator(self) -> Any:
        """Every key in one read at the controller, then every key from every broker's image."""
        brokers = list(self.env.db.brokers)  # type: ignore[attr-defined]
        controller = Op(TXN, [["r", k, None] for k in self.keys])
        return seq(controller, *(Op(BROKER_READ, image_read_invocation(self.keys, b)) for b in brokers))

    def client(self) -> Handler:
        return AppendClient(self.calls(), self.env.seed, self.controller_write_fraction)


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("elle-list-append", "committed-loss", "image-reads"),
        ConfigAppend,
        "transactions of APPENDs to list configs and multi-key reads (Elle list-append, strict serializable) "
        "at the controller; image reads at brokers",
        checker_options={
            "elle-list-append": {"consistency_model": "strict-serializable"},
            "committed-loss": {"loss_model": "list-append"},
            "image-reads": {"value_kind": "list"},
        },
    )
)
