"""Random fault schedules for `kchaos sim`: inject a fault every so often, heal it after a random duration.

The fault vocabulary is the harness's (`vocab.faults.kinds.FAULT_KINDS`), with the modes,
targets and parameters of the catalogue (`vocab.faults.catalogue`, `vocab.faults.partitions`,
`vocab.faults.targets`) applied to the simulator's integer node ids: voters are the controllers,
observers the brokers. Every choice is drawn from the simulation's RNG, so a seed fixes the whole
fault timeline. At most one fault of each kind is active at a time, which keeps heals exact (a heal
undoes the one fault it belongs to) while different kinds overlap. The targeted faults of
`node.sim.buggify` run beside them (for the kinds enabled) unless `buggify` is off.

Storage faults (`disk_stall`, `disk_fail`, `lose_unsynced`, `corrupt`) act on each node's simulated
filesystem (`Simulation.set_disk_fault` / `clear_disk_fault` / `kill(lose_unsynced=True)` /
`corrupt_storage` / `uncorrupt_storage`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node.runtime.corruption import NothingToCorrupt
from node.sim.buggify import Buggify, BuggifyConfig
from node.sim.world import Simulation
from vocab.faults import partitions
from vocab.faults.kinds import FAULT_KINDS, ClockFault, DiskFault, RedeliverFault
from vocab.faults.options import KindOptions, kind_options
from vocab.faults.targets import ClusterView, NoTarget, choose

DEPRECATED_ALIASES = {"disk": "disk_stall"}  # the simulator's old name for a flush stall


@dataclass(frozen=True, slots=True)
class FaultConfig:
    kinds: tuple[str, ...] = ()
    interval_ms: tuple[int, int] = (1000, 6000)  # between two injections
    duration_ms: tuple[int, int] = (500, 8000)  # how long a fault lasts before its heal
    # per kind, as `[nemesis_options.<kind>]`: weight, modes, targets, parameters
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    buggify: bool = True  # the targeted faults of node.sim.buggify
    buggify_config: BuggifyConfig | None = None

    def __post_init__(self) -> None:
        kinds = tuple(DEPRECATED_ALIASES.get(k, k) for k in self.kinds)
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; choose from {', '.join(FAULT_KINDS)}")
        object.__setattr__(self, "kinds", tuple(dict.fromkeys(kinds)))
        for kind in self.options:
            if kind not in self.kinds:
                raise ValueError(f"options for {kind!r}, which is not among the fault kinds {list(self.kinds)}")


class FaultInjector:
    def __init__(self, sim: Simulation, config: FaultConfig) -> None:
        self.sim = sim
        self.config = config
        self.options: dict[str, KindOptions] = {k: kind_options(k, options=config.options.get(k)) for k in config.kinds}
        self.active: dict[str, int] = {}  # kind -> serial of the active fault
        self.held: dict[int, str] = {}  # node -> the kind that took it down
        self._serial = 0
        self.running = False
        self.buggify: Buggify | None = None
        if config.buggify and config.kinds:
            self.buggify = Buggify(sim, config.kinds, config.buggify_config)

    def start(self) -> None:
        if self.config.kinds:
            self.running = True
            self._schedule_next()
        if self.buggify is not None:
            self.buggify.enable()

    def stop(self) -> None:
        """No more injections; the caller heals (`Simulation.heal_all`)."""
        self.running = False
        self.active.clear()
        self.held.clear()
        if self.buggify is not None:
            self.buggify.disable()

    def _schedule_next(self) -> None:
        lo, hi = self.config.interval_ms
        self.sim.queue.after(self.sim.rng.randint(lo, hi), self._inject)

    def _inject(self) -> None:
        if not self.running:
            return
        rng = self.sim.rng
        kinds = [k for k in self.config.kinds if self.options[k].weight > 0]
        if kinds:
            kind = _weighted(rng, kinds, [self.options[k].weight for k in kinds])
            if kind not in self.active:
                opts = self.options[kind]
                try:
                    undo = getattr(self, f"_{kind}")(rng.choice(opts.modes), opts, rng)
                except NoTarget:
                    undo = None
                if undo is not None:
                    self._serial += 1
                    self.active[kind] = self._serial
                    lo, hi = self.config.duration_ms
                    self.sim.queue.after(rng.randint(lo, hi), self._heal, kind, self._serial, undo)
        self._schedule_next()

    def _heal(self, kind: str, serial: int, undo: tuple) -> None:
        if self.active.get(kind) != serial:
            return  # the final heal_all got there first
        del self.active[kind]
        fn, *args = undo
        fn(*args)

    # --- helpers ---
    def _view(self) -> ClusterView:
        sim = self.sim
        return ClusterView(tuple(sim.nodes), sim.config.voter_ids, sim.config.observer_ids, sim.leader())

    def _targets(self, mode: str, rng: random.Random, eligible: list[int] | None = None) -> list[int]:
        return choose(mode, self._view(), rng, eligible)

    def _up(self) -> list[int]:
        return [n for n in self.sim.live_nodes() if n not in self.held]

    def _restart(self, kind: str, nodes: list[int]) -> None:
        for n in nodes:
            if self.held.get(n) == kind:
                del self.held[n]
                self.sim.restart(n)

    # --- the faults; each returns its undo as (callable, *args), or None when it did nothing ---
    def _partition(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        partition = partitions.build(mode, self._view(), rng)
        if not any(partition.grudge.values()):
            return None
        self.sim.partition(partition.grudge)
        return (self.sim.heal,)

    def _packet(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        params = opts.draw_params(mode, rng)
        jitter = min(params["jitter_ms"], params["delay_ms"])
        self.sim.packet(self._links(mode, rng), params["loss"], params["delay_ms"], jitter)
        return (self.sim.heal_packet,)

    def _redeliver(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        target_mode = rng.choice(opts.targets)
        params = opts.draw_params(mode, rng)
        lag = params["copy_delay_ms"] if mode == "duplicate" else params["late_ms"]
        self.sim.redeliver(self._links(target_mode, rng), RedeliverFault(mode, params["probability"], lag))
        return (self.sim.heal_redeliver,)

    def _links(self, mode: str, rng: random.Random) -> dict[int, list[int]] | None:
        """The links a network fault in target mode `mode` affects: those to and from its targets
        (None for `all`: every link between nodes)."""
        if mode == "all":
            return None
        hit = set(self._targets(mode, rng))
        nodes = list(self.sim.nodes)
        return {n: [m for m in nodes if m != n and (n in hit or m in hit)] for n in nodes}

    def _clock(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        targets = self._targets(rng.choice(opts.targets), rng)
        params = opts.draw_params(mode, rng)
        fault = ClockFault(mode, **params)
        for n in targets:
            if mode == "bump":
                self.sim.skew(n, jump_ms=fault.delta_ms)
            elif mode == "rate":
                self.sim.skew(n, rate=fault.rate)
            elif mode == "strobe":
                self.sim.strobe_clock(n, fault.delta_ms, fault.period_ms, fault.duration_ms)
            else:
                self.sim.reset_clock(n)
        return (self._reset_clocks, targets)

    def _reset_clocks(self, nodes: list[int]) -> None:
        for n in nodes:
            self.sim.reset_clock(n)

    def _kill(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        return self._crash("kill", mode, rng)

    def _lose_unsynced(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        return self._crash("lose_unsynced", mode, rng)

    def _crash(self, kind: str, mode: str, rng: random.Random) -> tuple:
        """kill -9 (or a power loss) of the targets, restarted by the undo."""
        targets = self._targets(mode, rng, self._up())
        for n in targets:
            self.sim.kill(n, lose_unsynced=kind == "lose_unsynced")
        self.held.update({n: kind for n in targets})
        return (self._restart, kind, targets)

    def _pause(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        targets = self._targets(mode, rng, [n for n in self._up() if not self.sim.nodes[n].paused])
        for n in targets:
            self.sim.pause(n)
        return (self._resume, targets)

    def _resume(self, nodes: list[int]) -> None:
        for n in nodes:
            self.sim.resume(n)

    def _disk_stall(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        targets = self._targets(mode, rng)
        params = opts.draw_params(mode, rng)
        fault = DiskFault("stall", tuple(params["ops"].split("+")), delay_ms=params["delay_ms"])
        for n in targets:
            self.sim.set_disk_fault(n, fault)
        return (self._clear_disks, "disk_stall", targets)

    def _disk_fail(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        targets = self._targets(mode, rng)
        params = opts.draw_params(mode, rng)
        ops = tuple(params["ops"].split("+"))
        fault = DiskFault("fail", ops, errno=params["errno"], probability=params["probability"])
        for n in targets:
            self.sim.set_disk_fault(n, fault)
        return (self._clear_disks, "disk_fail", targets)

    def _clear_disks(self, kind: str, nodes: list[int]) -> None:
        for n in nodes:
            self.sim.clear_disk_fault(n)
            if kind == "disk_fail" and n not in self.held:  # a failed fsync stopped it: start it again
                self.sim.restart(n)

    def _corrupt(self, mode: str, opts: KindOptions, rng: random.Random) -> tuple | None:
        targets = self._targets(rng.choice(opts.targets), rng, self._up())
        done = []
        for n in targets:
            self.sim.kill(n)
            try:
                self.sim.corrupt_storage(n, mode, rng)
            except NothingToCorrupt:  # it starts as it was
                self.sim.restart(n)
                continue
            done.append(n)
            self.sim.restart(n)  # it must refuse to start, or detect the damage
        self.held.update({n: "corrupt" for n in done})
        return (self._uncorrupt, done) if done else None

    def _uncorrupt(self, nodes: list[int]) -> None:
        for n in nodes:
            if self.held.get(n) == "corrupt":
                del self.held[n]
            self.sim.kill(n)
            self.sim.uncorrupt_storage(n)
            self.sim.restart(n)


def _weighted(rng: random.Random, items: list[str], weights: list[float]) -> str:
    return items[0] if len(items) == 1 else rng.choices(items, weights)[0]
