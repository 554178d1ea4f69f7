"""KIP-996 on real nodes: three voter processes on loopback, every node-to-node connection through a
relay the test can cut. A voter cut off from the others for many fetch timeouts never bumps its
epoch, and once the relays carry traffic again it follows the same leader in the same epoch.

The relays are the partition: each node's `controller.quorum.voters` names, for every other voter,
a relay port on 127.0.0.1 that forwards to that voter's listener. Cutting a node's relays closes
their connections and refuses new ones, in both directions (a request and its answer share one
connection, and every connection between two nodes goes through the relay of the node that opened it).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time

from node.runtime.local_cluster import NodeProcess, find_leader, plan_cluster, status, wait_for

# Kafka's fetch timeout, so that a loaded machine does not make the healthy follower miss its leader
# too. The request timeout must stay above the leader's 500 ms long poll, or the healthy follower's
# own Fetches time out and it stands as well.
TIMEOUTS = {
    "quorum.fetch.timeout.ms": "2000",
    "quorum.election.timeout.ms": "1000",
    "quorum.election.backoff.max.ms": "500",
    "quorum.request.timeout.ms": "1500",
}


class Relay:
    """One TCP relay on 127.0.0.1 to `target`, cut and healed by the test."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = False
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self.lock:
                if self.cut:
                    client.close()
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def set_cut(self, cut: bool) -> None:
        with self.lock:
            self.cut = cut
            doomed, self.open = (self.open, []) if cut else ([], self.open)
        for s in doomed:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.set_cut(True)
        self.listener.close()


def test_an_isolated_voter_rejoins_without_a_new_epoch(tmp_path):
    plan = plan_cluster(tmp_path, voters=3, settings=TIMEOUTS)
    specs = {spec.node_id: spec for spec in plan.nodes}
    relays = {(src, dst): Relay((specs[dst].host, specs[dst].port)) for src in specs for dst in specs if src != dst}
    procs: dict[int, NodeProcess] = {}
    try:
        for node_id, spec in specs.items():
            peers = {peer: f"127.0.0.1:{relays[node_id, peer].port}" for peer in specs if peer != node_id}
            peers[node_id] = spec.address
            voters = ",".join(f"{peer}@{address}" for peer, address in sorted(peers.items()))
            path = spec.config_path.with_name("relayed.properties")
            path.write_text(plan.properties(spec, {"controller.quorum.voters": voters}))
            procs[node_id] = NodeProcess(spec, path).start()
        leader = wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        epoch, leader_id = leader["epoch"], leader["node_id"]
        isolated = specs[min(n for n in specs if n != leader_id)]
        wait_for(lambda: (s := status(isolated)) and s["leader_id"] == leader_id, 30, what="a caught-up follower")

        for (src, dst), relay in relays.items():
            if isolated.node_id in (src, dst):
                relay.set_cut(True)
        roles = set()
        cut_until = time.monotonic() + 10  # five fetch timeouts: five candidacies or more without pre-vote
        while time.monotonic() < cut_until:
            doc = status(isolated)
            assert doc is not None and doc["epoch"] == epoch, doc
            roles.add(doc["role"])
            time.sleep(0.1)
        assert "prospective" in roles, roles  # it did try to stand, by pre-vote only

        for relay in relays.values():
            relay.set_cut(False)
        wait_for(
            lambda: (s := status(isolated)) and s["role"] == "follower" and s["leader_id"] == leader_id,
            30,
            what="the isolated voter to follow the leader again",
        )
        after = find_leader(plan.voters)
        assert after is not None and (after["node_id"], after["epoch"]) == (leader_id, epoch)
        assert status(isolated)["epoch"] == epoch
    finally:
        for proc in procs.values():
            proc.signal(signal.SIGKILL)
            proc.wait(10)
        for relay in relays.values():
            relay.close()
