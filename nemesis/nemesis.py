"""The nemesis: turns the schedule's `start-<kind>` / `stop-<kind>` ops into backend and DB calls.

The schedule names the kind and a mode; the nemesis chooses the targets (`vocab.faults.targets`) and the
parameters (`vocab.faults.options`) from a seeded RNG and the cluster's current leader, so a simulated
run does the same thing every time. Rules (results/SCHEMA.md, "Nemesis events"):

- A start completes `info` with `{"kind", "mode", "targets", <parameters>…}`: the fault window opens
  at that completion. A start that did nothing completes `fail` with the reason — the backend cannot
  do the kind (`FaultNotSupported`), no node fits the target mode, or the kind is already active —
  and opens no window.
- A stop undoes exactly what its kind's start did and completes `info` with `{"kind", "targets"}`;
  stopping a kind that is not active is a no-op (`"noop": true`), so the final phase can stop all.
- At most one fault per kind is active; kinds overlap freely. A node taken down by one kind (kill,
  lose_unsynced, corrupt) is no target for another until that kind's stop restarts it, and a stop
  restarts only nodes that are still down.
- Errors on some targets after others were hit complete `info` with the error: part of the fault
  happened, and its stop undoes that part.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from vocab.backend import Backend
from vocab.db import DB
from vocab.faults import partitions
from vocab.faults.catalogue import FAULT_KINDS, TARGETED_KIND, spec
from vocab.faults.kinds import REPLAY, ClockFault, DiskFault, FaultNotSupported, Links, PacketFault, RedeliverFault
from vocab.faults.options import KindOptions, kind_options
from vocab.faults.targets import ClusterView, NoTarget, choose
from vocab.generators import Op
from vocab.invocation import Completion, DoneFn, error_text
from vocab.schedulers import Scheduler

DOWN_KINDS = ("kill", "lose_unsynced", "corrupt")  # kinds that take nodes down until their stop
# Aimed by role, a replayed fault is aimed by role again (the leader of the new run, which another
# backend may have elected differently); aimed otherwise, at the recorded nodes by name.
ROLE_TARGET_MODES = frozenset({"leader", "follower"})
ROLE_PARTITIONS = frozenset({"isolate-leader", "leader-from-controllers"})


@dataclass
class ActiveFault:
    kind: str
    mode: str
    targets: list[str]
    data: dict[str, Any] = field(default_factory=dict)


class Nemesis:
    """A `Handler` for the nemesis process (see the module docstring). Fault actions may block
    (iptables, signals, HTTP status calls), so they run through `scheduler.blocking`, one at a time."""

    def __init__(
        self,
        backend: Backend,
        db: DB,
        scheduler: Scheduler,
        seed: int,
        options: Mapping[str, KindOptions] | None = None,
    ) -> None:
        self.backend = backend
        self.db = db
        self.scheduler = scheduler
        self.rng = random.Random(seed ^ 0x4E454D45)
        self.nodes = list(db.nodes)
        self.options = dict(options or {})
        self.faults: dict[str, ActiveFault] = {}
        self.down: dict[str, str] = {}  # node -> the kind that holds it down
        self._clock: tuple[ClockFault, int] | None = None  # the active clock fault and its start
        # when the clocks reset by the heals so far have caught up with the true time (ClockFault's
        # `lag_after_reset_ns`): until then a node's timers lag, so recovery is judged from there
        self.settled_at_ns = 0
        self._lock = threading.Lock()
        self._replay: dict[str, Any] | None = None  # what the start being carried out replays (REPLAY)
        self._starts: dict[str, Callable[[str, KindOptions, list[str]], ActiveFault]] = {
            "partition": self._start_partition,
            "packet": self._start_packet,
            "redeliver": self._start_redeliver,
            "clock": self._start_clock,
            "kill": self._start_kill,
            "pause": self._start_pause,
            "disk_stall": self._start_disk,
            "disk_fail": self._start_disk,
            "lose_unsynced": self._start_lose_unsynced,
            "corrupt": self._start_corrupt,
        }
        self._stops: dict[str, Callable[[ActiveFault, list[str]], dict[str, Any]]] = {
            "partition": self._stop_partition,
            "packet": self._stop_packet,
            "redeliver": self._stop_redeliver,
            "clock": self._stop_clock,
            "kill": self._stop_restart,
            "pause": self._stop_pause,
            "disk_stall": self._stop_disk,
            "disk_fail": self._stop_disk,
            "lose_unsynced": self._stop_restart,
            "corrupt": self._stop_corrupt,
        }

    @property
    def active(self) -> list[str]:
        """The fault kinds active now (for the progress line)."""
        return [k for k in FAULT_KINDS if k in self.faults]

    # -- the Handler ---------------------------------------------------------------------------------

    def invoke(self, op: Op, done: DoneFn) -> None:
        action, _, kind = op.f.partition("-")
        known = kind in self._starts or (kind == TARGETED_KIND and action == "stop")
        if action not in ("start", "stop") or not known:
            done(Completion("fail", error=f"this nemesis cannot do {op.f!r} (it knows start-/stop- of "
                                          f"{', '.join(self._starts)})"))  # fmt: skip
            return

        def finished(result: Completion | None, exc: BaseException | None) -> None:
            if exc is not None or result is None:
                result = Completion("info", {"kind": kind}, error=error_text(exc))
            done(result)

        value = op.value
        self.scheduler.blocking(lambda: self._locked(action, kind, value), finished)

    def _locked(self, action: str, kind: str, value: Any) -> Completion:
        with self._lock:
            return self.start(kind, value) if action == "start" else self.stop(kind)

    # -- starting and stopping -----------------------------------------------------------------------

    def start(self, kind: str, value: Any = None) -> Completion:
        replay = value.get(REPLAY) if isinstance(value, dict) else None
        self._replay = replay if isinstance(replay, dict) else None
        try:
            return self._start(kind, value)
        finally:
            self._replay = None

    def _start(self, kind: str, value: Any) -> Completion:
        opts = self._options(kind)
        requested = value.get("mode") if isinstance(value, dict) else None
        mode = requested if requested in spec(kind).modes else self.rng.choice(opts.modes)
        base = {"kind": kind, "mode": mode}
        if kind in self.faults:
            return Completion("fail", base, error=f"a {kind} fault is already active")
        if kind not in self.backend.faults:
            return Completion(
                "fail", base, error=f"the {type(self.backend).__name__} backend cannot do {kind!r} faults"
            )
        errors: list[str] = []
        try:
            fault = self._starts[kind](mode, opts, errors)
        except (NoTarget, FaultNotSupported) as exc:
            return Completion("fail", base, error=str(exc))
        if not fault.targets and errors:  # nothing happened after all
            return Completion("fail", base, error="; ".join(errors))
        self.faults[kind] = fault
        out = {"kind": kind, "mode": mode, "targets": fault.targets, **fault.data}
        return Completion("info", out, error="; ".join(errors) or None)

    def stop(self, kind: str) -> Completion:
        if kind == TARGETED_KIND:
            return self._stop_targeted()
        fault = self.faults.pop(kind, None)
        if fault is None:
            return Completion("info", {"kind": kind, "targets": [], "noop": True})
        errors: list[str] = []
        out = self._stops[kind](fault, errors)
        return Completion("info", {"kind": kind, "targets": fault.targets, **out}, error="; ".join(errors) or None)

    def _stop_targeted(self) -> Completion:
        """The simulator's targeted faults (node.sim.buggify) end with the run's main phase."""
        stop = getattr(self.backend, "stop_targeted", None)
        healed = stop() if stop is not None else []
        return Completion("info", {"kind": TARGETED_KIND, "targets": healed})

    # -- helpers --------------------------------------------------------------------------------------

    def _options(self, kind: str) -> KindOptions:
        if kind not in self.options:
            self.options[kind] = kind_options(kind)
        return self.options[kind]

    def _view(self) -> ClusterView:
        return ClusterView.of(self.db, self.db.leader())

    def _targets(self, target_mode: str, eligible: Collection[str] | None = None) -> list[str]:
        replay_names = self._replay is not None and target_mode not in ROLE_TARGET_MODES
        if replay_names and isinstance(self._replay.get("targets"), list):
            recorded = [str(t) for t in self._replay["targets"]]
            chosen = [t for t in recorded if t in self.nodes and (eligible is None or t in eligible)]
            if recorded and not chosen:
                raise NoTarget(f"the recorded targets {', '.join(recorded)} cannot be hit now (down, or unknown)")
            return chosen
        return choose(target_mode, self._view(), self.rng, eligible)

    def _params(self, mode: str, opts: KindOptions) -> dict[str, Any]:
        """The kind's parameters: the recorded ones when replaying (any missing drawn), else drawn."""
        drawn = opts.draw_params(mode, self.rng)
        if self._replay is None:
            return drawn
        return {name: self._replay.get(name, value) for name, value in drawn.items()}

    def _target_mode(self, opts: KindOptions) -> str:
        recorded = self._replay.get("target_mode") if self._replay is not None else None
        return str(recorded) if recorded in opts.targets else self.rng.choice(opts.targets)

    def _up(self) -> list[str]:
        """Nodes running now that no fault holds down."""
        return [n for n in self.nodes if n not in self.down and self.backend.is_alive(n)]

    def _each(self, targets: list[str], action: Callable[[str], Any], errors: list[str]) -> list[str]:
        """`action` on every target; the ones it worked on. A FaultNotSupported on the first target
        means the backend cannot do it at all: raised, nothing happened."""
        done = []
        for node in targets:
            try:
                action(node)
            except FaultNotSupported:
                if not done:
                    raise
                errors.append(f"{node}: not supported")
            except Exception as exc:  # keep going: the others are hit, the stop undoes them
                errors.append(f"{node}: {error_text(exc)}")
            else:
                done.append(node)
        return done

    def _restart(self, nodes: list[str], errors: list[str]) -> list[str]:
        """Start again every node in `nodes` that is down (the others are left alone)."""
        started = []
        for node in nodes:
            if self.backend.is_alive(node):
                continue
            try:
                self.db.restart_node(node)
            except Exception as exc:  # keep restarting the others; the recovery phase retries
                errors.append(f"{node}: {error_text(exc)}")
            else:
                started.append(node)
        return started

    # -- partition and packet ---------------------------------------------------------------------------

    def _start_partition(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        replay_names = self._replay is not None and mode not in ROLE_PARTITIONS
        if replay_names and isinstance(self._replay.get("grudge"), dict):
            partition = partitions.recorded(mode, self._replay, self.nodes)
        else:
            partition = partitions.build(mode, self._view(), self.rng)
        self.backend.partition(partition.grudge)
        details = partition.describe()
        targets = details.pop("targets")
        return ActiveFault("partition", mode, targets, details)

    def _stop_partition(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        self.backend.heal_network()
        return {}

    def _start_packet(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        params = self._params(mode, opts)
        params["jitter_ms"] = min(params["jitter_ms"], params["delay_ms"])
        fault = PacketFault(params["loss"], params["delay_ms"], params["jitter_ms"])
        targets, links = self._links(mode)
        self.backend.packet(links, fault)
        return ActiveFault("packet", mode, targets, params)

    def _stop_packet(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        self.backend.heal_packet()
        return {}

    def _links(self, target_mode: str) -> tuple[list[str], Links]:
        """The targets of a network fault and the links it affects: those to and from the targets
        (None for `all`: every link between nodes)."""
        if target_mode == "all":
            return list(self.nodes), None
        targets = self._targets(target_mode)
        hit = set(targets)
        return targets, {n: frozenset(m for m in self.nodes if m != n and (n in hit or m in hit)) for n in self.nodes}

    def _start_redeliver(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        target_mode = self._target_mode(opts)
        params = self._params(mode, opts)
        lag = params["copy_delay_ms"] if mode == "duplicate" else params["late_ms"]
        fault = RedeliverFault(mode, params["probability"], lag)
        targets, links = self._links(target_mode)
        self.backend.redeliver(links, fault)
        return ActiveFault("redeliver", mode, targets, {"target_mode": target_mode, **params})

    def _stop_redeliver(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        self.backend.heal_redeliver()
        return {}

    # -- clock -------------------------------------------------------------------------------------------

    def _start_clock(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        target_mode = self._target_mode(opts)
        params = self._params(mode, opts)
        fault = ClockFault(
            mode,
            delta_ms=params.get("delta_ms", 0),
            period_ms=params.get("period_ms", 0),
            duration_ms=params.get("duration_ms", 0),
            rate=params.get("rate", 1.0),
        )
        targets = self._targets(target_mode)
        done = self._each(targets, lambda n: self.backend.clock(n, fault), errors)
        self._clock = (fault, self.scheduler.now())
        return ActiveFault("clock", mode, done, {"target_mode": target_mode, **params})

    def _stop_clock(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        self._each(fault.targets, self.backend.clock_reset, errors)
        if self._clock is not None and fault.targets:
            clock, started = self._clock
            now = self.scheduler.now()
            self.settled_at_ns = max(self.settled_at_ns, now + clock.lag_after_reset_ns(now - started))
        self._clock = None
        return {}

    # -- kill, pause, power loss -------------------------------------------------------------------------

    def _start_kill(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        params = self._params(mode, opts)
        graceful = params.get("signal") == "TERM"
        targets = self._targets(mode, self._up())
        data: dict[str, Any] = {"signal": params["signal"]} if graceful else {}
        if graceful and params.get("successor") == "isolated":
            data.update(self._isolate_successor(targets))
        done = self._each(targets, self.backend.terminate if graceful else self.backend.kill, errors)
        self.down.update({n: "kill" for n in done})
        return ActiveFault("kill", mode, done, data)

    def _isolate_successor(self, leaders: list[str]) -> dict[str, Any]:
        """Cut the leader's preferred successor off from every node before it resigns: the controller
        (not the leader) whose log reaches furthest, lowest name first on a tie, as KIP-595's
        EndQuorumEpoch ranks them. The partition lasts until the kill's stop (it is healed there)."""
        view = self._view()
        ends = {n: self.db.log_end(n) for n in view.controllers if n not in leaders and n in self._up()}
        known = {n: e for n, e in ends.items() if e is not None}
        if not known or "partition" in self.faults:
            return {"successor": None}
        successor = min(known, key=lambda n: (-known[n], n))
        others = frozenset(n for n in self.nodes if n != successor)
        grudge = {successor: others, **{n: frozenset({successor}) for n in others}}
        self.backend.partition(grudge)
        return {"successor": successor, "isolated": True}

    def _start_lose_unsynced(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        targets = self._targets(mode, self._up())
        done = self._each(targets, self.backend.lose_unsynced, errors)
        self.down.update({n: "lose_unsynced" for n in done})
        return ActiveFault("lose_unsynced", mode, done)

    def _stop_restart(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        mine = [n for n in fault.targets if self.down.get(n) == fault.kind]
        for node in mine:
            del self.down[node]
        if fault.data.get("isolated") and "partition" not in self.faults:
            self.backend.heal_network()
        if fault.data.get("signal") == "TERM":  # one still stopping is killed; one stopped is reaped
            self._each(mine, self.backend.kill, errors)
        return {"restarted": self._restart(mine, errors)}

    def _start_pause(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        paused = set(self.faults["pause"].targets) if "pause" in self.faults else set()
        targets = self._targets(mode, [n for n in self._up() if n not in paused])
        done = self._each(targets, self.backend.pause, errors)
        return ActiveFault("pause", mode, done)

    def _stop_pause(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        self._each(fault.targets, self.backend.resume, errors)
        return {}

    # -- disks ---------------------------------------------------------------------------------------------

    def _start_disk(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        params = self._params(mode, opts)
        ops = tuple(params["ops"].split("+"))
        if opts.kind == "disk_stall":
            fault = DiskFault("stall", ops, delay_ms=params["delay_ms"])
        else:
            fault = DiskFault("fail", ops, errno=params["errno"], probability=params["probability"])
        targets = self._targets(mode)
        done = self._each(targets, lambda n: self.backend.disk(n, fault), errors)
        return ActiveFault(opts.kind, mode, done, params)

    def _stop_disk(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        healed = self._each(fault.targets, self.backend.disk_heal, errors)
        # A failed fsync or write stops the node (fail-stop): start the ones no other fault holds down.
        if fault.kind == "disk_fail":
            return {"restarted": self._restart([n for n in healed if n not in self.down], errors)}
        return {}

    # -- corruption ------------------------------------------------------------------------------------------

    def _start_corrupt(self, mode: str, opts: KindOptions, errors: list[str]) -> ActiveFault:
        target_mode = self._target_mode(opts)
        targets = self._targets(target_mode, self._up())
        damaged: dict[str, Any] = {}
        alive: dict[str, bool] = {}
        for node in targets:
            self.backend.kill(node)
            self.down[node] = "corrupt"
            try:
                damaged[node] = self.db.corrupt(node, mode, self.rng)
            except Exception as exc:  # nothing damaged: the node is started again as it was
                del self.down[node]
                self._restart([node], errors)
                if isinstance(exc, FaultNotSupported) and not damaged:
                    raise
                errors.append(f"{node}: {error_text(exc)}")
                continue
            # The node must refuse to start on damaged files, or detect the damage: start it and see.
            try:
                self.db.restart_node(node)
            except Exception as exc:  # a refusal the start command itself reports
                errors.append(f"{node}: start refused: {error_text(exc)}")
            alive[node] = self.backend.is_alive(node)
        done = [n for n in targets if n in damaged]
        data = {"target_mode": target_mode, "damage": damaged, "alive_after_start": alive}
        return ActiveFault("corrupt", mode, done, data)

    def _stop_corrupt(self, fault: ActiveFault, errors: list[str]) -> dict[str, Any]:
        for node in fault.targets:
            if self.down.get(node) == "corrupt":
                del self.down[node]
            try:
                if self.backend.is_alive(node):
                    self.backend.kill(node)
                self.db.uncorrupt(node)
            except Exception as exc:
                errors.append(f"{node}: {error_text(exc)}")
        return {"restarted": self._restart(fault.targets, errors)}
