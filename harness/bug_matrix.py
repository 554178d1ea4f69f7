"""The planted-bug matrix: which workload x nemesis x seed catches each planted bug, and a sweep of the
correct cluster that must raise no alarm.

A chaos harness earns trust by catching bugs nobody told it about. `kchaos bugs` switches each planted
bug of node/bugs.py on in a simulated cluster and runs the ordinary `kchaos run` machinery
(`harness.runner.run_test` with sim specs) over cells (workload, nemesis profile, seed), in a fixed
order: every workload under every nemesis profile at seed 1, then at seed 2, and so on. A run whose
verdict is invalid caught the bug; its checkers say how. A bug stops at its first catch (in that
order, so the result does not depend on `--jobs`) unless `--all`, or when its budget of simulated
time is spent (the budget over the planned length of a run is the number of cells it may use). Then
the correct cluster runs `--sweep` seeds (workloads and profiles in turn): any invalid verdict there
is a false alarm.

Workloads and nemesis kinds are picked up by name from the registries `kchaos run` uses, so what other
parts of kraft-chaos add (workloads, fault kinds) joins the matrix without a change here. Runs go to
processes (`--jobs`, the suites' `harness.pool.RunPool`: a run whose process crashes or hangs is an
unknown verdict with the reason, not a broken matrix), their plots are skipped (`kchaos analyze RUN_DIR`
draws them); run directories of catches, false alarms and errors are kept, the others removed unless
`--keep-all`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.test_spec import Cluster, TestSpec
from node.bugs import BY_NAME, CATALOGUE, PlantedBug

NS_PER_S = 1_000_000_000

# Which guarantee (and so which checker or fault) each bug is designed to be seen by, for the report of
# a bug the matrix did not catch: a finding about the harness, not a hint to the checkers.
NEEDS: dict[str, str] = {
    "raft-hwm-before-leader-change-committed": "the elected-behind targeted fault: sim invariants (commit safety)",
    "raft-leader-reelected-same-epoch": "lose_unsynced (power loss) faults in the sim: log matching, committed-loss",
    "raft-leader-never-resigns": "a partial partition (controllers apart, brokers reach all) + a freshness check",
    "raft-vote-not-persisted": "any election on the simulator: sim invariants (votes that elect a leader are durable)",
    "raft-follower-fetch-before-flush": "sim invariants (commit durable on a majority)",
    "raft-read-barrier-counts-late-fetches": "the leader paused past a failover with controller reads queued "
    "at it (8 s pauses: suites/gate.toml's pause-leader cell): linearizable",
    "raft-vote-older-epoch-granted": "a Vote request of an older candidacy delivered late: sim invariants "
    "(epochs never decrease)",
    "raft-vote-granted-twice-in-epoch": "two candidates of one epoch after the leader is killed (the gate's "
    "kill-leader cells): sim invariants (the votes that elect a leader are durable)",
    "raft-election-majority-off-by-one": "any election: sim invariants (election safety, votes that elect are durable)",
    "raft-leader-ignores-last-fetched-epoch": "a follower with a divergent tail after a failover: sim invariants "
    "(log matching, committed entries final)",
    "raft-follower-truncates-to-leader-epoch-end": "fast failovers (a deposed leader's tail on a follower): "
    "sim invariants (a divergence repaired)",
    "raft-describe-quorum-answered-by-non-leader": "DescribeQuorum ops of the played-broker workloads during an "
    "election: quorum-progress (leaderless-answer)",
    "raft-vote-skips-log-up-to-date-check": "elections without pre-vote (pre_vote = false: suites/gate.toml's "
    "no-pre-vote cell) and a voter behind after a power loss: sim invariants (commit safety)",
    "raft-begin-epoch-accepts-older-epoch": "stale copies of BeginQuorumEpoch (the redeliver fault, stale mode) "
    "landing after a newer election: sim invariants (epoch never goes back)",
    "raft-candidate-outbids-higher-epoch": "a leader kill leaving two voters that stand at once: the gate's "
    "elections_per_leader_change (kill-leader cells), or availability when it never ends",
    "raft-end-quorum-epoch-ignored": "graceful stops of the leader (kill signal=TERM): the gate's "
    "leaderless_after_resign_s (graceful-leader cells); every checker stays valid",
    "ctl-fenced-replica-into-isr": "isr-changes / registrations checkers (a fenced broker never joins an ISR); "
    "metadata-answers when the brokers are read through confluent-kafka",
    "ctl-stale-alter-partition-answer": "isr-changes CAS checker with AlterPartition sent to a stale controller",
    "ctl-stale-heartbeat-accepted": "registrations checker (stale broker epochs refused)",
    "ctl-unfence-before-catch-up": "registrations checker (unfenced only after catch-up)",
    "ctl-no-fence-after-failover": "registrations checker (fenced within the session timeout) across failovers",
    "ctl-config-change-not-atomic": "config-append (Elle list-append: multi-key requests, failed ones half applied)",
    "ctl-alter-partition-ignores-partition-epoch": "isr-changes CAS checker (a stale AlterPartition accepted)",
    "ctl-shutdown-before-leaders-moved": "registrations checker (a shut-down broker leads nothing)",
    "ctl-envelope-unauthorized": "the forgery checker (Envelope from a plain client)",
    "ctl-read-without-barrier": "clock-rate faults on the active controller (it answers a stale read)",
    "broker-forward-resend-ambiguous": "a controller crash with forwarded writes committed, unanswered: at-most-once",
    "broker-read-offset-not-applied": "config-append broker image reads (answer = committed image at its offset)",
    "metadata-snapshot-omits-configs": "sim image agreement / linearizable reads after a restart from a snapshot",
    "storage-flush-skips-fsync": "the simulated FileStorage (sim-storage) with power loss, or lazyfs on netns",
    "storage-quorum-state-rename-without-fsync": "the simulated FileStorage (sim-storage) with power loss, or lazyfs",
    "storage-segment-roll-no-dir-fsync": "the simulated FileStorage (sim-storage) with power loss, or lazyfs",
    "storage-crc-not-checked-on-load": "a bit flip (corrupt fault) in a segment the node then loads: sim invariants",
}


@dataclass(frozen=True, slots=True)
class Cell:
    workload: str
    nemesis: tuple[str, ...]
    seed: int

    @property
    def label(self) -> str:
        return f"{self.workload} x {'+'.join(self.nemesis) or 'none'} x seed {self.seed}"


@dataclass(frozen=True)
class MatrixConfig:
    bugs: tuple[str, ...] = tuple(b.name for b in CATALOGUE)
    workloads: tuple[str, ...] = ("config-register",)
    nemeses: tuple[tuple[str, ...], ...] = (("partition",), ("kill",), ("partition", "kill"))
    seeds: int = 10  # seeds per (workload, nemesis profile) a bug may use
    budget_s: float = 300.0  # simulated seconds a bug may use before it counts as not caught
    sweep: int = 200  # correct-cluster runs
    sweep_from: int = 1  # the sweep's first seed: a long sweep can be split over jobs or machines
    cluster: Cluster = field(default_factory=lambda: Cluster(controllers=3, brokers=2))
    time_limit_s: float = 25.0  # with recovery and start-up, 8 runs fit in the 300 s budget
    # A fault every 2 s for 2 s: about 12 faults per run, half again as many as at 3 s, so a profile of
    # every kind together reaches each kind's rarer windows (a leader killed under load, a bit flip in
    # a segment a node then loads) within the budget. Measured: 3 s caught 18 of 20, 2 s all 20.
    nemesis_interval_s: float = 2.0
    nemesis_duration_s: float = 2.0
    recovery_s: float = 10.0  # the availability window: a cluster killed whole needs ~5 s
    rate: float = 50.0
    concurrency: int = 5
    jobs: int = 2
    all_catches: bool = False
    keep_all: bool = False
    results: str = "results"
    run_timeout_s: float | None = 600.0  # a run with no verdict by then is stopped and counted unknown

    def cells(self) -> Iterator[Cell]:
        """Every cell a bug may use, in the matrix's fixed order (seed outermost)."""
        for seed in range(1, self.seeds + 1):
            for nemesis in self.nemeses:
                for workload in self.workloads:
                    yield Cell(workload, nemesis, seed)

    def sweep_cells(self) -> Iterator[Cell]:
        """The correct cluster's runs: `sweep` seeds from `sweep_from`, workloads and nemesis profiles in turn
        (the pair is fixed by the seed, so a sweep split in parts runs the same cells as one sweep)."""
        pairs = [(w, n) for n in self.nemeses for w in self.workloads]
        for seed in range(self.sweep_from, self.sweep_from + self.sweep):
            workload, nemesis = pairs[(seed - 1) % len(pairs)]
            yield Cell(workload, nemesis, seed)

    def spec(self, cell: Cell, bug: str | None) -> TestSpec:
        return TestSpec(
            name=f"bug-{bug}" if bug else "correct",
            seed=cell.seed,
            backend="sim",
            cluster=self.cluster,
            workload=cell.workload,
            nemesis=cell.nemesis,
            nemesis_interval_s=self.nemesis_interval_s,
            nemesis_duration_s=self.nemesis_duration_s,
            time_limit_s=self.time_limit_s,
            concurrency=self.concurrency,
            rate=self.rate,
            recovery_s=self.recovery_s,
            bugs=(bug,) if bug else (),
        )

    def repro(self, cell: Cell, bug: str | None) -> str:
        """The `kchaos run` command that replays one run of the matrix."""
        c = self.cluster
        nodes = f"{c.combined}" if c.combined else f"{c.controllers}+{c.brokers}"
        parts = [
            "kchaos run --backend sim",
            f"--nodes {nodes}",
            f"--workload {cell.workload}",
            f"--nemesis {','.join(cell.nemesis) or 'none'}",
            f"--seed {cell.seed}",
            f"--time-limit {self.time_limit_s:g}s",
            f"--nemesis-interval {self.nemesis_interval_s:g}s",
            f"--nemesis-duration {self.nemesis_duration_s:g}s",
            f"--recovery {self.recovery_s:g}s",
            f"--rate {self.rate:g}",
            f"--concurrency {self.concurrency}",
        ]
        if bug:
            parts.append(f"--bug {bug}")
        return " ".join(parts)


@dataclass
class RunOutcome:
    """One run of the matrix, as the worker process saw it."""

    bug: str | None
    cell: Cell
    position: int  # the cell's place in the bug's order (or the sweep's)
    valid: Any  # True | False | "unknown" | None (the run failed)
    exit_code: int
    sim_s: float  # simulated seconds of the run's phases (the history's span)
    wall_s: float
    failed: list[str]  # checkers that said invalid (sim-invariants included)
    line: str  # the verdict line: the first failing checker's first summary line
    run_dir: str
    error: str | None = None
    snapshot_fetches: int = 0  # snapshots nodes fetched from a leader (KIP-630 catch-up) in this run

    @property
    def caught(self) -> bool:
        return self.valid is False


def run_cell(config: MatrixConfig, bug: str | None, cell: Cell, position: int) -> RunOutcome:
    """Run one cell in this process (a worker of the pool) and keep its directory only when it matters."""
    from harness.runner import run_test

    logging.getLogger("kchaos.sim").setLevel(logging.ERROR)  # the matrix says which bug is on
    start = time.perf_counter()
    root = Path(config.results) / ("bugs" if bug else "sweep")
    result = run_test(config.spec(cell, bug), root=root, say=lambda _: None, progress=False, draw_plots=False)
    run_dir = result.run.path
    results = _read_json(run_dir / "results.json") or {}
    checkers = results.get("checkers", {})
    failed = [name for name, v in checkers.items() if isinstance(v, dict) and v.get("valid") is False]
    line = verdict_line(result.checker_lines, failed)
    outcome = RunOutcome(
        bug,
        cell,
        position,
        result.valid,
        result.exit_code,
        _history_span_s(run_dir / "history.jsonl"),
        time.perf_counter() - start,
        failed,
        line.strip(),
        str(run_dir),
        result.error,
        _snapshot_fetches(run_dir),
    )
    if result.valid is True and not config.keep_all:
        shutil.rmtree(run_dir, ignore_errors=True)
        outcome.run_dir = ""
    return outcome


def outcome_of(future: cf.Future[RunOutcome], bug: str | None, cell: Cell, position: int) -> RunOutcome:
    """The run's outcome; a run whose process crashed or hung (harness.pool.RunLost), or that raised,
    is an `unknown` verdict with the reason, so one bad run never stops the matrix."""
    try:
        return future.result()
    except Exception as exc:
        reason = str(exc) if type(exc).__name__ == "RunLost" else f"{type(exc).__name__}: {exc}"
        return RunOutcome(bug, cell, position, "unknown", 2, 0.0, 0.0, [], f"run lost: {reason}", "", reason)


def verdict_line(lines: Sequence[str], failed: Sequence[str]) -> str:
    """The first summary line of the first failing checker, the simulator's invariants before all
    (reported as "simulator invariants: False (...)"): the simulation stops at a violation, so what
    other checkers then say of the cut-short run (e.g. no write after the heal) follows from it."""
    ordered = sorted(failed, key=lambda name: name != "sim-invariants")
    names = ["simulator invariants" if name == "sim-invariants" else name for name in ordered]
    for name in names:
        for line in lines:
            if line.startswith(name):
                return line.strip()
    return ""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _history_span_s(path: Path, lines: int = 50) -> float:
    """The time of the history's last event (ns since the run started), in seconds: the largest of the
    last `lines` events, read from the end in growing chunks (a final read of a long list is one line
    of tens of KiB, so a fixed tail can hold no whole line)."""
    last = 0
    with contextlib.suppress(OSError), path.open("rb") as f:
        size = f.seek(0, 2)
        chunk = 65536
        while True:
            start = max(0, size - chunk)
            f.seek(start)
            tail = f.read().splitlines()
            if start == 0 or len(tail) > lines:  # the first line of a cut tail may be partial
                break
            chunk *= 4
        for line in tail[-lines:]:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                last = max(last, int(json.loads(line)["time"]))
    return last / NS_PER_S


def _snapshot_fetches(run_dir: Path) -> int:
    total = 0
    for stats in run_dir.glob("nodes/*/node-stats.json"):
        doc = _read_json(stats) or {}
        total += int(doc.get("snapshots_fetched", 0))
    return total


@dataclass
class BugResult:
    bug: PlantedBug
    runs: list[RunOutcome] = field(default_factory=list)
    budget_spent: bool = False

    @property
    def catches(self) -> list[RunOutcome]:
        return sorted((r for r in self.runs if r.caught), key=lambda r: r.position)

    @property
    def first(self) -> RunOutcome | None:
        catches = self.catches
        return catches[0] if catches else None

    @property
    def counted(self) -> list[RunOutcome]:
        """The runs up to and including the first catch, in the matrix's order (every run when none
        caught). Unlike `runs`, which also holds the runs already under way when the first catch came
        back, these are the same however many jobs ran: the figures the bug table prints."""
        first = self.first
        runs = sorted(self.runs, key=lambda r: r.position)
        return runs if first is None else [r for r in runs if r.position <= first.position]

    @property
    def sim_to_catch_s(self) -> float | None:
        """Simulated seconds of every run up to and including the first catch, in the matrix's order."""
        return None if self.first is None else sum(r.sim_s for r in self.counted)

    @property
    def wall_to_catch_s(self) -> float | None:
        return None if self.first is None else sum(r.wall_s for r in self.counted)


@dataclass
class SweepResult:
    runs: list[RunOutcome] = field(default_factory=list)

    @property
    def false_alarms(self) -> list[RunOutcome]:
        return [r for r in self.runs if r.valid is False]

    @property
    def unsure(self) -> list[RunOutcome]:
        """Runs that ended unknown or in an error: not alarms, but not clean either."""
        return [r for r in self.runs if r.valid is not True and r.valid is not False]

    @property
    def with_snapshot_catch_up(self) -> int:
        return sum(1 for r in self.runs if r.snapshot_fetches > 0)


@dataclass
class MatrixResult:
    config: MatrixConfig
    bugs: list[BugResult]
    sweep: SweepResult
    wall_s: float

    @property
    def exit_code(self) -> int:
        """0 when every bug was caught and the correct cluster raised no alarm, else 1."""
        missed = any(b.first is None for b in self.bugs)
        return 1 if missed or self.sweep.false_alarms else 0


class Matrix:
    """Runs the bug cells and the sweep on a process pool (see the module docstring)."""

    def __init__(self, config: MatrixConfig, on_progress: Callable[[str], None] | None = None) -> None:
        unknown = [b for b in config.bugs if b not in BY_NAME]
        if unknown:
            raise ValueError(f"unknown planted bug {unknown[0]!r} (known: {', '.join(sorted(BY_NAME))})")
        self.config = config
        self.say = on_progress or (lambda _text: None)
        # A run's simulated seconds, as planned: the budget allows floor(budget / this) cells per bug, a
        # number fixed in advance so that which cells run never depends on how fast others finished.
        self.run_estimate_s = config.time_limit_s + config.recovery_s + 2.0
        self.max_cells = max(1, int(config.budget_s // self.run_estimate_s))

    def run(self, executor: cf.Executor | None = None) -> MatrixResult:
        from harness.pool import RunPool

        start = time.perf_counter()
        own = executor is None
        pool = executor or RunPool(self.config.jobs, timeout_s=self.config.run_timeout_s)
        try:
            bugs = self._bugs(pool)
            sweep = self._sweep(pool)
        finally:
            if own:
                pool.shutdown(wait=True, cancel_futures=True)
        return MatrixResult(self.config, bugs, sweep, time.perf_counter() - start)

    def _bugs(self, pool: cf.Executor) -> list[BugResult]:
        config = self.config
        results = {name: BugResult(BY_NAME[name]) for name in config.bugs}
        queues = {name: enumerate(config.cells()) for name in config.bugs}
        submitted = dict.fromkeys(config.bugs, 0)
        inflight: dict[cf.Future[RunOutcome], tuple[str, Cell, int]] = {}
        open_bugs = list(config.bugs)

        def wants_more(name: str) -> bool:
            result = results[name]
            if result.first is not None and not config.all_catches:
                return False
            if submitted[name] >= self.max_cells:
                result.budget_spent = True
                return False
            return True

        def fill() -> None:
            """Submit runs round-robin over the open bugs until every job is busy."""
            while open_bugs and len(inflight) < config.jobs:
                for name in list(open_bugs):
                    if len(inflight) >= config.jobs:
                        return
                    step = next(queues[name], None) if wants_more(name) else None
                    if step is None:
                        open_bugs.remove(name)
                        continue
                    position, cell = step
                    submitted[name] += 1
                    inflight[pool.submit(run_cell, config, name, cell, position)] = (name, cell, position)

        while True:
            fill()
            if not inflight:
                break
            done, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
            for future in done:
                name, cell, position = inflight.pop(future)
                outcome = outcome_of(future, name, cell, position)
                results[name].runs.append(outcome)
                verdict = "CAUGHT" if outcome.caught else str(outcome.valid)
                self.say(f"{name}: {outcome.cell.label}: {verdict} ({outcome.sim_s:.0f} s simulated)")
        return [results[name] for name in config.bugs]

    def _sweep(self, pool: cf.Executor) -> SweepResult:
        config = self.config
        sweep = SweepResult()
        cells = list(enumerate(config.sweep_cells()))
        futures = {pool.submit(run_cell, config, None, cell, position): (cell, position) for position, cell in cells}
        for future in cf.as_completed(futures):
            outcome = outcome_of(future, None, *futures[future])
            sweep.runs.append(outcome)
            if outcome.valid is not True:
                self.say(f"correct cluster: {outcome.cell.label}: {outcome.valid} {outcome.line}")
        sweep.runs.sort(key=lambda r: r.position)
        if cells:
            self.say(f"correct cluster: {len(sweep.runs)} runs, {len(sweep.false_alarms)} false alarms")
        return sweep


# --- output -------------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def markdown(result: MatrixResult) -> str:
    """The bug table (docs/figures.md, "The planted-bug matrix"): one row per bug, then the correct cluster's sweep."""
    config = result.config
    rows = [
        "| bug | component | reference | caught by (workload x nemesis x seed) | runs | simulated to catch "
        "| wall to catch | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in result.bugs:
        first = b.first
        if first is None:
            why = "budget spent" if b.budget_spent else "cells exhausted"
            caught = f"**not caught** ({why}); needs: {NEEDS.get(b.bug.name, '?')}"
            verdict = "valid in every run"
        else:
            caught = first.cell.label
            verdict = first.line.replace("|", "/") or ", ".join(first.failed)
        rows.append(
            f"| `{b.bug.name}` | {b.bug.component} | {b.bug.reference} | {caught} | {len(b.counted)} | "
            f"{_seconds(b.sim_to_catch_s)} | {_seconds(b.wall_to_catch_s)} | {_truncate(verdict, 110)} |"
        )
    sweep = result.sweep
    caught = sum(1 for b in result.bugs if b.first is not None)
    sim_total = sum(r.sim_s for b in result.bugs for r in b.counted)
    lines = [
        *rows,
        "",
        f"Caught {caught} of {len(result.bugs)} planted bugs ({sim_total:.0f} s simulated in bug runs). "
        f"Correct cluster: {len(sweep.runs)} seeds, {len(sweep.false_alarms)} false alarms, "
        f"{len(sweep.unsure)} unknown or failed runs, {sweep.with_snapshot_catch_up} of {len(sweep.runs)} runs "
        f"with a catch-up from a snapshot. Cells: {', '.join(config.workloads)} x "
        f"{', '.join('+'.join(n) or 'none' for n in config.nemeses)}; {config.time_limit_s:g} s per run, "
        f"faults every {config.nemesis_interval_s:g} s for {config.nemesis_duration_s:g} s; "
        f"wall {result.wall_s:.0f} s with {config.jobs} jobs.",
    ]
    return "\n".join(lines) + "\n"


def _truncate(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def to_json(result: MatrixResult) -> dict[str, Any]:
    config = result.config

    def run(r: RunOutcome) -> dict[str, Any]:
        return {**asdict(r), "cell": asdict(r.cell), "repro": config.repro(r.cell, r.bug)}

    return {
        "config": asdict(config),
        "bugs": [
            {
                "name": b.bug.name,
                "component": b.bug.component,
                "rule": b.bug.rule,
                "reference": b.bug.reference,
                "guarantee": b.bug.guarantee,
                "caught": b.first is not None,
                "first_catch": run(b.first) if b.first else None,
                "catches": [run(r) for r in b.catches],
                "runs": len(b.counted),  # to the first catch: the same at any --jobs
                "runs_started": len(b.runs),  # with those under way when it came back
                "budget_spent": b.budget_spent,
                "sim_to_catch_s": b.sim_to_catch_s,
                "wall_to_catch_s": b.wall_to_catch_s,
                "needs": None if b.first else NEEDS.get(b.bug.name),
            }
            for b in result.bugs
        ],
        "sweep": {
            "runs": len(result.sweep.runs),
            "false_alarms": [run(r) for r in result.sweep.false_alarms],
            "unsure": [run(r) for r in result.sweep.unsure],
            "with_snapshot_catch_up": result.sweep.with_snapshot_catch_up,
            "sim_s": sum(r.sim_s for r in result.sweep.runs),
        },
        "wall_s": result.wall_s,
        "exit_code": result.exit_code,
    }


def default_nemeses(kinds: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """All fault kinds together first (with the simulator's targeted faults: the mix that reaches the
    most windows per simulated second), then each kind alone (a bug one kind exposes, undiluted),
    `kill` first: with pre-vote (KIP-996) a partitioned voter no longer unseats the leader when it
    returns, so the leader changes that failover bugs need come from leaders that really fail."""
    singles = sorted(((k,) for k in kinds), key=lambda single: single != ("kill",))
    return ((tuple(kinds),) if len(kinds) > 1 else ()) + tuple(singles)


__all__ = [
    "NEEDS",
    "BugResult",
    "Cell",
    "Matrix",
    "MatrixConfig",
    "MatrixResult",
    "RunOutcome",
    "SweepResult",
    "default_nemeses",
    "markdown",
    "run_cell",
    "to_json",
]
