"""Random fault schedules: inject a fault every so often, heal it after a random duration.

Every choice is drawn from the simulation's RNG, so a seed fixes the whole fault timeline. At most
one fault of each kind is active at a time, which keeps heals exact (a heal undoes the one fault it
belongs to) while still letting different kinds overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.sim.world import Simulation

FAULT_KINDS = ("partition", "kill", "pause", "clock", "disk")


@dataclass(frozen=True, slots=True)
class FaultConfig:
    kinds: tuple[str, ...] = ()
    interval_ms: tuple[int, int] = (1000, 6000)  # between two injections
    duration_ms: tuple[int, int] = (500, 8000)  # how long a fault lasts before its heal
    lose_unsynced_probability: float = 0.5  # a kill is a power loss this often
    clock_jump_ms: int = 5000  # jumps drawn from [-jump, +jump]
    clock_rates: tuple[float, ...] = (0.5, 0.8, 1.25, 2.0)

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; choose from {', '.join(FAULT_KINDS)}")


class FaultInjector:
    def __init__(self, sim: Simulation, config: FaultConfig) -> None:
        self.sim = sim
        self.config = config
        self.active: dict[str, int] = {}  # kind -> serial of the active fault
        self._serial = 0
        self.running = False

    def start(self) -> None:
        if self.config.kinds:
            self.running = True
            self._schedule_next()

    def stop(self) -> None:
        """No more injections; the caller heals (`Simulation.heal_all`)."""
        self.running = False
        self.active.clear()

    def _schedule_next(self) -> None:
        lo, hi = self.config.interval_ms
        self.sim.queue.after(self.sim.rng.randint(lo, hi), self._inject)

    def _inject(self) -> None:
        if not self.running:
            return
        rng = self.sim.rng
        kinds = self.config.kinds
        kind = kinds[rng.randrange(len(kinds))]
        if kind not in self.active:
            undo = getattr(self, f"_{kind}")()
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

    # --- the faults; each returns its undo as (callable, *args), or None when it did nothing ---
    def _partition(self) -> tuple | None:
        sim, rng = self.sim, self.sim.rng
        ids = list(sim.nodes)
        shape = rng.choice(("isolate", "halves", "one-way", "bridge"))
        if shape == "isolate":
            victim = ids[rng.randrange(len(ids))]
            sim.isolate([[n for n in ids if n != victim]])
        elif shape == "halves":
            shuffled = ids[:]
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(ids) - 1) if len(ids) > 1 else 1
            sim.isolate([shuffled[:cut], shuffled[cut:]])
        elif shape == "one-way":
            deaf = ids[rng.randrange(len(ids))]
            others = [n for n in ids if n != deaf]
            if not others:
                return None
            sim.partition({deaf: rng.sample(others, rng.randint(1, len(others)))})
        else:  # bridge: two sides that only one node hears in full
            shuffled = ids[:]
            rng.shuffle(shuffled)
            bridge, rest = shuffled[0], shuffled[1:]
            left, right = rest[: len(rest) // 2], rest[len(rest) // 2 :]
            grudge = {n: right for n in left}
            grudge.update({n: left for n in right})
            sim.partition({bridge: [], **grudge})
        return (sim.heal,)

    def _kill(self) -> tuple | None:
        sim, rng = self.sim, self.sim.rng
        live = sim.live_nodes()
        if not live:
            return None
        victim = live[rng.randrange(len(live))]
        sim.kill(victim, lose_unsynced=rng.random() < self.config.lose_unsynced_probability)
        return (sim.restart, victim)

    def _pause(self) -> tuple | None:
        sim, rng = self.sim, self.sim.rng
        live = [n for n in sim.live_nodes() if not sim.nodes[n].paused]
        if not live:
            return None
        victim = live[rng.randrange(len(live))]
        sim.pause(victim)
        return (sim.resume, victim)

    def _clock(self) -> tuple | None:
        sim, rng = self.sim, self.sim.rng
        ids = list(sim.nodes)
        victim = ids[rng.randrange(len(ids))]
        jump = rng.randint(-self.config.clock_jump_ms, self.config.clock_jump_ms)
        rate = rng.choice(self.config.clock_rates)
        sim.skew(victim, jump_ms=jump, rate=rate)
        return (sim.skew, victim, 0, 1.0)

    def _disk(self) -> tuple | None:
        sim, rng = self.sim, self.sim.rng
        ids = list(sim.nodes)
        victim = ids[rng.randrange(len(ids))]
        lo, hi = self.config.duration_ms
        sim.stall_disk(victim, rng.randint(lo, hi))
        return None  # a stall ends by itself
