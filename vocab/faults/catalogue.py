"""The fault catalogue: every kind the nemesis can inject, with its modes, targets and parameters.

This is data. The nemesis (`nemesis.nemesis`) reads it to choose what to do, the test model
(`harness.test_spec`) to validate `[nemesis_options.<kind>]`, and `kchaos nemeses` prints it. It is
imported by every CLI start, so it imports nothing heavy: which backend supports which kind is read
from the backends' `faults` only when asked (`backend_support`).

Vocabulary per kind:
- `modes`: what the kind's mode means differs by kind — a partition's shape, a clock fault's kind of
  skew, a corruption's place, and for the rest the *target mode* (which nodes: `one`, `leader`…);
- `targets`: for kinds whose mode is not a target mode (redeliver, clock, corrupt), the target modes allowed;
- `params`: each with a default; in a test file a parameter is a value, or a list to draw one from
  at each start. A default that is a list is drawn from too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocab.faults.kinds import BACKEND_FAULTS, CLOCK_MODES, DISK_ERRORS, FAULT_KINDS, REDELIVER_MODES, WHY_NOT

__all__ = [
    "CATALOGUE",
    "FAULT_KINDS",
    "HEAL_ORDER",
    "KIND_COLORS",
    "TARGETED_KIND",
    "TARGET_MODES",
    "KindSpec",
    "Param",
    "spec",
]

# Which nodes a fault hits (vocab.faults.targets). Minority/majority count the controllers (the voters):
# a minority down leaves the quorum available, a majority does not.
TARGET_MODES: tuple[str, ...] = (
    "one",
    "leader",
    "follower",
    "minority",
    "majority",
    "all",
    "controllers",
    "brokers",
    "one-controller",
    "one-broker",
)
TARGETS_DOC: dict[str, str] = {
    "one": "a random node",
    "leader": "the active controller (a random controller when none is known)",
    "follower": "a random controller that is not the leader",
    "minority": "a random minority of the controllers (the quorum survives)",
    "majority": "a random majority of the controllers (the quorum is lost)",
    "all": "every node",
    "controllers": "every controller (voter)",
    "brokers": "every node with the broker role",
    "one-controller": "a random controller",
    "one-broker": "a random node with the broker role",
}
KILL_TARGETS: tuple[str, ...] = ("one", "leader", "minority", "majority", "all")

PARTITION_MODES: tuple[str, ...] = (
    "random-halves",
    "isolate-one",
    "isolate-leader",
    "majorities-ring",
    "bridge",
    "one-way",
    "controllers-from-brokers",
    "isolate-each-controller",
    "leader-from-controllers",
)
PARTITION_DOC: dict[str, str] = {
    "random-halves": "all nodes shuffled and cut in two halves (the odd one out on the second)",
    "isolate-one": "a random node cut off from every other",
    "isolate-leader": "the active controller cut off from every other node",
    "majorities-ring": "controllers on a ring: each hears a majority, no two the same one (brokers hear all)",
    "bridge": "two halves that only one node (the bridge) hears both of",
    "one-way": "a random node's messages dropped one way: it is `deaf` (hears no one) or `mute` (no one hears it)",
    "controllers-from-brokers": "broker-only nodes cut off from the controllers (needs broker-only nodes)",
    "isolate-each-controller": "no controller hears another (brokers hear all): no quorum anywhere",
    "leader-from-controllers": "the active controller cut off from the other controllers, not from the brokers "
    "(KAFKA-15489: it must resign; the brokers must find the new one)",
}
CORRUPT_MODES: tuple[str, ...] = ("bitflip-log", "truncate-log", "bitflip-snapshot", "truncate-snapshot")
CLOCK_START_MODES: tuple[str, ...] = CLOCK_MODES  # bump, strobe, rate, reset
DISK_OPS_CHOICES: tuple[str, ...] = ("fsync", "write", "fsync+write")


@dataclass(frozen=True)
class Param:
    """One parameter of a fault kind. `default` is a value or a tuple to draw from at each start."""

    name: str
    type: type  # int, float or str
    default: Any
    doc: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # the modes it applies to (empty: all)

    def check(self, value: Any) -> str | None:
        """None when `value` is a valid single value, else what is wrong with it."""
        if self.type is str:
            if not isinstance(value, str):
                return f"expected a string, got {value!r}"
            if self.choices and value not in self.choices:
                return f"expected one of {', '.join(self.choices)}, got {value!r}"
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number, got {value!r}"
        if self.type is int and not float(value).is_integer():
            return f"expected an integer, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be >= {self.minimum:g}, got {value!r}"
        if self.maximum is not None and value > self.maximum:
            return f"must be <= {self.maximum:g}, got {value!r}"
        return None

    def describe_default(self) -> str:
        if isinstance(self.default, tuple):
            return "one of " + ", ".join(str(v) for v in self.default)
        return str(self.default)


@dataclass(frozen=True)
class KindSpec:
    """A fault kind of the catalogue (see the module docstring)."""

    kind: str
    summary: str
    modes: tuple[str, ...]
    default_modes: tuple[str, ...]
    stop: str
    targets: tuple[str, ...] = ()  # target modes, for kinds whose modes are something else
    default_targets: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    sim: str = ""  # how the sim backend does it
    netns: str = ""
    docker: str = ""  # where the docker backend differs from netns (it shares its namespace machinery)
    mode_doc: Mapping[str, str] = field(default_factory=dict)

    @property
    def docker_mechanism(self) -> str:
        return self.docker or f"as netns, in the container's network namespace: {self.netns}"

    @property
    def modes_are_targets(self) -> bool:
        return not self.targets and self.modes[0] in TARGET_MODES

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


_MS = "ms"
CATALOGUE: dict[str, KindSpec] = {
    spec.kind: spec
    for spec in (
        KindSpec(
            "partition",
            "cut links between nodes (a grudge: who cannot hear whom)",
            PARTITION_MODES,
            PARTITION_MODES,
            "heal every cut link",
            sim="the simulated network drops messages the grudge cuts",
            netns="nft/iptables DROP rules in our own table inside each namespace",
            mode_doc=PARTITION_DOC,
        ),
        KindSpec(
            "packet",
            "drop and delay packets on all links, or on the links to and from the targets",
            TARGET_MODES,  # `all`: every link
            ("all", "one", "leader", "minority"),
            "remove the packet fault",
            params=(
                Param("loss", float, (0.05, 0.2), "probability that a packet is dropped", "", 0.0, 1.0),
                Param("delay_ms", int, (0, 50, 200), "extra delay of each packet not dropped", _MS, 0),
                Param("jitter_ms", int, 20, "the delay varies uniformly by ± this (at most the delay)", _MS, 0),
            ),
            sim="per-message loss and extra delay on the affected links (messages reorder)",
            netns="iptables statistic loss and an NFQUEUE delay daemon on the receiving node",
        ),
        KindSpec(
            "redeliver",
            "deliver messages twice: a duplicate soon after, or a stale copy seconds later (old epochs)",
            REDELIVER_MODES,
            REDELIVER_MODES,
            "stop making copies (those already sent still arrive)",
            targets=TARGET_MODES,  # `all`: every link; else the links to and from the targets
            default_targets=("all", "one", "leader"),
            params=(
                Param("probability", float, (0.05, 0.2), "probability that a message is delivered again", "", 0.0, 1.0),
                Param(
                    "copy_delay_ms",
                    int,
                    (5, 50, 200),
                    "duplicate: the copy arrives up to this after the original",
                    _MS,
                    0,
                    modes=("duplicate",),
                ),
                Param(
                    "late_ms",
                    int,
                    (1_000, 3_000, 8_000),
                    "stale: the copy arrives this (± 25%) after the message was sent",
                    _MS,
                    0,
                    modes=("stale",),
                ),
            ),
            sim="each message on the affected links is delivered once more with the probability "
            "(requests are answered again; the sender's core sees a second answer to one correlation id)",
            netns=f"refused: {WHY_NOT[('netns', 'redeliver')]}",
            docker="refused, as netns",
            mode_doc={
                "duplicate": "a copy arrives up to copy_delay_ms after the original",
                "stale": "a copy arrives late_ms after the message was sent, after elections may have happened",
            },
        ),
        KindSpec(
            "clock",
            "skew the targets' wall clocks: bump, strobe, rate; reset",
            CLOCK_START_MODES,
            ("bump", "strobe", "rate"),
            "reset the targets' clocks to the true time at normal speed",
            targets=TARGET_MODES,
            default_targets=("one", "leader", "minority"),
            params=(
                Param(
                    "delta_ms",
                    int,
                    (-60_000, -10_000, -1_000, -100, 100, 1_000, 10_000, 60_000),
                    "bump: jump by this (negative: backwards); strobe: flip by this",
                    _MS,
                    -86_400_000,
                    86_400_000,
                    modes=("bump", "strobe"),
                ),
                Param("period_ms", int, (100, 1_000), "strobe: time between two flips", _MS, 1, modes=("strobe",)),
                Param("duration_ms", int, 10_000, "strobe: how long it flips", _MS, 1, modes=("strobe",)),
                Param(
                    "rate",
                    float,
                    (0.5, 0.8, 1.25, 2.0),
                    "rate: clock speed relative to real time",
                    "x",
                    0.01,
                    100.0,
                    modes=("rate",),
                ),
            ),
            sim="each node's clock is offset/rate over virtual time; its timers run on it (never backwards)",
            netns="libfaketime + the kchaos_clock shim, a timestamp file per node",
            mode_doc={
                "bump": "jump by delta_ms and stay there",
                "strobe": "flip between +delta_ms and the true time every period_ms for duration_ms",
                "rate": "run at `rate` times real speed",
                "reset": "the true time at normal speed",
            },
        ),
        KindSpec(
            "kill",
            "kill -9 the targets' processes",
            TARGET_MODES,
            KILL_TARGETS,
            "start the killed nodes again (a node still stopping gracefully is killed first)",
            params=(
                Param(
                    "signal",
                    str,
                    "KILL",
                    "KILL: kill -9; TERM: a graceful stop (a leader resigns with EndQuorumEpoch naming its "
                    "preferred successors, KIP-595; a broker shuts down through the controller)",
                    choices=("KILL", "TERM"),
                ),
                Param(
                    "successor",
                    str,
                    "reachable",
                    "TERM of the leader: `isolated` first cuts its preferred successor (the follower whose log "
                    "reaches furthest) off from every node, so the hand-over must fall to the next one",
                    choices=("reachable", "isolated"),
                    modes=("leader",),
                ),
            ),
            sim="the simulated process is dropped (its page cache survives); TERM: it shuts down by itself",
            netns="SIGKILL (or SIGTERM), restart with the same command",
            docker="docker kill -s KILL; a restart replaces the container (same namespace, address, data)",
        ),
        KindSpec(
            "pause",
            "stop the targets' processes from running (they keep sockets and memory)",
            TARGET_MODES,
            KILL_TARGETS,
            "resume them",
            sim="events to the node queue up until it resumes",
            netns="SIGSTOP / SIGCONT of the node's process group",
            docker="docker pause / unpause (the cgroup freezer)",
        ),
        KindSpec(
            "disk_stall",
            "make the targets' data-dir fsyncs and/or writes slow",
            TARGET_MODES,
            ("one", "leader", "minority"),
            "the disks healthy again",
            params=(
                Param("ops", str, ("fsync", "fsync+write"), "which calls stall", choices=DISK_OPS_CHOICES),
                Param("delay_ms", int, (50, 500, 2_000), "added to each call", _MS, 0),
            ),
            sim="simulated fsync/write completions delayed",
            netns="the kchaos_disk preload shim delays fsync/write on the data dir",
        ),
        KindSpec(
            "disk_fail",
            "make the targets' data-dir fsyncs and/or writes fail (the node must fail-stop)",
            TARGET_MODES,
            ("one", "leader", "minority"),
            "the disks healthy again; restart the targets the failure stopped",
            params=(
                Param("ops", str, ("fsync", "write", "fsync+write"), "which calls fail", choices=DISK_OPS_CHOICES),
                Param("errno", str, DISK_ERRORS, "the error", choices=DISK_ERRORS),
                Param("probability", float, 1.0, "each call fails with this probability", "", 0.000001, 1.0),
            ),
            sim="the simulated fsync/write raises the error",
            netns="the kchaos_disk preload shim fails fsync/write on the data dir; the node fail-stops",
        ),
        KindSpec(
            "lose_unsynced",
            "power loss: kill -9 and forget every write not yet fsynced",
            TARGET_MODES,
            ("one", "leader", "minority"),
            "start the nodes again",
            sim="the simulated disk keeps a random prefix of the un-fsynced writes",
            netns="a LazyFS-like FUSE filesystem under the data dir",
        ),
        KindSpec(
            "corrupt",
            "stop the target, damage a log segment or snapshot, start it: it must refuse or detect",
            CORRUPT_MODES,
            CORRUPT_MODES,
            "stop it, put the bytes back, start it",
            targets=TARGET_MODES,
            default_targets=("one",),
            sim="the simulated files are damaged the same way",
            netns="direct file edit while the node is down",
            mode_doc={
                "bitflip-log": "flip a bit in a log batch that has a valid batch after it",
                "truncate-log": "cut a log segment short, leaving a gap before later data",
                "bitflip-snapshot": "flip a bit in a snapshot",
                "truncate-snapshot": "cut a snapshot short",
            },
        ),
    )
}
assert tuple(CATALOGUE) == FAULT_KINDS

# The final phase stops kinds in this order: the network first (restarted nodes must reach their
# peers), healthy disks and clocks before restarts, paused nodes resumed, then restarts.
HEAL_ORDER: tuple[str, ...] = (
    "buggify",
    "partition",
    "packet",
    "redeliver",
    "clock",
    "disk_stall",
    "disk_fail",
    "pause",
    "kill",
    "lose_unsynced",
    "corrupt",
)

# Faults the simulator triggers by what a node just did (node.sim.buggify), recorded as the kind
# "buggify" in histories; each needs one of the run's kinds (the fault it does).
TARGETED_KIND = "buggify"

# One colour per kind wherever fault windows are drawn (run plots, report.html, the history viewer's
# `FAULT_COLORS`, which must stay equal: tests/nemesis/test_catalogue.py compares them).
KIND_COLORS: dict[str, str] = {
    "partition": "#7b61c9",
    "packet": "#17becf",
    "redeliver": "#9acd32",
    "clock": "#b8862d",
    "kill": "#c0392b",
    "pause": "#2d7fb8",
    "disk_stall": "#5d8c3a",
    "disk_fail": "#8c3a5d",
    "lose_unsynced": "#3a8c85",
    "corrupt": "#4d4d4d",
    "buggify": "#e67e22",
}
OTHER_COLOR = "#777777"

# Options of `[nemesis_options.<kind>]` besides the parameters.
SCHEDULE_OPTIONS: tuple[str, ...] = ("weight", "modes", "targets")


def spec(kind: str) -> KindSpec:
    try:
        return CATALOGUE[kind]
    except KeyError:
        raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(CATALOGUE)})") from None


def backend_support(backends: Sequence[str] | None = None) -> dict[str, frozenset[str]]:
    """Backend name -> the kinds it carries out (`vocab.faults.kinds.BACKEND_FAULTS`)."""
    return {name: BACKEND_FAULTS[name] for name in backends or BACKEND_FAULTS}


def mode_choices(kind: str) -> tuple[str, ...]:
    return spec(kind).modes


def check_option(kind: str, key: str, value: Any) -> str | None:
    """None when `[nemesis_options.<kind>] key = value` is valid, else the problem (one line)."""
    kind_spec = spec(kind)
    if key == "weight":
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return f"expected a number >= 0, got {value!r}"
        return None
    if key in ("modes", "targets"):
        allowed = kind_spec.modes if key == "modes" else kind_spec.targets
        if key == "targets" and not allowed:
            return f"{kind} has no separate targets: its modes are the target modes ({', '.join(kind_spec.modes)})"
        if not isinstance(value, list | tuple) or not value or not all(isinstance(m, str) for m in value):
            return f"expected a non-empty list of names, got {value!r}"
        unknown = [m for m in value if m not in allowed]
        if unknown:
            return f"unknown {key[:-1]} {unknown[0]!r} for {kind} (choose from {', '.join(allowed)})"
        return None
    param = kind_spec.param(key)
    if param is None:
        known = [
            *SCHEDULE_OPTIONS[:2],
            *(["targets"] if kind_spec.targets else []),
            *(p.name for p in kind_spec.params),
        ]
        return f"unknown option for {kind} (known: {', '.join(known)})"
    values = value if isinstance(value, list | tuple) else [value]
    if not values:
        return "expected a value or a non-empty list of values"
    for v in values:
        problem = param.check(v)
        if problem:
            return problem
    return None
