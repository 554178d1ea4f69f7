"""SIGKILL a real `kchaos run` at a chosen moment, run `kchaos heal`, and compare host snapshots.

Used by the netns and docker leak tests and by benchmarks/bench_kill_leaks.py (the full 10+10). A moment
is something the run writes down: a ledger entry of a kind (written just before the resource or fault is
created), a `done` of one (teardown), or a nemesis invocation in history.jsonl. The harness is killed as
soon as the moment is seen, so it dies mid-way through creating or applying that very thing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.backends.procs import FAKETIME_SHM_NAMES

if TYPE_CHECKING:
    from tests.harness_ssh.sshd_hosts import SshHosts

REPO = Path(__file__).resolve().parents[2]
ALL_KINDS = "partition,packet,clock,kill,pause,disk_stall,disk_fail,lose_unsynced,corrupt"
SSH_KINDS = "partition,clock,kill,pause,disk_stall,disk_fail"  # what the ssh backend carries out
# Processes of the docker engine are ours when a run started the engine: heal must stop them again.
ENGINE_COMMS = {"dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "docker-init", "docker-proxy"}
DOCKER_LIB = Path("/var/lib/docker/containers")
MOMENT_TIMEOUT_S = 240.0
COUNTERS = re.compile(r"\[\d+:\d+\]")  # iptables-save's packet and byte counts
# Temp names the harness makes (resources.create_tmpdir, the image builder, the doctor, the ssh backend).
OUR_TEMP = re.compile(r"kchaos-[0-9a-f]{12}$|kchaos-(image|rootfs|doctor)|kcssh")


@dataclass(frozen=True)
class Moment:
    """When to SIGKILL the harness: as soon as `op` of a ledger entry of `kind` (or, with `history`, the
    nemesis invocation `f`) appears. `boost` weights one fault kind up so its moment comes soon."""

    name: str
    kind: str = ""
    op: str = "add"
    history: str = ""
    boost: str = ""

    def seen(self, run_dir: Path) -> bool:
        if self.history:
            return any(
                r.get("process") == "nemesis" and r.get("type") == "invoke" and r.get("f") == self.history
                for r in _records(run_dir / "history.jsonl")
            )
        records = _records(run_dir / "ledger.jsonl")
        ids = {r["id"] for r in records if r.get("op") == "add" and r.get("kind") == self.kind}
        return any(r.get("op") == self.op and r.get("id") in ids for r in records)


NETNS_MOMENTS = {
    m.name: m
    for m in (
        Moment("setup", kind="firewall_table"),
        Moment("partition", kind="firewall_block", boost="partition"),
        Moment("packet", kind="delay_daemon", boost="packet"),
        Moment("clock", kind="clock", boost="clock"),
        Moment("pause", kind="paused", boost="pause"),
        Moment("disk", kind="disk_fault", boost="disk_stall"),
        Moment("lose_unsynced", history="start-lose_unsynced", boost="lose_unsynced"),
        Moment("corrupt", history="start-corrupt", boost="corrupt"),
        Moment("kill", history="start-kill", boost="kill"),
        Moment("teardown", kind="netns", op="done"),
    )
}
DOCKER_MOMENTS = {
    "engine": Moment("engine", kind="dockerd"),  # starting the engine (when none runs before the test)
    **NETNS_MOMENTS,
    "setup": Moment("setup", kind="docker-netns"),
    "pause": Moment("pause", kind="docker-pause", boost="pause"),
    "teardown": Moment("teardown", kind="docker-netns", op="done"),
}
# Over SSH the faults are remote commands; a host's packet filter table goes last in its teardown.
SSH_MOMENTS = {
    m.name: m
    for m in (
        Moment("setup", kind="ssh_firewall"),
        Moment("partition", kind="ssh_block", boost="partition"),
        Moment("clock", kind="ssh_clock", boost="clock"),
        Moment("pause", kind="ssh_paused", boost="pause"),
        Moment("disk", kind="ssh_disk", boost="disk_stall"),
        Moment("disk_fail", kind="ssh_disk", boost="disk_fail"),
        Moment("kill", history="start-kill", boost="kill"),
        Moment("process", kind="ssh_process"),  # a node being started on its host
        Moment("processes", kind="ssh_process", op="update"),  # one node up, the others starting
        Moment("teardown", kind="ssh_firewall", op="done"),
    )
}
MOMENTS = {"netns": NETNS_MOMENTS, "docker": DOCKER_MOMENTS, "ssh": SSH_MOMENTS}


@dataclass(frozen=True)
class Snapshot:
    """What a run may leave on this host, each part as a set of lines or names."""

    netns: frozenset[str]
    links: frozenset[str]
    nft: frozenset[str]
    iptables: frozenset[str]
    mounts: frozenset[str]
    docker: frozenset[str]
    processes: frozenset[str]
    temp_files: frozenset[str]
    hosts: frozenset[str] = frozenset()  # ssh hosts: packet filters and mounts inside each (all ours)

    def new_since(self, before: Snapshot) -> dict[str, list[str]]:
        """part -> what is here that was not `before`."""
        out = {}
        for name in self.__dataclass_fields__:
            new = getattr(self, name) - getattr(before, name)
            if new:
                out[name] = sorted(new)
        return out


def snapshot(marks: tuple[str, ...], hosts: SshHosts | None = None) -> Snapshot:
    """The whole host's state, except processes: only those whose command line or environment holds one
    of `marks` (the results root, a token in the harness's environment), and the docker engine's; and
    with `hosts`, what an ssh run may leave on each of them (they are network namespaces of the test's)."""
    netns = {line.split()[0] for line in _out(["ip", "netns", "list"]).splitlines() if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0] for line in _out(["ip", "-o", "link"]).splitlines()}
    iptables = {COUNTERS.sub("", line) for line in _out(["iptables-save"]).splitlines()}
    with open("/proc/mounts", encoding="utf-8") as f:
        mounts = frozenset(f.read().splitlines())
    temp = {f"/tmp/{n}" for n in os.listdir("/tmp") if OUR_TEMP.match(n)}
    temp |= {f"/dev/shm/{n}" for n in os.listdir("/dev/shm")}
    return Snapshot(
        netns=frozenset(netns),
        links=frozenset(links),
        nft=frozenset(_out(["nft", "list", "ruleset"]).splitlines()),
        iptables=frozenset(line for line in iptables if not line.startswith("#")),
        mounts=mounts,
        docker=frozenset(_docker_objects()),
        processes=frozenset(_our_processes(marks)),
        temp_files=frozenset(temp),
        hosts=frozenset(_ssh_hosts_state(hosts)) if hosts is not None else frozenset(),
    )


def _ssh_hosts_state(hosts: SshHosts) -> set[str]:
    """Each ssh host's nft ruleset and iptables rules (in its namespace) and the mounts its sshd (and so
    every node it starts) sees, each line prefixed with the host's name."""
    found = set()
    for name in hosts.roots:
        for argv in (["nft", "list", "ruleset"], ["iptables-save"]):
            out = hosts.net.exec(name, argv).stdout
            found |= {f"{name} {argv[0]}: {COUNTERS.sub('', line)}" for line in out.splitlines()}
        proc = hosts.net.process(name)
        if proc is not None:
            with open(f"/proc/{proc.pid}/mounts", encoding="utf-8") as f:
                found |= {f"{name} mount: {line}" for line in f.read().splitlines()}
    return {line for line in found if not line.split(": ", 1)[1].startswith("#")}


def run_marks(run_dir: Path) -> tuple[str, ...]:
    """Strings that only things of this run carry: its tag (every namespace, link, container and
    network is named after it) and the libfaketime files of every PID it ledgered."""
    marks = []
    for rec in _records(run_dir / "ledger.jsonl"):
        if rec.get("kind") in ("link", "docker-network") and rec.get("type", "bridge") == "bridge":
            marks.append(rec["name"])
        if rec.get("kind") == "ssh_firewall":
            marks.append(rec["name"])
        if rec.get("op") == "update" and "pid" in rec:
            marks += [name.format(pid=rec["pid"]) for name in FAKETIME_SHM_NAMES]
    return tuple(marks)


def split_leaks(new: dict[str, list[str]], marks: tuple[str, ...]) -> tuple[dict, dict]:
    """(ours, foreign): what is new on the host and carries one of our marks (or is the docker engine's
    state, which only the docker runs here touch), and what is new but someone else's on this shared
    machine (other helpers may run namespaces at the same time)."""
    ours: dict[str, list[str]] = {}
    foreign: dict[str, list[str]] = {}
    for part, items in new.items():
        for item in items:
            mine = part in ("processes", "docker", "hosts") or "/docker/" in item or any(m in item for m in marks)
            (ours if mine else foreign).setdefault(part, []).append(item)
    return ours, foreign


def _docker_objects() -> set[str]:
    found = {f"container-dir {d.name}" for d in DOCKER_LIB.iterdir()} if DOCKER_LIB.is_dir() else set()
    sock = "/var/run/docker.sock"
    if not os.path.exists(sock):
        return found
    for what, argv in (
        ("container", ["docker", "ps", "-a", "--filter", "label=kchaos.run", "--format", "{{.Names}}"]),
        ("network", ["docker", "network", "ls", "--filter", "label=kchaos.run", "--format", "{{.Name}}"]),
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode == 0:
            found |= {f"{what} {n}" for n in proc.stdout.split()}
    return found


def _our_processes(marks: tuple[str, ...]) -> set[str]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            continue
        if comm in ENGINE_COMMS or any(m in cmdline or m in environ for m in marks):
            found.add(f"{entry.name} {comm}: {cmdline[:200]}")
    return found


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def _records(path: Path) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):  # a line still being written
            records.append(json.loads(line))
    return records


def run_argv(backend: str, results: Path, moment: Moment, seed: int, inventory: Path | None = None) -> list[str]:
    kinds = SSH_KINDS if backend == "ssh" else ALL_KINDS
    argv = [sys.executable, "-m", "harness", "run", "--backend", backend, "--nemesis", kinds]
    if inventory is not None:
        argv += ["--inventory", str(inventory)]
    argv += ["--nemesis-interval", "1s", "--nemesis-duration", "2s", "--time-limit", "40s", "--recovery", "2s"]
    argv += ["--seed", str(seed), "--results", str(results), "--no-progress"]
    if moment.boost:
        argv += ["--nemesis-option", f"{moment.boost}.weight=20"]
    if moment.name == "teardown":
        argv[argv.index("40s")] = "5s"  # teardown comes sooner
    return argv


def run_dir_of(results: Path) -> Path | None:
    ledgers = sorted(results.glob("*/*/ledger.jsonl"))
    return ledgers[-1].parent if ledgers else None


@dataclass
class KillResult:
    run_dir: Path | None
    seen: bool  # the moment came before the run ended
    heal_rc: int | None
    heal_out: str
    outstanding_before_heal: int
    leaks: dict = field(default_factory=dict)  # part -> what of ours heal left
    foreign: dict = field(default_factory=dict)  # part -> what changed meanwhile that is not ours


def kill_at(
    backend: str, results: Path, moment: Moment, seed: int, token: str, inventory: Path | None = None
) -> KillResult:
    """Start `kchaos run`, SIGKILL it when `moment` is seen, then run `kchaos heal` on its run dir."""
    from harness.backends.ledger import Ledger

    env = {**os.environ, "PYTHONPATH": str(REPO), "KCHAOS_LEAK_MARK": token}
    log = open(results.parent / f"{results.name}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        run_argv(backend, results, moment, seed, inventory), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    seen = False
    try:
        deadline = time.monotonic() + MOMENT_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            run_dir = run_dir_of(results)
            if run_dir is not None and moment.seen(run_dir):
                seen = True
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        log.close()
    run_dir = run_dir_of(results)
    if run_dir is None:
        return KillResult(None, seen, None, "", 0)
    outstanding = len(Ledger.load(run_dir / "ledger.jsonl").outstanding())
    heal = subprocess.run(
        [sys.executable, "-m", "harness", "heal", str(run_dir)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return KillResult(run_dir, seen, heal.returncode, heal.stdout + heal.stderr, outstanding)


def check_kill_heal(
    backend: str, tmp_path: Path, moment: Moment, seed: int, hosts: SshHosts | None = None
) -> KillResult:
    """The whole check: snapshot, run and SIGKILL at `moment`, heal, snapshot again; the two must be
    equal. Whatever fails, the run's ledger is healed again before returning (the cleanup of a failing
    test), so one failure does not leave resources for the next. `hosts`: the ssh backend's (its
    inventory is used, its namespaces' state compared, and the processes under its root are ours)."""
    import secrets

    from tests.harness_netns.conftest import heal_if_left

    token = f"kchaos-leak-{secrets.token_hex(4)}"
    results = tmp_path / "results"
    marks = (token, str(results), *((str(hosts.root),) if hosts is not None else ()))
    before = snapshot(marks, hosts)
    result = None
    try:
        inventory = hosts.inventory if hosts is not None else None
        result = kill_at(backend, results, moment, seed, token, inventory)
        assert result.run_dir is not None, f"the run wrote no ledger (log: {results.parent}/results.log)"
        assert result.seen, f"moment {moment.name} never came (log: {results.parent}/results.log)"
        assert result.outstanding_before_heal > 0, "the kill left nothing to heal: too late"
        assert result.heal_rc == 0, result.heal_out
        new = snapshot(marks, hosts).new_since(before)
        result.leaks, result.foreign = split_leaks(new, (*marks, *run_marks(result.run_dir)))
        assert result.leaks == {}, f"{moment.name}: {result.leaks}\n{result.heal_out}"
        return result
    finally:
        run_dir = run_dir_of(results)
        if run_dir is not None:
            heal_if_left(run_dir)
