"""Backends carry out the fault vocabulary on some kind of host (BRIEF §3.2).

`Backend` is what the runner and the nemesis talk to; `sim` implements it in the simulator, `netns`
with one network namespace per node (harness.backends.netns). Faults are named by node id only, so a
nemesis never needs to know where a node runs. The vocabulary and its parameter types are in
`vocab.faults.kinds`; a backend lists the kinds it carries out in `faults` and raises
`FaultNotSupported` for the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from types import TracebackType

from vocab.faults.kinds import (
    ClockFault,
    DiskFault,
    FaultNotSupported,
    Grudge,
    Links,
    PacketFault,
    RedeliverFault,
    why_not,
)

__all__ = [
    "Backend",
    "ClockFault",
    "DiskFault",
    "FaultNotSupported",
    "Grudge",
    "Links",
    "PacketFault",
    "RedeliverFault",
    "check_grudge",
]


class Backend(ABC):
    """Hosts for a cluster's nodes plus the faults that can be done to them."""

    # The fault kinds (vocab.faults.kinds.FAULT_KINDS) this backend carries out.
    faults: frozenset[str] = frozenset({"partition", "kill"})

    @property
    @abstractmethod
    def node_ids(self) -> Sequence[str]:
        """The nodes, in a stable order."""

    @abstractmethod
    def setup(self) -> None:
        """Provision the hosts (nothing runs on them yet)."""

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything and remove every host resource setup() or a fault created. Idempotent."""

    @abstractmethod
    def address(self, node: str) -> str:
        """The address at which the harness (and other nodes) reach `node`."""

    @abstractmethod
    def partition(self, grudge: Grudge) -> None:
        """Replace the current partition: each node stops hearing from the nodes its grudge names."""

    @abstractmethod
    def heal_network(self) -> None:
        """Remove every partition."""

    @abstractmethod
    def kill(self, node: str) -> None:
        """kill -9 the node's process (no-op if it is not running)."""

    @abstractmethod
    def restart(self, node: str) -> None:
        """Start the node's process again with the command it was last started with."""

    @abstractmethod
    def is_alive(self, node: str) -> bool:
        """Whether the node's process is running."""

    def terminate(self, node: str) -> None:
        """Ask the node's process to stop (SIGTERM: it shuts down cleanly and writes its dumps)."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot stop a node gracefully")

    def wait_stopped(self, node: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the node's process to exit; whether it did."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot stop a node gracefully")

    def stop_nodes(self, nodes: Sequence[str], timeout_s: float) -> list[str]:
        """SIGTERM the nodes (all at once), wait up to `timeout_s` for each, kill -9 what is left; the
        nodes that had to be killed. A backend with remote hosts does it in one round per host."""
        for node in nodes:
            self.terminate(node)
        killed = []
        for node in nodes:
            if not self.wait_stopped(node, timeout_s):
                killed.append(node)
            self.kill(node)  # reaps it and closes its ledger entry
        return killed

    # -- the rest of the fault vocabulary: optional, each backend lists what it does in `faults` --------

    def enable_faults(self, kinds: Collection[str]) -> None:  # noqa: B027 - optional
        """Called after setup() and before any node starts, with the kinds the run's nemesis may use,
        so the backend can prepare what must be in place from a process's start (preloaded shims,
        data dirs on a filesystem that can forget un-fsynced writes)."""

    def data_dir(self, node: str) -> str | None:
        """Where the node keeps its data on its host, when the backend decides it (e.g. a mount that
        models power loss); None lets the DB adapter choose."""
        return None

    def packet(self, links: Links, fault: PacketFault) -> None:
        """Replace the current packet fault: drop/delay packets on `links` (None: every link)."""
        raise self._unsupported("packet")

    def heal_packet(self) -> None:
        """Remove every packet fault (a no-op when there is none)."""
        if "packet" in self.faults:
            raise NotImplementedError

    def redeliver(self, links: Links, fault: RedeliverFault) -> None:
        """Replace the current redeliver fault: deliver messages on `links` (None: every link) again."""
        raise self._unsupported("redeliver")

    def heal_redeliver(self) -> None:
        """Remove the redeliver fault (a no-op when there is none; copies already sent still arrive)."""
        if "redeliver" in self.faults:
            raise NotImplementedError

    def clock(self, node: str, fault: ClockFault) -> None:
        """Change the node's wall clock (see ClockFault)."""
        raise self._unsupported("clock")

    def clock_reset(self, node: str) -> None:
        """The node's wall clock back to the true time at normal speed."""
        self.clock(node, ClockFault("reset"))

    def pause(self, node: str) -> None:
        """Stop the node's process from running (SIGSTOP or the like); it keeps its sockets and memory."""
        raise self._unsupported("pause")

    def resume(self, node: str) -> None:
        """Let a paused node run again (a no-op when it is not paused)."""
        raise self._unsupported("pause")

    def disk(self, node: str, fault: DiskFault) -> None:
        """Replace the node's disk fault (a stall or a failure of its data-dir I/O)."""
        raise self._unsupported(f"disk_{fault.kind}")

    def disk_heal(self, node: str) -> None:
        """The node's disk healthy again (a no-op when it has no fault)."""
        raise self._unsupported("disk_stall")

    def lose_unsynced(self, node: str) -> None:
        """Power loss: kill -9 the node and forget every write it had not fsynced (file data, and the
        directory entries of directories not fsynced since). `restart(node)` brings it back."""
        raise self._unsupported("lose_unsynced")

    def _unsupported(self, kind: str) -> FaultNotSupported:
        name = type(self).__name__.removesuffix("Backend").lower()
        return FaultNotSupported(why_not(name, kind))

    def __enter__(self) -> Backend:
        self.setup()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.teardown()


def check_grudge(grudge: Grudge, nodes: Sequence[str]) -> None:
    """Raise ValueError naming the first node in `grudge` that is not one of `nodes`."""
    known = set(nodes)
    for node, others in grudge.items():
        for name in (node, *others):
            if name not in known:
                raise ValueError(f"grudge names unknown node '{name}' (nodes: {', '.join(nodes)})")
