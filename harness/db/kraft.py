"""The `kraft` adapter: the reference KRaft cluster (node/) as the system under test, on sim or netns.

Node names say the role: `c<i>` controller (a voter), `b<i>` broker (an observer), `n<i>` combined.
Node ids follow the simulator's layout (controllers, then combined, then brokers; see
`harness.backends.sim`), so a node has the same id on every backend.

- sim: the simulation already builds each node's process; start/kill/restart are the simulator's.
  Ready = the quorum converged, its leader's controller is active, every broker is ONLINE and every
  image caught up (`node.sim.cluster_run.settled`). Dumps come from the simulated processes.
- corrupt / uncorrupt (a stopped node's log or snapshot, `node.runtime.corruption`): on sim through the
  simulation (the node's SimFS), elsewhere by editing the files under `data_dir(node)` directly.
- netns (any backend with `start(node, argv)` and `address(node)`): one `server.properties` per node
  under run_dir/nodes/<node>/, data in run_dir/nodes/<node>/data, started with the real runtime
  (`python -m node.runtime node start`). Ready = DescribeCluster through the brokers names an active
  controller and every broker registered and unfenced. `collect` fetches every node's image,
  snapshot and committed log over HTTP (`GET /v1/dump`, one consistent document per node) while the
  nodes run, so dumps exist also with `--leave-db-running`; with `stop=True` it then stops the nodes
  (SIGTERM: each writes the same dumps on a clean stop) and keeps those later ones.

While the run goes on, `tap` copies committed records and snapshots from a live node into
`log-tap.jsonl` (always in the sim; on real backends when snapshots are on, since otherwise the final
dumps hold the whole log). At the end `collect` writes `config-timeline.jsonl` from the dumps and the
tap (harness/db/kraft_checks.py): the committed value of every topic config at every offset, which
broker reads are judged against.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import sys
import threading
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.backends.sim import ADMIN_PRINCIPAL, SimBackend, sim_layout
from harness.db.kraft_settings import NODE_SETTINGS, SNAPSHOT_INTERVAL
from harness.db.kraft_tap import LogTap
from node.bugs import BUGS_KEY
from node.runtime.corruption import Corruption, NothingToCorrupt, corrupt_data_dir, restore_corruption
from node.runtime.fs import OS_FS
from node.runtime.local_cluster import sasl_settings
from vocab.backend import Backend
from vocab.db import DB, DBError
from vocab.faults.kinds import FaultNotSupported

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
METRICS_PORT = 9100
REPO_ROOT = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 20.0
DUMP_TIMEOUT_S = 10.0

NODE_USER = "node"  # the principal nodes log in to each other with: a super user (ClusterAction)
ADMIN_USER = "admin"  # the harness's clients: a super user (ADMIN_PRINCIPAL)
FORGER_USER = "mallory"  # logs in fine but holds no ACL: the forger's principal (harness/forger.py)
NODE_STATS = "node-stats.json"  # what each node did that a run should exercise (snapshot catch-ups, ...)


class KraftDB(DB):
    """See the module docstring. `cluster` has `controllers`, `brokers`, `combined` counts; `bugs` are
    planted bugs switched on in every node (node/bugs.py)."""

    name = "kraft"

    def __init__(self, cluster: Any, settings: dict[str, str] | None = None, bugs: Sequence[str] = ()) -> None:
        self.ids = sim_layout(cluster.controllers, cluster.combined, cluster.brokers)
        self.passwords = {user: secrets.token_hex(12) for user in (NODE_USER, ADMIN_USER, FORGER_USER)}
        security = sasl_settings(self.passwords, NODE_USER, (ADMIN_PRINCIPAL,))
        planted = {BUGS_KEY: ",".join(bugs)} if bugs else {}
        self.settings = {**NODE_SETTINGS, **security, **planted, **(settings or {})}
        self.backend: Backend | None = None
        self.run_dir: Path | None = None
        self.recovered: bool | None = None  # how the last `recover` ended
        self._log_tap: LogTap | None = None
        self._tap_lock = threading.Lock()  # a real-backend tap runs on a worker thread
        self._tap_closed = False  # set by `collect`: the timeline is built, the tap file is final
        self._corruptions: dict[str, list[Corruption]] = {}  # node -> damage done to its files (real nodes)

    # -- who the harness's clients are ----------------------------------------------------------------

    admin_principal = ADMIN_PRINCIPAL

    def login(self, user: str = ADMIN_USER) -> dict[str, str]:
        """AdminClient keyword arguments that log `user` in over SASL/PLAIN (real backends)."""
        return {"username": user, "password": self.passwords[user]}

    # -- shape ------------------------------------------------------------------------------------

    @property
    def nodes(self) -> Sequence[str]:
        return tuple(self.ids)

    @property
    def controllers(self) -> list[str]:
        """Voters: controller-only and combined nodes."""
        return [n for n in self.ids if n[0] in "cn"]

    @property
    def brokers(self) -> list[str]:
        """Nodes with the broker role: combined and broker-only nodes."""
        return [n for n in self.ids if n[0] in "nb"]

    def node_id(self, node: str) -> int:
        return self.ids[node]

    def roles(self, node: str) -> frozenset[str]:
        return {"c": frozenset({"controller"}), "b": frozenset({"broker"}), "n": frozenset({"controller", "broker"})}[
            node[0]
        ]

    def node_of(self, node_id: int) -> str | None:
        return next((n for n, i in self.ids.items() if i == node_id), None)

    @property
    def sim(self) -> Any:
        """The simulation when running on the sim backend, else None."""
        return self.backend.simulation if isinstance(self.backend, SimBackend) else None

    def broker_address(self, node: str) -> str:
        return f"{self._backend().address(node)}:{BROKER_PORT}"

    def controller_address(self, node: str) -> str:
        return f"{self._backend().address(node)}:{CONTROLLER_PORT}"

    def node_of_address(self, address: str) -> str | None:
        """The node behind `host:port` (as the client reports who answered)."""
        host = address.rsplit(":", 1)[0]
        backend = self._backend()
        return next((n for n in self.ids if backend.address(n) == host), None)

    # -- install and start ---------------------------------------------------------------------------

    def install(self, backend: Backend, run_dir: Path) -> None:
        self.backend, self.run_dir = backend, Path(run_dir)
        if isinstance(backend, SimBackend):
            for node in self.ids:
                backend.start(node)
            return
        for node in self.ids:
            config = self.write_config(node)
            backend.start(  # type: ignore[attr-defined]
                node,
                [
                    getattr(backend, "node_python", sys.executable),
                    "-m",
                    "node.runtime",
                    "node",
                    "start",
                    "--config",
                    str(config),
                ],
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                cwd=getattr(backend, "node_code_root", REPO_ROOT),
            )

    def properties(self, node: str) -> dict[str, str]:
        """The node's server.properties (Kafka's key names; see node/runtime/server_config.py)."""
        backend = self._backend()
        host = backend.address(node)
        roles = {"c": "controller", "b": "broker", "n": "broker,controller"}[node[0]]
        listeners = []
        if "controller" in roles:
            listeners.append(f"CONTROLLER://{host}:{CONTROLLER_PORT}")
        if "broker" in roles:
            listeners.append(f"BROKER://{host}:{BROKER_PORT}")
        voters = ",".join(f"{self.ids[c]}@{backend.address(c)}:{CONTROLLER_PORT}" for c in self.controllers)
        return {
            "node.id": str(self.ids[node]),
            "process.roles": roles,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "metadata.log.dir": str(self.data_dir(node)),
            "metrics.listener": f"{host}:{METRICS_PORT}",
            **self.settings,
        }

    def write_config(self, node: str) -> Path:
        directory = self._run_dir() / "nodes" / node
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties(node).items()), encoding="utf-8")
        return path

    def data_dir(self, node: str) -> Path:
        """Where the backend keeps the node's data (e.g. on a filesystem that models power loss), else
        run_dir/nodes/<node>/data."""
        chosen = self._backend().data_dir(node)
        return Path(chosen) if chosen else self._run_dir() / "nodes" / node / "data"

    def create_topics(self, names: Sequence[str], partitions: int = 1, timeout_s: float = 60.0) -> None:
        """Create topics as the harness's admin (an existing one is fine), replicated on up to 3
        brokers; raises DBError when one cannot be created in time."""
        from node.protocol.admin import CreatableTopic, CreateTopicsRequest
        from node.protocol.errors import ErrorCode

        replicas = max(1, min(3, len(self.brokers)))
        request = CreateTopicsRequest(tuple(CreatableTopic(n, partitions, replicas) for n in names))
        done = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        if self.sim is not None:
            from node.sim.admin_client import SimAdminClient, broker_endpoints

            endpoints = broker_endpoints([self.ids[b] for b in self.brokers or self.controllers])
            admin = SimAdminClient(self.sim, endpoints, principal=ADMIN_PRINCIPAL)
            call = admin.send(request, idempotent=False, timeout_ms=int(timeout_s * 1000))
            if not self.sim.run_until_true(lambda: call.done, int(timeout_s * 1000)) or not call.ok:
                raise DBError(f"creating topics {list(names)} failed: {call.error or 'no answer'}")
            codes = [t.error_code for t in call.response.topics]
        else:
            from node.client import SyncAdminClient

            bootstrap = [self.broker_address(b) for b in self.brokers]
            with SyncAdminClient(bootstrap, request_timeout_ms=int(timeout_s * 1000), **self.login()) as admin:
                codes = [t.error_code for t in admin.send(request, idempotent=False).topics]
        if any(code not in done for code in codes):
            raise DBError(f"creating topics {list(names)} failed: {[ErrorCode(c).name for c in codes]}")

    # -- readiness -------------------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float) -> None:
        if self.sim is not None:
            from node.sim.cluster_run import _unsettled, settled, supervised

            sim = self.sim
            if not sim.run_until_true(lambda: supervised(sim) and settled(sim), int(timeout_s * 1000), poll_ms=100):
                raise DBError(_unsettled(sim, int(timeout_s * 1000)))
            return
        self.poll_ready(self._real_unready, timeout_s, before_each=self.restart_exited)

    def _real_unready(self) -> str | None:
        """What keeps a real cluster from being ready, or None when it is ready."""
        from node.client import SyncAdminClient
        from node.client.errors import KafkaError

        leader = self.leader()
        if leader is None:
            return "no quorum leader"
        bootstrap = [self.broker_address(b) for b in self.brokers]
        if not bootstrap:
            return None
        try:
            with SyncAdminClient(
                bootstrap, request_timeout_ms=2_000, connect_timeout_ms=1_000, **self.login()
            ) as admin:
                described = admin.describe_cluster(include_fenced=True)
        except KafkaError as exc:
            return f"DescribeCluster through the brokers failed: {exc}"
        if described.controller_id < 0:
            return "the brokers know no active controller"
        unfenced = {b.broker_id for b in described.brokers if not b.fenced}
        missing = [b for b in self.brokers if self.ids[b] not in unfenced]
        return f"brokers not registered and unfenced: {', '.join(missing)}" if missing else None

    def leader(self) -> str | None:
        """The active controller with the highest epoch (a deposed one that still believes it is active,
        cut off from the others, is not the leader), as on real backends below."""
        if self.sim is not None:
            sim = self.sim
            active = [n for n, h in sim.nodes.items() if h.up and h.process is not None and _active(h.process)]
            node_id = max(active, key=lambda n: (sim.raft(n).epoch, -n), default=None) or sim.leader()
            return None if node_id is None else self._backend().name_of(node_id)  # type: ignore[attr-defined]
        best: tuple[int, str] | None = None
        for node in self.controllers:
            doc = self.status(node)
            if doc and doc.get("role") == "leader" and (best is None or doc.get("epoch", -1) > best[0]):
                best = (int(doc.get("epoch", -1)), node)
        return best[1] if best else None

    def log_end(self, node: str) -> int | None:
        """How far the node's log reaches (its log end offset), None when it is down or does not answer:
        what a resigning leader ranks its preferred successors by (KIP-595 EndQuorumEpoch)."""
        if self.sim is not None:
            host = self.sim.node(self.ids[node])
            return host.raft.log_end_offset if host.up and host.raft is not None else None
        doc = self.status(node)
        return int(doc["log_end_offset"]) if doc and "log_end_offset" in doc else None

    def status(self, node: str, timeout: float = 1.0) -> dict[str, Any] | None:
        """A real node's /v1/status document, or None when it does not answer."""
        return self._http_json(node, "/v1/status", timeout)

    def _http_json(self, node: str, path: str, timeout: float) -> dict[str, Any] | None:
        url = f"http://{self._backend().address(node)}:{METRICS_PORT}{path}"
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=timeout) as resp:
            if resp.status == 200:
                return json.loads(resp.read())
        return None

    # -- faults and recovery -----------------------------------------------------------------------------

    def restart_node(self, node: str) -> None:
        self._backend().restart(node)

    def corrupt(self, node: str, mode: str, rng: random.Random) -> dict[str, Any]:
        """Damage a stopped node's log or snapshot where it must notice (`node.runtime.corruption`)."""
        if node not in self.ids:
            raise ValueError(f"unknown node '{node}' (nodes: {', '.join(self.ids)})")
        try:
            if self.sim is not None:
                corruption = self.sim.corrupt_storage(self.ids[node], mode, rng)
            else:
                if self._backend().is_alive(node):
                    raise DBError(f"{node} is running: stop it before corrupting its files")
                corruption = corrupt_data_dir(OS_FS, self.data_dir(node), mode, rng)
                self._corruptions.setdefault(node, []).append(corruption)
        except NothingToCorrupt as exc:
            raise FaultNotSupported(f"{node}: {exc}") from None
        return {"node": node, **corruption.describe()}

    def uncorrupt(self, node: str) -> None:
        """Put back the bytes `corrupt` changed (files a node has since set aside stay as they are)."""
        if self.sim is not None:
            self.sim.uncorrupt_storage(self.ids[node])
            return
        for corruption in reversed(self._corruptions.pop(node, [])):
            restore_corruption(OS_FS, corruption)

    # -- the log tap ---------------------------------------------------------------------------------------

    @property
    def tap_every_s(self) -> float:  # type: ignore[override]
        """Often in the simulator (reading a process's log is cheap there), every second otherwise."""
        return 0.05 if self.sim is not None else 1.0

    def tap(self, clock: Callable[[], int] | None = None) -> None:
        """Extend run_dir/log-tap.jsonl (harness/db/kraft_tap.py) from every live node: in the sim
        straight from the processes; on real backends over `GET /v1/dump`, only when snapshots are on
        (without them the final dumps hold the whole log). With the run's `clock`, also the time by
        which the committed log reached the tap's end (commit-times.jsonl, for the quorum-progress check)."""
        if self.run_dir is None or self.backend is None:
            return
        if self.sim is None and int(self.settings.get(SNAPSHOT_INTERVAL, "0") or 0) <= 0:
            return
        with self._tap_lock:
            if self._tap_closed:
                return
            views = self._sim_tap_views() if self.sim is not None else self._http_tap_views()
            if self._log_tap is None:
                self._log_tap = LogTap(self.run_dir, self._commit_header())
            self._log_tap.add(views)
            if clock is not None:
                self._log_tap.mark(clock())

    def _commit_header(self) -> dict[str, Any]:
        """What the quorum-progress check needs to know about the cluster: voters, ids, quorum timeouts."""
        from checkers.quorum_progress import header_line
        from node.raft.config import RaftConfig

        defaults = RaftConfig.__dataclass_fields__

        def ms(key: str, field_name: str) -> int:  # Kafka's spelling (controller.quorum.*) or KIP-595's
            return int(self.settings.get(key) or self.settings.get(f"controller.{key}") or defaults[field_name].default)

        return header_line(
            self.controllers,
            self.ids,
            ms("quorum.fetch.timeout.ms", "fetch_timeout_ms"),
            ms("quorum.request.timeout.ms", "request_timeout_ms"),
            brokers=self.brokers,
        )

    def _sim_tap_views(self) -> list[Any]:
        """The node furthest ahead whose log still holds the tap's end (only its new records are
        encoded); when none does, every node's view (the tap then jumps through a snapshot)."""
        from node.metadata.dump import log_entries, snapshot_dump

        end = self._log_tap.end if self._log_tap is not None else 0
        live = [p for p in (self.sim.process(i) for i in self.ids.values()) if p is not None]
        holding = [p for p in live if p.raft.log_start_offset <= end < p.raft.high_watermark]
        chosen = [max(holding, key=lambda p: p.raft.high_watermark)] if holding else live
        views = []
        for process in chosen:
            raft = process.raft
            start = raft.log_start_offset
            if start <= end < raft.log.end_offset:
                start = raft.log.batch_at(end).base_offset  # read only what is new
            batches = [b for b in raft.read_committed(start) if b.last_offset >= end]
            views.append((snapshot_dump(raft.snapshot), list(log_entries(batches, with_records=True))))
        return views

    def _http_tap_views(self) -> list[Any]:
        views = []
        for node in self.ids:
            doc = self._http_json(node, "/v1/dump", timeout=2.0)
            if doc is not None:
                views.append((doc["snapshot"], doc["committed_log"]))
        return views

    # -- collecting and stopping -------------------------------------------------------------------------

    def collect(self, run_dir: Path, *, stop: bool) -> list[str]:
        run_dir = Path(run_dir)
        if self.sim is not None:
            warnings = self._collect_sim(run_dir)
        else:
            warnings = self._collect_real(run_dir, stop)
        return warnings + self._write_timeline(run_dir)

    def _collect_real(self, run_dir: Path, stop: bool) -> list[str]:
        from node.metadata.dump import COMMITTED_LOG_DUMP, IMAGE_DUMP, SNAPSHOT_DUMP

        warnings: list[str] = []
        fetched = {node: self._fetch_dump(node, run_dir / "nodes" / node) for node in self.ids}
        stats = {node: self.status(node) for node in self.ids}  # before the nodes stop
        if stop:
            warnings += self.stop_all()
        names = (IMAGE_DUMP, SNAPSHOT_DUMP, COMMITTED_LOG_DUMP)
        # A backend whose hosts are other machines (ssh) fetches logs and data-dir listings itself.
        remote_collect = getattr(self._backend(), "collect_node", None)
        for node in self.ids:
            target = run_dir / "nodes" / node
            target.mkdir(parents=True, exist_ok=True)
            if stats[node] is not None:
                (target / NODE_STATS).write_text(json.dumps(stats[node], sort_keys=True) + "\n", encoding="utf-8")
            if remote_collect is not None:
                warnings += remote_collect(node, target)
                if not fetched[node]:
                    warnings.append(f"{node}: no dumps (not answering GET /v1/dump)")
                continue
            data = self.data_dir(node)
            listing = sorted(str(p.relative_to(data)) for p in data.rglob("*")) if data.is_dir() else []
            (target / "data-dir.txt").write_text("\n".join(listing) + "\n", encoding="utf-8")
            if stop and all((data / name).is_file() for name in names):  # a clean stop's, later than ours
                for name in names:  # moved, not copied: one copy of each dump per run (the node needs none)
                    shutil.move(data / name, target / name)
            elif not fetched[node]:
                warnings.append(f"{node}: no dumps (not answering GET /v1/dump, and no clean-stop dumps)")
        return warnings

    def _fetch_dump(self, node: str, target: Path) -> bool:
        """The node's image, snapshot and committed log over HTTP, taken at one instant, as the files a
        clean stop writes."""
        from node.metadata.dump import COMMITTED_LOG_DUMP, IMAGE_DUMP, SNAPSHOT_DUMP

        doc = self._http_json(node, "/v1/dump", DUMP_TIMEOUT_S)
        if doc is None:
            return False
        target.mkdir(parents=True, exist_ok=True)

        def line(obj: Any) -> str:
            return json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n"

        (target / IMAGE_DUMP).write_text(line(doc["image"]), encoding="utf-8")
        (target / SNAPSHOT_DUMP).write_text(line(doc["snapshot"]), encoding="utf-8")
        (target / COMMITTED_LOG_DUMP).write_text("".join(line(e) for e in doc["committed_log"]), encoding="utf-8")
        return True

    def _write_timeline(self, run_dir: Path) -> list[str]:
        """config-timeline.jsonl from the dumps and the tap; `complete` when every node dumped after
        the cluster recovered (then the dumps hold every committed offset)."""
        from harness.db.kraft_checks import read_node_dumps, write_timeline

        with self._tap_lock:  # a tap still running on a worker thread finishes first
            self._tap_closed = True
        try:
            dumps, _ = read_node_dumps(run_dir)
            complete = bool(self.recovered) and set(dumps) >= set(self.ids)
            write_timeline(run_dir, complete=complete)
        except Exception as exc:  # the checks that need it say "unknown"; the run goes on
            return [f"config-timeline: {type(exc).__name__}: {exc}"]
        return []

    def _collect_sim(self, run_dir: Path) -> list[str]:
        from node.runtime.dumps import write_dumps

        warnings = []
        sim = self.sim
        for node, node_id in self.ids.items():
            process = sim.process(node_id)
            if process is None:
                warnings.append(f"{node}: down at the end of the run, no dumps")
                continue
            write_dumps(run_dir / "nodes" / node, process)
            raft = process.raft
            stats = {
                "node_id": node_id,
                "role": raft.role.value,
                "epoch": raft.epoch,
                "high_watermark": raft.high_watermark,
                "metadata_offset": process.image.last_offset + 1,
                "snapshots_fetched": raft.metrics_state.snapshots_fetched_total,
                "snapshots_written": raft.metrics_state.snapshots_written_total,
            }
            (run_dir / "nodes" / node / NODE_STATS).write_text(json.dumps(stats, sort_keys=True) + "\n")
        return warnings

    def stop_all(self) -> list[str]:
        """SIGTERM every node (brokers first, so they shut down through a live controller), wait,
        then kill -9 what is left; returns warnings for nodes that had to be killed."""
        backend = self._backend()
        warnings = []
        broker_only = [n for n in self.ids if n[0] == "b"]
        for group in (broker_only, [n for n in self.ids if n not in broker_only]):
            killed = backend.stop_nodes([n for n in group if backend.is_alive(n)], STOP_TIMEOUT_S)
            warnings += [f"{n}: did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM; killed" for n in killed]
        return warnings

    def teardown(self) -> None:
        if self.backend is None or isinstance(self.backend, SimBackend):
            return
        for node in self.ids:
            with contextlib.suppress(Exception):
                self.backend.kill(node)


def _active(process: Any) -> bool:
    """Whether a simulated node process's controller believes it is the active one."""
    return process.controller is not None and process.controller.active
