"""The played-broker generator in virtual time against a toy controller: the broker life cycle it
plays (heartbeats on time, crash -> silence -> probe -> new incarnation, lagging before catching up)
and the AlterPartition compare-and-sets it derives from what it learned."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace
from typing import Any

from vocab.generators import Op, Rng, rate, run_virtual, time_limit
from vocab.generators.interpreter import Outcome
from workloads.fleet_gen import FleetGen, Params, Part, Slot, incarnation_id

MS = 1_000_000
SESSION, HEARTBEAT, SLACK = 3_000, 500, 1_000
BROKERS = (1000, 1001, 1002)


class ToyController:
    """Just enough of a controller: epochs from a counter, fenced until a caught-up heartbeat, one
    partition whose AlterPartition is a compare-and-set on the partition epoch."""

    def __init__(self) -> None:
        self.offset = itertools.count(100)
        self.epochs = {b: 10 + i for i, b in enumerate(BROKERS)}
        self.fenced = dict.fromkeys(BROKERS, False)
        self.part = {"leader": 1000, "leader_epoch": 0, "isr": [1000, 1001, 1002], "partition_epoch": 0}

    def __call__(self, op: Op, rng: Rng) -> Outcome:
        v = dict(op.value or {})
        latency = 5 * MS
        if op.f == "setup":
            return Outcome("ok", latency, {"ok": True})
        if op.f == "register":
            self.epochs[v["broker"]] = epoch = next(self.offset)
            self.fenced[v["broker"]] = True
            return Outcome("ok", latency, {**v, "epoch": epoch})
        if op.f == "heartbeat":
            b = v["broker"]
            if v["epoch"] != self.epochs[b]:
                return Outcome("fail", latency, {**v, "error": "STALE_BROKER_EPOCH"})
            if v["want_fence"]:
                self.fenced[b] = True
            elif v["offset"] >= v["epoch"]:
                self.fenced[b] = False
            return Outcome("ok", latency, {**v, "fenced": self.fenced[b], "caught_up": v["offset"] >= v["epoch"],
                                           "shut_down": v["want_shut_down"]})  # fmt: skip
        if op.f == "alter":
            p = self.part
            if (v["leader_epoch"], v["partition_epoch"]) != (p["leader_epoch"], p["partition_epoch"]):
                return Outcome("fail", latency, {**v, "error": "INVALID_UPDATE_VERSION"})
            if v["broker"] != p["leader"]:
                return Outcome("fail", latency, {**v, "error": "NOT_LEADER_OR_FOLLOWER"})
            p.update(isr=list(v["isr"]), partition_epoch=p["partition_epoch"] + 1)
            return Outcome("ok", latency, {**v, "result": dict(p)})
        return Outcome("ok", latency, {"offset": next(self.offset), "partitions": {"t/0": dict(self.part)}})


def fleet(mix: dict[str, float], seed: int = 1) -> FleetGen:
    params = Params(seed, SESSION, HEARTBEAT, SLACK, ("c1", "c2", "b1"), ("c1", "c2"), tuple(mix.items()))
    slots = tuple(Slot(b, params.incarnation(b, 0), 0, 10 + i) for i, b in enumerate(BROKERS))
    parts = (Part("t/0", "t", 0, "00000000-0000-0000-0000-000000000001", BROKERS, 0, 0, 1000, BROKERS),)
    return FleetGen(params, slots, parts)


def run(mix: dict[str, float], seconds: float = 40, seed: int = 1) -> list[dict[str, Any]]:
    return run_virtual(time_limit(seconds, rate(50, fleet(mix, seed))), ToyController(), concurrency=3, seed=seed)


def client_ops(history: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    return [e for e in history if e["f"] == f and e["type"] == "invoke"]


def test_setup_comes_first_and_live_brokers_heartbeat_on_time():
    history = run({"metadata": 1.0})
    assert history[0]["f"] == "setup"
    beats = defaultdict(list)
    for e in client_ops(history, "heartbeat"):
        beats[e["value"]["broker"]].append(e["time"])
    assert set(beats) == set(BROKERS)
    for times in beats.values():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) < SESSION * MS / 2  # well inside the session
        assert min(gaps) >= HEARTBEAT * MS * 4 // 5  # and not much more often than the interval


def test_a_crash_is_silence_then_a_probe_then_a_new_incarnation():
    history = run({"metadata": 5.0, "crash": 1.0}, seconds=60)
    probes = [e for e in client_ops(history, "heartbeat") if e["value"]["kind"] == "probe"]
    assert probes
    for probe in probes:
        broker, epoch = probe["value"]["broker"], probe["value"]["epoch"]
        assert probe["value"]["offset"] == -1  # does not report catching up: the answer must be "fenced"
        earlier = [
            e for e in client_ops(history, "heartbeat") if e["value"]["broker"] == broker and e["time"] < probe["time"]
        ]
        assert probe["time"] - earlier[-2 if earlier[-1] is probe else -1]["time"] >= (SESSION + SLACK) * MS
        assert earlier[-1]["value"]["epoch"] == epoch
    restarts = [e for e in client_ops(history, "register") if e["value"]["kind"] == "restart"]
    assert restarts
    first = {b: incarnation_id(1, b, 0) for b in BROKERS}
    assert all(e["value"]["incarnation"] != first[e["value"]["broker"]] for e in restarts)
    # after a registration the broker lags (offset below its epoch) before it catches up
    after = [e for e in client_ops(history, "heartbeat") if e["value"]["kind"] == "lagging"]
    assert after and all(e["value"]["offset"] < e["value"]["epoch"] for e in after)


def test_alter_partition_names_the_newest_version_it_knows():
    history = run({"alter": 5.0, "metadata": 1.0}, seconds=10)
    alters = [e for e in history if e["f"] == "alter"]
    ok = [e for e in alters if e["type"] == "ok"]
    assert len(ok) > 10
    cas = [e for e in alters if e["type"] == "invoke" and e["value"]["kind"] == "cas"]
    for e in cas:
        v = e["value"]
        assert v["broker"] in v["isr"] and len(set(v["isr"]) ^ set(v["from_isr"])) == 1  # one member more or less
    kinds = {e["value"]["kind"] for e in alters if e["type"] == "invoke"}
    assert {"cas", "not-leader", "stale"} <= kinds


def test_same_seed_same_ops():
    a = run({"alter": 3.0, "metadata": 1.0, "crash": 0.5, "fence": 0.5, "duplicate": 0.5}, seconds=20, seed=3)
    b = run({"alter": 3.0, "metadata": 1.0, "crash": 0.5, "fence": 0.5, "duplicate": 0.5}, seconds=20, seed=3)
    c = run({"alter": 3.0, "metadata": 1.0, "crash": 0.5, "fence": 0.5, "duplicate": 0.5}, seconds=20, seed=4)
    assert a == b and a != c


def test_an_ahead_alter_names_a_version_one_past_the_newest_known_and_no_isr_it_came_from():
    history = run({"alter": 5.0, "metadata": 1.0}, seconds=20)
    ahead = [e for e in history if e["f"] == "alter" and e["type"] == "invoke" and e["value"]["kind"] == "ahead"]
    assert ahead
    for e in ahead:
        v = e["value"]
        assert v["from_isr"] is None  # no join can be judged from it
        assert v["leader_epoch"] == 1 or v["leader_epoch"] == 0  # the toy's leader epoch is always 0
    assert any(e["value"]["leader_epoch"] == 1 for e in ahead)


def test_the_last_live_broker_is_never_crashed_or_shut_down():
    gen = fleet({"crash": 1.0})
    silent = [replace(s, phase="silent", until=10**12) for s in gen.slots[:2]]
    one_live = replace(gen, slots=(*silent, gen.slots[2]))
    for kind in ("crash", "shutdown"):
        assert one_live._action(Rng(1), kind, 0) is None
        assert replace(gen, slots=(silent[0], *gen.slots[1:]))._action(Rng(1), kind, 0) is not None
    history = run({"metadata": 1.0, "crash": 3.0, "shutdown": 1.0}, seconds=40)
    assert client_ops(history, "heartbeat")[-1]["time"] > 35 * 10**9  # someone still heartbeats at the end


def test_a_new_quorum_epoch_makes_silent_brokers_wait_a_whole_session_before_their_probe():
    gen = fleet({"metadata": 1.0})
    gen = replace(gen, slots=(replace(gen.slots[0], phase="silent", until=1 * 10**9), *gen.slots[1:]))
    first = gen._failover(500 * MS, 3)  # the first epoch seen is no failover
    assert first.leader_epoch == 3 and first.slots[0].until == 1 * 10**9
    after = first._failover(900 * MS, 4)
    assert after.slots[0].until == 900 * MS + gen.params.probe_after_ms * MS
    assert after.slots[1] == gen.slots[1]  # live brokers keep their schedule
    assert after._failover(950 * MS, 4) is after  # the same epoch again changes nothing
