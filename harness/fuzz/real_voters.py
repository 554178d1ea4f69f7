"""The `peers` voices against a real node process: node 1 of three voters, voters 2 and 3 played over
real sockets.

`real_node.py` sends requests to a node's listeners, and a node asks that sender nothing. Here node 1 of
`controller.quorum.voters=1@…,2@…,3@…` is a real `kchaos node start` process and this process listens
on the addresses of voters 2 and 3. The node connects there and asks for pre-votes, votes and
fetches, announces its epochs, copies snapshots; each request is answered, at a time and in an order
of the seed's choosing, with what `harness.fuzz.peers.Voices` builds: votes granted or refused,
record batches of a real leader at its fetch offset, diverging epochs, a real leader's snapshot whole
or damaged, now and then a damaged frame. Voters 2 and 3 also send requests to its CONTROLLER
listener. Every other 100 frames the voters are loyal instead (`Voices.loyal_answer`, `loyal_fetch`):
they grant its votes and fetch to its log end while a client reads and writes, so the real process
leads under load (parked fetches, appends through the fsync thread, read barriers). The voices
build on what the node reports on `/v1/status` (its epoch, log end, high watermark, the epochs it
was seen in). Short quorum timeouts make it change role every few hundred milliseconds, so its real
runtime (outbound links, request timeouts, reconnects, the fsync thread, the snapshot written
through real files) meets what the in-process target feeds the core.

The contract is the real node's: alive, a fresh client served on both listeners, a clean stop after
SIGTERM, and no traceback nor "cannot encode" in its log. A stop that a KIP prescribes for what only
the quorum's voters send (`DESIGNED_STOPS`: exit 254, the reason in its one line) is counted and the
node started again on a fresh data dir. Sockets have timeouts and the loop a deadline: nothing here
can hang.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.fuzz.describe import clip, describe_frame
from harness.fuzz.inprocess import DESIGNED_STOPS, ROOT
from harness.fuzz.peers import PEERS, Voices
from harness.fuzz.real_node import HOST, RealRun, free_port, probe_api_versions, wait_listening
from node.protocol.broker_api import SnapshotId
from node.protocol.codec import BinaryCodec, FrameError, FrameKind, FrameReader
from node.raft.base import LAST_EPOCH

PROBE_EVERY = 50
PHASE_FRAMES = 100
CLIENT = 0  # the connection a client's reads and writes go over, beside voters 2 and 3's
LAST_FRAMES = 5
STATUS_EVERY = 10
SETTINGS = {  # roles change every few hundred ms; a request unanswered for 400 ms fails and is sent again
    "quorum.election.timeout.ms": "150",
    "quorum.fetch.timeout.ms": "300",
    "quorum.election.backoff.max.ms": "100",
    "quorum.request.timeout.ms": "400",
}
_CODEC = BinaryCodec()


@dataclass
class StatusView:
    """Node 1 as its `/v1/status` last showed it (a `harness.fuzz.peers.PeerView`)."""

    epoch: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    log_start_offset: int = 0
    last_epoch: int = 0
    cluster_id: str | None = None
    snapshot_id: SnapshotId | None = None
    seen_epochs: set[int] = field(default_factory=set)

    def log_epochs(self) -> list[int]:
        """The epochs its log's batches were seen to end in: what its epoch cache holds, near enough."""
        return sorted(self.seen_epochs)

    def update(self, doc: dict) -> None:
        self.epoch, self.last_epoch = int(doc["epoch"]), int(doc["last_epoch"])
        self.log_end_offset, self.high_watermark = int(doc["log_end_offset"]), int(doc["high_watermark"])
        self.cluster_id = doc.get("cluster_id")
        if self.last_epoch > 0:
            self.seen_epochs.add(self.last_epoch)


class Link:
    """One TCP connection and the frames read from it so far."""

    def __init__(self, sock: socket.socket, peer: int) -> None:
        sock.settimeout(5)
        self.sock, self.peer, self.frames = sock, peer, FrameReader(_CODEC.max_frame_bytes)
        self.open = True

    def send(self, frame: bytes) -> bool:
        try:
            self.sock.sendall(frame)
            return True
        except OSError:
            self.close()
            return False

    def read(self) -> list[bytes]:
        """The whole frames that arrived (call when the selector says it is readable)."""
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.close()
            return []
        return self.frames.feed(data)

    def close(self) -> None:
        if self.open:
            self.open = False
            self.sock.close()


@dataclass
class Tally:
    frames: int = 0
    answers: int = 0
    requests: int = 0
    asked: Counter[str] = field(default_factory=Counter)  # what the node asked voters 2 and 3
    roles: Counter[str] = field(default_factory=Counter)  # the roles its status showed
    designed_stops: Counter[str] = field(default_factory=Counter)
    epochs_spent: int = 0  # times an edge-valued epoch brought it to LAST_EPOCH and it was started afresh
    snapshots_fetched: dict[int, int] = field(default_factory=dict)  # per incarnation of the node
    top_epoch: int = 0


class RealVoters:
    """Node 1 as a real process; voters 2 and 3 in this one."""

    def __init__(self, seed: int, workdir: Path, phase_frames: int = PHASE_FRAMES) -> None:
        self.rng = random.Random(f"real-voters:{seed}")
        self.phase_frames = phase_frames  # unruly voters for this many frames, then loyal ones, in turn
        self.workdir = workdir
        self.broker, self.controller, self.metrics = free_port(), free_port(), free_port()
        self.listeners = {peer: socket.create_server((HOST, 0)) for peer in PEERS}
        self.selector = selectors.DefaultSelector()
        for peer, server in self.listeners.items():
            server.setblocking(False)
            self.selector.register(server, selectors.EVENT_READ, ("accept", peer))
        self.inbound: dict[int, Link] = {}  # the node's connections to voters 2 and 3
        self.outbound: dict[int, Link] = {}  # voters 2 and 3's connections to its CONTROLLER listener
        self.pending: list[tuple[Link, int, object]] = []  # requests of the node not answered yet
        self.view = StatusView()
        self.voices = Voices(lambda: self.view)
        self.tally = Tally()
        self.recent: deque[tuple[str, bytes]] = deque(maxlen=LAST_FRAMES)  # what a finding shows
        self.log_path = workdir / "node.log"
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None

    # --- the node ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.incarnation += 1
        data = self.workdir / f"data-{self.incarnation}"
        props = self.workdir / f"node-{self.incarnation}.properties"
        voters = ",".join(
            [f"1@{HOST}:{self.controller}", *(f"{p}@{HOST}:{s.getsockname()[1]}" for p, s in self.listeners.items())]
        )
        lines = {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": f"BROKER://{HOST}:{self.broker},CONTROLLER://{HOST}:{self.controller}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "metadata.log.dir": str(data),
            "metrics.listener": f"{HOST}:{self.metrics}",
            **SETTINGS,
        }
        props.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness", "node", "start", "--config", str(props)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        wait_listening(self.proc, (self.broker, self.controller, self.metrics))
        self.view = StatusView()

    def check_alive(self, at: int) -> None:
        """Alive, or stopped as a KIP prescribes (counted; started again on a fresh data dir)."""
        assert self.proc is not None
        code = self.proc.poll()
        if code is None:
            return
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        last = lines[-1] if lines else ""
        stop = next((s for s in DESIGNED_STOPS if s in last), None)
        if code != 254 or stop is None:
            raise AssertionError(f"the node exited ({code}) after frame {at}: {last[:300]}")
        self.tally.designed_stops[stop] += 1
        self._drop_links()
        self.start()

    def probe(self) -> None:
        """Alive (or started again after a designed stop), and a fresh client served on each listener."""
        self.check_alive(self.tally.frames)
        for port in (self.broker, self.controller):
            try:
                probe_api_versions(port)
            except OSError as exc:
                assert self.proc is not None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=2)  # it may be stopping this moment, as designed or not
                if self.proc.poll() is None:
                    raise AssertionError(f"a fresh client on port {port} was not served: {exc}") from None
                self.check_alive(self.tally.frames)
                probe_api_versions(port)

    def refresh_view(self) -> None:
        conn = http.client.HTTPConnection(HOST, self.metrics, timeout=2)
        try:
            conn.request("GET", "/v1/status")
            answer = conn.getresponse()
            doc = json.loads(answer.read())
            if answer.status != 200:
                return  # not started yet: the last view stands
            self.view.update(doc)
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            return  # stopping or restarting: the last view stands
        finally:
            conn.close()
        self.tally.roles[str(doc.get("role"))] += 1
        self.tally.top_epoch = max(self.tally.top_epoch, self.view.epoch)
        self.tally.snapshots_fetched[self.incarnation] = int(doc.get("snapshots_fetched", 0))
        if self.view.epoch >= LAST_EPOCH and doc.get("role") != "leader":
            self.renew()

    def renew(self) -> None:
        """Stop the node with SIGTERM and start it afresh: its epoch reached LAST_EPOCH (an edge value a
        voter sent), where it refuses to stand, so it would never lead again and the rest of the run
        would test less. The stop must be clean, as at the end."""
        assert self.proc is not None
        if self.proc.poll() is not None:  # it stopped on its own meanwhile: by design (restarted) or not
            self.check_alive(self.tally.frames)
            return
        self._drop_links()
        code = _stop(self.proc)
        if code != 0:
            raise AssertionError(f"exit code {code} after SIGTERM (epoch {self.view.epoch}, to start it afresh)")
        self.tally.epochs_spent += 1
        self.start()

    # --- sockets ----------------------------------------------------------------------------------

    def pump(self, timeout: float) -> None:
        """Accept the node's connections to voters 2 and 3, and read what arrived, for `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            for key, _ in self.selector.select(max(0.0, deadline - time.monotonic())):
                what, peer = key.data
                if what == "accept":
                    self._accept(peer)
                elif what == "asks":
                    self._read_requests(key.fileobj, peer)
                else:
                    self._read_answers(key.fileobj, peer)
            if time.monotonic() >= deadline:
                return

    def _accept(self, peer: int) -> None:
        try:
            sock, _ = self.listeners[peer].accept()
        except BlockingIOError:
            return
        old = self.inbound.get(peer)
        if old is not None:
            self._drop(old)  # the node reconnects after it dropped the old one
        self.inbound[peer] = Link(sock, peer)
        self.selector.register(sock, selectors.EVENT_READ, ("asks", peer))

    def _read_requests(self, sock: object, peer: int) -> None:
        link = self.inbound.get(peer)
        if link is None or link.sock is not sock:
            return
        for raw in self._frames(link):
            try:
                frame = _CODEC.decode(raw)
            except FrameError as exc:
                raise AssertionError(f"node 1 sent voter {peer} a frame it cannot decode: {exc}") from None
            if frame.kind is not FrameKind.REQUEST:
                raise AssertionError(f"node 1 sent voter {peer} a {frame.kind.name} frame on its own connection")
            self.tally.asked[type(frame.message).__name__] += 1
            self.pending.append((link, frame.correlation_id, frame.message))
        if not link.open:
            self._drop(link)

    def _read_answers(self, sock: object, peer: int) -> None:
        link = self.outbound.get(peer)
        if link is None or link.sock is not sock:
            return
        self._frames(link)  # the node's answers to voters 2 and 3 are read and let go: the probes judge it
        if not link.open:
            self._drop(link)

    def _frames(self, link: Link) -> list[bytes]:
        try:
            return link.read()
        except FrameError as exc:  # a length prefix no frame of ours can have
            raise AssertionError(f"node 1 sent voter {link.peer} bytes that do not frame: {exc}") from None

    def _drop(self, link: Link) -> None:
        with contextlib.suppress(KeyError, ValueError):  # already unregistered
            self.selector.unregister(link.sock)
        link.close()
        for side in (self.inbound, self.outbound):
            if side.get(link.peer) is link:
                del side[link.peer]
        self.pending = [p for p in self.pending if p[0] is not link]

    def _drop_links(self) -> None:
        for link in [*self.inbound.values(), *self.outbound.values()]:
            self._drop(link)

    def outbound_link(self, peer: int) -> Link | None:
        link = self.outbound.get(peer)
        if link is not None:
            return link
        try:
            sock = socket.create_connection((HOST, self.controller), timeout=5)
        except OSError:
            return None
        link = self.outbound[peer] = Link(sock, peer)
        self.selector.register(sock, selectors.EVENT_READ, ("answers", peer))
        return link

    # --- one input --------------------------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if (self.tally.frames // self.phase_frames) % 2 == 1:
            self._loyal_step(roll, rng)
        elif roll < 0.15:
            self.pump(rng.choice((0.01, 0.05, 0.2)))
        elif roll < 0.5:
            peer = rng.choice(PEERS)
            self._request(
                peer, self.voices.damaged(self.voices.request(rng), rng, request=True, cid=rng.randint(1, 1000))
            )
        else:
            self._answer(rng, self.voices.answer, rate=1.0)

    def _loyal_step(self, roll: float, rng: random.Random) -> None:
        """Voters 2 and 3 let it lead (`Voices.loyal_fetch`, `loyal_answer`) and a client reads and writes
        on its CONTROLLER listener, so its real runtime leads under load: parked fetches, appends
        through the fsync thread, read barriers. Frames are damaged a third as often."""
        if roll < 0.1:
            self.pump(rng.choice((0.01, 0.05)))
            return
        if roll < 0.75:
            if roll < 0.45:
                peer, message = rng.choice(PEERS), self.voices.loyal_fetch(rng)
            else:
                peer, message = CLIENT, self.voices.read(rng) if roll < 0.6 else self.voices.write(rng)
            self._request(peer, self.voices.damaged(message, rng, request=True, cid=rng.randint(1, 1000), rate=0.3))
            return
        self._answer(rng, self.voices.loyal_answer, rate=0.3)

    def _request(self, peer: int, frame: bytes) -> None:
        """`frame` on the CONTROLLER listener, over `peer`'s own connection (voter 2 or 3, or a client)."""
        link = self.outbound_link(peer)
        who = f"voter {peer}" if peer in PEERS else "a client"
        self.recent.append((f"a request on its CONTROLLER listener from {who}'s connection", frame))
        if link is not None and link.send(frame):
            self.tally.frames += 1
            self.tally.requests += 1
        elif link is not None:
            self._drop(link)
        self.pump(0)

    def _answer(self, rng: random.Random, build: Callable[[int, object, random.Random], object], rate: float) -> None:
        """Answer one of the node's requests not answered yet, chosen at random (none: time passes)."""
        self.pump(0)
        if not self.pending:
            self.pump(rng.choice((0.01, 0.05, 0.1)))
            return
        link, correlation_id, asked = self.pending.pop(rng.randrange(len(self.pending)))
        message = build(link.peer, asked, rng)
        frame = self.voices.damaged(message, rng, request=False, cid=correlation_id, rate=rate)
        self.recent.append((f"an answer from voter {link.peer} to {clip(repr(asked), 300)}", frame))
        if link.send(frame):
            self.tally.frames += 1
            self.tally.answers += 1
        else:
            self._drop(link)

    def last_frames(self) -> list[str]:
        """The last frames sent, oldest first: what to look at when the node broke the contract."""
        out = [f"the last {len(self.recent)} frames sent, oldest first:"]
        for what, frame in self.recent:
            out += [f"  {what}", *(f"    {line}" for line in describe_frame(frame, _CODEC))]
        return out

    def close(self) -> int | None:
        """SIGTERM the node and wait for it; its exit code (None if it had to be killed)."""
        self._drop_links()
        for server in self.listeners.values():
            self.selector.unregister(server)
            server.close()
        self.selector.close()
        return None if self.proc is None else _stop(self.proc)


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM `proc` and wait for it; its exit code (None if it had to be killed)."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def fuzz_real_voters(seed: int, frames: int, time_limit_s: float | None = None) -> RealRun:
    """Send `frames` frames as voters 2 and 3 of a real node 1; the lines say what was sent, what the
    node reached and whether the contract held."""
    limit = time_limit_s if time_limit_s is not None else 60 + frames * 0.2
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kchaos-fuzz-voters-") as tmp:
        voters = RealVoters(seed, Path(tmp))
        code: int | None = None
        try:
            voters.start()
            deadline = time.monotonic() + limit
            steps = 0
            while voters.tally.frames < frames and time.monotonic() < deadline:
                steps += 1
                voters.step()
                if steps % STATUS_EVERY == 0:
                    voters.refresh_view()
                if steps % PROBE_EVERY == 0:
                    voters.probe()
            voters.probe()
        except AssertionError as exc:
            problems.append(str(exc))
        finally:
            code = voters.close()
        if code != 0 and not problems:
            problems.append(f"exit code {code} after SIGTERM")
        text = voters.log_path.read_text(errors="replace")
        if "Traceback" in text:
            problems.append("a traceback in the node's log")
        if "cannot encode" in text:  # a request or an answer it could not write (server.py, peers.py log why)
            problems.append(next(line for line in text.splitlines() if "cannot encode" in line)[:300])
    t = voters.tally
    roles = ", ".join(f"{role} {n}" for role, n in sorted(t.roles.items())) or "none seen"
    asked = ", ".join(f"{name.removesuffix('Request')} {n}" for name, n in sorted(t.asked.items())) or "nothing"
    stops = sum(t.designed_stops.values())
    spent = f"; started afresh at the last epoch {t.epochs_spent}" if t.epochs_spent else ""
    lines = [
        f"real voters (seed {seed}): {t.frames} frames to node 1 as voters 2 and 3, "
        f"{t.answers} answers to what it asked and {t.requests} requests",
        f"  it asked: {asked}",
        f"  its status showed: {roles}; epochs up to {t.top_epoch}; snapshots copied "
        f"{sum(t.snapshots_fetched.values())}; stops by design {stops}"
        + (f" ({', '.join(f'{s} {n}' for s, n in t.designed_stops.items())})" if stops else "")
        + spent,
    ]
    if t.frames < frames and not problems:
        problems.append(f"only {t.frames} of {frames} frames within {limit:.0f} s")
    held = "  contract held: alive or stopped by design, fresh clients served, clean stop"
    lines.append(held if not problems else f"  FINDING {problems}")
    if problems:
        lines += [f"    {line}" for line in voters.last_frames()]
    return RealRun(lines, problems)


__all__ = ["fuzz_real_voters"]
