"""The fault vocabulary every backend carries out (BRIEF §3.2): one name per fault, one parameter type each.

A nemesis (the `nemesis/` package) decides *which* fault, *where* and *when*; a backend only knows *how*
on its kind of host. Faults are named by node id, so the same nemesis drives the simulator, network
namespaces, containers and VMs. A backend lists what it can do in `Backend.faults`; asking for anything
else raises `FaultNotSupported`, which the nemesis turns into a `fail` completion (nothing happened).

| kind          | Backend methods                                  | parameters           |
|---------------|--------------------------------------------------|----------------------|
| partition     | partition(grudge), heal_network()                | `Grudge`             |
| packet        | packet(links, fault), heal_packet()              | `Links`, `PacketFault` |
| redeliver     | redeliver(links, fault), heal_redeliver()        | `Links`, `RedeliverFault` |
| clock         | clock(node, fault), clock_reset(node)            | `ClockFault`         |
| kill          | kill(node), restart(node)                        |                      |
| pause         | pause(node), resume(node)                        |                      |
| disk_stall    | disk(node, fault), disk_heal(node)               | `DiskFault(stall)`   |
| disk_fail     | disk(node, fault), disk_heal(node)               | `DiskFault(fail)`    |
| lose_unsynced | lose_unsynced(node), restart(node)               |                      |
| corrupt       | the DB adapter (it knows the file formats): `DB.corrupt` / `DB.uncorrupt` on a stopped node |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Every fault kind, in the order the catalogue lists them.
FAULT_KINDS: tuple[str, ...] = (
    "partition",
    "packet",
    "redeliver",
    "clock",
    "kill",
    "pause",
    "disk_stall",
    "disk_fail",
    "lose_unsynced",
    "corrupt",
)

# Backend name -> the kinds it carries out (each backend class's `faults` is its entry). Kept here, as
# data, so that `kchaos nemeses` and the test model can say who supports what without importing the
# backends themselves (the ssh and docker ones pull in much of the harness).
BACKEND_FAULTS: dict[str, frozenset[str]] = {
    "sim": frozenset(FAULT_KINDS),
    # corrupt: the DB adapter edits a stopped node's files; no redeliver (see WHY_NOT)
    "netns": frozenset(FAULT_KINDS) - {"redeliver"},
    "docker": frozenset(FAULT_KINDS) - {"redeliver"},  # the netns machinery, in each container's namespace
    # packet (netem) and lose_unsynced (a power loss) only on VMs of `kchaos vagrant up`: elsewhere they
    # would need NFQUEUE daemons or a FUSE mount on every host; no corrupt (the DB adapter edits locally)
    "ssh": frozenset({"partition", "packet", "kill", "pause", "clock", "disk_stall", "disk_fail", "lose_unsynced"}),
}

# Why a backend cannot carry out a kind, where there is more to say than "not implemented": the
# one line its refusal (`FaultNotSupported`, a suite's check) gives.
_TCP = (
    "the nodes talk over TCP, which drops a duplicated segment and delivers in order (a segment held "
    "back stalls its connection, nothing stale overtakes), so a packet-level copy never reaches a node "
    "twice; for slow links use the packet kind's delay_ms"
)
WHY_NOT: dict[tuple[str, str], str] = {
    ("netns", "redeliver"): _TCP,
    ("docker", "redeliver"): _TCP,
    ("ssh", "redeliver"): _TCP,
}


def why_not(backend: str, kind: str) -> str:
    """One line: the `backend` cannot carry out `kind` faults, and why when it is known."""
    reason = WHY_NOT.get((backend, kind))
    return f"the {backend} backend cannot do {kind!r} faults" + (f": {reason}" if reason else "")


# node -> the nodes it must not hear from (Jepsen's "grudge"); packets *to* the key *from* the values.
Grudge = Mapping[str, frozenset[str]]
# node -> the peers whose packets to it are affected; None means every link between nodes.
Links = Mapping[str, frozenset[str]] | None


class FaultNotSupported(Exception):
    """This backend cannot carry out this fault (the message names both)."""


@dataclass(frozen=True)
class PacketFault:
    """Degraded links: each packet on an affected link is dropped with `loss`, else delayed by
    `delay_ms` ± `jitter_ms` (uniform). Delays may reorder packets, as a real network does."""

    loss: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"packet loss must be in [0, 1], got {self.loss}")
        if self.delay_ms < 0 or self.jitter_ms < 0 or self.jitter_ms > self.delay_ms:
            raise ValueError(f"packet delay needs 0 <= jitter <= delay, got {self.delay_ms} ± {self.jitter_ms}")


REDELIVER_MODES = ("duplicate", "stale")


@dataclass(frozen=True)
class RedeliverFault:
    """Messages delivered more than once: on an affected link each message that arrives is, with
    `probability`, delivered once more:

    - duplicate: the copy arrives up to `lag_ms` after the original (uniform);
    - stale: the copy arrives about `lag_ms` after the message was sent (± 25%): seconds later, after
      elections may have moved every node to a newer epoch, so each handler's epoch checks matter.
    """

    mode: str
    probability: float
    lag_ms: int

    def __post_init__(self) -> None:
        if self.mode not in REDELIVER_MODES:
            raise ValueError(f"redeliver mode must be one of {', '.join(REDELIVER_MODES)}, got {self.mode!r}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"redeliver probability must be in [0, 1], got {self.probability}")
        if self.lag_ms < 0:
            raise ValueError(f"redeliver lag must be >= 0 ms, got {self.lag_ms}")


CLOCK_MODES = ("bump", "strobe", "rate", "reset")


@dataclass(frozen=True)
class ClockFault:
    """A node's wall clock (what Kafka's `Time.milliseconds()` reads):

    - bump: jump by `delta_ms` (negative = backwards) and stay there;
    - strobe: flip between +`delta_ms` and the true time every `period_ms`, for `duration_ms`;
    - rate: run at `rate` times real speed (libfaketime applies it from the process's start);
    - reset: the true time at normal speed.
    """

    mode: str
    delta_ms: int = 0
    period_ms: int = 0
    duration_ms: int = 0
    rate: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in CLOCK_MODES:
            raise ValueError(f"clock mode must be one of {', '.join(CLOCK_MODES)}, got {self.mode!r}")
        if self.mode == "strobe" and (self.period_ms <= 0 or self.duration_ms <= 0):
            raise ValueError("a clock strobe needs period_ms > 0 and duration_ms > 0")
        if self.rate <= 0:
            raise ValueError(f"clock rate must be > 0, got {self.rate}")

    def lag_after_reset_ns(self, active_ns: int) -> int:
        """How long the node's clock stands still after a reset that ends this fault, having been on
        for `active_ns`: a node's clock never runs backwards, so a clock that was ahead waits for the
        true time (a forward bump's delta, a strobe's, which ends on a step back, a fast rate's gain)."""
        if self.mode in ("bump", "strobe"):
            return max(0, self.delta_ms) * 1_000_000
        if self.mode == "rate" and self.rate > 1:
            return int((self.rate - 1) * active_ns)
        return 0


DISK_OPS = ("fsync", "write")
DISK_ERRORS = ("EIO", "ENOSPC")


@dataclass(frozen=True)
class DiskFault:
    """What the node's data-dir I/O suffers until `disk_heal`:

    - kind "stall": every call in `ops` takes `delay_ms` longer;
    - kind "fail": every call in `ops` fails with `errno` (with `probability`).
    """

    kind: str
    ops: tuple[str, ...] = ("fsync",)
    delay_ms: int = 0
    errno: str = "EIO"
    probability: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("stall", "fail"):
            raise ValueError(f"disk fault kind must be stall or fail, got {self.kind!r}")
        if not self.ops or any(op not in DISK_OPS for op in self.ops):
            raise ValueError(f"disk fault ops must be some of {', '.join(DISK_OPS)}, got {self.ops!r}")
        if self.errno not in DISK_ERRORS:
            raise ValueError(f"disk fault errno must be one of {', '.join(DISK_ERRORS)}, got {self.errno!r}")
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"disk fault probability must be in (0, 1], got {self.probability}")
        if self.delay_ms < 0:
            raise ValueError(f"disk stall delay must be >= 0, got {self.delay_ms}")


# A start's value may carry what an earlier run's start did (`kchaos reproduce`): targets, parameters,
# a partition's grudge. The nemesis then does that again instead of choosing.
REPLAY = "replay"
