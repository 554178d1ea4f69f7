"""The netns backend's packet, clock, pause and disk faults, kept in one place per run.

`enable(kinds)` prepares, before any node starts, what a fault needs from a process's first instant:
the preload shims (built once, cached) and each node's control files under run_dir/nodes/NODE/.
`spawn_env` then adds the preload environment to every process the backend starts, only for the
kinds enabled, so a run without clock or disk faults runs its nodes exactly as before. Packet faults
and pauses need nothing in advance.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path

from harness.backends import clocks, disks, native
from harness.backends.clocks import ClockControl
from harness.backends.disks import DiskControl
from harness.backends.ledger import Ledger
from harness.backends.packets import PacketFaults
from harness.backends.pauses import Pauses
from harness.backends.shell import BackendError
from vocab.faults.kinds import FaultNotSupported

log = logging.getLogger("kchaos.backends")
DISK_KINDS = frozenset({"disk_stall", "disk_fail"})
CLOCK_FILE = "faketime"
DISK_CONTROL_FILE = "disk-fault"


class HostFaults:
    def __init__(self, run_dir: Path, ledger: Ledger) -> None:
        self.run_dir = Path(run_dir)
        self.ledger = ledger
        self.packets = PacketFaults(ledger)
        self.pauses = Pauses(ledger)
        self.clocks: dict[str, ClockControl] = {}
        self.disks: dict[str, DiskControl] = {}
        self.enabled: set[str] = set()  # the clock and disk kinds prepared by enable()
        self._preloaded: dict[str, frozenset[str]] = {}  # node -> what its current process was started with

    def enable(self, kinds: Collection[str], nodes: Collection[str]) -> None:
        try:
            if "clock" in kinds:
                clocks.preload_env(Path("/dev/null"))  # libfaketime is there and the shim builds
                for node in nodes:
                    self.clocks.setdefault(node, self._control(ClockControl, node, CLOCK_FILE))
            if DISK_KINDS & set(kinds):
                native.build("kchaos_disk")
                for node in nodes:
                    self.disks.setdefault(node, self._control(DiskControl, node, DISK_CONTROL_FILE))
        except native.NativeBuildError as exc:
            raise BackendError(str(exc)) from None
        self.enabled |= set(kinds) & (DISK_KINDS | {"clock"})

    def _control(self, cls: type, node: str, name: str) -> ClockControl | DiskControl:
        control = cls(self.ledger, node, self.run_dir / "nodes" / node / name)
        control.create()
        return control

    def spawn_env(self, node: str, env: Mapping[str, str] | None, data_dir: Path) -> Mapping[str, str] | None:
        """`env` (None: ours) plus what puts the node's clock and disk under our control; called just
        before every spawn, so it also knows which processes started without them."""
        if node not in self.disks and node not in self.clocks:
            self._preloaded[node] = frozenset()
            return env
        out = dict(env if env is not None else os.environ)
        preloads: list[str] = []
        kinds = set()
        if node in self.disks:
            extra = disks.preload_env(self.disks[node].path, data_dir)
            preloads.append(extra.pop("LD_PRELOAD"))
            out.update(extra)
            kinds |= DISK_KINDS & self.enabled
        if node in self.clocks:
            control = self.clocks[node]
            control.process_starting()
            extra = clocks.preload_env(control.path)
            preloads.append(extra.pop("LD_PRELOAD"))
            out.update(extra)
            kinds.add("clock")
        if preloads:
            out["LD_PRELOAD"] = ":".join([*preloads, *filter(None, [out.get("LD_PRELOAD")])])
        self._preloaded[node] = frozenset(kinds)
        return out

    def clock(self, node: str) -> ClockControl:
        self._require(node, "clock")
        return self.clocks[node]

    def disk(self, node: str, kind: str) -> DiskControl:
        self._require(node, kind)
        return self.disks[node]

    def _require(self, node: str, kind: str) -> None:
        if kind not in self.enabled:
            raise FaultNotSupported(f"{kind} faults were not enabled for this run (enable_faults before nodes start)")
        if node in self._preloaded and kind not in self._preloaded[node]:
            raise FaultNotSupported(f"node {node} was started before {kind} faults were enabled; restart it first")

    def stop(self) -> None:
        """Before teardown: stop the clock strobes, and the delay daemons while we still hold their
        process handles (so they are reaped, not left as zombies). The ledger undoes everything else,
        and whatever this could not do; so nothing here may stop the teardown."""
        for control in self.clocks.values():
            control.stop_strobe()
        try:
            self.packets.heal()
        except Exception as exc:  # the ledger's undo of each chain and daemon still runs
            log.warning("could not heal packet faults before teardown: %s", exc)
