"""Shared helpers for the netns backend tests: host snapshots, echo servers, reachability probes."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ECHO = str(HERE / "echo_server.py")
PROBE = str(HERE / "probe.py")
PORT = 7000
# A DROP makes a connect hang until its timeout; every probe of one batch runs at once, so a batch
# costs about one timeout whatever its size.
PROBE_TIMEOUT = 3.0

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, bridges, nft")


@dataclass(frozen=True)
class HostState:
    """What a netns run could leave behind, restricted to names that start with one prefix: the suite's
    other workers (pytest-xdist) and other jobs on this host make and remove namespaces meanwhile."""

    netns: frozenset[str]
    links: frozenset[str]
    ruleset: frozenset[str]
    marked_processes: frozenset[int]


def new_tag() -> str:
    """A NetnsBackend tag of the test's own: every namespace, link and rule it makes is named kcTAG..."""
    return secrets.token_hex(3)


def snapshot(prefix: str, marker: str) -> HostState:
    """Namespaces and links named `prefix`..., the lines of the host's nft ruleset that name it, and the
    processes whose command line holds `marker`."""
    netns = {line.split()[0] for line in _out(["ip", "netns", "list"]).splitlines() if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0] for line in _out(["ip", "-o", "link"]).splitlines()}
    return HostState(
        netns=frozenset(n for n in netns if n.startswith(prefix)),
        links=frozenset(n for n in links if n.startswith(prefix)),
        ruleset=frozenset(line.strip() for line in _out(["nft", "list", "ruleset"]).splitlines() if prefix in line),
        marked_processes=frozenset(marked_pids(marker)),
    )


def marked_pids(marker: str) -> list[int]:
    """Live processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def heal_if_left(run_dir: Path) -> None:
    """Cleanup for a test that failed half-way: undo whatever its ledger still lists (no-op otherwise)."""
    from harness.backends.ledger import LEDGER_NAME, heal

    if (run_dir / LEDGER_NAME).exists():
        heal(run_dir / LEDGER_NAME)


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def new_marker() -> str:
    return f"kchaos-test-{secrets.token_hex(4)}"


def echo_argv(address: str, marker: str) -> list[str]:
    return [sys.executable, ECHO, address, str(PORT), marker]


def root_reaches(address: str, timeout: float = PROBE_TIMEOUT) -> bool:
    try:
        with socket.create_connection((address, PORT), timeout=timeout) as s:
            s.sendall(b"hi\n")
            return s.recv(16) == b"hi\n"
    except OSError:
        return False


def wait_reachable(address: str, deadline_s: float = 15.0) -> None:
    """Wait for a freshly started server to listen (how long that takes depends on the machine)."""
    deadline = time.monotonic() + deadline_s
    while not root_reaches(address, timeout=1.0):
        if time.monotonic() > deadline:
            raise AssertionError(f"{address}:{PORT} never answered")
        time.sleep(0.05)


def reach_matrix(backend, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], bool]:
    """(src, dst) -> whether src's namespace completes an echo round trip to dst's server."""
    probe_args = [str(PORT), str(PROBE_TIMEOUT)]
    procs = {
        (src, dst): subprocess.Popen(
            ["ip", "netns", "exec", backend.hosts[src].netns, sys.executable, PROBE, backend.address(dst), *probe_args]
        )
        for src, dst in pairs
    }
    return {pair: p.wait(timeout=PROBE_TIMEOUT + 30) == 0 for pair, p in procs.items()}


def run_bridge(run_dir: Path) -> str:
    """The bridge a run created, read from its ledger (every netns run names its resources after it)."""
    for line in (Path(run_dir) / "ledger.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "link" and rec.get("type") == "bridge":
            return rec["name"]
    raise AssertionError(f"{run_dir}: the ledger names no bridge")


def run_leftovers(root: Path) -> set[str]:
    """Everything left on the host by the netns runs under `root` (blind to other runs at the same time)."""
    left: set[str] = set()
    for ledger in Path(root).glob("*/*/ledger.jsonl"):
        left |= leftovers(run_bridge(ledger.parent))
    return left


def leftovers(bridge: str) -> set[str]:
    """What is left on the host of the run whose bridge is `bridge`: its namespaces and links, and any
    root rule naming it. Unlike `snapshot`, blind to other runs on this machine at the same time."""
    netns = {line.split()[0] for line in _out(["ip", "netns", "list"]).splitlines() if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0] for line in _out(["ip", "-o", "link"]).splitlines()}
    rules = {line.strip() for line in _out(["nft", "list", "ruleset"]).splitlines() if bridge in line}
    return {n for n in netns | links if n.startswith(bridge)} | rules
