"""config-register: per-key read/write registers on topic config keys, checked for linearizability.

Keys are `<topic>/<config>` for a few topics (created at setup) and a few long-valued topic configs.
- write: IncrementalAlterConfigs SET of a fresh integer (unique in the run) through a random broker,
  which forwards it to the active controller (KIP-590). History: f "write", value = the integer.
- read: DescribeConfigs at the active controller (answered after a read barrier: linearizable).
  History: f "read", value = the integer, or null while the key has no dynamic value (the register's
  initial state in the checker's `register` model).
- read-broker: DescribeConfigs at a random broker, answered from its metadata image (not
  linearizable). History: f "read-broker", value `{"metadata_offset": o, "reads": [["r", key, v]]}`,
  judged by `image-reads` (the committed log's image at o), never by the linearizability checker.
Errors: a definite one (`KafkaError.definite`) -> `fail`; timeouts, lost connections and ambiguous
server answers -> `info` (results/SCHEMA.md; node/client/errors.py decides which is which).

Checkers: `linearizable` (register model, writes and controller reads), `committed-loss` (register:
the final read of a key shows no value older than an acknowledged write), `image-reads` (broker reads).

Options (`[workload_options]`): `topics` (3), `configs` (["retention.ms", "segment.ms"]),
`read_fraction` (0.5), `broker_read_fraction` (0.3 of the reads), `request_timeout_ms` (5000).
"""

from __future__ import annotations

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

NAME = "config-register"
TOPIC_PREFIX = "register-"
DEFAULT_CONFIGS = ("retention.ms", "segment.ms")
GENERATION = 1_000_000_000  # write values of the n-th generator start at n * GENERATION + 1

__all__ = ["ConfigRegister", "key_of", "op_maker", "register_keys", "register_value", "split_key"]


def op_maker(
    keys: Sequence[str], read_fraction: float, broker_read_fraction: float = 0.0, base: int = 0
) -> Callable[[Rng, int], Op]:
    """The generator function: a read (at the controller or at a broker) or a write of a random key;
    write values are unique (base + i + 1)."""
    keys = tuple(keys)

    def make(rng: Rng, i: int) -> Op:
        key = rng.choice(keys)
        if rng.random() < read_fraction:
            if rng.random() < broker_read_fraction:
                return Op(BROKER_READ, image_read_invocation([key]), key=key)
            return Op("read", None, key=key)
        return Op("write", base + i + 1, key=key)

    return make


def register_value(raw: str | None) -> int | None:
    """A key's dynamic value as an integer; None while it has only its default."""
    return None if raw is None else int(raw)


def write_answer(answer: Answer) -> Completion:
    if answer.error is not None:
        return failed(answer.error, answer.node)
    errors = alter_errors(answer.response)
    if not errors:
        return Completion("info", node=answer.node, error="empty IncrementalAlterConfigs answer")
    error = next(iter(errors.values()))
    return Completion("ok", node=answer.node) if error is None else failed(error, answer.node)


class RegisterClient:
    """Carries out config-register ops through `Calls` (either backend)."""

    def __init__(self, calls: Calls, seed: int) -> None:
        self.calls = calls
        self.rng = random.Random(seed ^ 0xC11E)

    def _broker(self) -> str:
        return self.calls.brokers[self.rng.randrange(len(self.calls.brokers))]

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == "write":
            request = alter_request([(op.key, ConfigOperation.SET, str(op.value))])
            self.calls.to_broker(self._broker(), request, idempotent=False, done=lambda a: done(write_answer(a)))
        elif op.f == "read":
            controller_read(self.calls, [op.key], lambda values: register_value(values[op.key]), done)
        elif op.f == BROKER_READ:
            keys, node = requested(op.value)
            broker_read(self.calls, node or self._broker(), keys, register_value, done)
        else:
            done(Completion("fail", error=f"config-register has no op {op.f!r}"))


def register_keys(env: WorkloadEnv) -> tuple[list[str], list[str]]:
    """The topics and the `<topic>/<config>` keys the `topics` and `configs` options ask for."""
    topics = int(env.option("topics", 3))
    configs = env.option("configs", list(DEFAULT_CONFIGS))
    if isinstance(configs, str):
        configs = [c.strip() for c in configs.split(",") if c.strip()]
    if topics < 1 or not configs:
        raise ValueError("config-register needs topics >= 1 and at least one config")
    names = [f"{TOPIC_PREFIX}{i}" for i in range(topics)]
    return names, [key_of(t, c) for t in names for c in configs]


class ConfigRegister(CallsWorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.topics, self.keys = register_keys(env)
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.broker_read_fraction = float(env.option("broker_read_fraction", 0.3))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        client_choice(env)  # an unknown `client` stops the run before it starts
        self._generations = 0

    def setup(self) -> None:
        create_topics(self.env, self.topics)

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(op_maker(self.keys, self.read_fraction, self.broker_read_fraction, base))

    def final_generator(self) -> Any:
        """Every key at the controller, then every key from every broker's image."""
        brokers = list(self.env.db.brokers)  # type: ignore[attr-defined]
        controller = [Op("read", None, key=k) for k in self.keys]
        images = [Op(BROKER_READ, image_read_invocation([k], b), key=k) for b in brokers for k in self.keys]
        return seq(*controller, *images)

    def client(self) -> Handler:
        return RegisterClient(self.calls(), self.env.seed)


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("linearizable", "committed-loss", "image-reads"),
        ConfigRegister,
        "per-key registers on topic configs: SET through a random broker, linearizable reads at the "
        "controller, image reads at brokers",
        checker_options={
            "linearizable": {"model": "register", "ignore_f": [BROKER_READ]},
            "committed-loss": {"loss_model": "register"},
            "image-reads": {"value_kind": "int"},
        },
    )
)
