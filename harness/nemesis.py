"""The nemesis: turns the schedule's `start-<kind>` / `stop-<kind>` ops into faults on a backend.

Targets are chosen here (the schedule only names the kind and, optionally, a mode), from a seeded RNG,
so a simulated run picks the same targets every time. Completions are `info` with
`{"targets": [...], "mode": ...}` (results/SCHEMA.md): a fault window opens at a start's completion.
A start that could do nothing (no target) completes `fail` and opens no window; stopping a fault that
is not active is a no-op, so the final phase can stop every kind.

Faults of this issue:
- partition, modes `random-halves` (a minority and a majority), `isolate-one` (a random node alone),
  `isolate-leader` (the current leader alone; a random node when none is known). Stop: heal.
- kill, modes `one` (a random node) and `leader`: kill -9. Stop: start the killed nodes again.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

from harness.backends import Backend, grudges
from harness.db import DB
from harness.generators import Op
from harness.invocation import Completion, DoneFn, error_text
from harness.schedulers import Scheduler

MODES: dict[str, tuple[str, ...]] = {
    "partition": ("random-halves", "isolate-one", "isolate-leader"),
    "kill": ("one", "leader"),
}
IMPLEMENTED = tuple(MODES)


class Nemesis:
    """A `Handler` for the nemesis process (see the module docstring). Fault actions may block
    (iptables, process signals), so they run through `scheduler.blocking`."""

    def __init__(self, backend: Backend, db: DB, scheduler: Scheduler, seed: int) -> None:
        self.backend = backend
        self.db = db
        self.scheduler = scheduler
        self.rng = random.Random(seed ^ 0x4E454D45)
        self.nodes = list(db.nodes)
        self.killed: list[str] = []
        self.partitioned = False
        self._lock = threading.Lock()
        self._actions: dict[str, Callable[[Any], Completion]] = {
            "start-partition": self._start_partition,
            "stop-partition": self._stop_partition,
            "start-kill": self._start_kill,
            "stop-kill": self._stop_kill,
        }

    @property
    def active(self) -> list[str]:
        """The fault kinds active now (for the progress line)."""
        return (["partition"] if self.partitioned else []) + (["kill"] if self.killed else [])

    def invoke(self, op: Op, done: DoneFn) -> None:
        action = self._actions.get(op.f)
        if action is None:
            done(Completion("fail", error=f"this nemesis cannot do {op.f!r} (it knows {', '.join(self._actions)})"))
            return

        def finished(result: Completion | None, exc: BaseException | None) -> None:
            done(result if exc is None and result is not None else Completion("info", error=error_text(exc)))

        value = op.value
        self.scheduler.blocking(lambda: self._locked(action, value), finished)

    def _locked(self, action: Callable[[Any], Completion], value: Any) -> Completion:
        with self._lock:
            return action(value)

    def _mode(self, kind: str, value: Any) -> str:
        mode = value.get("mode") if isinstance(value, dict) else None
        return mode if mode in MODES[kind] else self.rng.choice(MODES[kind])

    # -- partition -----------------------------------------------------------------------------------

    def _start_partition(self, value: Any) -> Completion:
        mode = self._mode("partition", value)
        out: dict[str, Any] = {"mode": mode}
        if mode == "random-halves":
            grudge = grudges.random_halves(self.nodes, self.rng)
        else:
            target = self.db.leader() if mode == "isolate-leader" else None
            if mode == "isolate-leader":
                out["leader"] = target
            grudge = grudges.isolate(target or self.rng.choice(self.nodes), self.nodes)
        self.backend.partition(grudge)
        self.partitioned = True
        components = _components(grudge, self.nodes)
        out["targets"] = min(components, key=lambda c: (len(c), c))
        out["components"] = components
        return Completion("info", out)

    def _stop_partition(self, _value: Any) -> Completion:
        if not self.partitioned:
            return Completion("info", {"targets": [], "noop": True})
        self.backend.heal_network()
        self.partitioned = False
        return Completion("info", {"targets": list(self.nodes)})

    # -- kill ----------------------------------------------------------------------------------------

    def _start_kill(self, value: Any) -> Completion:
        mode = self._mode("kill", value)
        alive = [n for n in self.nodes if self.backend.is_alive(n) and n not in self.killed]
        target = self.db.leader() if mode == "leader" else None
        if target not in alive:
            target = self.rng.choice(alive) if alive else None
        if target is None:
            return Completion("fail", {"targets": [], "mode": mode}, error="no live node to kill")
        self.backend.kill(target)
        self.killed.append(target)
        return Completion("info", {"targets": [target], "mode": mode})

    def _stop_kill(self, _value: Any) -> Completion:
        targets, self.killed = self.killed, []
        errors = []
        for node in targets:
            try:
                self.db.restart_node(node)
            except Exception as exc:  # keep restarting the others; the recovery phase retries
                errors.append(f"{node}: {error_text(exc)}")
        return Completion("info", {"targets": targets}, error="; ".join(errors) or None)


def _components(grudge: grudges.Grudge, nodes: Sequence[str]) -> list[list[str]]:
    """The groups of nodes that still hear each other, each sorted, in order of their first node."""
    seen: set[str] = set()
    out = []
    for node in nodes:
        if node in seen:
            continue
        group = sorted([node] + [m for m in nodes if m != node and m not in grudge.get(node, ())])
        seen.update(group)
        out.append(group)
    return out
