"""registrations: played brokers register, heartbeat, fence, shut down, crash and come back (KIP-631).

The workload plays `brokers` brokers of its own (`workloads.played_brokers`); the ops and their phases
are `workloads.fleet_gen`'s. Besides the scheduled heartbeats, the op mix draws reads (Metadata and
DescribeCluster of any node's image, DescribeQuorum, a linearizable barrier) and broker events: a crash
(silence, then a probe heartbeat that must find the broker fenced, then a new incarnation), a
controlled shutdown, `want_fence`, a duplicate incarnation while the broker lives, a heartbeat with a
superseded epoch, a re-registration of the same incarnation. The played brokers are the replicas of
the workload's topics, so fencing and shutdown move their partitions' leadership too.

Checkers: `registrations` (KIP-631 as a client sees it), `partition-state` (what the controller
made of the partitions) and `metadata-answers` (each Metadata answer alone; with `client =
"confluent-kafka"` the brokers' images are read through librdkafka, `workloads/kafka_observer.py`).
"""

from __future__ import annotations

from vocab.workload import Workload, register_workload
from workloads.played_brokers import PLAYED_BROKER_CHECKER_OPTIONS, PlayedBrokersRun

NAME = "registrations"
DEFAULT_MIX = {
    "metadata": 8.0,
    "describe-cluster": 6.0,
    "quorum": 6.0,
    "barrier": 4.0,
    "crash": 0.12,
    "shutdown": 0.06,
    "fence": 0.1,
    "duplicate": 0.1,
    "stale": 0.1,
    "reregister": 0.05,
}


class Registrations(PlayedBrokersRun):
    name = NAME
    default_mix = DEFAULT_MIX


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("registrations", "partition-state", "metadata-answers"),
        Registrations,
        "played brokers register, heartbeat, fence, shut down and crash; fencing and epochs checked (KIP-631)",
        checker_options=PLAYED_BROKER_CHECKER_OPTIONS,
    )
)
