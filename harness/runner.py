"""One `kchaos run`: a test from nothing to a verdict, on the sim or netns backend, by one code path.

Phases (issue 5): create the run directory and save test.json → provision hosts (backend.setup) →
install and start the cluster (db.install) → wait until ready → workload setup (topics) → run: the
client generator and the nemesis schedule side by side for the time limit → heal every fault → the
end of the run (`EndOfRun`): the recovery window (the clients keep running the workload for
`recovery_s`, after a reset clock has caught up with the true time, or until `recovery_tail_s` after
its first committed write; the availability checker wants a write committed in it) → recover
(restart what is down, wait until ready) → final reads → collect node logs and dumps (over HTTP while
the nodes run, then from their clean stop unless `leave_db_running`) → `analyze_run` with the
workload's checkers and the end-of-run checks → exit code. From the start of the run phase to the
final reads the adapter's `tap` runs every `db.tap_every_s` (`PeriodicTap`).

The run phase is `harness.driver.Driver` on the backend's scheduler: the simulator's queue for sim
(virtual time, deterministic: same seed, same history.jsonl byte for byte), an asyncio loop for
netns. Every event goes to history.jsonl as it happens (one flushed line each). Host resources are
undone on every exit path the process survives (normal end, error, Ctrl-C, SIGTERM); after a
SIGKILL, `kchaos heal RUN_DIR` undoes them from the backend's ledger.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import store
from harness.backends.shell import BackendError
from harness.db import make_db
from harness.driver import Driver, DriverStats
from harness.history_writer import HistoryWriter
from harness.plugins import get_workload, make_nemesis
from harness.progress import Progress
from vocab.backend import Backend
from vocab.db import DB, DBError
from vocab.errors import EXIT_ERROR, EXIT_INVALID, UserError
from vocab.faults.catalogue import HEAL_ORDER, TARGETED_KIND
from vocab.faults.options import all_options
from vocab.generators import (
    Op,
    clients,
    end_after_ok,
    fault_timeline,
    heal_all,
    main_phase,
    nemesis,
    nemesis_schedule,
    phases,
    rate,
    replay_phase,
    time_limit,
)
from vocab.generators.schedule import TimedFault
from vocab.schedulers import RealtimeScheduler, Scheduler, VirtualScheduler
from vocab.workload import WorkloadEnv, WorkloadRun

# A replayed timeline that falls behind (`replay_phase`) runs on past the time limit, up to this many
# times it: over ssh into TCG guests a fault takes seconds (a kill of three nodes ~12 s), one at a time.
REPLAY_MAX = 3.0
RECOVER_TIMEOUT_S = 90.0
OP_TIMEOUT_MARGIN_S = 5.0


@dataclass
class RunResult:
    """What a run ended with. `exit_code`: 0 valid, 1 invalid, 2 unknown, 254 the run itself failed."""

    run: store.RunDir
    valid: Any  # True | False | "unknown" | None when it never got to the analysis
    exit_code: int
    stats: DriverStats | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    checker_lines: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # phase -> wall seconds


def make_backend(spec: Any, run_dir: Path) -> Backend:
    if spec.backend == "sim":
        from harness.backends.sim import SimBackend, run_cluster_options
        from harness.db.kraft_settings import sim_settings

        c = spec.cluster
        settings = sim_settings(getattr(spec, "sut_settings", {}))  # --sut-setting wins, as on real nodes
        return SimBackend(
            controllers=c.controllers,
            brokers=c.brokers,
            combined=c.combined,
            seed=spec.seed,
            targeted=spec.nemesis_buggify and bool(spec.nemesis),
            cluster_options={**run_cluster_options(spec.bugs), **settings.cluster},
            raft={**({} if getattr(spec, "pre_vote", True) else {"pre_vote": False}), **settings.raft},
        )
    if spec.backend == "netns":
        from harness.backends.netns import NetnsBackend

        if os.geteuid() != 0:
            raise UserError("--backend netns needs root (network namespaces); use --backend sim")
        return NetnsBackend(run_dir, spec.nodes)
    if spec.backend == "docker":
        from harness.backends.docker import DockerBackend

        if os.geteuid() != 0:
            raise UserError("--backend docker needs root (it attaches the containers' namespaces); use --backend sim")
        return DockerBackend(run_dir, spec.nodes, say=lambda text: print(f"kchaos run: {text}", file=sys.stderr))
    if spec.backend == "ssh":
        from harness.backends.ssh import SshBackend

        if not getattr(spec, "inventory", ""):
            raise UserError("--backend ssh needs --inventory FILE (the hosts to run on)")
        return SshBackend(run_dir, spec.nodes, spec.inventory)
    raise UserError(f"backend {spec.backend!r} is not implemented (choose sim, netns, docker or ssh)")


def make_scheduler(backend: Backend) -> Scheduler:
    from harness.backends.sim import SimBackend

    return backend.scheduler() if isinstance(backend, SimBackend) else RealtimeScheduler()


def build_main_generator(
    spec: Any, workload: WorkloadRun, targeted: bool = False, timeline: Sequence[TimedFault] | None = None
) -> Any:
    """Clients at `rate` beside the nemesis schedule for the time limit, then heal every fault
    (with `targeted`, the simulator's targeted faults too). With `timeline` (`kchaos reproduce`), the
    nemesis replays those ops at their times instead of following a schedule, and the clients run on
    until the last of them has been carried out (`replay_phase`), however far behind it fell."""
    client_gen = rate(spec.rate, workload.generator())
    kinds = list(spec.nemesis)
    if not kinds:
        return main_phase(client_gen, [], spec.time_limit_s)
    if timeline is not None:
        main = replay_phase(client_gen, fault_timeline(timeline), spec.time_limit_s, REPLAY_MAX * spec.time_limit_s)
    else:
        options = all_options(kinds, spec.nemesis_modes, spec.nemesis_options)
        schedule = nemesis_schedule(
            kinds,
            spec.nemesis_interval_s,
            spec.nemesis_duration_s,
            modes={k: o.modes for k, o in options.items()},
            weights={k: o.weight for k, o in options.items()},
            max_active=spec.nemesis_max_active or len(kinds),
            draw=spec.nemesis_draw,
        )
        main = main_phase(client_gen, schedule, spec.time_limit_s)
    healed = [*kinds, TARGETED_KIND] if targeted else kinds
    return phases(main, nemesis(heal_all(healed, HEAL_ORDER)))


class Run:
    """The state of one run while its phases go by (see the module docstring)."""

    def __init__(
        self,
        spec: Any,
        run: store.RunDir,
        *,
        say: Callable[[str], None],
        progress: bool | None,
        timeline: Sequence[TimedFault] | None = None,
    ) -> None:
        self.spec = spec
        self.run = run
        self.timeline = timeline
        self.say = say
        self.progress_live = progress
        self.warnings: list[str] = []
        self.backend: Backend | None = None
        self.db: DB | None = None
        self.scheduler: Scheduler | None = None
        self.workload: WorkloadRun | None = None
        self.writer: HistoryWriter | None = None
        self.stats: DriverStats | None = None
        self.sim_violation: str | None = None
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def _phase(self, name: str) -> Any:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def execute(self) -> None:
        spec = self.spec
        self.backend = make_backend(spec, self.run.path)
        with self._host_guard():
            self.say(f"provisioning {len(spec.nodes)} {spec.backend} hosts: {', '.join(spec.nodes)}")
            with self._phase("provision"):
                self.backend.setup()
                self.backend.enable_faults(spec.nemesis)
            self.db = make_db(spec.sut, spec)
            self.say(f"starting the {spec.sut} cluster ({spec.cluster.describe()})")
            with self._phase("start"):
                self.db.install(self.backend, self.run.path)
                self.db.wait_ready(spec.ready_timeout_s)
                self.scheduler = make_scheduler(self.backend)
                env = WorkloadEnv(spec, self.db, self.backend, self.scheduler, spec.seed)
                self.workload = make_workload(spec, env)
                self.workload.setup()
            try:
                with self._phase("run"):
                    self._run_phases()
            finally:
                if self.writer is not None:
                    self.writer.close()
                self._close_workload()
            with self._phase("collect"):
                self._collect()

    def _run_phases(self) -> None:
        spec, scheduler, db, workload = self.spec, self.scheduler, self.db, self.workload
        assert scheduler is not None and db is not None and workload is not None and self.backend is not None
        self.writer = HistoryWriter(self.run.history_jsonl)
        options = all_options(spec.nemesis, spec.nemesis_modes, spec.nemesis_options)
        the_nemesis = make_nemesis(self.backend, db, scheduler, spec.seed, options) if spec.nemesis else None
        timeout = int(spec.workload_options.get("request_timeout_ms", 5_000)) / 1000 + OP_TIMEOUT_MARGIN_S
        forger = self._forger()
        scheduler.reset()
        progress = Progress(
            spec.time_limit_s,
            clock_ns=scheduler.now,
            faults=(lambda: the_nemesis.active) if the_nemesis else list,
            live=False if scheduler.virtual else self.progress_live,
            quiet=self.progress_live is False,  # `--no-progress` and batch runs: no line at all
            every_s=float("inf") if scheduler.virtual else 10.0,
        )
        driver = Driver(
            scheduler,
            workload.client(),
            the_nemesis,
            concurrency=spec.concurrency,
            sink=self.writer.write,
            op_timeout_s=timeout,
            on_event=progress.on_event,
        )
        self.say(f"running {spec.workload} for {spec.time_limit_s:g} s, nemesis {'+'.join(spec.nemesis) or 'none'}")
        targeted = self._start_targeted(driver)
        tap = PeriodicTap(scheduler, db, self.warnings)
        tap.start()
        try:
            with progress if not scheduler.virtual else contextlib.nullcontext(), self._side(forger):
                self.stats = driver.run(build_main_generator(spec, workload, targeted, self.timeline), spec.seed)
                if forger is not None:
                    forger.stop()
                if self._simulation_stopped():
                    return
                settle_s = max(0, the_nemesis.settled_at_ns - scheduler.now()) / 1e9 if the_nemesis else 0.0
                self.stats = EndOfRun(spec, db, workload, driver, progress, self.warnings, settle_s).run()
                self._simulation_stopped()
        finally:
            tap.stop()

    def _start_targeted(self, driver: Driver) -> bool:
        """The backend's targeted faults (sim: node.sim.buggify) for the main phase, each firing in
        the history as a nemesis `start-buggify`/`stop-buggify` pair; the final heal ends them."""
        start = getattr(self.backend, "start_targeted", None)
        if start is None or not self.spec.nemesis:
            return False
        return bool(start(lambda action, value: driver.record_external(f"{action}-{TARGETED_KIND}", value)))

    def _forger(self) -> Any:
        """The forger side process (harness/forger.py) when the test has one and the cluster is kraft."""
        if not getattr(self.spec, "forger", False) or self.spec.sut != "kraft":
            return None
        from harness.forger import make_forger

        assert self.writer is not None and self.scheduler is not None
        forger = make_forger(self.db, self.backend, self.scheduler, self.writer.write, self.spec.seed)
        forger.setup()
        return forger

    @contextlib.contextmanager
    def _side(self, forger: Any) -> Any:
        """The forger runs beside the main phase; whatever it still waits for when the run ends is `info`."""
        if forger is not None:
            forger.start()
        try:
            yield
        finally:
            if forger is not None:
                forger.close()

    def simulation_violation(self) -> str | None:
        """The simulator's invariant violation, if the run is on the simulator and one happened."""
        from harness.backends.sim import SimBackend

        if isinstance(self.backend, SimBackend) and self.backend.sim is not None:
            violation = self.backend.sim.violation
            return None if violation is None else str(violation)
        return None

    def _simulation_stopped(self) -> bool:
        """True when the simulation stopped on an invariant violation (the run is then invalid)."""
        if isinstance(self.scheduler, VirtualScheduler) and self.scheduler.stopped_by_simulation:
            violation = self.scheduler.sim.violation
            if violation is not None:
                self.sim_violation = str(violation)
                return True
        return False

    def _close_workload(self) -> None:
        with contextlib.suppress(Exception):
            if self.workload is not None:
                self.workload.close()

    def _collect(self) -> None:
        assert self.db is not None
        stop = not self.spec.leave_db_running
        self.say("collecting node logs and dumps" + (", stopping the cluster" if stop else ""))
        self.warnings += self.db.collect(self.run.path, stop=stop)
        if self.sim_violation:
            (self.run.node_dir("_sim") / "invariant-violation.txt").write_text(self.sim_violation + "\n")

    @contextlib.contextmanager
    def _host_guard(self) -> Any:
        """Tear the hosts down however the block ends, unless the cluster is to be left running."""
        from harness.backends.signals import exit_on_termination

        with exit_on_termination():
            try:
                yield
            except BaseException:
                self._teardown(force=True)
                raise
            else:
                self._teardown(force=False)

    def _teardown(self, *, force: bool) -> None:
        if self.spec.leave_db_running and not force:
            if self.spec.backend != "sim":
                self.say(f"cluster left running; `kchaos heal {self.run.path}` removes it")
            return
        with contextlib.suppress(Exception):
            if self.db is not None:
                self.db.teardown()
        if self.scheduler is not None:
            self.scheduler.close()
        if self.backend is not None:
            try:
                self.backend.teardown()
            except Exception as exc:  # a failed heal never blocks the analysis (BRIEF §3.5)
                self.warnings.append(f"teardown: {exc}")


def make_workload(spec: Any, env: WorkloadEnv) -> WorkloadRun:
    """The run's workload; options it cannot use are the test's fault (a one-line error, exit 254)."""
    try:
        return get_workload(spec.workload, spec.sut).make(env)
    except (ValueError, TypeError) as exc:
        raise UserError(f"workload {spec.workload}: [workload_options] {exc}") from None


class EndOfRun:
    """After the final heal: the recovery window, recover, final reads (see the module docstring)."""

    def __init__(
        self,
        spec: Any,
        db: DB,
        workload: WorkloadRun,
        driver: Driver,
        progress: Progress,
        warnings: list[str],
        settle_s: float = 0.0,
    ) -> None:
        self.spec, self.db, self.workload, self.driver = spec, db, workload, driver
        self.progress, self.warnings = progress, warnings
        self.settle_s = settle_s  # a reset clock still catching up with the true time: the window waits

    def run(self) -> DriverStats:
        spec, driver = self.spec, self.driver
        stats = driver.stats
        self.progress.phase = "recover"
        if spec.recovery_s > 0:
            window = rate(spec.rate, self.workload.recovery_generator())
            if spec.recovery_tail_s is not None:
                window = end_after_ok(self._counts_as_write(), spec.recovery_tail_s, window, self.settle_s)
            window = time_limit(self.settle_s + spec.recovery_s, window)
            stats = driver.run(clients(window), spec.seed + 2)
        if not self.db.recover(RECOVER_TIMEOUT_S):
            why = self.db.recovery_problem
            self.warnings.append(
                f"the cluster did not recover within {RECOVER_TIMEOUT_S:.0f} s of the heal"
                + (f": {why}" if why else "")
            )
        final = self.workload.final_generator() if spec.final_reads else None
        if final is not None:
            self.progress.phase = "final reads"
            stats = driver.run(clients(final), spec.seed + 1)
        return stats

    def _counts_as_write(self) -> Callable[[Op], bool]:
        """A completion the availability checker would count as a write (its `write_f` for this run)."""
        from checkers.availability import changes_something
        from harness.run_report import availability_write_fs

        fs = availability_write_fs(self.spec.to_dict())
        return lambda event: changes_something(event.f, event.value, fs)


class PeriodicTap:
    """Calls `db.tap()` every `db.tap_every_s` of run time until stopped, one call at a time, as
    blocking work (in the simulator it runs inline, deterministically). A failing tap is reported once."""

    def __init__(self, scheduler: Scheduler, db: DB, warnings: list[str]) -> None:
        self.scheduler, self.db, self.warnings = scheduler, db, warnings
        self.stopped = False
        self.failed = False

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        self.stopped = True

    def _schedule(self) -> None:
        if not self.stopped:
            self.scheduler.call_at(self.scheduler.now() + int(self.db.tap_every_s * 1e9), self._fire)

    def _fire(self) -> None:
        if not self.stopped:
            self.scheduler.blocking(lambda: self.db.tap(self.scheduler.now), self._done)

    def _done(self, _result: Any, error: BaseException | None) -> None:
        if error is not None and not self.failed:
            self.failed = True
            self.warnings.append(f"log tap: {type(error).__name__}: {error}")
        self._schedule()


def run_test(
    spec: Any,
    *,
    root: str | os.PathLike[str] | None = None,
    say: Callable[[str], None] | None = None,
    progress: bool | None = None,
    extra_test: Mapping[str, Any] | None = None,
    draw_plots: bool = True,
    timeline: Sequence[TimedFault] | None = None,
) -> RunResult:
    """Run one test (a resolved `TestSpec`) and analyse it; see the module docstring. `draw_plots=False`
    leaves the plots out of the analysis (batch runs; `kchaos analyze RUN_DIR` draws them later);
    `timeline` replays a recorded fault timeline instead of the nemesis schedule (`kchaos reproduce`)."""
    from harness.run_report import analyze_run

    say = say or (lambda text: print(f"kchaos run: {text}", file=sys.stderr, flush=True))
    workload = get_workload(spec.workload, spec.sut)
    run = store.create_run(spec.name, root)
    test = {**spec.to_dict(store.iso_utc(store.utc_now())), **(extra_test or {})}
    store.write_json_atomic(run.test_json, test)
    state = Run(spec, run, say=say, progress=progress, timeline=timeline)
    error: str | None = None
    try:
        state.execute()
    except DBError as exc:
        error = str(exc)
        if state.simulation_violation() is not None:
            # The cluster never got ready because the simulator stopped on an invariant violation
            # (a bug that breaks safety at start-up): that is a verdict, not a failed run.
            state.sim_violation, error = state.simulation_violation(), None
            run.history_jsonl.touch(exist_ok=True)
    except (UserError, BackendError) as exc:  # bad input, or a host tool that failed: its message says which
        error = str(exc)
    except Exception as exc:  # the run failed; its history so far is still analysed
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    result = RunResult(run, None, EXIT_ERROR, state.stats, state.warnings, error, timings=state.timings)
    if not run.history_jsonl.exists():
        return result
    with state._phase("analyze"):
        analysis = analyze_run(run, checkers={spec.workload: workload.checkers}, draw_plots=draw_plots)
    result.valid = analysis.valid
    result.exit_code = analysis.exit_code if error is None else EXIT_ERROR
    result.warnings += analysis.warnings
    from harness.run_report import checker_summary

    result.checker_lines = [line for v in analysis.verdicts for line in checker_summary(v)]
    if state.sim_violation:
        _mark_invalid(run, state.sim_violation)
        result.valid, result.exit_code = False, EXIT_INVALID
        result.checker_lines.append(f"simulator invariants: False ({state.sim_violation})")
    return result


def _mark_invalid(run: store.RunDir, violation: str) -> None:
    """A simulator invariant violation makes the run invalid whatever the history checkers said."""
    results = store.read_results(run) or {"checkers": {}}
    results["valid"] = False
    results.setdefault("checkers", {})["sim-invariants"] = {"valid": False, "violation": violation}
    store.write_json_atomic(run.results_json, results)


def combined_exit(codes: Sequence[int]) -> int:
    """The exit code of several runs: an error wins, then invalid, then unknown."""
    for code in (EXIT_ERROR, EXIT_INVALID, 2):
        if code in codes:
            return code
    return 0
