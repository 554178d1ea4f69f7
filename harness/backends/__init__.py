"""Backends carry out the fault vocabulary on some kind of host (BRIEF §3.2).

`Backend` is what the runner and the nemesis talk to; `sim` implements it in the simulator, `netns`
with one network namespace per node (harness.backends.netns). Faults are named by node id only, so a
nemesis never needs to know where a node runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import TracebackType

# node -> the nodes it must not hear from (Jepsen's "grudge")
Grudge = Mapping[str, frozenset[str]]


class Backend(ABC):
    """Hosts for a cluster's nodes plus the faults that can be done to them."""

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
