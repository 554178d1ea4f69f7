"""The test model: what one `kchaos run` runs, from a TOML file and/or CLI flags (flags win).

A test file (every key optional; durations are seconds as numbers, or strings like "500ms", "90s",
"2m", "1h"):

    name = "partition-kill"          # default: "<workload>-<nemesis label>"
    backend = "sim"                  # sim | netns | ssh  (BACKENDS)
    inventory = "hosts.toml"         # ssh only: the hosts (harness/backends/inventory.py)
    sut = "kraft"                    # system under test adapter (SUTS): kraft | etcd | kafka (not on sim)
    workload = "config-register"     # the workload registry (vocab/workload.py, harness/plugins.py)
    nemesis = ["partition", "kill"]  # fault kinds (vocab.faults.catalogue); [] = no faults
    nemesis_interval_s = 10          # a fault starts this long after the previous start (or stop, when full)
    nemesis_duration_s = 10          # and lasts this long
    nemesis_max_active = 0           # faults active at once; 0 = every kind may be
    nemesis_draw = "random"          # each start's kind: "random" (by weight) or "deck" (each kind once a round)
    nemesis_buggify = true           # sim only: the simulator's targeted faults too
    time_limit_s = 60                # the main phase
    concurrency = 5                  # client workers
    rate = 50.0                      # client ops per second in total; 0 = as fast as they go
    seed = 42                        # default: a random one, saved with the run
    test_count = 1                   # runs of this test
    leave_db_running = false
    recovery_s = 10                  # recovery window: clients run on after the heal (availability checker)
    recovery_tail_s = 10             # optional: end it 10 s after its first committed write (unset: it runs out)
    ready_timeout_s = 90             # how long the cluster may take to serve at start (JVMs in TCG guests: minutes)
    final_reads = true
    bugs = []                        # planted bugs (node/bugs.py) switched on in every node
    forger = true                    # a side process sending forged requests (harness/forger.py)
    pre_vote = true                  # KIP-996 pre-votes; false: plain KIP-595 elections (every Vote counts)

    [cluster]                        # either combined nodes, or controllers (+ brokers)
    controllers = 3
    brokers = 2

    [workload_options]               # passed to the workload as they are
    keys = 5

    [sut_settings]                   # every node's configuration, on top of the harness's own:
    "controller.quorum.fetch.timeout.ms" = 1500  # server.properties keys (kraft, kafka; on the simulator
                                     # those it models: harness/db/kraft_settings.py), or etcd's
                                     # flags without the dashes ("heartbeat-interval" = 50)

    [nemesis_modes]                  # optional: kind -> target modes the nemesis picks from
    partition = ["random-halves", "isolate-leader"]

    [nemesis_options.clock]          # optional, per kind: weight, modes, targets, parameters
    weight = 2                       # drawn this much more often than a kind of weight 1
    targets = ["leader"]
    delta_ms = [-90000, 90000]       # a list: one value drawn at each start

`TestSpec.to_dict()` is the run's test.json (results/SCHEMA.md); `from_dict` reads one back.
Allowed names come from the registries passed to `load_test`, else from the module constants below.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from vocab.faults.catalogue import FAULT_KINDS, check_option, mode_choices
from vocab.generators.schedule import DRAWS

# test.json's schema version (results/SCHEMA.md); equal to reports.schema.SCHEMA_VERSION, not imported
# from there because that module loads pyarrow, which every CLI start would then pay for.
SCHEMA_VERSION = 1
# How long `kchaos run` waits for the cluster to serve after starting it (--ready-timeout).
READY_TIMEOUT_S = 90.0

# Default registries (what load_test accepts when the caller passes none).
BACKENDS: tuple[str, ...] = ("sim", "netns", "docker", "ssh")
SUTS: tuple[str, ...] = ("kraft", "etcd", "kafka")  # as harness.db.SUTS (not imported: CLI start-up)
NEMESES: tuple[str, ...] = FAULT_KINDS


def registered_workloads() -> tuple[str, ...]:
    """The workload registry's names (vocab/workload.py, loaded by harness/plugins.py): the allowed
    `workload` values."""
    from harness.plugins import workload_names

    return workload_names()


# CLI flag that sets each override key (for error messages).
FLAGS: dict[str, str] = {
    "name": "--name",
    "backend": "--backend",
    "inventory": "--inventory",
    "sut": "--sut",
    "workload": "--workload",
    "nodes": "--nodes",
    "nemesis": "--nemesis",
    "nemesis_interval_s": "--nemesis-interval",
    "nemesis_duration_s": "--nemesis-duration",
    "time_limit_s": "--time-limit",
    "concurrency": "--concurrency",
    "rate": "--rate",
    "seed": "--seed",
    "test_count": "--test-count",
    "leave_db_running": "--leave-db-running",
    "recovery_s": "--recovery",
    "recovery_tail_s": "--recovery-tail",
    "ready_timeout_s": "--ready-timeout",
    "final_reads": "--final-reads",
    "workload_options": "--workload-option",
    "nemesis_options": "--nemesis-option",
    "nemesis_max_active": "--nemesis-max-active",
    "nemesis_draw": "--nemesis-draw",
    "nemesis_buggify": "--no-buggify",
    "bugs": "--bug",
    "forger": "--no-forger",
    "pre_vote": "--no-pre-vote",
    "sut_settings": "--sut-setting",
}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]{0,99}$")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Registries:
    """The names a test may use; the runner passes what its backends and workloads implement."""

    backends: Collection[str] = BACKENDS
    suts: Collection[str] = SUTS
    workloads: Collection[str] = field(default_factory=registered_workloads)
    nemeses: Collection[str] = NEMESES


@dataclass(frozen=True)
class Cluster:
    """Combined nodes (controller + broker in one process), or separate controllers and brokers."""

    controllers: int = 0
    brokers: int = 0
    combined: int = 0

    def node_names(self) -> list[str]:
        """Combined nodes n1.., controllers c1.., brokers b1.. (in that order)."""
        return (
            [f"n{i}" for i in range(1, self.combined + 1)]
            + [f"c{i}" for i in range(1, self.controllers + 1)]
            + [f"b{i}" for i in range(1, self.brokers + 1)]
        )

    def describe(self) -> str:
        parts = []
        if self.combined:
            parts.append(f"{self.combined} combined")
        if self.controllers:
            parts.append(f"{self.controllers} controllers")
        if self.brokers:
            parts.append(f"{self.brokers} brokers")
        return " + ".join(parts)


@dataclass(frozen=True)
class TestSpec:
    """One fully resolved test (every default filled in, the seed chosen)."""

    __test__ = False  # not a pytest test class

    name: str
    seed: int
    backend: str = "sim"
    sut: str = "kraft"
    cluster: Cluster = field(default_factory=lambda: Cluster(combined=3))
    workload: str = "config-register"
    workload_options: dict[str, Any] = field(default_factory=dict)
    nemesis: tuple[str, ...] = ("partition", "kill")
    nemesis_interval_s: float = 10.0
    nemesis_duration_s: float = 10.0
    nemesis_modes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    nemesis_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    nemesis_max_active: int = 0
    nemesis_draw: str = "random"  # vocab.generators.schedule.DRAWS
    nemesis_buggify: bool = True
    time_limit_s: float = 60.0
    concurrency: int = 5
    rate: float = 50.0
    test_count: int = 1
    leave_db_running: bool = False
    recovery_s: float = 10.0
    # End the recovery window this long after its first committed write (at most recovery_s in all);
    # None: the window runs out. A window of minutes (JVMs in TCG guests) then costs seconds when the
    # cluster comes back at once.
    recovery_tail_s: float | None = None
    ready_timeout_s: float = READY_TIMEOUT_S
    final_reads: bool = True
    bugs: tuple[str, ...] = ()  # planted bugs switched on in every node (node/bugs.py); () = the correct node
    forger: bool = True  # the forger side process (harness/forger.py) runs beside the workload
    pre_vote: bool = True  # KIP-996 pre-votes in every node; False to test plain KIP-595 elections
    inventory: str = ""  # ssh backend: the inventory file (absolute path); "" = none
    sut_settings: dict[str, str] = field(default_factory=dict)  # every node's configuration (see above)

    @property
    def nodes(self) -> list[str]:
        return self.cluster.node_names()

    def to_dict(self, started_at: str | None = None) -> dict[str, Any]:
        """The test.json of a run (results/SCHEMA.md): the required keys first, then the rest."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": self.name}
        out.update(
            workload=self.workload,
            nemesis=list(self.nemesis),
            backend=self.backend,
            seed=self.seed,
            nodes=self.nodes,
            time_limit_s=self.time_limit_s,
            concurrency=self.concurrency,
            rate=self.rate,
        )
        if started_at is not None:
            out["started_at"] = started_at
        out.update(
            sut=self.sut,
            cluster={
                "controllers": self.cluster.controllers,
                "brokers": self.cluster.brokers,
                "combined": self.cluster.combined,
            },
            workload_options=dict(self.workload_options),
            nemesis_interval_s=self.nemesis_interval_s,
            nemesis_duration_s=self.nemesis_duration_s,
            nemesis_modes={k: list(v) for k, v in self.nemesis_modes.items()},
            nemesis_options={k: dict(v) for k, v in self.nemesis_options.items()},
            nemesis_max_active=self.nemesis_max_active,
            nemesis_buggify=self.nemesis_buggify,
            test_count=self.test_count,
            leave_db_running=self.leave_db_running,
            recovery_s=self.recovery_s,
            final_reads=self.final_reads,
        )
        if self.bugs:
            out["bugs"] = list(self.bugs)
        if not self.forger:
            out["forger"] = False
        if not self.pre_vote:
            out["pre_vote"] = False
        if self.nemesis_draw != "random":
            out["nemesis_draw"] = self.nemesis_draw
        if self.ready_timeout_s != READY_TIMEOUT_S:
            out["ready_timeout_s"] = self.ready_timeout_s
        if self.recovery_tail_s is not None:
            out["recovery_tail_s"] = self.recovery_tail_s
        if self.inventory:
            out["inventory"] = self.inventory
        if self.sut_settings:
            out["sut_settings"] = dict(self.sut_settings)
        return out

    def to_toml(self) -> str:
        """A test file that `load_test` reads back to this very spec."""
        data = self.to_dict()
        for derived in ("schema_version", "nodes"):
            data.pop(derived)
        scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
        tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
        lines = [f"{k} = {_toml_value(v)}" for k, v in scalars]
        for table, values in tables:
            lines += ["", f"[{table}]"] + [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items()]
        return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


# --- loading -----------------------------------------------------------------------------------------


class _Where:
    """Names the origin of a value in error messages: `file:line: key` or `--flag`."""

    def __init__(self, path: Path | None, text: str = "") -> None:
        self.path = path
        self.lines = text.splitlines()

    def of(self, key: str, table: str | None = None, *, flag: bool = False) -> str:
        if flag:
            return f"{FLAGS.get(key, '--' + key.replace('_', '-'))}"
        dotted = f"{table}.{key}" if table else key
        line = self._line_of(key, table)
        return f"{self.path}:{line}: {dotted}" if line else f"{self.path}: {dotted}"

    def _line_of(self, key: str, table: str | None) -> int | None:
        """Best effort: the line that assigns `key` in `table` (tomllib gives no positions)."""
        current: str | None = None
        pattern = re.compile(rf"^\s*(?:\"{re.escape(key)}\"|{re.escape(key)})\s*=")
        for number, line in enumerate(self.lines, start=1):
            header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]", line)
            if header:
                current = header.group(1)
                continue
            if current == table and pattern.match(line):
                return number
        if table is None:
            return None
        for number, line in enumerate(self.lines, start=1):  # a table of its own: `[table.key]`
            header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]", line)
            if header and header.group(1) == f"{table}.{key}":
                return number
        if "." in table:  # an inline table: the line that assigns it
            parent, _, name = table.rpartition(".")
            return self._line_of(name, parent)
        return None


def _fail(where: str, problem: str) -> UserError:
    return UserError(f"{where}: {problem}")


def _duration(value: Any, where: str, *, positive: bool) -> float:
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if not m:
            raise _fail(where, f"expected a duration like 30, 30s, 500ms or 2m, got {value!r}")
        secs = float(m.group(1)) * _UNITS[m.group(2)]
    elif isinstance(value, int | float) and not isinstance(value, bool):
        secs = float(value)
    else:
        raise _fail(where, f"expected a duration in seconds, got {_type_name(value)} {value!r}")
    if not math.isfinite(secs) or secs < 0 or (positive and secs == 0):
        raise _fail(where, f"must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return secs


def _integer(value: Any, where: str, *, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(where, f"expected an integer, got {_type_name(value)} {value!r}")
    if value < minimum:
        raise _fail(where, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise _fail(where, f"must be <= {maximum:,}, got {value:,}")
    return value


# Clients are built before the run starts (each a process of the history, with its own connection on a
# real backend): 10**20 of them was a hang at "starting the cluster", not an error.
MAX_CONCURRENCY = 10_000


def _number(value: Any, where: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _fail(where, f"expected a number, got {value!r}") from None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _fail(where, f"expected a number, got {_type_name(value)} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise _fail(where, f"must be a number >= 0, got {value!r}")
    return float(value)


def _boolean(value: Any, where: str) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    if not isinstance(value, bool):
        raise _fail(where, f"expected true or false, got {_type_name(value)} {value!r}")
    return value


def _choice(value: Any, where: str, allowed: Collection[str], what: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a {what} name, got {_type_name(value)} {value!r}")
    if value not in allowed:
        raise _fail(where, f"unknown {what} {value!r} (choose from {', '.join(sorted(allowed))})")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise _fail(
            where,
            f"a test name is 1-100 letters, digits and + . _ - starting with a letter or digit, got {value!r}",
        )
    return value


def _kinds(value: Any, where: str, allowed: Collection[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [] if value.strip() in ("", "none") else [k.strip() for k in value.split(",")]
    if not isinstance(value, list | tuple) or not all(isinstance(k, str) for k in value):
        raise _fail(where, f"expected a list of fault kinds, got {_type_name(value)} {value!r}")
    for kind in value:
        if kind not in allowed:
            raise _fail(where, f"unknown fault kind {kind!r} (choose from {', '.join(sorted(allowed))})")
    return tuple(dict.fromkeys(value))


def _cluster(value: Any, where: _Where, flag: bool) -> Cluster:
    if isinstance(value, str | int) and flag:
        text = str(value).strip()
        if re.fullmatch(r"\d+", text):
            value = {"combined": int(text)}
        elif m := re.fullmatch(r"(\d+)\s*\+\s*(\d+)", text):
            value = {"controllers": int(m.group(1)), "brokers": int(m.group(2))}
        else:
            try:
                value = {k.strip(): v.strip() for k, v in (p.split("=", 1) for p in text.split(","))}
            except ValueError:
                raise _fail(
                    where.of("nodes", flag=True),
                    f"expected N (combined nodes), C+B (controllers+brokers) or controllers=3,brokers=2, got {text!r}",
                ) from None
    if not isinstance(value, Mapping):
        raise _fail(where.of("cluster", flag=flag), f"expected a table, got {_type_name(value)} {value!r}")
    counts = {}
    for key, count in value.items():
        loc = where.of("nodes", flag=True) if flag else where.of(key, "cluster")
        if key not in ("controllers", "brokers", "combined"):
            raise _fail(loc, f"unknown key {key!r} (expected controllers, brokers, combined)")
        counts[key] = _integer(count, loc, minimum=0)
    cluster = Cluster(**counts)
    if cluster.controllers + cluster.combined == 0:
        loc = where.of("nodes", flag=True) if flag else where.of("cluster")
        raise _fail(loc, "needs at least one controller or combined node")
    return cluster


def _modes(value: Any, where: _Where, flag: bool) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise _fail(where.of("nemesis_modes", flag=flag), f"expected a table, got {_type_name(value)}")
    out = {}
    for kind, modes in value.items():
        loc = where.of("nemesis_modes", flag=True) if flag else where.of(kind, "nemesis_modes")
        if not isinstance(modes, list | tuple) or not modes or not all(isinstance(m, str) for m in modes):
            raise _fail(loc, f"expected a non-empty list of mode names, got {modes!r}")
        if kind in FAULT_KINDS:
            unknown = [m for m in modes if m not in mode_choices(kind)]
            if unknown:
                raise _fail(
                    loc, f"unknown mode {unknown[0]!r} for {kind} (choose from {', '.join(mode_choices(kind))})"
                )
        out[kind] = tuple(modes)
    return out


def _nemesis_options(value: Any, where: _Where, flag: bool) -> dict[str, dict[str, Any]]:
    """`[nemesis_options.<kind>]` tables (or `--nemesis-option KIND.KEY=VALUE` pairs, already grouped
    by kind), each key checked against the catalogue."""
    if not isinstance(value, Mapping):
        raise _fail(where.of("nemesis_options", flag=flag), f"expected a table, got {_type_name(value)}")
    out: dict[str, dict[str, Any]] = {}
    for kind, options in value.items():
        table = f"nemesis_options.{kind}"
        if kind not in FAULT_KINDS:
            loc = where.of("nemesis_options", flag=True) if flag else where.of(kind, "nemesis_options")
            raise _fail(loc, f"unknown fault kind {kind!r} (choose from {', '.join(FAULT_KINDS)})")
        if not isinstance(options, Mapping):
            raise _fail(where.of(kind, "nemesis_options"), f"expected a table, got {_type_name(options)}")
        for key, option in options.items():
            problem = check_option(kind, key, option)
            if problem:
                loc = f"{FLAGS['nemesis_options']} {kind}.{key}" if flag else where.of(key, table)
                raise _fail(loc, problem)
        out[kind] = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}
    return out


def _bug_names(value: Any, where: str) -> tuple[str, ...]:
    """Planted bug names: a list or "a,b"; each must be in the catalogue (node/bugs.py)."""
    from node.bugs import UnknownBugError, parse_bugs

    if not isinstance(value, str) and not (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
        raise _fail(where, f"expected a list of planted bug names, got {_type_name(value)} {value!r}")
    try:
        return tuple(parse_bugs(value))
    except UnknownBugError as exc:
        raise _fail(where, str(exc)) from None


def _inventory(value: Any, where: str) -> str:
    """The ssh inventory file as an absolute path (so test.json names it wherever it is read)."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"expected the path of an inventory file, got {_type_name(value)} {value!r}")
    return str(Path(value).expanduser().resolve())


def _type_name(value: Any) -> str:
    return {dict: "table", list: "array", str: "string", bool: "boolean", float: "float", int: "integer"}.get(
        type(value), type(value).__name__
    )


# field -> (TOML table it lives in or None, parser(value, where-string, registries))
_Parser = Callable[[Any, str, Registries], Any]
_SCALARS: dict[str, _Parser] = {
    "name": lambda v, w, r: _name(v, w),
    "backend": lambda v, w, r: _choice(v, w, r.backends, "backend"),
    "sut": lambda v, w, r: _choice(v, w, r.suts, "system-under-test adapter"),
    "workload": lambda v, w, r: _choice(v, w, r.workloads, "workload"),
    "nemesis": lambda v, w, r: _kinds(v, w, r.nemeses),
    "nemesis_interval_s": lambda v, w, r: _duration(v, w, positive=True),
    "nemesis_duration_s": lambda v, w, r: _duration(v, w, positive=False),
    "time_limit_s": lambda v, w, r: _duration(v, w, positive=True),
    "concurrency": lambda v, w, r: _integer(v, w, minimum=1, maximum=MAX_CONCURRENCY),
    "rate": lambda v, w, r: _number(v, w),
    "seed": lambda v, w, r: _integer(v, w, minimum=0),
    "test_count": lambda v, w, r: _integer(v, w, minimum=1),
    "leave_db_running": lambda v, w, r: _boolean(v, w),
    "recovery_s": lambda v, w, r: _duration(v, w, positive=False),
    "recovery_tail_s": lambda v, w, r: _duration(v, w, positive=True),
    "ready_timeout_s": lambda v, w, r: _duration(v, w, positive=True),
    "final_reads": lambda v, w, r: _boolean(v, w),
    "nemesis_max_active": lambda v, w, r: _integer(v, w, minimum=0),
    "nemesis_draw": lambda v, w, r: _choice(v, w, DRAWS, "nemesis draw"),
    "nemesis_buggify": lambda v, w, r: _boolean(v, w),
    "bugs": lambda v, w, r: _bug_names(v, w),
    "forger": lambda v, w, r: _boolean(v, w),
    "pre_vote": lambda v, w, r: _boolean(v, w),
    "inventory": lambda v, w, r: _inventory(v, w),
}
_TABLES = ("cluster", "workload_options", "sut_settings", "nemesis_modes", "nemesis_options")
# test.json keys that are derived or added by the runner: accepted and ignored by from_dict. `suite` (which
# suite, cell and seed a run of `kchaos suite`/`gate`/`nightly` was), `reproduces` (the run a `kchaos
# reproduce` replayed) and `attempt` (which of its `--attempts` runs) say where a run came from, not what it
# ran, so a run recorded with them reproduces.
_DERIVED = ("schema_version", "nodes", "started_at", "suite", "reproduces", "attempt")


def _resolve(raw: Mapping[str, Any], where: _Where, flags: Mapping[str, Any], reg: Registries) -> TestSpec:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _SCALARS:
            values[key] = _SCALARS[key](value, where.of(key), reg)
        elif key == "cluster":
            values["cluster"] = _cluster(value, where, flag=False)
        elif key == "workload_options":
            if not isinstance(value, Mapping):
                raise _fail(where.of(key), f"expected a table, got {_type_name(value)}")
            values[key] = dict(value)
        elif key == "nemesis_modes":
            values[key] = _modes(value, where, flag=False)
        elif key == "nemesis_options":
            values[key] = _nemesis_options(value, where, flag=False)
        elif key == "sut_settings":
            values[key] = _sut_settings(value, where, flag=False)
        else:
            known = ", ".join([*_SCALARS, *_TABLES])
            raise _fail(where.of(key), f"unknown key (known keys: {known})")
    for key, value in flags.items():
        if value is None:
            continue  # flag not given
        loc = where.of(key, flag=True)
        if key in _SCALARS:
            values[key] = _SCALARS[key](value, loc, reg)
        elif key == "nodes":
            values["cluster"] = _cluster(value, where, flag=True)
        elif key == "workload_options":
            if not isinstance(value, Mapping):
                raise _fail(loc, f"expected key=value options, got {value!r}")
            values[key] = {**values.get(key, {}), **value}
        elif key == "sut_settings":
            values[key] = {**values.get(key, {}), **_sut_settings(value, where, flag=True)}
        elif key == "nemesis_modes":
            values[key] = _modes(value, where, flag=True)
        elif key == "nemesis_options":
            merged = {k: dict(v) for k, v in values.get(key, {}).items()}
            for kind, options in _nemesis_options(value, where, flag=True).items():
                merged[kind] = {**merged.get(kind, {}), **options}
            values[key] = merged
        else:
            raise _fail(loc, "unknown option")
    kinds = values.get("nemesis", TestSpec.nemesis)
    for table in ("nemesis_modes", "nemesis_options"):
        for kind in values.get(table, {}):
            if kind not in kinds:
                loc = where.of(kind, table) if table in raw else where.of(table, flag=True)
                what = table.removeprefix("nemesis_")
                raise _fail(loc, f"{what} for {kind!r}, which is not in the nemesis list {list(kinds)}")
    problem = _sut_problem(values)
    if problem:
        key = "sut" if "sut" in values else "backend"
        raise _fail(where.of(key, flag=key in flags and flags[key] is not None), problem)
    settings = values.get("sut_settings")
    if settings:
        from harness.db import sut_settings_problem

        problem = sut_settings_problem(
            values.get("sut", TestSpec.sut), values.get("backend", TestSpec.backend), settings
        )
        if problem:
            raise _fail(where.of("sut_settings", flag=flags.get("sut_settings") is not None), problem)
    if "seed" not in values:
        values["seed"] = secrets.randbelow(1 << 31)
    if "name" not in values:
        label = "+".join(sorted(kinds)) or "none"
        values["name"] = f"{values.get('workload', TestSpec.workload)}-{label}"
    return TestSpec(**values)


_SETTING_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def _sut_settings(value: Any, where: _Where, flag: bool) -> dict[str, str]:
    """`[sut_settings]` (or `--sut-setting KEY=VALUE` pairs): names as a config file or a flag spells
    them, values as text (a TOML number or boolean as Java properties and flags write it)."""
    if not isinstance(value, Mapping):
        raise _fail(where.of("sut_settings", flag=flag), f"expected a table, got {_type_name(value)}")
    out: dict[str, str] = {}
    for key, setting in value.items():
        loc = f"{FLAGS['sut_settings']} {key}" if flag else where.of(key, "sut_settings")
        if not isinstance(key, str) or not _SETTING_RE.match(key):
            raise _fail(loc, "expected a setting name of letters, digits, '.', '_' and '-'")
        if isinstance(setting, bool):
            out[key] = "true" if setting else "false"
        elif isinstance(setting, int | float | str) and "\n" not in str(setting):
            out[key] = str(setting)
        else:
            raise _fail(loc, f"expected a string, number or boolean on one line, got {_type_name(setting)} {setting!r}")
    return out


def _sut_problem(values: Mapping[str, Any]) -> str | None:
    """Why the chosen system under test cannot run on the chosen backend or workload (harness.db), or None."""
    from harness.db import sut_problem

    sut = values.get("sut", TestSpec.sut)
    workload = values.get("workload", TestSpec.workload)
    try:
        from harness.plugins import workload_suts

        suts: tuple[str, ...] | None = workload_suts(workload)
    except KeyError:
        suts = None
    brokers = values.get("cluster", Cluster(combined=3)).brokers
    kinds = values.get("nemesis", TestSpec.nemesis)
    backend = values.get("backend", TestSpec.backend)
    vm_hosts, guest_clocks = _host_kinds(values.get("inventory", "")) if backend == "ssh" else (False, False)
    problem = sut_problem(sut, backend, suts, brokers, kinds, vm_hosts, guest_clocks)
    return f"workload {workload}: {problem}" if problem and problem.startswith("that workload") else problem


def _host_kinds(inventory: str) -> tuple[bool, bool]:
    """Whether every host of this ssh inventory is a VM of `kchaos vagrant up`, and whether every host's
    clock faults step its own kernel clock (both False when there is no inventory or it cannot be read:
    the backend says why when the run starts)."""
    if not inventory:
        return False, False
    from harness.backends.inventory import load_inventory

    try:
        hosts = load_inventory(Path(inventory)).hosts
    except Exception:
        return False, False
    if not hosts:
        return False, False
    return all(host.vm for host in hosts), all(host.clock == "guest" for host in hosts)


def _read_text(file: Path, what: str) -> str:
    """A UTF-8 file's text; one that cannot be read is a one-line UserError naming it."""
    try:
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{file}: cannot read {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{file}: not a UTF-8 text file") from None


def read_toml(file: Path, what: str) -> tuple[dict[str, Any], str]:
    """A TOML file's table and text; a file that cannot be read or parsed is a one-line UserError
    naming the file (and the line and column of a syntax error)."""
    text = _read_text(file, what)
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"^(.*) \(at line (\d+), column (\d+)\)$", str(exc))
        where_text = f"{file}:{m.group(2)}:{m.group(3)}" if m else str(file)
        raise UserError(f"{where_text}: invalid TOML: {m.group(1) if m else exc}") from None


def read_test_json(file: Path) -> tuple[dict[str, Any], str]:
    """A run's test.json as a test file: its table without the keys the runner derives or adds, and
    its text. A file that cannot be read or parsed, or holds no JSON object, is a one-line UserError."""
    text = _read_text(file, "test file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise UserError(f"{file}: a test.json holds one JSON object, not {type(data).__name__}")
    return {k: v for k, v in data.items() if k not in _DERIVED}, text


def read_test_file(file: Path) -> tuple[dict[str, Any], str]:
    """A test file's table and text: TOML, or a run's test.json (by its `.json` suffix), so a past
    run's test can be run again as it was (`kchaos run --test RUN_DIR/test.json`), flags winning."""
    if file.suffix == ".json":
        return read_test_json(file)
    return read_toml(file, "test file")


def load_test(
    path: str | Path | None,
    overrides: Mapping[str, Any] | None = None,
    registries: Registries | None = None,
) -> TestSpec:
    """The resolved test: defaults, then the test file (if any: TOML, or a run's test.json), then
    `overrides` (CLI flags; a None value means "not given"). Bad input raises UserError with one line
    naming file/flag, key, problem."""
    reg = registries or Registries()
    raw: dict[str, Any] = {}
    where = _Where(None)
    if path is not None:
        file = Path(path)
        raw, text = read_test_file(file)
        where = _Where(file, text)
    return _resolve(raw, where, overrides or {}, reg)


def from_dict(data: Mapping[str, Any], source: str = "test.json", registries: Registries | None = None) -> TestSpec:
    """A spec from a run's test.json (derived keys ignored), validated like a test file."""
    raw = {k: v for k, v in data.items() if k not in _DERIVED}
    where = _Where(Path(source))
    return _resolve(raw, where, {}, registries or Registries())
