"""Suites: a matrix of runs (workloads x nemesis sets x cluster shapes x backends x seeds) run
unattended, in parallel processes, within a time budget, resumable, into the suite's own results root.

A suite file (TOML; durations as in test files: 30, "30s", "500ms", "2m"):

    name = "gate"                    # the suite's name (its results folder)
    budget = "9m"                    # wall time: no run starts after it is spent (default: none)
    jobs = 2                         # runs at once (--jobs wins; default min(2, CPUs))
    real_jobs = 1                    # of which on real backends (netns, docker, ssh): clusters at once
                                     # (default: CPUs // nodes of the largest cluster, at least 1)
    run_timeout = "5m"               # a run with no verdict by then is stopped: verdict unknown
    seeds = 3                        # seeds 1..3 of every cell, a list: [1, 7, 42], or a range: "501..1000"

    [defaults]                       # any key of a test file (harness/test_spec.py) for every run
    time_limit_s = 25

    [matrix]                         # the dimensions; a cell is one of each
    workloads = ["config-append", "registrations"]
    nemeses = { all = ["partition", "kill"], kill = ["kill"] }   # named sets (or a list of lists)
    clusters = ["3+2"]               # kchaos run --nodes syntax: N combined, or C+B (default ["3"])
    backends = ["sim"]               # (default ["sim"]; nemeses default: none)

    [[cell]]                         # per-cell overrides: cells matching every `match` key get the rest
                                     # (in file order: a later table's key wins)
    match = { nemesis = "kill" }     # keys: workload, nemesis, cluster, backend
    nemesis_modes = { kill = ["leader"] }

    [[cell]]
    match = { workload = "registrations", backend = "netns" }
    skip = true                      # leave those cells out

    [gate]                           # thresholds for `kchaos gate` (harness/gate.py)

Runs go to `<results>/suites/<name>/<UTC timestamp>/<cell name>/<run timestamp>/` (the results store's
layout under the suite's root, so `kchaos results list --root` and `kchaos report` read it), each
test.json carrying `suite: {id, cell, seed}`. `runs.jsonl` in the suite root gets one line per
finished run (flushed as it ends): `--resume` runs only the runs it lacks.
"""

from __future__ import annotations

import concurrent.futures as cf
import fnmatch
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import test_spec
from harness.test_spec import Registries, TestSpec
from vocab.errors import UserError

SUITE_FILE = "suite.json"
JOURNAL = "runs.jsonl"
DIMENSIONS = ("workload", "nemesis", "cluster", "backend")
TOP_KEYS = (
    "name",
    "description",
    "budget",
    "jobs",
    "real_jobs",
    "run_timeout",
    "seeds",
    "defaults",
    "matrix",
    "cell",
    "gate",
)
MATRIX_KEYS = ("workloads", "nemeses", "clusters", "backends")
DEFAULT_RUN_TIMEOUT_S = 600.0


class _SuiteWhere(test_spec._Where):
    """Error locations inside a suite file: `suite.toml:12: defaults.rate`, `suite.toml: cell[2].rate`."""

    def __init__(self, path: Path, text: str, table: str) -> None:
        super().__init__(path, text)
        self.table = table

    def of(self, key: str, table: str | None = None, *, flag: bool = False) -> str:
        if flag:
            return f"{self.path}: {self.table}"
        return super().of(key, f"{self.table}.{table}" if table else self.table)


@dataclass(frozen=True)
class SuiteCell:
    """One point of the matrix (every seed of it runs the same test but for the seed)."""

    workload: str
    nemesis: str  # the nemesis set's name
    kinds: tuple[str, ...]
    cluster: str  # the --nodes label, e.g. "3+2"
    backend: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.workload}/{self.nemesis}/{self.cluster}/{self.backend}"

    @property
    def test_name(self) -> str:
        """The run folder's name: the cell's dimensions joined by dots."""
        return re.sub(r"[^A-Za-z0-9+._-]", "_", f"{self.workload}.{self.nemesis}.{self.cluster}.{self.backend}")


Queued = tuple[SuiteCell, int]  # a run: the cell and its seed


def first_runs(runs: Sequence[Queued], patterns: Sequence[str]) -> list[Queued]:
    """The runs matched by `patterns` first (pattern by pattern, each in the suite's order), then the
    rest. A pattern is a glob over cell ids (`registrations/all/*`), with `#SEED` for one seed only.

    Only the order moves, never the set of runs or a verdict: with `--fail-fast` a run known to catch
    a bug (last night's failing cell) ends the suite at once instead of after every cell before it,
    and under a budget the named runs are the ones sure to start."""
    ahead: list[Queued] = []
    for pattern in patterns:
        ahead += [run for run in _matching(runs, pattern) if run not in ahead]
    return ahead + [run for run in runs if run not in ahead]


def _matching(runs: Sequence[Queued], pattern: str) -> list[Queued]:
    glob, _, seed = pattern.partition("#")
    return [(cell, s) for cell, s in runs if fnmatch.fnmatchcase(cell.id, glob) and (not seed or str(s) == seed)]


def check_first(patterns: Sequence[str], suite: Suite, flag: str = "--first") -> tuple[str, ...]:
    """Each pattern must match a run of the suite: a misspelt one would silently change nothing."""
    for pattern in patterns:
        _, hash_, seed = pattern.partition("#")
        if hash_ and not seed.isdigit():
            raise UserError(f"{flag} {pattern}: a seed after '#' must be a number")
        if not _matching(suite.runs(), pattern):
            ids = ", ".join(c.id for c in suite.cells[:3]) + (", ..." if len(suite.cells) > 3 else "")
            raise UserError(f"{flag} {pattern}: matches no run of suite {suite.name} (cells: {ids})")
    return tuple(patterns)


@dataclass
class Suite:
    name: str
    path: Path
    description: str
    cells: list[SuiteCell]
    seeds: tuple[int, ...]
    defaults: dict[str, Any]
    budget_s: float | None
    jobs: int | None
    real_jobs: int | None
    run_timeout_s: float
    gate: dict[str, Any]
    where: Any  # for error locations of [gate]
    registries: Registries
    bugs: tuple[str, ...] = ()  # planted bugs switched on in every run (`--bug`)
    fail_fast: bool = False  # stop at the first invalid run (`--fail-fast`)
    first: tuple[str, ...] = ()  # runs to start before the others (`--first`, see `first_runs`)

    def real_limit(self) -> int:
        """Runs on real backends at once: `real_jobs`, else one cluster per its nodes' worth of CPUs."""
        if self.real_jobs is not None:
            return self.real_jobs
        real = [c for c in self.cells if c.backend != "sim"]
        if not real:
            return 1
        nodes = max(len(self.spec(c, self.seeds[0]).nodes) for c in real)
        return max(1, (os.cpu_count() or 1) // nodes)

    def runs(self) -> list[tuple[SuiteCell, int]]:
        """Every run, seed outermost: each cell's first seed before any cell's second."""
        return [(cell, seed) for seed in self.seeds for cell in self.cells]

    def ordered_runs(self) -> list[tuple[SuiteCell, int]]:
        """`runs()` with the runs `first` names moved to the front, in the order of its patterns."""
        return first_runs(self.runs(), self.first)

    def spec(self, cell: SuiteCell, seed: int) -> TestSpec:
        raw = {
            **self.defaults,
            "name": cell.test_name,
            "workload": cell.workload,
            "nemesis": list(cell.kinds),
            "backend": cell.backend,
            **{k: v for k, v in cell.overrides.items() if k not in ("match", "skip")},
            "seed": seed,
        }
        if self.bugs:
            raw["bugs"] = list(self.bugs)
        where = _SuiteWhere(self.path, "", f"cell {cell.id}")
        return test_spec._resolve(raw, where, {"nodes": cell.cluster}, self.registries)


def _names(value: Any, where: str, allowed: Sequence[str] | None, what: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: expected a non-empty list of {what} names, got {value!r}")
    for name in value:
        if allowed is not None and name not in allowed:
            raise UserError(f"{where}: unknown {what} {name!r} (choose from {', '.join(sorted(allowed))})")
    return list(dict.fromkeys(value))


def _nemesis_sets(value: Any, where: str, allowed: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Named fault-kind sets: a table name -> kinds, or a list of lists (named by their kinds)."""
    if isinstance(value, list):
        value = {"+".join(kinds) or "none" if isinstance(kinds, list) else str(kinds): kinds for kinds in value}
    if not isinstance(value, Mapping) or not value:
        raise UserError(f"{where}: expected a table of named fault-kind lists, e.g. {{ all = ['partition', 'kill'] }}")
    sets: dict[str, tuple[str, ...]] = {}
    for name, kinds in value.items():
        if not re.fullmatch(r"[A-Za-z0-9+_-]{1,40}", name):
            raise UserError(f"{where}: nemesis set name {name!r}: use letters, digits, + _ -")
        sets[name] = test_spec._kinds(kinds, f"{where}.{name}", allowed)
    return sets


def _cluster_label(value: Any, where: str) -> str:
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is None or not re.fullmatch(r"\d+|\d+\s*\+\s*\d+", text):
        raise UserError(f"{where}: expected N (combined nodes) or C+B (controllers+brokers), got {value!r}")
    return text.replace(" ", "")


MAX_SEEDS = 1_000_000  # per cell: a million simulated runs is weeks of CPU; more is a typo


def _at_most_max_seeds(count: int, where: str) -> None:
    """A count past MAX_SEEDS is refused before a tuple of that many seeds is built (the fuzzer's
    `seeds = 99999999999999999999` overflowed `range`, a traceback instead of one line)."""
    if count > MAX_SEEDS:
        raise UserError(f"{where}: at most {MAX_SEEDS:,} seeds per cell, got {count:,}")


def seed_range(text: str, where: str) -> tuple[int, ...] | None:
    """`A..B`, seeds A to B inclusive (None if `text` is not a range). The simulator is deterministic,
    so a soak over seeds 1..N replays the same schedules until the code changes: a range lets a
    night explore seeds no earlier night ran."""
    match = re.fullmatch(r"\s*(\d+)\s*\.\.\s*(\d+)\s*", text)
    if match is None:
        return None
    first, last = int(match[1]), int(match[2])
    if last < first:
        raise UserError(f"{where}: the range {text!r} is empty (its last seed is below its first)")
    _at_most_max_seeds(last - first + 1, where)
    return tuple(range(first, last + 1))


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, str) and (seeds := seed_range(value, where)) is not None:
        return seeds
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise UserError(f"{where}: must be >= 1, got {value}")
        _at_most_max_seeds(value, where)
        return tuple(range(1, value + 1))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        if any(s < 0 for s in value):
            raise UserError(f"{where}: seeds must be >= 0, got {value!r}")
        return tuple(dict.fromkeys(value))
    raise UserError(f'{where}: expected a count of seeds, a list of seeds or a range "A..B", got {value!r}')


def _check_overrides(overrides: Any, known_dims: Mapping[str, list[str]], file: Path) -> None:
    """`[[cell]]` tables: a `match` on known dimensions and values, an optional `skip`, test keys."""
    if not isinstance(overrides, list) or not all(isinstance(o, Mapping) for o in overrides):
        raise UserError(f"{file}: cell: expected [[cell]] tables")
    for i, override in enumerate(overrides, start=1):
        match = override.get("match", {})
        where = f"{file}: cell[{i}]"
        if not isinstance(match, Mapping):
            raise UserError(f"{where}.match: expected a table of {', '.join(DIMENSIONS)}")
        for dim, value in match.items():
            if dim not in DIMENSIONS:
                raise UserError(f"{where}.match: unknown dimension {dim!r} (known: {', '.join(DIMENSIONS)})")
            if value not in known_dims[dim]:
                raise UserError(f"{where}.match.{dim}: {value!r} is not in the matrix ({', '.join(known_dims[dim])})")
        if "skip" in override and not isinstance(override["skip"], bool):
            raise UserError(f"{where}.skip: expected true or false")
        for key in ("name", "seed", "workload", "nemesis", "backend", "cluster"):
            if key in override:
                raise UserError(f"{where}.{key}: a dimension or the seed; narrow the cell with match instead")


def _expand(
    workloads: list[str],
    nemeses: Mapping[str, tuple[str, ...]],
    clusters: list[str],
    backends: list[str],
    overrides: list[Mapping[str, Any]],
) -> list[SuiteCell]:
    """Every cell of the matrix with the `[[cell]]` tables that match it applied in file order (a later
    table's key wins), the skipped ones left out."""
    cells: list[SuiteCell] = []
    for workload, (nemesis, kinds), cluster, backend in itertools.product(
        workloads, nemeses.items(), clusters, backends
    ):
        dims = {"workload": workload, "nemesis": nemesis, "cluster": cluster, "backend": backend}
        merged: dict[str, Any] = {}
        skip = False
        for override in overrides:
            if all(dims[d] == v for d, v in override.get("match", {}).items()):
                skip = skip or bool(override.get("skip", False))
                merged.update({k: v for k, v in override.items() if k not in ("match", "skip")})
        if not skip:
            cells.append(SuiteCell(workload, nemesis, kinds, cluster, backend, merged))
    return cells


def load_suite(
    path: str | Path, *, registries: Registries | None = None, bugs: Sequence[str] = (), seeds: Any = None
) -> Suite:
    """The suite file, every cell resolved to a test spec (so a bad key fails before any run starts)."""
    from harness.run_cli import registries as default_registries

    file = Path(path)
    raw, text = test_spec.read_toml(file, "suite file")
    reg = registries or default_registries()
    top = test_spec._Where(file, text)
    for key in raw:
        if key not in TOP_KEYS:
            raise UserError(f"{top.of(key)}: unknown key (known keys: {', '.join(TOP_KEYS)})")
    name = test_spec._name(raw.get("name", file.stem), top.of("name"))
    budget = raw.get("budget")
    budget_s = None if budget is None else test_spec._duration(budget, top.of("budget"), positive=True)
    jobs, real_jobs = (
        None if key not in raw else test_spec._integer(raw[key], top.of(key), minimum=1)
        for key in ("jobs", "real_jobs")
    )
    timeout = raw.get("run_timeout", DEFAULT_RUN_TIMEOUT_S)
    run_timeout_s = test_spec._duration(timeout, top.of("run_timeout"), positive=True)
    seed_list = _seeds(seeds if seeds is not None else raw.get("seeds", 1), "--seeds" if seeds else top.of("seeds"))
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise UserError(f"{top.of('description')}: expected a string")

    defaults = raw.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise UserError(f"{top.of('defaults')}: expected a table")
    for key in ("name", "seed", "workload", "nemesis", "backend", "cluster"):
        if key in defaults:
            raise UserError(f"{top.of(key, 'defaults')}: set by the suite ([matrix] or the seeds), not in [defaults]")
    parsed_bugs = tuple(test_spec._bug_names(list(bugs), "--bug")) if bugs else ()
    # the defaults alone must be a valid test (their own error locations)
    test_spec._resolve({**defaults, "seed": 1}, _SuiteWhere(file, text, "defaults"), {}, reg)

    matrix = raw.get("matrix")
    if not isinstance(matrix, Mapping):
        raise UserError(f"{file}: a suite needs a [matrix] table (workloads, nemeses, clusters, backends)")
    for key in matrix:
        if key not in MATRIX_KEYS:
            raise UserError(f"{top.of(key, 'matrix')}: unknown key (known keys: {', '.join(MATRIX_KEYS)})")
    workloads = _names(matrix.get("workloads"), top.of("workloads", "matrix"), list(reg.workloads), "workload")
    nemeses = _nemesis_sets(matrix.get("nemeses", {"none": []}), top.of("nemeses", "matrix"), list(reg.nemeses))
    listed = matrix.get("clusters", ["3"])
    clusters = [
        _cluster_label(c, top.of("clusters", "matrix")) for c in (listed if isinstance(listed, list) else [listed])
    ]
    backends = _names(matrix.get("backends", ["sim"]), top.of("backends", "matrix"), list(reg.backends), "backend")

    overrides = raw.get("cell", [])
    known_dims = {"workload": workloads, "nemesis": list(nemeses), "cluster": clusters, "backend": backends}
    _check_overrides(overrides, known_dims, file)
    _check_support(nemeses, backends, top.of("nemeses", "matrix"))
    cells = _expand(workloads, nemeses, clusters, backends, overrides)
    if not cells:
        raise UserError(f"{file}: every cell of the matrix is skipped")
    suite = Suite(
        name,
        file,
        description,
        cells,
        seed_list,
        dict(defaults),
        budget_s,
        jobs,
        real_jobs,
        run_timeout_s,
        dict(raw.get("gate", {})) if isinstance(raw.get("gate", {}), Mapping) else {},
        _SuiteWhere(file, text, "gate"),
        reg,
        parsed_bugs,
    )
    if "gate" in raw and not isinstance(raw["gate"], Mapping):
        raise UserError(f"{top.of('gate')}: expected a table of thresholds")
    for cell in cells:  # every cell resolves to a valid test, or the suite is refused before any run
        try:
            suite.spec(cell, suite.seeds[0])
        except UserError as exc:
            raise UserError(str(exc).replace(f"{file}: cell {cell.id}", f"{file}: [[cell]] for {cell.id}")) from None
    return suite


def _check_support(nemeses: Mapping[str, tuple[str, ...]], backends: Sequence[str], where: str) -> None:
    """Every fault kind of the matrix must be one each backend of it carries out (vocab.faults.catalogue)."""
    from vocab.faults.catalogue import backend_support

    support = backend_support([b for b in backends if b in ("sim", "netns", "docker", "ssh")])
    for backend, kinds in support.items():
        for name, wanted in nemeses.items():
            missing = [k for k in wanted if k not in kinds]
            if missing:
                raise UserError(f"{where}.{name}: the {backend} backend cannot carry out {', '.join(missing)}")


def preflight(suite: Suite) -> None:
    """What every run of a backend would fail on alike, refused before any run starts (one line):
    netns and docker need root, ssh an inventory."""
    for cell in suite.cells:
        if cell.backend in ("netns", "docker") and os.geteuid() != 0:
            raise UserError(f"{suite.path}: cell {cell.id}: the {cell.backend} backend needs root (sudo kchaos ...)")
        if cell.backend == "ssh" and not suite.spec(cell, suite.seeds[0]).inventory:
            raise UserError(
                f'{suite.path}: cell {cell.id}: the ssh backend needs inventory = "hosts.toml" in [defaults]'
            )


# --- running ----------------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One finished run of the suite, as `runs.jsonl` holds it."""

    cell: str
    seed: int
    verdict: str  # valid | invalid | unknown
    exit_code: int
    line: str  # the verdict line: the first failing checker's first summary line, or why unknown
    failed: list[str]
    run_dir: str
    wall_s: float
    error: str | None = None
    measures: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.cell}#{self.seed}"


def verdict_text(valid: Any) -> str:
    return {True: "valid", False: "invalid"}.get(valid, "unknown") if isinstance(valid, bool) else "unknown"


def run_suite_cell(spec: TestSpec, cell_id: str, root: str, suite_id: str) -> RunRecord:
    """Run one seed of a cell in this process (a worker of the pool) and measure it."""
    from harness.bug_matrix import verdict_line
    from harness.measures import run_measures
    from harness.runner import run_test

    logging.getLogger("kchaos.sim").setLevel(logging.ERROR)  # the suite says which bugs are on
    start = time.perf_counter()
    extra = {"suite": {"id": suite_id, "cell": cell_id, "seed": spec.seed}}
    result = run_test(spec, root=root, say=lambda _: None, progress=False, extra_test=extra, draw_plots=False)
    run_dir = result.run.path
    try:
        results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        results = {}
    checkers = results.get("checkers", {})
    failed = [name for name, v in checkers.items() if isinstance(v, dict) and v.get("valid") is False]
    line = verdict_line(result.checker_lines, failed)
    verdict = verdict_text(result.valid)
    if result.error is not None:
        verdict, line = "unknown", f"run failed: {result.error}"
    elif verdict == "unknown" and not line:
        unknown = [n for n, v in checkers.items() if isinstance(v, dict) and v.get("valid") not in (True, False)]
        line = f"unknown: {', '.join(unknown) or 'no checker decided'}"
    measures: dict[str, Any] = {}
    if results:
        try:
            measures = run_measures(run_dir)
        except Exception as exc:  # a measure that cannot be computed is missing, never a lost verdict
            measures = {"error": f"{type(exc).__name__}: {exc}"}
    code = result.exit_code if result.error is None else 2
    return RunRecord(
        cell_id, spec.seed, verdict, code, line.strip(), failed, str(run_dir), time.perf_counter() - start,
        result.error, measures,
    )  # fmt: skip


@dataclass
class SuiteResult:
    suite: Suite
    root: Path
    suite_id: str
    records: dict[str, RunRecord]  # run key -> record
    skipped: list[tuple[SuiteCell, int]]  # runs left out, for the reason `stopped_by` gives
    wall_s: float
    stopped_by: str = "budget"  # what left `skipped` out: the budget, or fail-fast after an invalid run

    def cell_records(self, cell: SuiteCell) -> list[RunRecord]:
        return sorted((r for r in self.records.values() if r.cell == cell.id), key=lambda r: r.seed)

    def cell_verdict(self, cell: SuiteCell) -> str:
        records = self.cell_records(cell)
        verdicts = {r.verdict for r in records}
        if "invalid" in verdicts:
            return "invalid"
        if "unknown" in verdicts or len(records) < len(self.suite.seeds):
            return "unknown"
        return "valid"

    def first_failure(self, cell: SuiteCell) -> RunRecord | None:
        return next((r for r in self.cell_records(cell) if r.verdict == "invalid"), None)

    @property
    def exit_code(self) -> int:
        verdicts = {self.cell_verdict(c) for c in self.suite.cells}
        return 1 if "invalid" in verdicts else 2 if "unknown" in verdicts else 0


def suite_dir(results: str | os.PathLike[str], name: str) -> Path:
    return Path(results) / "suites" / name


def new_suite_root(results: str | os.PathLike[str], suite: Suite) -> tuple[Path, str]:
    """A fresh `<results>/suites/<name>/<UTC timestamp>/`, `latest` pointing at it."""
    from harness import store

    run = store.create_run(suite.name, Path(results) / "suites")
    return run.path, f"{suite.name}/{run.path.name}"


def open_suite_root(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """An existing suite root (the `latest` link followed) and its suite.json."""
    root = Path(path).resolve()
    meta = root / SUITE_FILE
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: not a suite directory (no {SUITE_FILE})") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{meta}: cannot read: {exc}") from None
    return root, data


def failed_last_time(results: str | Path, suite: Suite) -> tuple[str, ...]:
    """`--failed-first`: the runs of this suite's latest root (under `results`) that were invalid or
    unknown, as `--first` patterns (`CELL#SEED`), invalid ones first; only runs the suite still has."""
    latest = suite_dir(results, suite.name) / "latest"
    if not latest.is_dir():
        return ()
    now = {f"{cell.id}#{seed}" for cell, seed in suite.runs()}
    records = [r for r in read_journal(latest.resolve()).values() if r.key in now]
    return tuple(r.key for r in sorted(records, key=lambda r: r.verdict != "invalid") if r.verdict != "valid")


def read_journal(root: Path) -> dict[str, RunRecord]:
    """The finished runs of a suite root; a torn last line (the suite was killed mid-write) is ignored."""
    records: dict[str, RunRecord] = {}
    path = root / JOURNAL
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = RunRecord(**json.loads(line))
        except (ValueError, TypeError):
            continue
        records[record.key] = record
    return records


class SuiteRunner:
    """Runs a suite's runs on a `harness.pool.RunPool` (see the module docstring)."""

    def __init__(
        self,
        suite: Suite,
        root: Path,
        suite_id: str,
        *,
        jobs: int,
        say: Callable[[str], None] | None = None,
        done: Mapping[str, RunRecord] | None = None,
        worker: Callable[[TestSpec, str, str, str], RunRecord] | None = None,
    ) -> None:
        self.suite, self.root, self.suite_id, self.jobs = suite, root, suite_id, jobs
        self.worker = worker or run_suite_cell  # a module-level function (it goes to another process)
        self.say = say or (lambda _text: None)
        self.records: dict[str, RunRecord] = dict(done or {})

    def run(self, executor: cf.Executor | None = None) -> SuiteResult:
        from harness.backends.signals import exit_on_termination
        from harness.pool import RunPool

        start = time.monotonic()
        todo = [(c, s) for c, s in self.suite.ordered_runs() if f"{c.id}#{s}" not in self.records]
        total = len(self.suite.runs())
        if len(todo) < total:
            self.say(f"resuming: {total - len(todo)} of {total} runs already done")
        own: RunPool | None = None  # the pool this runner made, which it may stop
        pool: cf.Executor
        if executor is None:
            pool = own = RunPool(self.jobs, timeout_s=self.suite.run_timeout_s)
        else:
            pool = executor
        inflight: dict[cf.Future[RunRecord], tuple[SuiteCell, int]] = {}
        queue = list(todo)
        real_limit = self.suite.real_limit()  # a real cluster's processes need cores of their own
        skipped: list[tuple[SuiteCell, int]] = []
        stopped_by = "budget"
        first_invalid: RunRecord | None = None
        finished_here: list[float] = []
        journal = (self.root / JOURNAL).open("a", encoding="utf-8")
        try:
            with exit_on_termination():  # SIGTERM/SIGHUP unwind like Ctrl-C: the runs are stopped
                while queue or inflight:
                    while queue and len(inflight) < self.jobs:
                        pick = _startable(queue, list(inflight.values()), real_limit)
                        if pick is None:
                            break
                        if self.suite.budget_s is not None and time.monotonic() - start >= self.suite.budget_s:
                            skipped += queue
                            self.say(f"budget of {self.suite.budget_s:g} s spent: {len(queue)} runs not started")
                            queue = []
                            break
                        cell, seed = queue.pop(pick)
                        spec = self.suite.spec(cell, seed)
                        future = pool.submit(self.worker, spec, cell.id, str(self.root), self.suite_id)
                        inflight[future] = (cell, seed)
                    if not inflight:
                        break
                    done, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                    for future in done:
                        cell, seed = inflight.pop(future)
                        record = self._record(future, cell, seed)
                        self.records[record.key] = record
                        journal.write(json.dumps(record.__dict__, default=str) + "\n")
                        journal.flush()
                        finished_here.append(record.wall_s)
                        self._progress(record, len(queue) + len(inflight), start, finished_here)
                        if record.verdict == "invalid":
                            first_invalid = first_invalid or record
                    if first_invalid is not None and self.suite.fail_fast and (queue or inflight):
                        stopped_by = "fail-fast"
                        skipped += queue + list(inflight.values())
                        self.say(
                            f"fail-fast: {first_invalid.cell} seed {first_invalid.seed} is invalid; {len(queue)} "
                            f"runs not started, {len(inflight)} under way stopped"
                        )
                        queue = []
                        if own is not None:  # our own pool: stop the runs (SIGTERM: each undoes its hosts)
                            own.stop()
                        for future in inflight:  # a caller's executor is the caller's to stop
                            future.cancel()
                        inflight = {}
        except BaseException:  # Ctrl-C or an error here: stop the runs under way (they undo their hosts)
            if own is not None:
                own.stop()
            raise
        finally:
            journal.close()
            if own is not None:
                own.shutdown(wait=True, cancel_futures=True)
        return SuiteResult(
            self.suite, self.root, self.suite_id, self.records, skipped, time.monotonic() - start, stopped_by
        )

    def _record(self, future: cf.Future[RunRecord], cell: SuiteCell, seed: int) -> RunRecord:
        try:
            return future.result()
        except Exception as exc:  # crashed, hung, or the worker raised: unknown with the reason
            reason = str(exc) if type(exc).__name__ == "RunLost" else f"{type(exc).__name__}: {exc}"
            return RunRecord(cell.id, seed, "unknown", 2, f"run lost: {reason}", [], "", 0.0, reason)

    def _progress(self, record: RunRecord, remaining: int, start: float, walls: list[float]) -> None:
        cells_done = sum(1 for c in self.suite.cells if all(f"{c.id}#{s}" in self.records for s in self.suite.seeds))
        failures = sum(1 for r in self.records.values() if r.verdict == "invalid")
        unknown = sum(1 for r in self.records.values() if r.verdict == "unknown")
        elapsed = time.monotonic() - start
        eta = elapsed / len(walls) * remaining if walls else 0.0
        self.say(
            f"[{len(self.records)}/{len(self.suite.runs())} runs, {cells_done}/{len(self.suite.cells)} cells, "
            f"{failures} failed, {unknown} unknown, ETA {_clock(eta)}] {record.cell} seed {record.seed}: "
            f"{record.verdict}" + (f" ({record.line})" if record.verdict != "valid" and record.line else "")
        )


def _startable(
    queue: Sequence[tuple[SuiteCell, int]], running: Sequence[tuple[SuiteCell, int]], real: int
) -> int | None:
    """The first queued run that may start: one on a real backend waits for a slot of `real` (a
    cluster's processes need cores of their own); simulated runs behind it go ahead."""
    real_busy = sum(1 for cell, _ in running if cell.backend != "sim") >= real
    return next((i for i, (cell, _) in enumerate(queue) if cell.backend == "sim" or not real_busy), None)


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def write_suite_meta(root: Path, suite: Suite, suite_id: str, jobs: int) -> Path:
    from harness import store

    meta = {
        "id": suite_id,
        "name": suite.name,
        "file": str(suite.path.resolve()),
        "definition": suite.path.read_text(encoding="utf-8"),
        "cells": [c.id for c in suite.cells],
        "seeds": list(suite.seeds),
        "bugs": list(suite.bugs),
        "jobs": jobs,
        "started_at": store.iso_utc(store.utc_now()),
    }
    return store.write_json_atomic(root / SUITE_FILE, meta)


# --- output -----------------------------------------------------------------------------------------


def table_markdown(result: SuiteResult) -> str:
    """Cells x verdicts: runs by verdict, the cell's verdict and its first failing seed."""
    rows = [
        "| cell | runs | valid | invalid | unknown | verdict | first failing seed | verdict line |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell in result.suite.cells:
        records = result.cell_records(cell)
        count = {v: sum(1 for r in records if r.verdict == v) for v in ("valid", "invalid", "unknown")}
        first = result.first_failure(cell)
        odd = first or next((r for r in records if r.verdict == "unknown"), None)
        line = (odd.line if odd else "").replace("|", "/")
        line = line if len(line) <= 100 else line[:99] + "…"
        rows.append(
            f"| {cell.id} | {len(records)}/{len(result.suite.seeds)} | {count['valid']} | {count['invalid']} | "
            f"{count['unknown']} | {result.cell_verdict(cell)} | {first.seed if first else '-'} | {line} |"
        )
    verdicts = [result.cell_verdict(c) for c in result.suite.cells]
    summary = (
        f"\n{len(result.suite.cells)} cells: {verdicts.count('valid')} valid, {verdicts.count('invalid')} invalid, "
        f"{verdicts.count('unknown')} unknown; {len(result.records)} runs"
        + (f", {len(result.skipped)} not run ({result.stopped_by})" if result.skipped else "")
        + f"; wall {result.wall_s:.0f} s. Suite root: {result.root}\n"
    )
    return "\n".join(rows) + "\n" + summary


__all__ = [
    "RunRecord",
    "Suite",
    "SuiteCell",
    "SuiteResult",
    "SuiteRunner",
    "load_suite",
    "open_suite_root",
    "read_journal",
    "run_suite_cell",
    "table_markdown",
]
