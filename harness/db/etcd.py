"""The `etcd` adapter: etcd 3.4 (Debian's `etcd-server`) as the system under test, one member per node.

Not on sim (etcd is a real program; the simulator runs only our own node core): `check_backend`
refuses it before a run starts. On any backend with `start(node, argv)` and `address(node)` (netns,
docker, ssh) each node runs `etcd` (on an ssh host or VM, the host's own, found on its PATH and asked
for its version before any member starts) with:
- its data dir under the backend's choice or run_dir/nodes/<node>/data, so a run's etcd state stays
  with the run;
- client URL http://ADDR:2379 (the v3 gRPC gateway the workloads use, workloads/etcd_client.py), peer
  URL http://ADDR:2380, the whole initial cluster on the command line and a cluster token unique to
  the run; a restarted member finds its data dir and ignores the initial-cluster flags;
- logs (zap, JSON lines) on stderr: the backend writes them to nodes/<node>/stderr.log.
Ready = every member answers `POST /v3/maintenance/status`, they agree on a leader, and a linearizable
read through the leader succeeds. The leader is found through that same status API: the member that
names itself leader with the highest raft term (an isolated ex-leader steps down: etcd runs Raft with
CheckQuorum). `collect` saves each member's status (etcd-status.json) and a data-dir listing, then
stops the members with SIGTERM. The fault kinds that cannot be done to etcd are refused before a run
(`harness.db.SUT_UNREACHED_FAULTS`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.backends.shell import BackendError
from harness.db.program import ProgramDB
from vocab.backend import Backend
from vocab.db import DBError

CLIENT_PORT = 2379
PEER_PORT = 2380
STOP_TIMEOUT_S = 20.0
STATUS_FILE = "etcd-status.json"
READY_KEY = "kchaos-ready"
# Raft timing: etcd's defaults (heartbeat 100 ms, election 1 s), written out so a run's test.json
# and the command line say what the members ran with.
MEMBER_SETTINGS: dict[str, str] = {"heartbeat-interval": "100", "election-timeout": "1000"}


# The oldest etcd whose JSON gateway serves at /v3/ (3.3 served it at /v3beta/), which the workloads use.
MIN_VERSION = (3, 4)


def check_version(output: str, etcd: str) -> None:
    """DBError when what `etcd --version` printed names no version or one too old (`etcd` names the
    program in the message: a path, or a host's etcd)."""
    m = re.search(r"etcd Version: (\d+)\.(\d+)", output)
    if m is None:
        raise DBError(f"{etcd} --version printed no version")
    if (int(m[1]), int(m[2])) < MIN_VERSION:
        raise DBError(f"{etcd} is etcd {m[1]}.{m[2]}; --sut etcd needs etcd {MIN_VERSION[0]}.{MIN_VERSION[1]}+")


def etcd_binary() -> str:
    """The etcd program (Debian's etcd-server puts it in /usr/bin); DBError naming the fix when absent."""
    found = shutil.which("etcd")
    if found is None:
        raise DBError("etcd is not installed: apt-get install etcd-server etcd-client (setup.sh does)")
    return found


class EtcdDB(ProgramDB):
    """See the module docstring. Every node is a voting member (no broker role)."""

    name = "etcd"

    def __init__(self, nodes: Sequence[str], token: str, settings: dict[str, str] | None = None) -> None:
        self._nodes = list(nodes)
        self.token = token
        self.settings = {**MEMBER_SETTINGS, **(settings or {})}
        self.backend: Backend | None = None
        self.run_dir: Path | None = None
        self.member_ids: dict[str, str] = {}  # node -> etcd member id (from its status answers)

    @property
    def nodes(self) -> Sequence[str]:
        return tuple(self._nodes)

    # -- install and start ---------------------------------------------------------------------------

    def install(self, backend: Backend, run_dir: Path) -> None:
        from harness.backends.sim import SimBackend

        if isinstance(backend, SimBackend):
            raise DBError("--sut etcd is not available on the sim backend (use netns, docker or ssh)")
        self.backend, self.run_dir = backend, Path(run_dir)
        if self.remote_hosts():  # each host's own etcd, asked first, all at once
            with ThreadPoolExecutor(len(self._nodes)) as pool:
                programs = dict(zip(self._nodes, pool.map(self._remote_etcd, self._nodes)))
        else:
            programs = dict.fromkeys(self._nodes, etcd_binary())
            for node in self._nodes:  # a host of its own has the node's directory made by its backend
                self.data_dir(node).parent.mkdir(parents=True, exist_ok=True)
        for node in self._nodes:
            backend.start(node, [programs[node], *self.flags(node)], env=None, cwd=None)  # type: ignore[attr-defined]

    def _remote_etcd(self, node: str) -> str:
        """The etcd on the node's host (found on its PATH), checked before any member starts: a host
        without one would otherwise show only as a member that never answers."""
        backend: Any = self._backend()
        where = f"etcd on the host of {node}"
        try:
            done = backend.exec(node, ["etcd", "--version"], timeout=60.0)
        except BackendError as exc:
            raise DBError(f"{node}: cannot run etcd on its host: {exc}") from None
        if done.returncode == 127:
            raise DBError(
                f"{where}: not found (--sut etcd over ssh needs etcd {MIN_VERSION[0]}.{MIN_VERSION[1]}+ on "
                "every host: apt-get install etcd-server there)"
            )
        check_version(done.stdout + done.stderr, where)
        return "etcd"

    def flags(self, node: str) -> list[str]:
        """The member's command line (see the module docstring)."""
        backend = self._backend()
        host = backend.address(node)
        cluster = ",".join(f"{n}=http://{backend.address(n)}:{PEER_PORT}" for n in self._nodes)
        return [
            f"--name={node}",
            f"--data-dir={self.data_dir(node)}",
            f"--listen-client-urls=http://{host}:{CLIENT_PORT}",
            f"--advertise-client-urls=http://{host}:{CLIENT_PORT}",
            f"--listen-peer-urls=http://{host}:{PEER_PORT}",
            f"--initial-advertise-peer-urls=http://{host}:{PEER_PORT}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={self.token}",
            "--logger=zap",
            "--log-outputs=stderr",
            *(f"--{k}={v}" for k, v in self.settings.items()),
        ]

    def data_dir(self, node: str) -> Path:
        chosen = self._backend().data_dir(node)
        return Path(chosen) if chosen else self._run_dir() / "nodes" / node / "data"

    # -- the status API ----------------------------------------------------------------------------------

    def post(self, node: str, path: str, body: dict[str, Any], timeout: float = 1.0) -> dict[str, Any] | None:
        """A blocking POST to the member's gateway; its JSON answer, or None when it did not answer 200."""
        url = f"http://{self._backend().address(node)}:{CLIENT_PORT}{path}"
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(request, timeout=timeout) as resp:
            if resp.status == 200:
                return json.loads(resp.read())
        return None

    def status(self, node: str, timeout: float = 1.0) -> dict[str, Any] | None:
        """The member's maintenance status (`leader`, `raftTerm`, `raftIndex`, `header.member_id`, ...)."""
        doc = self.post(node, "/v3/maintenance/status", {}, timeout)
        if doc is not None and "header" in doc:
            self.member_ids[node] = str(doc["header"].get("member_id"))
            return doc
        return None

    def leader(self) -> str | None:
        return self._leader_of({node: self.status(node, timeout=0.5) for node in self._nodes})

    def _leader_of(self, statuses: dict[str, dict[str, Any] | None]) -> str | None:
        """Of these status answers, the member that names itself leader with the highest raft term."""
        best: tuple[int, str] | None = None
        for node, doc in statuses.items():
            if doc is None or str(doc.get("leader")) != self.member_ids.get(node):
                continue
            term = int(doc.get("raftTerm", 0))
            if best is None or term > best[0]:
                best = (term, node)
        return best[1] if best else None

    def _unready(self) -> str | None:
        """What keeps the cluster from being ready, or None when it is ready."""
        statuses = {node: self.status(node) for node in self._nodes}
        silent = [n for n, s in statuses.items() if s is None]
        if silent:
            return f"no status answer from {', '.join(silent)}"
        leaders = {str(s.get("leader")) for s in statuses.values() if s is not None}
        if len(leaders) != 1 or "0" in leaders:
            return f"members do not agree on a leader ({sorted(leaders)})"
        leader = self._leader_of(statuses)  # from the answers above: no second round of status calls
        if leader is None:
            return "no member says it leads"
        if self.post(leader, "/v3/kv/range", {"key": base64.b64encode(READY_KEY.encode()).decode()}, 2.0) is None:
            return f"a linearizable read at the leader {leader} failed"
        return None

    # -- collecting and stopping -------------------------------------------------------------------------

    def collect(self, run_dir: Path, *, stop: bool) -> list[str]:
        statuses = {node: self.status(node, timeout=2.0) for node in self._nodes}
        return self.collect_members(run_dir, stop, statuses, STATUS_FILE, STOP_TIMEOUT_S)
