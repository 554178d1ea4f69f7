"""Which `Calls` a run's workload client uses: the simulator's, ours on a real backend, or
confluent-kafka's (workloads/kafka_client.py). Kept apart from `workloads.calls` so that the Kafka
client's module, which builds on `calls`, is not imported by it."""

from __future__ import annotations

from typing import Any

from vocab.workload import WorkloadRun
from workloads.calls import Calls, RealCalls, SimCalls
from workloads.kafka_client import CONFLUENT, KafkaCalls, client_choice


def make_calls(env: Any, timeout_ms: int) -> Calls:
    """The run's `Calls`: the simulator's, ours on a real backend, or confluent-kafka's when the
    `client` workload option asks for it (workloads/kafka_client.py)."""
    if client_choice(env) == CONFLUENT:
        return KafkaCalls(env, timeout_ms)
    return SimCalls(env, timeout_ms) if env.db.sim is not None else RealCalls(env, timeout_ms)


class CallsWorkloadRun(WorkloadRun):
    """A workload run whose client sends its requests through one `Calls`, made on first use."""

    env: Any
    timeout_ms: int
    _calls: Calls | None = None

    def calls(self) -> Calls:
        if self._calls is None:
            self._calls = make_calls(self.env, self.timeout_ms)
        return self._calls

    def close(self) -> None:
        if self._calls is not None:
            self._calls.close()
