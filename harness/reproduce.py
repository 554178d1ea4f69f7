"""Reproduce a stored run: the same test (seed, workload, cluster shape, options) and the same faults.

A run's faults are its history's nemesis ops. Replayed, each is invoked at the same offset from the
run's start, and each start that did something carries what it did (`vocab.faults.kinds.REPLAY`: its
targets, parameters and a partition's grudge), so the new run's nemesis hits the same nodes the same
way instead of choosing. Starts that failed (they opened no fault) are left out; the simulator's
targeted faults (`buggify`) exist only there and are not replayed elsewhere.

A simulated run reproduced in the simulator is simply run again: one seed fixes everything, the fault
timeline included, so the history comes out byte for byte the same (`compare` says whether it did).
Elsewhere the same faults meet different timing, so a bug that needs a narrow window may not show in
one run: `attempts` runs the reproduction again until one reaches the original's verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import store
from vocab.errors import UserError
from vocab.faults.catalogue import TARGETED_KIND
from vocab.faults.kinds import REPLAY
from vocab.generators.schedule import TimedFault


@dataclass
class Plan:
    """What a reproduction runs: the spec, the timeline (None: the seed replays it), and notes."""

    source: Path
    spec: Any
    timeline: list[TimedFault] | None
    notes: list[str] = field(default_factory=list)


def timeline_of(events: list[dict[str, Any]], time_limit_s: float | None) -> tuple[list[TimedFault], int]:
    """The nemesis ops of a history's main phase as a replayable timeline, and how many of the
    simulator's targeted faults it left out. A start is paired with its completion (the nemesis does
    one op at a time): `info` gives what to replay, `fail` leaves it out."""
    limit_ns = int(time_limit_s * 1e9) if time_limit_s is not None else None  # None: every op
    out: list[TimedFault] = []
    targeted = 0
    pending: dict[str, Any] | None = None
    for event in events:
        if event.get("process") != "nemesis":
            continue
        f = str(event.get("f", ""))
        action, _, kind = f.partition("-")
        if kind == TARGETED_KIND:
            targeted += action == "start" and event.get("type") == "info"
            continue
        if event.get("type") == "invoke":
            pending = event
            continue
        if pending is None or pending.get("f") != f or (limit_ns is not None and int(pending["time"]) >= limit_ns):
            pending = None
            continue
        at = int(pending["time"])
        if action == "start" and event.get("type") == "info" and isinstance(event.get("value"), dict):
            done = event["value"]
            out.append((at, f, {"mode": done.get("mode"), REPLAY: done}))
        elif action == "stop":
            out.append((at, f, None))
        pending = None
    return out, targeted


# A node killed in a TCG guest needs tens of seconds to import its code again (`kchaos vagrant up`
# says so too): a shorter recovery window would call that slow restart an availability failure.
TCG_RECOVERY_S = 60.0
# A JVM (--sut kafka) in a TCG guest takes 1-2 min to serve after a restart, and three starting at
# once about 3 min (docs/concepts/suts.md): the start-up wait and the recovery window `up` prints.
TCG_JVM_S = 300.0
# A JVM's window raised for TCG ends this long after its first committed write (--recovery-tail), so
# a cluster that comes back at once is not kept under load for minutes. (The reference cluster's
# 60 s are kept whole: its recovering brokers' reads are where a replayed bug may show.)
TCG_TAIL_S = 10.0
JVM_SUTS = frozenset({"kafka"})


def plan(
    run_dir: str | Path, backend: str | None = None, inventory: str | None = None, cluster: str | None = None
) -> Plan:
    """The reproduction of the run in `run_dir` on `backend` (default: the run's own); `inventory` names
    the hosts of an ssh reproduction (default: the run's own, when it ran over ssh). `vagrant` is ssh
    to the VMs `kchaos vagrant up` booted in `cluster` (default vagrant/.cluster)."""
    from harness.test_spec import from_dict

    vms = None
    if backend == "vagrant":
        if inventory:
            raise UserError("--inventory names ssh hosts; --backend vagrant takes the VMs of --cluster DIR")
        vms, inventory, backend = _vagrant_cluster(cluster)
    elif cluster:
        raise UserError(f"--cluster names the VMs of a vagrant reproduction, not of a {backend or 'default'} one")

    run = store.open_run(run_dir)
    test = store.read_test(run)
    spec = from_dict(test, source=str(run.test_json))
    history = store.read_history(run.history_jsonl) if run.history_jsonl.exists() else None
    if history is None:
        raise UserError(f"{run.path}: no history.jsonl: the run never started, there is nothing to reproduce")
    target = backend or spec.backend
    name = spec.name if spec.name.endswith("-reproduction") else f"{spec.name}-reproduction"
    new = dataclasses.replace(spec, backend=target, name=name, inventory=_inventory(spec, target, inventory))
    notes: list[str] = []
    if vms is not None:
        new, said = _on_vms(new, vms, inventory)
        notes += said
    if spec.backend == "sim" and target == "sim":
        return Plan(run.path, new, None, ["simulator to simulator: the seed replays the whole run"])
    timeline, targeted = timeline_of(history.events, spec.time_limit_s)
    if targeted:
        notes.append(f"{targeted} targeted fault(s) of the simulator are not replayed on {target}")
    if target == "sim" and spec.nemesis_buggify:
        new = dataclasses.replace(new, nemesis_buggify=False)  # only the recorded faults
    if target == "sim" and spec.sut_settings:
        from harness.db.kraft_settings import off_sim, settings_problem

        dropped = off_sim(spec.sut_settings)
        if dropped:
            kept = {k: v for k, v in spec.sut_settings.items() if k not in dropped}
            new = dataclasses.replace(new, sut_settings=kept)
            notes.append(f"node settings with no simulated meaning left out: {', '.join(dropped)}")
        problem = settings_problem(new.sut_settings, "sim")
        if problem:  # e.g. a replica heartbeat above the simulated cluster's own lag time
            raise UserError(f"{run.path}: its node settings cannot run on the simulator: {problem}")
        if new.sut_settings:
            notes.append(f"node settings applied to the simulated nodes: {', '.join(new.sut_settings)}")
    kinds = sorted({f.partition("-")[2] for _, f, _ in timeline})
    if kinds and not set(kinds) <= set(new.nemesis):
        new = dataclasses.replace(new, nemesis=tuple(dict.fromkeys([*new.nemesis, *kinds])))
    starts = sum(1 for _, f, _ in timeline if f.startswith("start-"))
    notes.append(f"{starts} fault start(s) replayed at their recorded times and targets")
    return Plan(run.path, new, timeline, notes)


def _vagrant_cluster(directory: str | None) -> tuple[Any, str, str]:
    """The VM cluster in `directory`, its inventory, and the backend that reaches it (ssh)."""
    from harness.backends.vms import DEFAULT_DIR, Cluster

    where = Path(directory).expanduser().resolve() if directory else DEFAULT_DIR
    made = Cluster.load(where)  # a one-line error when no cluster is up there
    return made, str(where / "inventory.toml"), "ssh"


def _on_vms(spec: Any, vms: Any, inventory: str) -> tuple[Any, list[str]]:
    """The spec fitted to the VMs: enough of them, and a recovery window a TCG guest can meet."""
    count = len(spec.cluster.node_names())
    if count > len(vms.vms):
        raise UserError(
            f"the run has {count} nodes but {Path(inventory).parent} has {len(vms.vms)} VM(s): "
            f"`kchaos vagrant up --nodes {count}` there first"
        )
    notes = [f"on the VMs {', '.join(list(vms.vms)[:count])} of {Path(inventory).parent} ({vms.accel})"]
    if vms.accel != "tcg":
        return spec, notes
    jvm = spec.sut in JVM_SUTS
    if jvm:
        recovery, why = TCG_JVM_S, "a JVM restarted in a TCG guest takes 1-2 min to serve again"
    else:
        recovery, why = TCG_RECOVERY_S, "a node restarted in a TCG guest takes tens of seconds to serve again"
    if spec.recovery_s < recovery:
        notes.append(f"recovery window {spec.recovery_s:g} s -> {recovery:g} s: {why}")
        spec = dataclasses.replace(spec, recovery_s=recovery)
        if jvm and spec.recovery_tail_s is None:
            notes.append(f"the window ends {TCG_TAIL_S:g} s after its first committed write, not run out")
            spec = dataclasses.replace(spec, recovery_tail_s=TCG_TAIL_S)
    if jvm and spec.ready_timeout_s < TCG_JVM_S:
        notes.append(
            f"start-up wait {spec.ready_timeout_s:g} s -> {TCG_JVM_S:g} s: JVMs starting at once in TCG guests "
            "take minutes to serve"
        )
        spec = dataclasses.replace(spec, ready_timeout_s=TCG_JVM_S)
    return spec, notes


def _inventory(spec: Any, target: str, given: str | None) -> str:
    """The inventory of the reproduction: only an ssh one has hosts, and it needs them."""
    if target != "ssh":
        if given:
            raise UserError(f"--inventory names the hosts of an ssh reproduction, not of a {target} one")
        return ""
    if given:
        return str(Path(given).expanduser().resolve())
    if not spec.inventory:
        raise UserError(f"the run ran on {spec.backend}: --backend ssh needs --inventory FILE (the hosts to run on)")
    return str(spec.inventory)


@dataclass
class Comparison:
    """Each checker's verdict in the stored run and in its reproduction, side by side."""

    rows: list[tuple[str, Any, Any]]
    original_valid: Any
    reproduced_valid: Any
    identical_history: bool | None  # simulator to simulator only
    faults: tuple[int, int] | None = None  # fault starts carried out in the reproduction, of those replayed

    @property
    def reproduced(self) -> bool:
        return self.original_valid == self.reproduced_valid

    def lines(self) -> list[str]:
        width = max([len("checker"), *(len(name) for name, _, _ in self.rows)])
        out = [f"{'checker':<{width}}  {'original':<10}  reproduction"]
        out += [f"{name:<{width}}  {_show(a):<10}  {_show(b)}" for name, a, b in self.rows]
        out.append(f"{'verdict':<{width}}  {_show(self.original_valid):<10}  {_show(self.reproduced_valid)}")
        if self.identical_history is not None:
            out.append(f"history: {'byte-identical' if self.identical_history else 'DIFFERS'} from the original's")
        if self.faults is not None:
            done, recorded = self.faults
            out.append(f"faults: {done} of the {recorded} recorded fault starts carried out")
        same = "the same verdict" if self.reproduced else "a different verdict"
        out.append(f"reproduced: {'yes' if self.reproduced else 'NO'} ({same})")
        return out


def compare(
    original: Path, reproduction: Path, same_seed_sim: bool, timeline: list[TimedFault] | None = None
) -> Comparison:
    """The two runs' verdicts; with the `timeline` the reproduction replayed, how many of its fault
    starts the reproduction carried out (a start that failed there, or never came, is missing)."""
    first = store.read_results(store.open_run(original)) or {}
    second = store.read_results(store.open_run(reproduction)) or {}
    a, b = first.get("checkers", {}), second.get("checkers", {})
    rows = [(name, _valid(a.get(name)), _valid(b.get(name))) for name in sorted(set(a) | set(b))]
    identical = None
    if same_seed_sim:
        identical = (original / "history.jsonl").read_bytes() == (reproduction / "history.jsonl").read_bytes()
    faults = None
    if timeline is not None:
        recorded = sum(1 for _, f, _ in timeline if f.startswith("start-"))
        replayed, _ = timeline_of(store.read_history(reproduction / "history.jsonl").events, None)
        faults = (sum(1 for _, f, _ in replayed if f.startswith("start-")), recorded)
    return Comparison(rows, first.get("valid", "unknown"), second.get("valid", "unknown"), identical, faults)


@dataclass
class Attempt:
    """One run of a reproduction, and its verdicts beside the original's (None: it never got there)."""

    number: int
    result: Any  # runner.RunResult
    comparison: Comparison | None


def attempts_allowed(p: Plan, asked: int) -> tuple[int, str | None]:
    """How many runs a reproduction may take, and why fewer than asked: in the simulator the seed (and
    the recorded timeline) fixes everything, so a second run can only repeat the first."""
    if asked < 1:
        raise UserError(f"--attempts {asked}: a reproduction takes at least one run")
    if asked > 1 and p.spec.backend == "sim":
        return 1, f"--attempts {asked}: the simulator is deterministic, one run says all a second would"
    return asked, None


def keep_trying(
    p: Plan, attempts: int, run_one: Callable[[int], Any], say: Callable[[str], None] = lambda _: None
) -> list[Attempt]:
    """Run the reproduction (`run_one(number)`) until one reaches the original's verdict, at most
    `attempts` times. A run that failed as a run (an error, no verdict) ends the tries: running it
    again would hide what broke."""
    from harness.run_report import verdict_word

    done: list[Attempt] = []
    for number in range(1, attempts + 1):
        result = run_one(number)
        comparison = None
        if result.valid is not None:
            comparison = compare(p.source, result.run.path, same_seed_sim=p.timeline is None, timeline=p.timeline)
        done.append(Attempt(number, result, comparison))
        if comparison is None or result.error or comparison.reproduced:
            break
        if number < attempts:
            say(
                f"attempt {number} of {attempts}: {verdict_word(comparison.reproduced_valid)[0]}, the original "
                f"{verdict_word(comparison.original_valid)[0]} ({result.run.path}): running it again"
            )
    return done


def _valid(entry: Any) -> Any:
    return entry.get("valid", "unknown") if isinstance(entry, dict) else None


def _show(value: Any) -> str:
    if value is True:
        return "valid"
    if value is False:
        return "INVALID"
    return "-" if value is None else str(value)
