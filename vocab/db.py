"""The system-under-test protocol: how a run installs, starts, watches and collects a cluster on a backend.

The runner only speaks this interface, so another system (etcd, ZooKeeper, a Kafka build) plugs in as
another adapter registered in `harness.db.SUTS`. Methods are blocking: they run between the run's phases, not
while ops are in flight (a nemesis that restarts a node calls `restart_node` from a worker thread).
"""

from __future__ import annotations

import contextlib
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vocab.backend import Backend
from vocab.faults.kinds import FaultNotSupported


class DBError(Exception):
    """The cluster could not be installed, started or made ready (the message says which node and why)."""


class DB(ABC):
    """One system under test on one backend (see the module docstring)."""

    name: str = "db"
    backend: Backend | None = None  # set by `install`
    run_dir: Path | None = None  # set by `install`

    @abstractmethod
    def install(self, backend: Backend, run_dir: Path) -> None:
        """Write each node's configuration and start every node."""

    @abstractmethod
    def wait_ready(self, timeout_s: float) -> None:
        """Block until the cluster serves clients (DBError naming what is missing after `timeout_s`)."""

    @abstractmethod
    def leader(self) -> str | None:
        """The node that leads the cluster now, when there is one (for `isolate-leader`, `kill leader`)."""

    def log_end(self, node: str) -> int | None:
        """How far the node's log reaches, when the system can say (None: unknown)."""
        return None

    @abstractmethod
    def restart_node(self, node: str) -> None:
        """Start a node that was killed, with the command it was started with."""

    recovered: bool | None = None  # how the last `recover` ended
    recovery_problem: str | None = None  # why it did not (the readiness check's last answer)

    def recover(self, timeout_s: float) -> bool:
        """After the faults are healed: start every node that is down, wait until ready. False if not."""
        self.restart_exited()
        try:
            self.wait_ready(timeout_s)
        except DBError as exc:
            self.recovered, self.recovery_problem = False, str(exc)
            return False
        self.recovered, self.recovery_problem = True, None
        return True

    def restart_exited(self) -> None:
        """Like systemd's Restart=always: a node that stopped by itself is started again."""
        backend = self._backend()
        for node in self.nodes:
            if not backend.is_alive(node):
                with contextlib.suppress(Exception):
                    backend.restart(node)

    def poll_ready(
        self, unready: Callable[[], str | None], timeout_s: float, before_each: Callable[[], None] | None = None
    ) -> None:
        """Call `unready` (what is missing, or None) until it says ready; DBError with its last answer
        after `timeout_s`. `before_each` runs before every try (e.g. `restart_exited`)."""
        deadline = time.monotonic() + timeout_s
        problem = "no answer yet"
        while time.monotonic() < deadline:
            if before_each is not None:
                before_each()
            problem = unready()
            if problem is None:
                return
            time.sleep(0.25)
        raise DBError(f"{self.name} cluster not ready after {timeout_s:.0f} s: {problem}")

    @abstractmethod
    def collect(self, run_dir: Path, *, stop: bool) -> list[str]:
        """Copy logs and state dumps to run_dir/nodes/<node>/; stop the cluster first when `stop`.
        Returns warnings (what could not be collected); never raises for a missing file."""

    @abstractmethod
    def teardown(self) -> None:
        """Stop whatever still runs (idempotent; the backend removes the hosts)."""

    @property
    @abstractmethod
    def nodes(self) -> Sequence[str]:
        """Every node of the cluster."""

    def _backend(self) -> Backend:
        if self.backend is None:
            raise DBError(f"the {self.name} cluster is not installed yet")
        return self.backend

    def _run_dir(self) -> Path:
        if self.run_dir is None:
            raise DBError(f"the {self.name} cluster is not installed yet")
        return self.run_dir

    # -- what nemeses need to know or do beyond the backend's fault vocabulary ------------------------

    def roles(self, node: str) -> frozenset[str]:
        """The node's roles: "controller" (a voter of the metadata quorum) and/or "broker". A system
        without that split calls every node a controller (every node votes)."""
        return frozenset({"controller"})

    def corrupt(self, node: str, mode: str, rng: random.Random) -> dict[str, Any]:
        """Corrupt the data files of a *stopped* node (only the adapter knows their format): modes
        `bitflip-log`, `truncate-log`, `bitflip-snapshot`, `truncate-snapshot`
        (`node.runtime.corruption.CORRUPT_MODES` for kraft), placed where the node must detect it;
        FaultNotSupported when there is nothing to damage. Saves what it changed (for `uncorrupt`)
        and returns a description for the history."""
        raise FaultNotSupported(f"the {self.name} adapter cannot corrupt files")

    def uncorrupt(self, node: str) -> None:  # noqa: B027 - optional
        """Put back every byte `corrupt` changed on `node` (a no-op when nothing is corrupted)."""

    # -- what the end-of-run checks need ---------------------------------------------------------------

    tap_every_s: float = 1.0  # how often the runner calls `tap` (run time)

    def tap(self, clock: Callable[[], int] | None = None) -> None:  # noqa: B027 - optional
        """Record, while the run goes on, what the end state may no longer hold (e.g. committed records
        a snapshot will replace). Called every `tap_every_s` from the run's scheduler; may block.
        `clock` reads the run's clock (the history's times), for records of when things were seen."""
