"""isr-changes: the workload leads partitions of its own brokers and changes their ISRs (KIP-497).

The played brokers of `workloads.played_brokers` are the only replicas of the workload's topics, so
the workload is every partition's leader: it sends AlterPartition as the leader, a compare-and-set on
(leader epoch, partition epoch) of the newest version it knows, adding a replica (possibly a fenced or
lagging one, which the controller must refuse with INELIGIBLE_REPLICA) or dropping a follower. Some
requests are stale on purpose (an older version: FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION; a
follower asking: NOT_LEADER_OR_FOLLOWER; a superseded broker epoch: STALE_BROKER_EPOCH), two may race
from one version, and the broker events of `registrations` (crash, fence, shutdown, re-registration)
run at the same time, so the controller moves leaders and ISRs between the workload's changes.

Checkers: `partition-cas` (linearizability of the compare-and-sets per partition, model
`partition-cas`), `partition-state` (versions, invariants, images, durability), `registrations` and
`metadata-answers` (each Metadata answer alone, librdkafka's too with `client = "confluent-kafka"`).
"""

from __future__ import annotations

from vocab.workload import Workload, register_workload
from workloads.played_brokers import PLAYED_BROKER_CHECKER_OPTIONS, PlayedBrokersRun

NAME = "isr-changes"
DEFAULT_MIX = {
    "alter": 10.0,
    "metadata": 6.0,
    "describe-cluster": 2.0,
    "quorum": 4.0,
    "barrier": 2.0,
    "crash": 0.09,
    "shutdown": 0.045,
    "fence": 0.08,
    "duplicate": 0.05,
    "stale": 0.05,
    "reregister": 0.08,
}


class IsrChanges(PlayedBrokersRun):
    name = NAME
    default_mix = DEFAULT_MIX


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("partition-cas", "partition-state", "registrations", "metadata-answers"),
        IsrChanges,
        "AlterPartition compare-and-sets as the leader of the workload's own partitions (KIP-497)",
        checker_options=PLAYED_BROKER_CHECKER_OPTIONS,
    )
)
