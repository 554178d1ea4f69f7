"""The fuzzer against a real node process: mutated frames over loopback sockets.

A combined node (examples/combined.properties with free loopback ports and a temp data dir) is
started as `python -m harness node start`; frames go to both listeners, each on its own connection,
30 % of them in Kafka's own framing (`harness/fuzz/kafka.py`), while the checks of the contract run
between them: the process is alive, a fresh client on each listener still gets its ApiVersions
answer, and at the end the node stops cleanly (exit 0) after a SIGTERM with no traceback in its log,
nor a "cannot encode" (a client dropped because its answer could not be written). Plain blocking
sockets with timeouts: nothing here can hang.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.fuzz.inprocess import kafka_codecs
from harness.fuzz.kafka import kafka_request
from harness.fuzz.mutate import mutate_bytes
from harness.fuzz.runner import ROOT, mutated_frame
from node.process.process import CONTROLLER_LISTENER
from node.protocol.codec import BinaryCodec, FrameError
from node.protocol.registry import API_KEYS, BROKER_API_KEYS, CONTROLLER_API_KEYS, REQUESTS
from node.protocol.session import ApiVersionsRequest

HOST = "127.0.0.1"
PROBE_EVERY = 50
KAFKA_HINTS = {"names": ("t1", "no-such-topic"), "topic_ids": (), "brokers": (1, -1, 1000)}
_CODEC = BinaryCodec()


@dataclass(frozen=True)
class RealRun:
    """What a run against a real node process printed, and what broke the contract (empty: nothing)."""

    lines: list[str]
    findings: list[str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _properties(data: Path, broker: int, controller: int) -> str:
    return (
        "node.id=1\nprocess.roles=broker,controller\n"
        f"listeners=BROKER://{HOST}:{broker},CONTROLLER://{HOST}:{controller}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters=1@{HOST}:{controller}\nmetadata.log.dir={data}\n"
    )


def _read_frame(sock: socket.socket) -> bytes | None:
    """One whole answer, or None when the node closed the connection (its one-line refusal)."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (length,) = struct.unpack(">i", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(min(1 << 16, length - len(body)))
        if not chunk:
            return None
        body += chunk
    return head + body


def probe_api_versions(port: int) -> None:
    """A fresh client on `port` gets its ApiVersions answer (AssertionError if not; OSError if it cannot connect)."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(_CODEC.encode_request(7, ApiVersionsRequest()))
        answer = _read_frame(sock)
    if answer is None:
        raise AssertionError(f"a fresh client on port {port} got no ApiVersions answer")
    try:
        _CODEC.decode(answer)
    except FrameError as exc:
        raise AssertionError(f"a fresh client on port {port} got an answer it cannot decode: {exc}") from None


def fuzz_real_node(seed: int, frames: int) -> RealRun:
    """Send `frames` mutated frames; the lines say what was sent and whether the contract held."""
    rng = random.Random(seed)
    broker, controller = free_port(), free_port()
    classes = {
        controller: [c for c in REQUESTS if API_KEYS[c] in CONTROLLER_API_KEYS],
        broker: [c for c in REQUESTS if API_KEYS[c] in BROKER_API_KEYS],
    }
    framing = kafka_codecs(1, [(1, HOST, controller)])
    by_port = {controller: framing[CONTROLLER_LISTENER], broker: framing["BROKER"]}
    with tempfile.TemporaryDirectory(prefix="kchaos-fuzz-node-") as tmp:
        props = Path(tmp) / "server.properties"
        props.write_text(_properties(Path(tmp) / "data", broker, controller))
        log_path = Path(tmp) / "node.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness", "node", "start", "--config", str(props)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        answered = closed = 0
        problems: list[str] = []
        code: int | None = None
        try:
            wait_listening(proc, (broker, controller))
            for i in range(frames):
                port = rng.choice((broker, controller))
                roll = rng.random()
                if roll < 0.3:  # Kafka's own framing, as librdkafka or the Java AdminClient send it
                    frame, _ = kafka_request(by_port[port], rng, KAFKA_HINTS, i + 1)
                    frame = mutate_bytes(frame, rng) if rng.random() < 0.3 else frame
                elif roll < 0.95:
                    frame = mutated_frame(rng.choice(classes[port]), rng)
                else:
                    frame = rng.randbytes(20)
                with socket.create_connection((HOST, port), timeout=10) as sock:
                    sock.sendall(frame)
                    sock.shutdown(socket.SHUT_WR) if rng.random() < 0.3 else None
                    try:
                        got = _read_frame(sock)
                    except TimeoutError:
                        got = None  # a parked request (Fetch) or a partial frame: the node waits for more
                    except ConnectionError:
                        got = None
                answered += got is not None
                closed += got is None
                if i % PROBE_EVERY == 0:
                    if proc.poll() is not None:
                        raise AssertionError(f"the node exited ({proc.returncode}) after frame {i}")
                    probe_api_versions(broker)
                    probe_api_versions(controller)
            probe_api_versions(broker)
            probe_api_versions(controller)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        except (AssertionError, OSError, subprocess.TimeoutExpired) as exc:  # a finding, not a traceback
            problems.append(str(exc) or type(exc).__name__)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log_path.read_text(errors="replace")
    sent = answered + closed
    lines = [f"real node (seed {seed}): {sent} frames, {answered} answered, {closed} closed or unanswered"]
    if code != 0 and not problems:
        problems.append(f"exit code {code} after SIGTERM")
    if "Traceback" in text:
        problems.append("a traceback in the node's log")
    if "cannot encode" in text:  # the runtime dropped a client it owed an answer (server.py logs why)
        problems.append(next(line for line in text.splitlines() if "cannot encode" in line)[:300])
    held = "  contract held: alive, fresh clients served, clean stop"
    lines.append(held if not problems else f"  FINDING {problems}")
    return RealRun(lines, problems)


def wait_listening(proc: subprocess.Popen[bytes], ports: tuple[int, ...]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the node exited ({proc.returncode}) while starting")
        try:
            for port in ports:
                socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the node did not listen within 30 s")


__all__ = ["RealRun", "free_port", "fuzz_real_node", "probe_api_versions", "wait_listening"]
