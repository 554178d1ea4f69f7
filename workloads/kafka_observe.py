"""registrations and isr-changes on Apache Kafka (`--sut kafka`): observation workloads.

On the reference cluster both workloads play brokers of their own (`workloads.played_brokers`): they
send BrokerRegistration, BrokerHeartbeat and AlterPartition. On Kafka no client can: those are
inter-node RPCs that only a broker sends to the controller (a Kafka controller refuses them from a
client that is not a broker of the cluster's). So here the brokers are Kafka's own, the faults
(kill, pause, partition) are what fences them and moves their leaderships and ISRs, and the clients
only watch, through confluent-kafka (`workloads.kafka_observer`), at a random broker each time:

- `kafka-metadata`: `list_topics()`, one Metadata answer: the unfenced brokers, the controller, per
  partition of the workload's topics the leader, the replicas and the ISR;
- `kafka-describe-cluster`: `describe_cluster()`, the registered unfenced brokers and the controller.

Set-up creates `topics` topics of `partitions` partitions, replicated to every broker up to 3, so
that every fault of a broker moves leaderships and shrinks ISRs. The two workloads differ only in
the op mix: `registrations` reads DescribeCluster as often as Metadata (who is fenced), `isr-changes`
reads Metadata mostly, over more partitions (who leads, who is in sync).

What Kafka documents for these answers: a broker answers Metadata and DescribeCluster from its
metadata image, a committed prefix of the KRaft metadata log applied at its own pace (eventually
consistent; no read barrier, no offset or epoch in the answer the Python API returns). So answers
cannot be ordered against each other, and the checker (`metadata-answers`) judges each one alone by
the rules every image the controller writes satisfies: no fenced broker as a leader or in an ISR of
two or more, the leader in the ISR, the ISR within the replicas. The ISR may be empty when there is
no leader: Kafka 4.1 formats a new cluster with KIP-966's Eligible Leader Replicas
(`eligible.leader.replicas.version=1`), and then fencing the last ISR member moves it to the ELR
(checker option `elr`). It also measures how long a killed
or paused broker stays listed, and stays a leader, in the other brokers' answers (the fencing delay:
`broker.session.timeout.ms` plus the image's lag). `availability` asks for one Metadata answer
within the recovery window after the final heal (these workloads write nothing).

Options (`[workload_options]`): `topics` (2), `partitions` (3; isr-changes 6), `request_timeout_ms`
(3000).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vocab.errors import UserError
from vocab.generators import Op, Rng, as_gen
from vocab.invocation import DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, WorkloadRun, register_workload
from workloads.kafka_admin import create_topics
from workloads.kafka_client import _ck, admin_config
from workloads.kafka_observer import KafkaObserver
from workloads.played_brokers import observe

SETUP_TIMEOUT_S = 60.0
READ_FS = ("kafka-metadata", "kafka-describe-cluster")
CHECKERS = ("metadata-answers",)
# these workloads write nothing: a Metadata answer after the final heal is the cluster's liveness;
# Kafka 4.1 formats new clusters with KIP-966's Eligible Leader Replicas, so an ISR may be empty
CHECKER_OPTIONS = {"availability": {"write_f": list(READ_FS)}, "metadata-answers": {"elr": True}}


class ObserverClient:
    """Carries out `kafka-metadata` / `kafka-describe-cluster` reads at the broker the op names."""

    def __init__(self, observer: KafkaObserver) -> None:
        self.observer = observer

    def invoke(self, op: Op, done: DoneFn) -> None:
        observe(self.observer, op, done)


class KafkaObservation(WorkloadRun):
    """See the module docstring; `mix` is {f: weight} over READ_FS."""

    def __init__(self, env: WorkloadEnv, name: str, mix: Mapping[str, float], partitions: int) -> None:
        db = env.db
        if getattr(db, "name", "") != "kafka" or getattr(env.scheduler, "loop", None) is None:
            raise UserError(f"{name} on kafka needs --sut kafka on a real backend (netns)")
        self.env = env
        self.name = name
        self.brokers: list[str] = list(db.brokers)  # type: ignore[attr-defined]
        self.topics = [f"{name}-{i}" for i in range(_positive(env, name, "topics", 2))]
        self.partitions = _positive(env, name, "partitions", partitions)
        self.timeout_ms = _positive(env, name, "request_timeout_ms", 3_000)
        self.mix = [(f, float(mix[f])) for f in READ_FS if mix.get(f, 0) > 0]
        self._observer: KafkaObserver | None = None

    def observer(self) -> KafkaObserver:
        if self._observer is None:
            self._observer = KafkaObserver(self.env, self.timeout_ms, self.topics)
        return self._observer

    def setup(self) -> None:
        """Create the topics, replicated to every broker up to 3, and wait for each."""
        bootstrap = [self.env.db.broker_address(b) for b in self.brokers]  # type: ignore[attr-defined]
        admin = _ck().AdminClient(admin_config(bootstrap, {}, self.timeout_ms, f"{self.name}-setup"))
        create_topics(admin, self.topics, self.partitions, min(3, len(self.brokers)), SETUP_TIMEOUT_S)

    def generator(self) -> Any:
        total = sum(w for _, w in self.mix)

        def make(rng: Rng, i: int) -> Op:
            pick, f = rng.random() * total, self.mix[-1][0]
            for kind, weight in self.mix:
                if pick < weight:
                    f = kind
                    break
                pick -= weight
            return Op(f, {"node": rng.choice(self.brokers)})

        return as_gen(make)

    def client(self) -> Handler:
        return ObserverClient(self.observer())

    def close(self) -> None:
        if self._observer is not None:
            self._observer.close()


def _positive(env: WorkloadEnv, workload: str, name: str, default: int) -> int:
    value = env.option(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{workload} on kafka: workload option {name} must be an integer >= 1, got {value!r}")
    return value


def _register(name: str, mix: Mapping[str, float], partitions: int, description: str) -> Workload:
    return register_workload(
        Workload(
            name,
            CHECKERS,
            lambda env: KafkaObservation(env, name, mix, partitions),
            description,
            checker_options=CHECKER_OPTIONS,
            suts=("kafka",),
        )
    )


REGISTRATIONS = _register(
    "registrations",
    {"kafka-metadata": 1, "kafka-describe-cluster": 1},
    3,
    "Kafka: broker registrations and fencing as Metadata / DescribeCluster answers show them while "
    "brokers fail (each answer judged alone; fencing delay measured)",
)
ISR_CHANGES = _register(
    "isr-changes",
    {"kafka-metadata": 4, "kafka-describe-cluster": 1},
    6,
    "Kafka: partition leaders and ISRs as Metadata answers show them while brokers fail (each answer "
    "judged alone; how long a failed broker stays leader measured)",
)
