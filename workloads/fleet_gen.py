"""The generator of the played-broker workloads (registrations, isr-changes): a pure state machine.

It plays a few brokers through their life (KIP-631) and, for isr-changes, leads their partitions
(KIP-497). Like every generator (`vocab.generators.core`) it is an immutable value: `op(ctx)` names
the next op from the state and the time; `update(ctx, event)` folds invocations and completions back
in, so the same seed and the same answers give the same ops. Every op's invoke value holds all that
the client sends, so the history says what was asked even when the outcome is unknown.

A broker slot goes through phases:

    register -> lagging (heartbeats that do not report catching up: it must stay fenced)
             -> live (caught-up heartbeats every broker.heartbeat.interval.ms: unfenced)
    live -> crash: silent for session + slack + margin -> probe (one not-caught-up heartbeat: the
            controller must answer "fenced") -> down until the probe's own session lapsed
            -> register a new incarnation
    live -> shutdown: want_shut_down heartbeats until should_shut_down -> silent -> probe -> ...
    live -> fence (want_fence), stale (a heartbeat with a superseded epoch), duplicate (another
            incarnation registers while this one lives), reregister (the same incarnation again)

Heartbeats are scheduled; everything else comes from the op mix (weights per kind), and a read is
the fallback when the chosen kind cannot be done now (the driver must never see a generator with
nothing to do while the run lasts).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from vocab.generators import EXHAUSTED, PENDING, Context, Gen, Op, Rng

MS = 1_000_000
SETUP = "setup"
READS = ("metadata", "describe-cluster", "quorum", "barrier")
KAFKA_KINDS = {"metadata": "kafka-metadata", "describe-cluster": "kafka-describe-cluster"}
ACTIONS = ("crash", "shutdown", "fence", "duplicate", "stale", "reregister")
# AlterPartition kinds: `ahead` plays a leader that learned of a version this controller has not seen (a
# newer controller moved the partition on), the KAFKA-14154 situation: KIP-497 wants NOT_CONTROLLER.
ALTER_KINDS = (("cas", 0.65), ("stale", 0.1), ("not-leader", 0.1), ("stale-broker-epoch", 0.1), ("ahead", 0.05))
MAX_PROBES = 3  # a crashed broker asks this many times whether it is fenced before it restarts
MAX_ALTERS_IN_FLIGHT = 2  # per partition: two compare-and-sets from one version race, one may win


@dataclass(frozen=True, slots=True)
class Params:
    """What the generator needs to know about the run (times in ms)."""

    seed: int
    session_ms: int
    heartbeat_ms: int
    slack_ms: int
    nodes: tuple[str, ...]  # every node (reads go to any)
    controllers: tuple[str, ...]
    mix: tuple[tuple[str, float], ...]  # op kind -> weight (heartbeats are scheduled, not mixed)
    lag_ms: int = 1_000  # how long a new registration stays behind before catching up (at most)
    kafka_nodes: frozenset[str] = frozenset()  # their image reads go through confluent-kafka (`kafka-*`)

    @property
    def probe_after_ms(self) -> int:
        return self.session_ms + self.slack_ms + 500

    def incarnation(self, broker: int, generation: int) -> str:
        return incarnation_id(self.seed, broker, generation)


def incarnation_id(seed: int, broker: int, generation: int) -> str:
    """A played broker's incarnation id: a new one per process start, the same for the same seed."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"kchaos/{seed}/{broker}/{generation}"))


@dataclass(frozen=True, slots=True)
class Slot:
    broker: int
    incarnation: str
    generation: int
    epoch: int | None
    old_epochs: tuple[int, ...] = ()
    phase: str = "live"  # register | lagging | live | shutting | silent | probe | down
    until: int = 0  # ns: when the phase's next step is due
    last_beat: int = -(10**18)
    busy: str | None = None  # kind of the op in flight
    duplicates: int = 0
    next_incarnation: str | None = None  # set by a crash: the next registration is a new incarnation
    clean: bool = True  # no heartbeat of the current epoch has an unknown outcome (its probe can be judged)
    probes: int = 0  # probes of this silence answered "unfenced" so far

    def due_at(self, heartbeat_ns: int) -> int:
        """When the slot's next scheduled op is due (its heartbeat, or its phase's next step)."""
        if self.phase in ("live", "shutting"):
            return self.last_beat + heartbeat_ns
        if self.phase == "lagging":
            return min(self.last_beat + heartbeat_ns, self.until)
        return self.until


@dataclass(frozen=True, slots=True)
class Part:
    key: str
    topic: str
    partition: int
    topic_id: str
    replicas: tuple[int, ...]
    pe: int = -1  # the newest version known: partition epoch, leader epoch, leader, ISR
    le: int = -1
    leader: int = -1
    isr: tuple[int, ...] = ()
    older: tuple[tuple[int, int, tuple[int, ...]], ...] = ()  # a few older (pe, le, isr)
    in_flight: int = 0

    def learn(self, pe: int, le: int, leader: int, isr: tuple[int, ...]) -> Part:
        if pe <= self.pe:
            return self
        older = (*self.older, (self.pe, self.le, self.isr))[-4:] if self.pe >= 0 else self.older
        return replace(self, pe=pe, le=le, leader=leader, isr=tuple(isr), older=older)


@dataclass(frozen=True, slots=True)
class FleetGen(Gen):
    params: Params
    slots: tuple[Slot, ...]
    parts: tuple[Part, ...]
    needs_setup: bool = True  # the first op is `setup` (the client answers it with the run's facts)
    offset: int = 0  # the highest metadata offset seen
    quorum_due: bool = False  # a probe just completed: ask its controller for its epoch (closes the bracket)
    leader_epoch: int = -1  # the highest quorum epoch a DescribeQuorum answer named
    rand: int = 0

    # --- ops ---------------------------------------------------------------------------------------

    def op(self, ctx: Context) -> Any:
        free = ctx.first_free()
        if free is None:
            return PENDING
        _, process = free
        now = ctx.time
        if self.needs_setup:
            return Op(SETUP, {}).bind(process, now), replace(self, needs_setup=False)
        rng = Rng(self.rand)
        if self._waiting() >= len(ctx.workers) - 2 > 0 and not self.quorum_due:
            # Every other worker waits on a controller request (a deposed controller that still believes
            # it leads answers no write, nor anything queued behind one): this one keeps observing, so
            # the history holds reads, the linearizable barrier included, while those requests hang.
            step = self._read(rng, _weighted(rng, tuple((k, w) for k, w in self.params.mix if k in READS)))
        else:
            step = self._scheduled(now) or self._mixed(rng, now)
        op, gen = step
        return op.bind(process, now), replace(gen, rand=rng.state)

    def _waiting(self) -> int:
        """Controller requests in flight: registrations, heartbeats and AlterPartitions."""
        return sum(1 for s in self.slots if s.busy is not None) + sum(p.in_flight for p in self.parts)

    def _scheduled(self, now: int) -> tuple[Op, FleetGen] | None:
        """The slot most overdue for its heartbeat or its next phase step, if any."""
        if self.quorum_due:
            return Op("quorum", {"node": None}), replace(self, quorum_due=False)
        hb = self.params.heartbeat_ms * MS * 4 // 5  # a little early: the rate limiter may delay it
        due = [s for s in self.slots if s.busy is None and s.due_at(hb) <= now]
        if not due:
            return None
        slot = min(due, key=lambda s: (s.due_at(hb), s.broker))
        if slot.phase in ("live", "lagging"):
            if slot.phase == "lagging" and now >= slot.until:
                slot = replace(slot, phase="live")
            return self._beat(slot, "beat" if slot.phase == "live" else "lagging")
        if slot.phase == "shutting":
            return self._beat(slot, "shutdown")
        if slot.phase == "probe":
            return self._beat(slot, "probe")
        if slot.phase == "silent":
            nxt = replace(slot, phase="probe" if slot.epoch is not None else "register")
            return self._with(nxt)._scheduled(now)
        if slot.phase == "down":
            return self._with(replace(slot, phase="register"))._scheduled(now)
        return self._register(slot, "start" if slot.epoch is None else "restart")

    def _mixed(self, rng: Rng, now: int) -> tuple[Op, FleetGen]:
        kind = _weighted(rng, self.params.mix)
        step = None
        if kind == "alter":
            step = self._alter(rng)
        elif kind in ACTIONS:
            step = self._action(rng, kind, now)
        elif kind in READS:
            step = self._read(rng, kind)
        return step or self._read(rng, "metadata")

    def _read(self, rng: Rng, kind: str) -> tuple[Op, FleetGen]:
        if kind == "barrier":
            return Op("barrier", {}), self
        nodes = self.params.controllers if kind == "quorum" else self.params.nodes
        node = None if kind == "quorum" else rng.choice(nodes)
        if node in self.params.kafka_nodes and kind in KAFKA_KINDS:
            kind = KAFKA_KINDS[kind]  # a Kafka client's answer: no offset, no epochs to learn from
        return Op(kind, {"node": node}), self

    def _beat(self, slot: Slot, kind: str) -> tuple[Op, FleetGen]:
        assert slot.epoch is not None
        if kind == "stale":
            epoch = slot.old_epochs[-1]
        else:
            epoch = slot.epoch
        caught_up = kind in ("beat", "stale")
        value = {
            "broker": slot.broker,
            "incarnation": slot.incarnation,
            "epoch": epoch,
            "offset": max(epoch, self.offset) if caught_up else epoch - 1 if kind == "lagging" else -1,
            "want_fence": kind == "fence",
            "want_shut_down": kind == "shutdown",
            "kind": kind,
        }
        return Op("heartbeat", value, key=slot.broker), self._with(replace(slot, busy=kind))

    def _register(self, slot: Slot, kind: str, incarnation: str | None = None) -> tuple[Op, FleetGen]:
        incarnation = incarnation or slot.next_incarnation or slot.incarnation
        value = {"broker": slot.broker, "incarnation": incarnation, "kind": kind}
        return Op("register", value, key=slot.broker), self._with(replace(slot, busy=kind))

    def _action(self, rng: Rng, kind: str, now: int) -> tuple[Op, FleetGen] | None:
        live = [s for s in self.slots if s.busy is None and s.phase == "live" and s.epoch is not None]
        if kind in ("crash", "shutdown") and sum(s.phase == "live" for s in self.slots) < 2:
            return None  # the last live broker stays: its heartbeats keep showing whether writes commit
        if kind in ("crash", "shutdown"):  # a crash is judged by its probe only if the epoch is clean
            live = [s for s in live if s.clean] or [s for s in live if not s.clean]
            if live and not live[0].clean:
                return self._register(rng.choice(live), "reregister")  # a fresh epoch first
        if not live:
            return None
        slot = rng.choice(live)
        if kind == "crash":
            silent = replace(self._renewed(slot), phase="silent", until=now + self.params.probe_after_ms * MS)
            return self._with(silent)._read(rng, "describe-cluster")
        if kind == "shutdown":
            return self._beat(replace(slot, phase="shutting"), "shutdown")
        if kind == "fence":
            return self._beat(slot, "fence")
        if kind == "stale":
            return self._beat(slot, "stale") if slot.old_epochs else None
        if kind == "duplicate":
            other = self.params.incarnation(slot.broker, 10_000 + slot.duplicates)
            return self._register(replace(slot, duplicates=slot.duplicates + 1), "duplicate", other)
        return self._register(slot, "reregister")

    def _alter(self, rng: Rng) -> tuple[Op, FleetGen] | None:
        ready = [p for p in self.parts if p.pe >= 0 and p.in_flight < MAX_ALTERS_IN_FLIGHT]
        if not ready:
            return None
        part = rng.choice(ready)
        epochs = {s.broker: s for s in self.slots}
        kind = _weighted(rng, ALTER_KINDS)
        sender, le, pe, from_isr = part.leader, part.le, part.pe, part.isr
        if kind == "stale" and part.older:
            pe, le, from_isr = rng.choice(part.older)
        elif kind == "stale":
            kind = "cas"
        elif kind == "not-leader":
            others = [r for r in part.replicas if r != part.leader]
            if not others:
                return None
            sender = rng.choice(others)
        elif kind == "ahead":  # one epoch past the newest version known; never a version the ISR came from
            le, pe = (le + 1, pe) if rng.random() < 0.5 else (le, pe + 1)
        slot = epochs.get(sender)
        if slot is None or slot.epoch is None:
            return None
        broker_epoch = slot.epoch
        if kind == "stale-broker-epoch":
            if not slot.old_epochs:
                return None
            broker_epoch = slot.old_epochs[-1]
        isr = _next_isr(rng, part.replicas, from_isr, sender)
        if isr is None:
            return None
        value = {
            "topic": part.topic,
            "partition": part.partition,
            "topic_id": part.topic_id,
            "broker": sender,
            "broker_epoch": broker_epoch,
            "leader_epoch": le,
            "partition_epoch": pe,
            "isr": list(isr),
            "from_isr": None if kind == "ahead" else list(from_isr),
            "kind": kind,
        }
        return Op("alter", value, key=part.key), self._with_part(replace(part, in_flight=part.in_flight + 1))

    # --- events ------------------------------------------------------------------------------------

    def update(self, ctx: Context, event: Op) -> Gen:
        if event.f == "heartbeat" and event.type == "invoke":
            slot = self._slot(event.key)
            return self if slot is None else self._with(replace(slot, last_beat=event.time))
        if event.type == "invoke":
            return self
        value = event.value if isinstance(event.value, dict) else {}
        if event.f == "heartbeat":
            return self._beat_done(event, value)
        if event.f == "register":
            return self._registered(event, value)
        if event.f == "alter":
            return self._altered(event, value)
        if event.f == "quorum" and event.type == "ok":
            return self._failover(event.time, value.get("epoch"))
        if event.f in ("metadata", "describe-cluster", "barrier") and event.type == "ok":
            gen = replace(self, offset=max(self.offset, int(value.get("offset", -1))))
            for key, p in (value.get("partitions") or {}).items():
                gen = gen._learn(key, p)
            return gen
        return self

    def _failover(self, now: int, epoch: Any) -> FleetGen:
        """A new quorum epoch: a controller that may never have heard from the silent brokers took over.
        KIP-631 wants it to fence them a session after it did, so their probes wait a whole session
        from now (a probe sent sooner may find the new controller's fresh session still running)."""
        if not isinstance(epoch, int) or epoch <= self.leader_epoch:
            return self
        gen = replace(self, leader_epoch=epoch)
        if self.leader_epoch < 0:
            return gen
        due = now + self.params.probe_after_ms * MS
        for slot in self.slots:
            if slot.phase == "silent" and slot.busy is None and slot.epoch is not None and slot.until < due:
                gen = gen._with(replace(slot, until=due))
        return gen

    def _beat_done(self, event: Op, value: dict[str, Any]) -> FleetGen:
        slot = self._slot(event.key)
        if slot is None:
            return self
        kind, now, p = slot.busy, event.time, self.params
        slot = replace(slot, busy=None)
        error = value.get("error")
        if event.type == "ok":
            if kind == "probe" and value.get("fenced") is False and slot.probes < MAX_PROBES:
                # still unfenced (a controller activated meanwhile starts every session afresh): stay
                # silent and ask again, so that one probe falls where the answer is certain
                slot = replace(slot, phase="silent", until=now + p.probe_after_ms * MS, probes=slot.probes + 1)
            elif kind == "probe":
                slot = replace(slot, phase="down", until=now + (p.session_ms + p.slack_ms) * MS, probes=0)
            elif kind == "shutdown" and value.get("shut_down"):
                slot = replace(self._renewed(slot), phase="silent", until=now + p.probe_after_ms * MS)
            elif kind == "fence":
                slot = replace(slot, phase="lagging", until=now + p.lag_ms * MS)
        elif event.type == "fail" and error in ("STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED"):
            if kind not in ("stale", "probe"):
                slot = replace(slot, phase="register", until=now)  # like a broker: register again
            elif kind == "probe":
                slot = replace(slot, phase="down", until=now + (p.session_ms + p.slack_ms) * MS)
        elif kind == "probe":
            slot = replace(slot, phase="down", until=now + (p.session_ms + p.slack_ms) * MS)
        if event.type == "info" and value.get("epoch") == slot.epoch:
            slot = replace(slot, clean=False)
        gen = self._with(slot)
        return replace(gen, quorum_due=True) if kind == "probe" and event.type == "ok" else gen

    def _registered(self, event: Op, value: dict[str, Any]) -> FleetGen:
        slot = self._slot(event.key)
        if slot is None:
            return self
        kind, now, p = slot.busy, event.time, self.params
        slot = replace(slot, busy=None)
        if event.type == "ok":
            epoch = int(value["epoch"])
            old = (*slot.old_epochs, slot.epoch)[-4:] if slot.epoch is not None else slot.old_epochs
            lag = int(Rng(self.rand ^ epoch).random() * p.lag_ms) * MS
            slot = replace(
                slot,
                incarnation=value.get("incarnation", slot.incarnation),
                next_incarnation=None,
                clean=True,
                epoch=epoch,
                old_epochs=old,
                phase="lagging",
                until=now + lag,
            )
        elif kind not in ("start", "restart"):
            pass  # a duplicate refused (as it must be while the live one's session lasts), or a re-registration
        elif event.type == "fail" and value.get("error") == "DUPLICATE_BROKER_REGISTRATION":
            slot = replace(slot, phase="down", until=now + (p.session_ms + p.slack_ms) * MS)
        elif event.type == "fail":
            slot = replace(slot, phase="register", until=now + 200 * MS)
        else:  # unknown outcome: a new incarnation, once any session it got has lapsed
            slot = replace(self._renewed(slot), phase="silent", until=now + p.probe_after_ms * MS)
        return self._with(slot)

    def _altered(self, event: Op, value: dict[str, Any]) -> FleetGen:
        part = next((p for p in self.parts if p.key == event.key), None)
        if part is None:
            return self
        part = replace(part, in_flight=max(0, part.in_flight - 1))
        gen = self._with_part(part)
        result = value.get("result") if event.type == "ok" else None
        return gen._learn(part.key, result) if result else gen

    def _learn(self, key: str, p: Any) -> FleetGen:
        part = next((x for x in self.parts if x.key == key), None)
        if part is None or not isinstance(p, dict):
            return self
        learned = part.learn(int(p["partition_epoch"]), int(p["leader_epoch"]), int(p["leader"]), tuple(p["isr"]))
        return self if learned is part else self._with_part(learned)

    # --- helpers -----------------------------------------------------------------------------------

    def _slot(self, broker: Any) -> Slot | None:
        return next((s for s in self.slots if s.broker == broker), None)

    def _with(self, slot: Slot) -> FleetGen:
        return replace(self, slots=tuple(slot if s.broker == slot.broker else s for s in self.slots))

    def _with_part(self, part: Part) -> FleetGen:
        return replace(self, parts=tuple(part if p.key == part.key else p for p in self.parts))

    def _renewed(self, slot: Slot) -> Slot:
        """The slot after a crash or a shutdown: its next registration is a new incarnation (the current
        one stays what its probe heartbeat names)."""
        generation = slot.generation + 1
        return replace(slot, generation=generation, next_incarnation=self.params.incarnation(slot.broker, generation))


def _weighted(rng: Rng, weights: tuple[tuple[str, float], ...]) -> str:
    total = sum(w for _, w in weights)
    x = rng.random() * total
    for name, w in weights:
        x -= w
        if x < 0:
            return name
    return weights[-1][0]


def _next_isr(rng: Rng, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> tuple[int, ...] | None:
    """One replica more or one follower less than `isr`, always keeping `leader` in it."""
    outside = [r for r in replicas if r not in isr]
    followers = [r for r in isr if r != leader]
    if outside and (not followers or rng.random() < 0.5):
        return (*isr, rng.choice(outside))
    if followers:
        drop = rng.choice(followers)
        return tuple(r for r in isr if r != drop)
    return None


@dataclass(frozen=True, slots=True)
class Remembered(Gen):
    """`inner`, with its newest state after every event kept in `cell[0]`, so the recovery window can
    continue the played brokers where the main phase left them (a fresh FleetGen would set them up
    again from scratch: epochs and incarnations the cluster has long moved past). Only `update` records:
    `op` is a query that combinators may discard, while `update` follows the op that was taken."""

    inner: Gen
    cell: list[Gen | None]

    def op(self, ctx: Context) -> Any:
        step = self.inner.op(ctx)
        if step is PENDING or step is EXHAUSTED:
            return step
        op, inner = step
        return op, Remembered(inner, self.cell)

    def update(self, ctx: Context, event: Op) -> Gen:
        inner = self.inner.update(ctx, event)
        self.cell[0] = inner
        return self if inner is self.inner else Remembered(inner, self.cell)
