"""The `ssh` backend: each node on a host of an inventory (harness/backends/inventory.py), reached over SSH.

Per host, everything lives under its `root` (a directory the backend touches only over SSH):
  venvs/HASH/          a venv holding this tree's wheel and crc32c (remote_deploy.py), reused while the
                       code is unchanged
  opt/NAME-HASH/       files a system under test needs there (Kafka's jars: `ship_files`), kept while
                       their content is unchanged
  bin/kchaos-ctl       start / signal / kill / stop by pid file (remote_ctl.sh)
  lib/                 the clock and disk preload shims, when those faults are enabled
  runs/TAG/nodes/NODE  the node's config, data dir, stdout/stderr logs, pid file, fault control files
The local run directory is mirrored: a local path under it in a start command (the node's config) is
uploaded to the same place under runs/TAG and the command rewritten to use it; the harness's Python
becomes the venv's. Faults (remote_faults.py): partition (nft/iptables on the host), kill -9 and
restart, pause (SIGSTOP/SIGCONT), clock (libfaketime), disk stall/fail (the kchaos_disk shim).
On hosts that are VMs of `kchaos vagrant up` (inventory `vm = DIR`, vm_faults.py): lose_unsynced is a
power loss of the whole VM, packet faults are netem in the guests, and `pause = "vm"` stops the VM.
Not here: packet faults and lose_unsynced on other hosts (NFQUEUE daemons, a FUSE mount), and corrupt
(the DB adapter edits a node's files locally).

Every resource is ledgered with its host's login before it is created; teardown(), Ctrl-C, SIGTERM and
`kchaos heal RUN_DIR` after a crash undo it over SSH. Per-host work (deploy, partitions, teardown) runs on
all hosts at once; each fault's wall time is kept and written to ssh-latency.json at teardown.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import platform
import secrets
import shlex
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.backends import native, vm_faults
from harness.backends.host_faults import DISK_KINDS
from harness.backends.inventory import Host, Inventory, load_inventory
from harness.backends.ledger import LEDGER_NAME, HealReport, Ledger
from harness.backends.netns import check_node_ids
from harness.backends.remote_deploy import CTL_SCRIPT, build_wheel, crc32c_wheel, install_script
from harness.backends.remote_faults import (
    GuestClock,
    RemoteClock,
    RemoteDisk,
    RemoteFirewall,
    forget_live,
    make_control_dir,
    register_live,
)
from harness.backends.remote_shell import Remote, each
from harness.backends.shell import BackendError
from harness.backends.signals import TeardownOnTermination, deferred_termination
from vocab.backend import Backend, check_grudge
from vocab.faults.kinds import BACKEND_FAULTS, ClockFault, DiskFault, FaultNotSupported, Grudge, Links, PacketFault

LATENCY_FILE = "ssh-latency.json"
SHIP_TIMEOUT_S = 600.0  # Kafka's jars (44 MB) into a TCG guest over its emulated NIC (~10 MB/s measured)
LIBFAKETIME_GLOBS = "/usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1"


@dataclass
class HostInfo:
    """What setup learned about a host."""

    root: str  # absolute
    python_tag: str  # "311"
    machine: str  # uname -m
    firewall: str  # nft | iptables | ""
    libfaketime: str  # "" when not installed


@dataclass
class RemoteSpec:
    argv: list[str]  # already rewritten for the host
    env: dict[str, str]


class SshBackend(TeardownOnTermination, Backend):
    """Nodes on inventory hosts over SSH; see the module docstring."""

    faults = BACKEND_FAULTS["ssh"]

    def __init__(
        self, run_dir: Path | str, node_ids: Sequence[str], inventory: Inventory | Path | str, *, tag: str | None = None
    ) -> None:
        check_node_ids(node_ids)
        self.run_dir = Path(run_dir).resolve()
        self._nodes = list(node_ids)
        self.inventory = inventory if isinstance(inventory, Inventory) else load_inventory(inventory)
        self.hosts: dict[str, Host] = self.inventory.for_nodes(self._nodes)
        self.tag = tag or secrets.token_hex(3)
        self.ledger: Ledger | None = None
        self.remotes: dict[str, Remote] = {}
        self.info: dict[str, HostInfo] = {}
        self.firewalls: dict[str, RemoteFirewall] = {}
        self.clocks: dict[str, RemoteClock | GuestClock] = {}
        self.disks: dict[str, RemoteDisk] = {}
        self.code_hash = ""
        self._shims: dict[str, str] = {}  # shim name -> its file name under ROOT/lib (enable_faults)
        self._specs: dict[str, RemoteSpec] = {}
        self._procs: dict[str, tuple[int, int, int]] = {}  # node -> (pid, starttime, ledger id)
        self._paused: dict[str, int] = {}  # node -> ledger id
        self._vm_paused: set[str] = set()  # nodes in _paused whose whole VM is stopped (pause = "vm")
        self._powered_off: set[str] = set()  # nodes whose VM lost its power (lose_unsynced), until restart
        self._grudge: dict[str, list[str]] = {}  # node -> the addresses it drops now (for a rebooted VM)
        self._netem: vm_faults.GuestNetem | None = None
        self._blocks: list[int] = []
        self._lock = threading.RLock()
        self.latencies: dict[str, list[float]] = {}  # fault action -> wall seconds of each call

    # -- Backend: shape ------------------------------------------------------------------------------

    @property
    def node_ids(self) -> Sequence[str]:
        return tuple(self._nodes)

    @property
    def ledger_path(self) -> Path:
        return self.run_dir / LEDGER_NAME

    def address(self, node: str) -> str:
        return self._host(node).address

    def node_dir(self, node: str) -> str:
        return f"{self._info(node).root}/runs/{self.tag}/nodes/{node}"

    def data_dir(self, node: str) -> str | None:
        return f"{self.node_dir(node)}/data"

    # -- setup and teardown -----------------------------------------------------------------------------

    def setup(self) -> None:
        if self.ledger is not None:
            return
        self.ledger = Ledger.create(self.ledger_path)
        try:
            control_dir = make_control_dir(self.ledger, self.tag)
            for node, host in self.hosts.items():
                self.remotes[node] = Remote(host, control_dir)
                register_live(self.remotes[node])
            wheel = build_wheel()
            self.code_hash = wheel.digest
            infos = each(self._nodes, self._probe)
            self.info = dict(zip(self._nodes, infos))
            each(self._nodes, lambda node: self._deploy(node, wheel.path))
            for node in self._nodes:
                tool = self.info[node].firewall
                if not tool:
                    raise BackendError(f"host {self._host(node).name}: neither nft nor iptables is installed")
                self.firewalls[node] = RemoteFirewall(self.remotes[node], tool, self.tag)
            each(self._nodes, lambda node: self.firewalls[node].install(self._ready()))
        except BaseException:
            with contextlib.suppress(Exception):
                self.teardown()
            raise

    def _probe(self, node: str) -> HostInfo:
        host, remote = self._host(node), self._remote(node)
        remote.connect()
        q = shlex.quote
        script = (
            f"mkdir -p {q(host.root)} && cd {q(host.root)} && pwd -P && uname -m && "
            f"{q(host.python)} -c 'import sys; print(\"%d%d\" % sys.version_info[:2])' && "
            "{ command -v nft >/dev/null 2>&1 && echo nft || echo -; } && "
            "{ iptables --version 2>/dev/null || echo -; } && "
            f"{{ ls {LIBFAKETIME_GLOBS} 2>/dev/null | head -n 1; echo; }}"
        )
        lines = remote.out(script).splitlines()
        if len(lines) < 5:
            raise BackendError(f"host {host.name}: unexpected answer to the probe: {lines}")
        root, machine, tag, nft, ipt = lines[:5]
        if int(tag) < 311:
            raise BackendError(
                f"host {host.name}: {host.python} is Python {tag[0]}.{tag[1:]}; nodes need 3.11 or later"
            )
        legacy = "legacy" in ipt
        if nft == "nft" and not legacy:
            tool = "nft"
        elif ipt != "-":
            tool = "iptables"
        else:
            tool = ""
        return HostInfo(root, tag, machine, tool, lines[5].strip() if len(lines) > 5 else "")

    def _deploy(self, node: str, wheel: Path) -> None:
        """Upload and install the code (skipped when the host already has this code hash), the control
        script, and the node's directory."""
        info, remote = self._info(node), self._remote(node)
        host = self._host(node)
        venv = f"{info.root}/venvs/{self.code_hash}"
        if remote.run(f"test -f {shlex.quote(venv)}/.complete", check=False).returncode != 0:
            crc = crc32c_wheel(info.python_tag, info.machine)
            for path in (wheel, crc):
                remote.put(path, f"{info.root}/wheels/{path.name}")
            remote.run(install_script(info.root, host.python, self.code_hash, [wheel.name, crc.name]), timeout=300)
        remote.put(CTL_SCRIPT.read_bytes(), self._ctl(node), mode="755")
        remote.run(f"mkdir -p {shlex.quote(self.node_dir(node))}/data")
        if host.vm:  # a power loss takes what the guest has not written back: not the code
            remote.run("sync")

    def teardown(self) -> HealReport:
        """Stop every node, remove every rule and fault on every host (in parallel), then whatever the
        ledger still lists; the ledger keeps the record."""
        with self._lock, deferred_termination():
            if self.ledger is None:
                return HealReport()
            for clock in self.clocks.values():
                clock.stop_strobe()
            by_host: dict[str, list[int]] = {}
            last: list[int] = []  # the shared connections' directory: after every remote undo
            for entry in self.ledger.outstanding():
                if "host" not in entry.fields:
                    last.append(entry.id)
                    continue
                by_host.setdefault(entry.fields["host"]["name"], []).append(entry.id)
            reports = each(list(by_host.values()), self._undo_ids)
            report = HealReport()
            for part in reports:
                report.removed += part.removed
                report.already_gone += part.already_gone
                report.failed += part.failed
            self._procs.clear()
            self._paused.clear()
            self._blocks.clear()
            self._write_latencies()
            for remote in self.remotes.values():
                forget_live(remote)
                remote.close()
            reports.append(self._undo_ids(last))
            report.removed += reports[-1].removed
            report.failed += reports[-1].failed
            if report.failed:
                raise BackendError(
                    f"teardown left {len(report.failed)} resource(s); run `kchaos heal {self.run_dir}`: "
                    + "; ".join(report.failed)
                )
            return report

    def _undo_ids(self, ids: list[int]) -> HealReport:
        report = HealReport()
        for rid in ids:  # newest first, as the ledger lists them
            self._ready().undo(rid, report)
        return report

    # -- processes -------------------------------------------------------------------------------------

    def start(
        self, node: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
    ) -> tuple[int, int]:
        """Start `argv` on the node's host (see the module docstring for how it is rewritten); `cwd` is
        always the node's directory there. Returns (pid, starttime)."""
        del cwd
        with self._lock:
            if self.is_alive(node):
                raise BackendError(f"node {node} already runs on host {self._host(node).name}")
            added = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
            self._specs[node] = RemoteSpec(self._remote_argv(node, argv), added)
            if self._host(node).vm:  # the node's config survives a power loss; its data need not
                self._remote(node).run("sync")
            return self._spawn(node)

    def _remote_argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """`argv` for the host: the harness's Python becomes the venv's, and a file of the run directory,
        as an argument or as the value of one (`-Dlog4j2.configurationFile=PATH`), is uploaded to the same
        place under runs/TAG and named there."""
        out = []
        for i, arg in enumerate(argv):
            if i == 0 and arg == sys.executable:
                out.append(f"{self._info(node).root}/venvs/{self.code_hash}/bin/python")
                continue
            uploaded = self._upload_run_file(node, arg)
            if uploaded is None and "=" in arg:
                key, _, value = arg.partition("=")
                target = self._upload_run_file(node, value)
                uploaded = None if target is None else f"{key}={target}"
            out.append(arg if uploaded is None else uploaded)
        return out

    def _upload_run_file(self, node: str, arg: str) -> str | None:
        """Where a file of the local run directory named by `arg` now is on the host (uploaded), or None
        when `arg` names no such file."""
        path = Path(arg)
        if not (path.is_absolute() and path.is_file() and path.resolve().is_relative_to(self.run_dir)):
            return None
        target = f"{self._info(node).root}/runs/{self.tag}/{path.resolve().relative_to(self.run_dir)}"
        self._remote(node).put(path, target)
        return target

    def exec(self, node: str, argv: Sequence[str], *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a short command on the node's host, in the node's directory, and wait for it (a tool a
        system under test runs before its nodes start: Kafka's storage format). `argv` is rewritten as
        `start`'s is. An ssh failure or the timeout raises BackendError; the command's own exit status is
        the caller's to read."""
        remote_argv = self._remote_argv(node, argv)
        script = f"cd {shlex.quote(self.node_dir(node))} && exec " + " ".join(shlex.quote(a) for a in remote_argv)
        done = self._remote(node).run(script, check=False, timeout=timeout)
        text = [part.decode("utf-8", "replace") for part in (done.stdout, done.stderr)]
        return subprocess.CompletedProcess(remote_argv, done.returncode, text[0], text[1])

    def ship_files(self, node: str, files: Sequence[Path], name: str) -> str:
        """These local files in one directory on the node's host, ROOT/opt/NAME-HASH (HASH: of their names
        and bytes), uploaded only when that directory is not complete there yet; returns its path. Like
        the venvs, it is a cache kept between runs, not a resource of the run."""
        digest = _files_digest(tuple(Path(f) for f in files))
        target = f"{self._info(node).root}/opt/{name}-{digest}"
        remote, q = self._remote(node), shlex.quote(target)
        if remote.run(f"test -f {q}/.complete", check=False).returncode == 0:
            return target
        staging = f"{target}.{secrets.token_hex(3)}"
        script = (
            f"set -e; mkdir -p {shlex.quote(staging)}; tar -xf - -C {shlex.quote(staging)}; "
            f"touch {shlex.quote(staging)}/.complete; "
            # two nodes on one host may race: the first complete copy stays, the other is dropped
            f"if [ -f {q}/.complete ]; then rm -rf {shlex.quote(staging)}; "
            f"else rm -rf {q}; mv -T {shlex.quote(staging)} {q}; fi"
        )
        remote.run(script, input_bytes=_tar_of(files), timeout=SHIP_TIMEOUT_S)
        return target

    def _spawn(self, node: str) -> tuple[int, int]:
        spec = self._specs[node]
        ledger, remote = self._ready(), self._remote(node)
        env = {**spec.env, **self._fault_env(node)}
        node_dir = self.node_dir(node)
        fields = {"node": node, "host": self._host(node).to_dict(), "ctl": self._ctl(node), "dir": node_dir}
        rid = ledger.record("ssh_process", **fields, argv=spec.argv)
        command = [self._ctl(node), "start", node_dir, "env", *(f"{k}={v}" for k, v in sorted(env.items()))]
        command += spec.argv
        try:
            out = remote.out(" ".join(shlex.quote(c) for c in command)).split()
            pid, starttime = int(out[0]), int(out[1])
        except (BackendError, IndexError, ValueError) as exc:
            with contextlib.suppress(Exception):
                ledger.undo(rid)
            raise BackendError(f"node {node}: cannot start on host {self._host(node).name}: {exc}") from None
        ledger.update(rid, pid=pid, starttime=starttime)
        self._procs[node] = (pid, starttime, rid)
        return pid, starttime

    def is_alive(self, node: str) -> bool:
        self._host(node)
        if node not in self._procs:
            return False
        if node in self._vm_paused:
            return True  # its VM is stopped: nothing answers, and nothing died
        return self._remote(node).run(f"{self._ctl(node)} alive {self.node_dir(node)}", check=False).returncode == 0

    def kill(self, node: str) -> None:
        self._host(node)
        with self._lock:
            proc = self._procs.pop(node, None)
            if proc is None:
                return  # not timed: a no-op is no fault
            if node in self._vm_paused:  # a stopped VM runs no ssh: let it run, then kill the process
                self.resume(node)
            with self._timed("kill"):
                self._remote(node).run(f"{self._ctl(node)} kill {self.node_dir(node)}")
            self._drop_pause(node)
            self._ready().mark_done(proc[2])

    def restart(self, node: str) -> None:
        self._host(node)
        with self._lock, self._timed("restart"):
            if node not in self._specs:
                raise BackendError(f"node {node} was never started, so there is no command to restart")
            if node in self._powered_off:
                self._power_on(node)
            if self.is_alive(node):
                return
            old = self._procs.pop(node, None)
            if old is not None:  # it died by itself: its ledger entry is over
                self._drop_pause(node)
                self._ready().mark_done(old[2])
            self._spawn(node)

    def stop_nodes(self, nodes: Sequence[str], timeout_s: float) -> list[str]:
        """SIGTERM the nodes (all at once), wait up to timeout_s each, kill -9 what is left; returns the
        nodes that had to be killed."""

        def stop(node: str) -> bool:
            proc = self._procs.get(node)
            if proc is None:
                return False
            code = self._remote(node).run(
                f"{self._ctl(node)} stop {self.node_dir(node)} {max(1, int(timeout_s))}",
                check=False,
                timeout=timeout_s + 30,
            )
            with self._lock:
                self._procs.pop(node, None)
                self._drop_pause(node)
                self._ready().mark_done(proc[2])
            return code.returncode == 5

        killed = each(list(nodes), stop)
        return [n for n, k in zip(nodes, killed) if k]

    def collect_node(self, node: str, target: Path) -> list[str]:
        """Fetch the node's stdout/stderr logs and a listing of its data dir into `target`."""
        remote, node_dir = self._remote(node), self.node_dir(node)
        target.mkdir(parents=True, exist_ok=True)
        warnings = []
        for name in ("stdout.log", "stderr.log"):
            data = remote.get(f"{node_dir}/{name}", check=False)
            if data is None:
                warnings.append(f"{node}: no {name} on host {self._host(node).name}")
                continue
            (target / name).write_bytes(data)
        listing = remote.out(f"cd {shlex.quote(node_dir)}/data 2>/dev/null && find . -mindepth 1 | sort", check=False)
        names = sorted(line.removeprefix("./") for line in listing.splitlines() if line.strip())
        (target / "data-dir.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
        return warnings

    def log_tail(self, node: str, name: str, size: int) -> str | None:
        """The last `size` bytes of the node's `name` log (stdout.log, stderr.log) on its host, while the
        run goes on (a member that exited at start-up: its last words); None when there is none."""
        path = f"{self.node_dir(node)}/{name}"
        try:
            done = self._remote(node).run(f"tail -c {int(size)} {shlex.quote(path)}", check=False)
        except BackendError:  # the host does not answer: no last words, the caller's error stands
            return None
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None

    def collect_all(self, target_root: Path) -> list[str]:
        """collect_node for every node, all hosts at once."""
        parts = each(self._nodes, lambda n: self.collect_node(n, Path(target_root) / "nodes" / n))
        return [w for part in parts for w in part]

    # -- partitions ----------------------------------------------------------------------------------------

    def partition(self, grudge: Grudge) -> None:
        check_grudge(grudge, self._nodes)
        ledger = self._ready()
        with self._lock, self._timed("partition"):
            old, self._blocks = self._blocks, []
            for node in self._nodes:
                sources = sorted(self.address(p) for p in grudge.get(node, ()))
                if sources:
                    self._blocks.append(
                        ledger.record(
                            "ssh_block",
                            host=self._host(node).to_dict(),
                            node=node,
                            sources=sources,
                            tool=self.firewalls[node].tool,
                            tag=self.tag,
                        )
                    )
            self._grudge = {n: [self.address(p) for p in grudge.get(n, ())] for n in self._nodes}
            each(self._reachable(), lambda n: self.firewalls[n].block(self._grudge[n]))
            for rid in old:
                ledger.mark_done(rid)

    def heal_network(self) -> None:
        ledger = self._ready()
        with self._lock, self._timed("heal_network"):
            each(self._reachable(), lambda n: self.firewalls[n].block(()))
            self._grudge = {}
            for rid in self._blocks:
                ledger.mark_done(rid)
            self._blocks = []

    def blocked_sources(self, node: str) -> set[str]:
        """Addresses the node's host drops right now (read back from its packet filter)."""
        return self.firewalls[node].blocked()

    # -- pause -----------------------------------------------------------------------------------------------

    def pause(self, node: str) -> None:
        self._host(node)
        with self._lock, self._timed("pause"):
            proc = self._procs.get(node)
            if proc is None or node in self._paused:
                return
            if self._host(node).pause == "vm":
                vm_rid = vm_faults.pause(self._ready(), self._host(node))
                if vm_rid is not None:
                    self._paused[node] = vm_rid
                    self._vm_paused.add(node)
                return
            rid = self._ready().record(
                "ssh_paused",
                node=node,
                host=self._host(node).to_dict(),
                ctl=self._ctl(node),
                pid=proc[0],
                starttime=proc[1],
            )
            self._paused[node] = rid
            code = self._remote(node).run(f"{self._ctl(node)} signal {self.node_dir(node)} STOP", check=False)
            if code.returncode == 3:  # it died in the meantime: nothing to pause
                self._drop_pause(node)

    def resume(self, node: str) -> None:
        self._host(node)
        with self._lock, self._timed("resume"):
            if node not in self._paused:
                return
            if node in self._vm_paused:
                self._vm_paused.discard(node)
                vm_faults.resume(self._ready(), self._paused.pop(node))
                self._catch_up(node)
                return
            self._remote(node).run(f"{self._ctl(node)} signal {self.node_dir(node)} CONT", check=False)
            self._ready().mark_done(self._paused.pop(node))

    def is_paused(self, node: str) -> bool:
        return node in self._paused and self.is_alive(node)

    def _drop_pause(self, node: str) -> None:
        self._vm_paused.discard(node)
        rid = self._paused.pop(node, None)
        if rid is not None:
            self._ready().mark_done(rid)

    # -- whole VMs (vm_faults.py) -------------------------------------------------------------------------

    def lose_unsynced(self, node: str) -> None:
        """Power loss of the node's VM: the guest's unsynced writes are gone; `restart` boots it."""
        host = self._host(node)
        if not host.vm:
            raise FaultNotSupported(
                f"lose_unsynced over ssh is a VM's power loss: host {host.name} is not a VM of `kchaos vagrant up` "
                "(inventory vm = DIR)"
            )
        with self._lock, self._timed("power_off"):
            if node in self._powered_off:
                return
            vm_faults.power_off(self._ready(), host)
            self._powered_off.add(node)
            self._remote(node).close()  # its shared connection went down with the VM
            self._drop_pause(node)
            proc = self._procs.pop(node, None)
            if proc is not None:  # the process died with its VM
                self._ready().mark_done(proc[2])

    def _answers(self, node: str) -> None:
        """A fault that needs the node's host now: refused while its VM is stopped or off."""
        if node not in self._reachable():
            raise FaultNotSupported(f"host {self._host(node).name}: its VM is paused or powered off")

    def _reachable(self) -> list[str]:
        """The nodes whose host answers ssh: not a stopped VM (its network faults wait for its resume)."""
        return [n for n in self._nodes if n not in self._vm_paused and n not in self._powered_off]

    def _catch_up(self, node: str) -> None:
        """A resumed VM gets the partition and packet fault set while it was stopped."""
        self.firewalls[node].block(self._grudge.get(node, ()))
        if self._netem is not None:
            self._netem.refresh(node)

    def _power_on(self, node: str) -> None:
        """Boot the VM again, then what its reboot emptied: this run's packet filter (with the current
        grudge) and a faulted clock; netem comes back at the next packet fault."""
        ledger, host = self._ready(), self._host(node)
        with self._timed("power_on"):
            vm_faults.power_on(ledger, host)
            self._remote(node).close()
            self._powered_off.discard(node)
            self.firewalls[node].install(ledger)
            self._catch_up(node)
            clock = self.clocks.get(node)
            if isinstance(clock, GuestClock):
                clock.rebooted()

    def packet(self, links: Links, fault: PacketFault) -> None:
        if links is None:
            links = {n: frozenset(p for p in self._nodes if p != n) for n in self._nodes}
        check_grudge(links, self._nodes)
        plain = sorted(self._host(n).name for n in self._nodes if not self._host(n).vm)
        if plain:
            raise FaultNotSupported(
                f"packet faults over ssh use netem in VMs of `kchaos vagrant up`; not a VM: {', '.join(plain)}"
            )
        with self._lock, self._timed("packet"):
            if self._netem is None:
                addresses = {n: self.address(n) for n in self._nodes}
                self._netem = vm_faults.GuestNetem(self._ready(), self.remotes, addresses)
            self._netem.apply(links, fault, self._reachable())

    def heal_packet(self) -> None:
        with self._lock:
            if self._netem is not None:
                with self._timed("heal_packet"):
                    self._netem.heal(self._reachable())

    def packet_rules(self, node: str) -> str:
        """The qdiscs on the node's guest, as `tc qdisc show` lists them."""
        return self._netem.active(node) if self._netem is not None else ""

    # -- clock and disk ----------------------------------------------------------------------------------

    def enable_faults(self, kinds: Collection[str]) -> None:
        """Before the nodes start: the shims and control files the clock and disk faults need."""
        wanted = set(kinds) & ({"clock"} | DISK_KINDS)
        if not wanted:
            return
        for node in self._nodes:
            info = self._info(node)
            if info.machine != platform.machine():
                raise BackendError(
                    f"host {self._host(node).name} is {info.machine}: the preload shims are built here for "
                    f"{platform.machine()}; run without clock and disk faults"
                )
            if "clock" in wanted and not info.libfaketime and self._host(node).clock != "guest":
                raise BackendError(f"host {self._host(node).name}: libfaketime not found (apt-get install faketime)")
        faked = "clock" in wanted and any(self._host(n).clock != "guest" for n in self._nodes)
        shims = (["kchaos_clock"] if faked else []) + (["kchaos_disk"] if wanted & DISK_KINDS else [])
        try:
            built = {name: native.build(name) for name in shims}
        except native.NativeBuildError as exc:
            raise BackendError(str(exc)) from None

        def prepare(node: str) -> None:
            remote = self._remote(node)
            for path in built.values():
                lib = f"{self._info(node).root}/lib/{path.name}"
                if remote.run(f"test -f {shlex.quote(lib)}", check=False).returncode != 0:
                    remote.put(path, lib, mode="755")
            if "clock" in wanted and self._host(node).clock == "guest":
                self.clocks[node] = GuestClock(self._ready(), node, remote)
                self.clocks[node].create()
            elif "clock" in wanted:
                self.clocks[node] = RemoteClock(self._ready(), node, remote, f"{self.node_dir(node)}/faketime")
                self.clocks[node].create()
            if wanted & DISK_KINDS:
                self.disks[node] = RemoteDisk(self._ready(), node, remote, f"{self.node_dir(node)}/disk-fault")
                self.disks[node].create()

        each(self._nodes, prepare)
        self._shims = {name: path.name for name, path in built.items()}

    def _fault_env(self, node: str) -> dict[str, str]:
        """The preload environment for the node's clock and disk, when enabled."""
        shims = self._shims
        lib = f"{self._info(node).root}/lib"
        env: dict[str, str] = {}
        preload = []
        if node in self.disks:
            preload.append(f"{lib}/{shims['kchaos_disk']}")
            env.update(KCHAOS_DISK_CONTROL=str(self.disks[node].path), KCHAOS_DISK_DIR=str(self.data_dir(node)))
        if node in self.clocks and isinstance(self.clocks[node], GuestClock):
            self.clocks[node].process_starting()
        elif node in self.clocks:
            self.clocks[node].process_starting()
            preload += [f"{lib}/{shims['kchaos_clock']}", self._info(node).libfaketime]
            env.update(
                FAKETIME_TIMESTAMP_FILE=str(self.clocks[node].path),
                FAKETIME_NO_CACHE="1",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
                NO_FAKE_STAT="1",
            )
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)
        return env

    def clock(self, node: str, fault: ClockFault) -> None:
        self._host(node)
        if node not in self.clocks:
            raise FaultNotSupported("clock faults were not enabled for this run (enable_faults before nodes start)")
        self._answers(node)
        with self._timed("clock"):
            self.clocks[node].apply(fault)

    def clock_reset(self, node: str) -> None:
        self._host(node)
        if node in self.clocks:
            with self._timed("clock"):
                self.clocks[node].apply(ClockFault("reset"))

    def disk(self, node: str, fault: DiskFault) -> None:
        self._host(node)
        if node not in self.disks:
            raise FaultNotSupported(f"disk_{fault.kind} faults were not enabled for this run")
        self._answers(node)
        with self._timed("disk"):
            self.disks[node].apply(fault)

    def disk_heal(self, node: str) -> None:
        self._host(node)
        if node in self.disks:
            with self._timed("disk"):
                self.disks[node].heal()

    # -- latency figures ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _timed(self, action: str):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            yield
        finally:
            self.latencies.setdefault(action, []).append(time.perf_counter() - started)

    def latency_summary(self) -> dict[str, dict[str, float]]:
        """Per fault action: count, median and max wall milliseconds."""
        out = {}
        for action, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            out[action] = {
                "count": len(ordered),
                "median_ms": round(ordered[len(ordered) // 2] * 1000, 2),
                "max_ms": round(ordered[-1] * 1000, 2),
            }
        return out

    def _write_latencies(self) -> None:
        doc = {
            "faults": self.latency_summary(),
            "commands": {
                self._host(n).name: {"count": r.commands, "seconds": round(r.seconds, 3)}
                for n, r in self.remotes.items()
            },
        }
        with contextlib.suppress(OSError):
            (self.run_dir / LATENCY_FILE).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    # -- helpers --------------------------------------------------------------------------------------------

    def _ready(self) -> Ledger:
        if self.ledger is None:
            raise BackendError("ssh backend is not set up (call setup() first)")
        return self.ledger

    def _host(self, node: str) -> Host:
        try:
            return self.hosts[node]
        except KeyError:
            raise BackendError(f"unknown node '{node}' (nodes: {', '.join(self._nodes)})") from None

    def _remote(self, node: str) -> Remote:
        return self.remotes[node]

    def _info(self, node: str) -> HostInfo:
        try:
            return self.info[node]
        except KeyError:
            raise BackendError("ssh backend is not set up (call setup() first)") from None

    def _ctl(self, node: str) -> str:
        return f"{self._info(node).root}/bin/kchaos-ctl"


def _files_digest(files: tuple[Path, ...]) -> str:
    """The first 16 hex digits of a sha256 over the files' names and bytes, in the order given (worked
    out once per process while no file's size or modification time changes)."""
    return _digest_of(tuple((path, *_stamp(path)) for path in files))


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _digest_of(stamped: tuple[tuple[Path, int, int], ...]) -> str:
    h = hashlib.sha256()
    for path, _, _ in stamped:
        h.update(path.name.encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _tar_of(files: Sequence[Path]) -> bytes:
    """An uncompressed tar of the files, each under its own name (jars are compressed already)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in files:
            tar.add(path, arcname=Path(path).name, recursive=False)
    return buffer.getvalue()
