"""Generators: every combinator's behaviour in virtual time, determinism, the nemesis schedule.

Every test that runs a generator runs it under both drivers (the `run` fixture): `run_virtual` and
the runner's `harness.driver.Driver` (on a virtual clock, with the execute model as its client and
nemesis), so the two cannot drift apart again."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.driver import Driver
from vocab.generators import (
    EXHAUSTED,
    NEMESIS,
    PENDING,
    Context,
    Op,
    Outcome,
    any_of,
    clients,
    cycle,
    delay,
    each_process,
    each_worker,
    end_after_ok,
    filter_ops,
    heal_all,
    limit,
    map_ops,
    mix,
    nemesis,
    nemesis_schedule,
    once,
    phases,
    prepare,
    rate,
    repeat,
    run_virtual,
    seconds,
    seq,
    sleep,
    stagger,
    then,
    time_limit,
    whole_run,
)
from vocab.generators.core import NS_PER_MS, Rng
from vocab.generators.interpreter import VirtualClock
from vocab.invocation import Completion

MS = NS_PER_MS


def fixed(latency_ms: float = 1.0, type_: str = "ok"):
    """An execute model: every op completes after `latency_ms` with `type_`."""

    def execute(op: Op, rng: Rng) -> Outcome:
        return Outcome(type_, int(latency_ms * MS), op.value)

    return execute


class Modelled:
    """A `Handler` that completes each op as the execute model says, `latency` later on the clock."""

    def __init__(self, execute, rng: Rng, clock: VirtualClock) -> None:
        self.execute, self.rng, self.clock = execute, rng, clock

    def invoke(self, op: Op, done) -> None:
        outcome = self.execute(op, self.rng)
        completion = Completion(outcome.type, outcome.value, outcome.node, outcome.error)
        self.clock.call_at(self.clock.now() + max(0, outcome.latency), done, completion)


def run_driver(gen, execute, concurrency: int, seed: int, with_nemesis: bool) -> list[dict]:
    """`gen` through the runner's Driver, with run_virtual's randomness for the model."""
    events: list[dict] = []
    clock = VirtualClock()
    model = Modelled(execute, Rng(seed ^ 0x5DEECE66D), clock)  # the stream run_virtual gives `execute`
    driver = Driver(
        clock,  # type: ignore[arg-type]  # a Clock is all the Driver asks of its scheduler
        model,
        model if with_nemesis else None,
        concurrency=concurrency,
        sink=lambda e: events.append({"index": len(events), **e}),
        op_timeout_s=1e9,  # the model decides every outcome; no harness timeouts
    )
    driver.run(gen, seed)
    return events


DRIVERS = {"run_virtual": run_virtual, "driver": run_driver}


@pytest.fixture(params=sorted(DRIVERS))
def run(request):
    """Runs a generator (default model: every op ok after 1 ms) under one of the two drivers."""
    drive = DRIVERS[request.param]

    def run(gen, execute=None, concurrency: int = 3, seed: int = 1, nemesis_worker: bool = True) -> list[dict]:
        return drive(gen, execute or fixed(), concurrency=concurrency, seed=seed, with_nemesis=nemesis_worker)

    return run


def invokes(history: list[dict], process=None) -> list[dict]:
    return [e for e in history if e["type"] == "invoke" and (process is None or e["process"] == process)]


def counter(f: str = "x"):
    """An infinite source: op i has value i."""
    return lambda rng, i: Op(f, i)


def ctx(now: int = 0, concurrency: int = 2, free=None) -> Context:
    workers = {w: w for w in range(concurrency)}
    workers[NEMESIS] = NEMESIS
    return Context.of(now, workers, workers if free is None else free)


# --- leaves and the protocol -----------------------------------------------------------------------


def test_once_is_emitted_once_on_the_first_free_worker_now():
    step = once("read", key="k").op(ctx(now=5, free=[1, NEMESIS]))
    op, after = step
    assert (op.f, op.key, op.process, op.time, op.type) == ("read", "k", 1, 5, "invoke")
    assert after.op(ctx()) is EXHAUSTED
    assert once("read").op(ctx(free=[])) is PENDING


def test_op_is_a_pure_query():
    gen = prepare(mix(stagger(0.01, counter("a")), counter("b")), seed=3)
    c = ctx(now=100)
    first, second = gen.op(c), gen.op(c)
    assert first[0] == second[0]
    assert first[1].op(c)[0] == second[1].op(c)[0]


def test_fn_counts_its_ops_and_none_ends_it(run):
    history = run(lambda rng, i: Op("w", i) if i < 4 else None)
    assert [e["value"] for e in invokes(history)] == [0, 1, 2, 3]


def test_limit_caps_an_infinite_source(run):
    assert len(invokes(run(limit(7, counter())))) == 7
    assert invokes(run(limit(0, counter()))) == []


# --- sequencing --------------------------------------------------------------------------------------


def test_seq_does_not_wait_but_then_and_phases_do(run):
    slow = fixed(latency_ms=50)
    no_wait = invokes(run(seq(once("a"), once("b")), slow, concurrency=2))
    assert [(e["f"], e["time"]) for e in no_wait] == [("a", 0), ("b", 0)]
    waited = invokes(run(then(once("a"), once("b")), slow, concurrency=2))
    assert [(e["f"], e["time"]) for e in waited] == [("a", 0), ("b", 50 * MS)]


def test_phases_start_only_when_every_worker_is_free(run):
    def varied(op: Op, rng: Rng) -> Outcome:
        return Outcome("ok", ((op.value or 0) % 5 + 1) * 10 * MS, op.value)

    history = run(phases(limit(9, counter("p1")), limit(3, counter("p2")), once("p3")), varied, concurrency=4)
    p1_done = max(e["time"] for e in history if e["f"] == "p1" and e["type"] == "ok")
    p2 = [e for e in history if e["f"] == "p2"]
    assert min(e["time"] for e in p2 if e["type"] == "invoke") == p1_done
    p3 = invokes(history)[-1]
    assert p3["f"] == "p3" and p3["time"] == max(e["time"] for e in p2)
    assert Counter(e["f"] for e in invokes(history)) == {"p1": 9, "p2": 3, "p3": 1}


def test_cycle_restarts_its_generator(run):
    fs = [e["f"] for e in invokes(run(cycle(seq(once("a"), once("b")), times=3), concurrency=1))]
    assert fs == ["a", "b"] * 3
    assert invokes(run(cycle(seq()))) == []  # an empty cycle ends instead of spinning


def test_cycle_copies_get_fresh_randomness(run):
    draws = lambda rng, i: Op("r", rng.below(1_000_000)) if i == 0 else None  # noqa: E731
    values = [e["value"] for e in invokes(run(cycle(draws, times=5), concurrency=1))]
    assert len(values) == 5 and len(set(values)) == 5


def test_repeat_emits_the_first_op_without_advancing(run):
    history = run(repeat(counter("r"), times=4), concurrency=2)
    assert [e["value"] for e in invokes(history)] == [0, 0, 0, 0]


# --- choosing ----------------------------------------------------------------------------------------


def test_mix_draws_from_all_and_drops_exhausted_sources(run):
    fs = Counter(e["f"] for e in invokes(run(limit(400, mix(counter("a"), counter("b"))))))
    assert fs["a"] + fs["b"] == 400 and 150 < fs["a"] < 250
    exact = Counter(e["f"] for e in invokes(run(mix(limit(3, counter("a")), limit(50, counter("b"))))))
    assert exact == {"a": 3, "b": 50}


def test_any_of_takes_the_soonest_op(run):
    late = delay(1.0, counter("late"))
    soon = delay(0.1, counter("soon"))
    history = run(time_limit(2.0, any_of(late, soon)), concurrency=2)
    late_times = [e["time"] for e in invokes(history) if e["f"] == "late"]
    assert late_times == [0, seconds(1.0)]
    assert len([e for e in invokes(history) if e["f"] == "soon"]) == 20


# --- routing -----------------------------------------------------------------------------------------


def test_clients_and_nemesis_route_to_their_workers(run):
    gen = any_of(clients(limit(20, counter("c"))), nemesis(limit(3, counter("n"))))
    history = run(gen, concurrency=2)
    for e in history:
        assert (e["process"] == NEMESIS) == (e["f"] == "n")
    assert len(invokes(history)) == 23
    assert invokes(run(nemesis(once("n")), nemesis_worker=False)) == []


def test_each_worker_gives_every_worker_its_own_copy(run):
    history = run(each_worker(seq(once("a"), once("b"))), concurrency=3, nemesis_worker=False)
    per_process = {p: [e["f"] for e in invokes(history, p)] for p in range(3)}
    assert per_process == {0: ["a", "b"], 1: ["a", "b"], 2: ["a", "b"]}


def test_each_process_starts_a_fresh_copy_after_info(run):
    def crash_first(op: Op, rng: Rng) -> Outcome:
        return Outcome("info" if (op.process, op.value) == (0, 0) else "ok", MS, op.value)

    history = run(each_process(limit(2, counter())), crash_first, concurrency=2, nemesis_worker=False)
    by_process = {p: [e["value"] for e in invokes(history, p)] for p in (0, 1, 2)}
    # process 0 crashed on its first op; worker 0 goes on as process 2 with a fresh copy
    assert by_process == {0: [0], 1: [0, 1], 2: [0, 1]}


def test_filter_and_map_shape_the_stream(run):
    evens = filter_ops(lambda op: op.value % 2 == 0, limit(10, counter()))
    assert [e["value"] for e in invokes(run(evens))] == [0, 2, 4, 6, 8]
    keyed = map_ops(lambda op: Op(op.f, op.value, op.process, op.type, op.time, key="k9"), limit(2, counter()))
    assert [e["key"] for e in invokes(run(keyed))] == ["k9", "k9"]


# --- time ---------------------------------------------------------------------------------------------


def test_time_limit_stops_issuing_at_the_cutoff(run):
    history = run(time_limit(1.0, delay(0.1, counter())), concurrency=2)
    times = [e["time"] for e in invokes(history)]
    assert times == [i * seconds(0.1) for i in range(10)]


def test_time_limit_is_not_ended_by_a_late_op_while_others_are_busy(run):
    # the only client is busy when the nemesis offers an op due after the cutoff
    main = time_limit(1.0, any_of(clients(counter("c")), nemesis(nemesis_schedule(["kill"], 5.0, 1.0))))
    history = run(seq(main, nemesis(once("next"))), fixed(latency_ms=100), concurrency=1)
    assert [e["f"] for e in invokes(history)] == ["c"] * 10 + ["next"]


def writes_at(*indices: int):
    """Op i is a write ("w") at `indices`, a read ("r") elsewhere."""
    return lambda rng, i: Op("w" if i in indices else "r", i)


def is_w(event: Op) -> bool:
    return event.f == "w"


def test_end_after_ok_ends_a_tail_after_the_first_ok_write(run):
    history = run(end_after_ok(is_w, 0.5, time_limit(10.0, delay(0.1, writes_at(7)))), concurrency=2)
    times = [e["time"] for e in invokes(history)]
    # op 7 is invoked at 0.7 s and acknowledged 1 ms later: ops go on until 1.201 s, then none
    assert times == [i * seconds(0.1) for i in range(13)]


def test_end_after_ok_without_a_counted_ok_is_its_generator(run):
    history = run(end_after_ok(is_w, 0.5, time_limit(2.0, delay(0.1, writes_at()))), concurrency=2)
    assert len(invokes(history)) == 20

    def writes_fail(op: Op, rng: Rng) -> Outcome:
        return Outcome("fail" if op.f == "w" else "ok", MS, op.value)

    history = run(end_after_ok(is_w, 0.5, time_limit(2.0, delay(0.1, writes_at(3, 4)))), writes_fail)
    assert len(invokes(history)) == 20  # writes that failed do not end it


def test_end_after_ok_counts_only_ops_invoked_after_the_settle(run):
    gen = end_after_ok(is_w, 0.5, time_limit(10.0, delay(0.1, writes_at(1, 8))), settle_s=0.45)
    times = [e["time"] for e in invokes(run(gen, concurrency=2))]
    # the write at 0.1 s was invoked before the settle ended; the one at 0.8 s counts: until 1.301 s
    assert times == [i * seconds(0.1) for i in range(14)]


def test_end_after_ok_leaves_its_generators_randomness_alone(run):
    """Wrapped, a random generator draws what it draws unwrapped: the ops are the same up to the end."""
    plain = invokes(run(time_limit(3.0, rate(50, writes_at(40))), concurrency=2))
    tailed = invokes(run(end_after_ok(is_w, 0.2, time_limit(3.0, rate(50, writes_at(40)))), concurrency=2))
    assert 40 < len(tailed) < len(plain) and tailed == plain[: len(tailed)]


def test_rate_gives_the_requested_throughput_in_virtual_time(run):
    history = run(time_limit(20.0, rate(200, counter())), fixed(latency_ms=2), concurrency=10)
    n = len(invokes(history))
    assert 3600 <= n <= 4400  # 200/s for 20 s, random spacing
    gaps = [b["time"] - a["time"] for a, b in zip(invokes(history), invokes(history)[1:])]
    assert min(gaps) >= 0 and len(set(gaps)) > 100  # random, not fixed


def test_rate_is_capped_by_the_workers(run):
    # 2 workers, 100 ms per op: at most 20 ops/s whatever the rate asks
    history = run(time_limit(5.0, rate(1000, counter())), fixed(latency_ms=100), concurrency=2, nemesis_worker=False)
    assert len(invokes(history)) == 100


def test_delay_spaces_ops_exactly(run):
    times = [e["time"] for e in invokes(run(limit(5, delay(0.25, counter()))))]
    assert times == [0, seconds(0.25), seconds(0.5), seconds(0.75), seconds(1.0)]


def test_stagger_mean_gap_is_dt(run):
    times = [e["time"] for e in invokes(run(limit(2001, stagger(0.01, counter())), concurrency=50))]
    mean_gap = (times[-1] - times[0]) / 2000
    assert 0.9 * seconds(0.01) <= mean_gap <= 1.1 * seconds(0.01)


def test_sleep_holds_a_worker_and_is_not_recorded(run):
    history = run(phases(once("a"), sleep(2.0), once("b")), concurrency=2)
    assert [(e["f"], e["type"]) for e in history] == [("a", "invoke"), ("a", "ok"), ("b", "invoke"), ("b", "ok")]
    assert history[2]["time"] == MS + seconds(2.0)


# --- determinism --------------------------------------------------------------------------------------


def noisy(op: Op, rng: Rng) -> Outcome:
    if op.process == NEMESIS:
        return Outcome("info", 5 * MS, {"targets": ["n1"]})
    roll = rng.random()
    return Outcome("ok" if roll < 0.8 else "fail" if roll < 0.9 else "info", rng.randint(MS, 30 * MS), op.value)


def full(kinds=("partition", "kill")):
    client = rate(100, mix(lambda rng, i: Op("read", key=f"k{rng.below(3)}"), lambda rng, i: Op("write", i)))
    return whole_run(client, nemesis_schedule(kinds, 1.0, 0.5), 6.0, kinds, 1.0, each_worker(once("read")))


def test_same_seed_same_history_other_seed_other_history(run):
    a, b, c = run(full(), noisy, concurrency=5, seed=7), run(full(), noisy, 5, 7), run(full(), noisy, 5, 8)
    assert a == b
    assert a != c


# --- the nemesis schedule and the final phase ----------------------------------------------------------


def test_nemesis_schedule_alternates_start_and_stop_with_interval_and_duration(run):
    history = run(time_limit(20.0, nemesis(nemesis_schedule(["partition", "kill"], 2.0, 1.0))), noisy, seed=4)
    nem = [e for e in history if e["process"] == NEMESIS]
    assert {e["type"] for e in nem} == {"invoke", "info"}
    invoked = [e for e in nem if e["type"] == "invoke"]
    actions = [e["f"].split("-", 1) for e in invoked]
    assert [a for a, _ in actions] == ["start", "stop"] * (len(actions) // 2)
    assert all(actions[i][1] == actions[i + 1][1] for i in range(0, len(actions), 2))
    assert {k for _, k in actions} == {"partition", "kill"}
    completed = [e for e in nem if e["type"] == "info"]
    assert invoked[0]["time"] == seconds(2.0)
    for i in range(1, len(invoked)):
        gap = invoked[i]["time"] - completed[i - 1]["time"]
        assert gap == (seconds(1.0) if actions[i][0] == "stop" else seconds(2.0))


def test_a_failed_start_gets_no_stop(run):
    def start_fails(op: Op, rng: Rng) -> Outcome:
        return Outcome("fail" if op.f.startswith("start") else "info", MS)

    history = run(time_limit(10.0, nemesis(nemesis_schedule(["kill"], 1.0, 1.0))), start_fails)
    assert {e["f"] for e in history} == {"start-kill"}


def test_nemesis_schedule_modes_are_plain_data(run):
    gen = nemesis(nemesis_schedule(["partition"], 1.0, 1.0, modes={"partition": ["isolate-leader"]}))
    starts = [e for e in invokes(run(time_limit(10.0, gen), noisy)) if e["f"] == "start-partition"]
    assert starts and all(e["value"] == {"mode": "isolate-leader"} for e in starts)


def test_heal_all_stops_each_kind_once(run):
    history = run(nemesis(heal_all(["kill", "partition", "kill"])), noisy)
    assert [e["f"] for e in invokes(history)] == ["stop-kill", "stop-partition"]


def test_whole_run_heals_then_recovers_then_reads_once_per_worker(run):
    history = run(full(), noisy, concurrency=4, seed=11)
    heal_at = next(i for i, e in enumerate(history) if e["f"] == "stop-kill" and e["time"] >= seconds(5.0))
    heals = history[heal_at : heal_at + 4]
    assert [(e["f"], e["type"]) for e in heals] == [
        ("stop-kill", "invoke"),
        ("stop-kill", "info"),
        ("stop-partition", "invoke"),
        ("stop-partition", "info"),
    ]
    main = [e for e in history[:heal_at] if e["process"] != NEMESIS]
    assert max(e["time"] for e in invokes(main)) < seconds(6.0)
    assert history[heal_at]["time"] >= max(e["time"] for e in main)  # every client op finished first
    finals = history[heal_at + 4 :]
    assert [e["f"] for e in invokes(finals)] == ["read"] * 4
    assert min(e["time"] for e in finals) == heals[-1]["time"] + seconds(1.0)
    assert len({e["process"] for e in invokes(finals)}) == 4


@pytest.mark.parametrize("kinds", [(), ("kill",)])
def test_whole_run_without_faults_or_with_one_kind(run, kinds):
    history = run(full(kinds), noisy, concurrency=2, seed=2)
    allowed = {f"{a}-{k}" for a in ("start", "stop") for k in kinds}
    assert {e["f"] for e in history if e["process"] == NEMESIS} <= allowed
    assert invokes(history)[-1]["f"] == "read"


# --- the two drivers -------------------------------------------------------------------------------


def test_both_drivers_write_the_same_history():
    for seed in (1, 7):
        virtual = run_virtual(full(), noisy, concurrency=5, seed=seed)
        assert len(virtual) > 500
        assert run_driver(full(), noisy, concurrency=5, seed=seed, with_nemesis=True) == virtual


def test_an_op_without_a_time_is_due_now(run):
    """`Op.time` None means "now", in a template and in both drivers (`run_virtual` used to crash on
    it while the runner's Driver took it as now)."""
    untimed = map_ops(lambda op: Op(op.f, op.value, op.process), limit(3, counter()))
    history = run(untimed, fixed(latency_ms=50), concurrency=1, nemesis_worker=False)
    assert [(e["value"], e["time"]) for e in invokes(history)] == [(0, 0), (1, 50 * MS), (2, 100 * MS)]
