"""The `sim` backend: the fault vocabulary carried out on a deterministic `Simulation` of a whole cluster.

Hosts are simulated: `setup` builds the simulation (every node a `NodeProcess` with the roles the
test's shape gives it), `start`/`kill`/`restart` start and kill -9 the simulated processes, partitions
are the simulated network's grudge. Nothing touches the machine, so there is nothing to heal after a
crash. Node names map to the simulator's integer ids in its own layout (controller-only voters first,
then combined voters, then broker-only observers): c1.. -> 1.., n1.. -> next, b1.. -> last.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends import Backend, Grudge, check_grudge
from harness.schedulers import VirtualScheduler
from node.bugs import warning_lines
from node.sim.cluster import ClusterConfig, host_address
from node.sim.world import SimConfig, Simulation

# Runs exercise the whole node (issue 13): a snapshot every this many committed records, so that a node
# that was cut off or down for a fault window catches up from a snapshot (KIP-630 FetchSnapshot) in
# every run; netns runs use the same threshold (harness/db/kraft.py).
RUN_SNAPSHOT_EVERY_RECORDS = 20
ADMIN_PRINCIPAL = "User:admin"  # the harness's own clients: a super user (ClusterConfig.super_users)


def run_cluster_options(bugs: Sequence[str] = ()) -> dict[str, Any]:
    """The `ClusterConfig` options of a `kchaos run` on the simulator: the ACL authorizer on (super users:
    the nodes' principals and ADMIN_PRINCIPAL; anyone else needs ACLs), snapshots every
    RUN_SNAPSHOT_EVERY_RECORDS records, and the planted bugs of the test (none by default). The
    simulator does not model SASL: a simulated client simply has a principal."""
    return {
        "authorizer": True,
        "super_users": (ADMIN_PRINCIPAL,),
        "security_protocol": "SASL_PLAINTEXT",
        "snapshot_every_records": RUN_SNAPSHOT_EVERY_RECORDS,
        "bugs": tuple(bugs),
    }


def sim_layout(controllers: int, combined: int, brokers: int) -> dict[str, int]:
    """Node name -> simulator id (see the module docstring)."""
    names = (
        [f"c{i}" for i in range(1, controllers + 1)]
        + [f"n{i}" for i in range(1, combined + 1)]
        + [f"b{i}" for i in range(1, brokers + 1)]
    )
    return {name: i for i, name in enumerate(names, start=1)}


class SimBackend(Backend):
    """A simulated cluster of `controllers` + `combined` + `brokers` nodes (see the module docstring)."""

    def __init__(
        self,
        *,
        controllers: int = 0,
        brokers: int = 0,
        combined: int = 0,
        seed: int = 0,
        cluster_options: Mapping[str, Any] | None = None,
        raft: Mapping[str, int] | None = None,
    ) -> None:
        self.cluster_config = ClusterConfig(
            controllers=controllers, brokers=brokers, combined=combined, **dict(cluster_options or {})
        )
        self.seed = seed
        self.raft = dict(raft or {})
        self.ids = sim_layout(controllers, combined, brokers)
        self.names = {i: name for name, i in self.ids.items()}
        self.sim: Simulation | None = None

    # -- Backend -----------------------------------------------------------------------------------

    @property
    def node_ids(self) -> Sequence[str]:
        return tuple(self.ids)

    def setup(self) -> None:
        if self.sim is None:
            self.sim = Simulation(SimConfig(seed=self.seed, cluster=self.cluster_config, raft=self.raft))
            for line in warning_lines(self.cluster_config.bugs):
                logging.getLogger("kchaos.sim").warning("%s", line)
                self.sim.trace.record(self.sim.now, "harness", "planted-bug", line)

    def teardown(self) -> None:
        if self.sim is not None:
            self.sim.trace.close()

    def address(self, node: str) -> str:
        return host_address(self.id_of(node))

    def partition(self, grudge: Grudge) -> None:
        check_grudge(grudge, self.node_ids)
        self.simulation.partition({self.id_of(n): [self.id_of(m) for m in sorted(cut)] for n, cut in grudge.items()})

    def heal_network(self) -> None:
        if self.simulation.network.partitioned:
            self.simulation.heal()

    def kill(self, node: str) -> None:
        self.simulation.kill(self.id_of(node))

    def restart(self, node: str) -> None:
        self.simulation.restart(self.id_of(node))

    def is_alive(self, node: str) -> bool:
        return bool(self.simulation.node(self.id_of(node)).up)

    # -- the rest of what the runner needs ------------------------------------------------------------

    def start(self, node: str, argv: Sequence[str] | None = None, **_: Any) -> None:
        """Start the node's simulated process (`argv` is meaningless here and ignored)."""
        self.simulation.start([self.id_of(node)])

    @property
    def simulation(self) -> Simulation:
        if self.sim is None:
            raise RuntimeError("sim backend is not set up (call setup() first)")
        return self.sim

    def scheduler(self) -> VirtualScheduler:
        return VirtualScheduler(self.simulation)

    def id_of(self, node: str) -> int:
        try:
            return self.ids[node]
        except KeyError:
            raise ValueError(f"unknown node '{node}' (nodes: {', '.join(self.ids)})") from None

    def name_of(self, node_id: int) -> str:
        return self.names.get(node_id, str(node_id))
