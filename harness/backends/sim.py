"""The `sim` backend: the fault vocabulary carried out on a deterministic `Simulation` of a whole cluster.

Hosts are simulated: `setup` builds the simulation (every node a `NodeProcess` with the roles the
test's shape gives it), `start`/`kill`/`restart` start and kill -9 the simulated processes, partitions
are the simulated network's grudge, packet faults its per-link loss and extra delay, clock faults the
node's simulated clock (its timers run on it), pause queues the node's events until it resumes. Disk
faults, power loss and file corruption act on each node's `SimFS` (the real `FileStorage` runs on it;
see `node.sim.disk`). Nothing touches the machine, so there is nothing to heal after a crash. Node
names map to the simulator's integer ids in its own layout (controller-only voters first, then combined
voters, then broker-only observers): c1.. -> 1.., n1.. -> next, b1.. -> last.

With `targeted`, the simulator's targeted faults (`node.sim.buggify`) run during the main phase:
`start_targeted(listener)` / `stop_targeted()`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from node.bugs import warning_lines
from node.sim.buggify import Buggify, Listener
from node.sim.cluster import ClusterConfig, host_address
from node.sim.world import SimConfig, Simulation
from vocab.backend import Backend, check_grudge
from vocab.faults.kinds import BACKEND_FAULTS, ClockFault, DiskFault, Grudge, Links, PacketFault, RedeliverFault
from vocab.schedulers import VirtualScheduler

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

    faults = BACKEND_FAULTS["sim"]

    def __init__(
        self,
        *,
        controllers: int = 0,
        brokers: int = 0,
        combined: int = 0,
        seed: int = 0,
        cluster_options: Mapping[str, Any] | None = None,
        raft: Mapping[str, Any] | None = None,
        targeted: bool = False,
    ) -> None:
        self.cluster_config = ClusterConfig(
            controllers=controllers, brokers=brokers, combined=combined, **dict(cluster_options or {})
        )
        self.seed = seed
        self.raft = dict(raft or {})
        self.ids = sim_layout(controllers, combined, brokers)
        self.names = {i: name for name, i in self.ids.items()}
        self.sim: Simulation | None = None
        self.targeted = targeted
        self.fault_kinds: frozenset[str] = frozenset()
        self.buggify: Buggify | None = None

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

    def terminate(self, node: str) -> None:
        """SIGTERM: the simulated process stops cleanly (a leader resigns with EndQuorumEpoch first)."""
        if self.is_alive(node):
            self.simulation.shutdown(self.id_of(node))

    def is_alive(self, node: str) -> bool:
        return bool(self.simulation.node(self.id_of(node)).up)

    def enable_faults(self, kinds: Collection[str]) -> None:
        self.fault_kinds = frozenset(kinds)

    def _link_ids(self, links: Links) -> dict[int, list[int]] | None:
        return None if links is None else {self.id_of(n): [self.id_of(m) for m in sorted(s)] for n, s in links.items()}

    def packet(self, links: Links, fault: PacketFault) -> None:
        self.simulation.packet(self._link_ids(links), fault.loss, round(fault.delay_ms), round(fault.jitter_ms))

    def heal_packet(self) -> None:
        self.simulation.heal_packet()

    def redeliver(self, links: Links, fault: RedeliverFault) -> None:
        self.simulation.redeliver(self._link_ids(links), fault)

    def heal_redeliver(self) -> None:
        self.simulation.heal_redeliver()

    def clock(self, node: str, fault: ClockFault) -> None:
        node_id, sim = self.id_of(node), self.simulation
        if fault.mode == "bump":
            sim.skew(node_id, jump_ms=fault.delta_ms)
        elif fault.mode == "rate":
            sim.skew(node_id, rate=fault.rate)
        elif fault.mode == "strobe":
            sim.strobe_clock(node_id, fault.delta_ms, fault.period_ms, fault.duration_ms)
        else:
            sim.reset_clock(node_id)

    def clock_reset(self, node: str) -> None:
        self.simulation.reset_clock(self.id_of(node))

    def pause(self, node: str) -> None:
        self.simulation.pause(self.id_of(node))

    def resume(self, node: str) -> None:
        self.simulation.resume(self.id_of(node))

    def wall_clock_ms(self, node: str) -> int:
        """The node's (skewed) wall clock, as a real node reports it on /metrics."""
        return self.simulation.wall_clock(self.id_of(node))

    # -- targeted faults (node.sim.buggify) ------------------------------------------------------------

    def start_targeted(self, listener: Listener) -> bool:
        """Switch on the targeted faults allowed by the enabled kinds; each firing and its end go to
        `listener` ("start"/"stop", value with node names). False when there is none to switch on."""
        if not self.targeted:
            return False
        if self.buggify is None:
            self.buggify = Buggify(self.simulation, self.fault_kinds, listener=listener, name_of=self.name_of)
        self.buggify.listener = listener
        self.buggify.enable()
        return self.buggify.enabled

    def stop_targeted(self) -> list[str]:
        """No more targeted faults; end the active one now. The nodes it had hit."""
        if self.buggify is None:
            return []
        return [self.name_of(n) for n in self.buggify.disable()]

    # -- disks, power loss, corruption: carried out by the simulated storage (SimFS) ------------------

    def disk(self, node: str, fault: DiskFault) -> None:
        self.simulation.set_disk_fault(self.id_of(node), fault)

    def disk_heal(self, node: str) -> None:
        self.simulation.clear_disk_fault(self.id_of(node))

    def lose_unsynced(self, node: str) -> None:
        self.simulation.kill(self.id_of(node), lose_unsynced=True)

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
