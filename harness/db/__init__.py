"""System-under-test adapters: how a run installs, starts, watches and collects a cluster on a backend.

The runner only speaks this interface, so another system (etcd, ZooKeeper, a Kafka build) plugs in as
another adapter registered in `SUTS`. Methods are blocking: they run between the run's phases, not
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

from checkers.registry import CHECKERS
from harness.backends import Backend, FaultNotSupported


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

    def recover(self, timeout_s: float) -> bool:
        """After the faults are healed: start every node that is down, wait until ready. False if not."""
        self.restart_exited()
        try:
            self.wait_ready(timeout_s)
        except DBError:
            self.recovered = False
            return False
        self.recovered = True
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


class ProgramDB(DB):
    """A cluster of someone else's program (etcd, Kafka) started by the backend, one process per node:
    restart, stop and collect through the backend alone."""

    def restart_node(self, node: str) -> None:
        self._backend().restart(node)

    def teardown(self) -> None:
        if self.backend is None:
            return
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.backend.kill(node)

    def collect_members(
        self, run_dir: Path, stop: bool, statuses: dict[str, Any], status_file: str, stop_timeout_s: float
    ) -> list[str]:
        """`collect` for a real program: stop the members (SIGTERM, kill -9 after `stop_timeout_s`) when
        `stop`, write each node's status answer (taken before stopping; None: a warning; nodes absent
        from `statuses` have none) to nodes/<node>/`status_file`, and fetch the node's files (a remote
        backend) or list its data dir."""
        import json

        backend = self._backend()
        warnings: list[str] = []
        if stop:
            alive = [n for n in self.nodes if backend.is_alive(n)]
            killed = backend.stop_nodes(alive, stop_timeout_s)  # type: ignore[attr-defined]
            warnings += [f"{n}: did not stop within {stop_timeout_s:.0f} s of SIGTERM; killed" for n in killed]
        remote_collect = getattr(backend, "collect_node", None)
        for node in self.nodes:
            target = Path(run_dir) / "nodes" / node
            target.mkdir(parents=True, exist_ok=True)
            if node in statuses and statuses[node] is None:
                warnings.append(f"{node}: no status answer at the end of the run")
            elif node in statuses:
                (target / status_file).write_text(json.dumps(statuses[node], sort_keys=True) + "\n", encoding="utf-8")
            if remote_collect is not None:
                warnings += remote_collect(node, target)
                continue
            data = Path(self.data_dir(node))  # type: ignore[attr-defined]
            listing = sorted(str(p.relative_to(data)) for p in data.rglob("*")) if data.is_dir() else []
            (target / "data-dir.txt").write_text("\n".join(listing) + "\n", encoding="utf-8")
        return warnings


# name -> factory(test spec) -> DB
SUTS: dict[str, Callable[[Any], DB]] = {}


def _kraft(spec: Any) -> DB:
    from harness.db.kraft import KraftDB
    from node.runtime.server_config import PRE_VOTE_KEY

    settings = {} if getattr(spec, "pre_vote", True) else {PRE_VOTE_KEY: "false"}
    return KraftDB(spec.cluster, settings, bugs=getattr(spec, "bugs", ()))


def _etcd(spec: Any) -> DB:
    import secrets

    from harness.db.etcd import EtcdDB

    problem = sut_problem("etcd", spec.backend, brokers=spec.cluster.brokers)
    if problem:
        raise DBError(problem)
    return EtcdDB(spec.nodes, token=f"kchaos-{secrets.token_hex(4)}")


def _kafka(spec: Any) -> DB:
    from harness.db.kafka.db import KafkaDB, cluster_id

    problem = sut_problem("kafka", spec.backend)
    if problem:
        raise DBError(problem)
    return KafkaDB(spec.nodes, cluster_id(), getattr(spec, "kafka_settings", None))


SUTS["kraft"] = _kraft
SUTS["etcd"] = _etcd
SUTS["kafka"] = _kafka

# name -> the backends its adapter runs on (etcd is a real program: the simulator runs only our node core)
SUT_BACKENDS: dict[str, tuple[str, ...]] = {
    "kraft": ("sim", "netns", "docker", "ssh"),
    "etcd": ("netns", "docker", "ssh"),
    "kafka": ("netns",),  # docker and ssh: not yet (docs/concepts/suts.md)
}

# name -> the end-of-run checks its adapter brings, each with the node dump file that shows a run has
# what it needs (they need the system's own code, so they live beside the adapter and are registered
# here as checkers: `kchaos check`, `kchaos analyze`, results.json)
SUT_CHECKS: dict[str, dict[str, str]] = {
    "kraft": {
        "image-replay": "metadata-snapshot.json",
        "at-most-once": "committed-log.jsonl",
        "elections": "committed-log.jsonl",  # LeaderChange records: a measure the gate puts thresholds on
    }
}
CHECKERS.setdefault("image-replay", "harness.db.kraft_checks:check_from_args")
CHECKERS.setdefault("at-most-once", "harness.db.kraft_at_most_once:check_from_args")


# name -> fault kinds that cannot be done to its nodes: refused before a run, so that no verdict claims
# a fault it never had. etcd is Go: it reads the clock and does file I/O without libc, so the clock and
# disk preload shims miss it (measured: under libfaketime at -3 days it logs the true time); its bbolt
# database cannot mmap a file on the lazyfs FUSE mount (measured: "failed to open database ... no
# such device"), so no lose_unsynced; and the adapter knows no etcd file format to corrupt.
# Kafka: not yet measured whether the JVM honours the clock and disk shims or runs on the lazyfs mount,
# and the adapter knows no Kafka file format to corrupt; refused until each is measured.
SUT_UNREACHED_FAULTS: dict[str, frozenset[str]] = {
    "etcd": frozenset({"clock", "disk_stall", "disk_fail", "lose_unsynced", "corrupt"}),
    "kafka": frozenset({"clock", "disk_stall", "disk_fail", "lose_unsynced", "corrupt"}),
}


def sut_problem(
    sut: str,
    backend: str,
    workload_suts: Sequence[str] | None = None,
    brokers: int = 0,
    faults: Sequence[str] = (),
) -> str | None:
    """Why `sut` cannot run on `backend`, with a workload written for `workload_suts`, with broker-only
    nodes or with these fault kinds; None when it can."""
    backends = SUT_BACKENDS.get(sut)
    if backends is not None and backend not in backends:
        return f"{sut} is not available on the {backend} backend (it runs on {', '.join(backends)})"
    unreached = [kind for kind in faults if kind in SUT_UNREACHED_FAULTS.get(sut, ())]
    if unreached:
        return f"{', '.join(unreached)} faults cannot be done to {sut} nodes (see docs/concepts/suts.md)"
    if workload_suts is not None and sut not in workload_suts:
        return f"that workload runs on {', '.join(workload_suts)}, not on {sut}"
    if sut == "etcd" and brokers:
        return "etcd has no brokers: every member votes (use --nodes N, e.g. --nodes 3)"
    return None


def make_db(name: str, spec: Any) -> DB:
    try:
        return SUTS[name](spec)
    except KeyError:
        raise DBError(f"unknown system under test {name!r} (known: {', '.join(sorted(SUTS))})") from None
