"""Quorum progress: a controller cut off from the other voters stops acting as the leader, and a node
linked with every live voter keeps up with the committed log (KIP-595).

KIP-595's Leader Progress Timeout: a leader that has not had a Fetch from a majority of the voters for
`quorum.fetch.timeout.ms` (F) starts an election; the voters that still hear each other elect a leader
of their own; a non-leader answers with an error that names the leader it knows, so clients and
brokers move on. A leader that never resigns (KAFKA-15489), cut off from the other controllers but not
from the brokers and clients, keeps claiming leadership and keeps taking requests it can neither
commit nor refuse: no write is lost and every safety check passes, but whoever reaches it is stuck.
Four rules, over the history:

- **zombie-leader**: a voter answered DescribeQuorum (`f` `quorum`, value `leader` = its own id) that
  it leads, although it had been cut off from a majority of the voters (linked in either direction
  with fewer than a majority, counting itself; neither down nor impaired) for 2F + R/2 or longer (its
  check-quorum timer fires within two fetch timeouts of the last Fetch of a majority; half of R,
  `quorum.request.timeout.ms`, is slack). Only time the voter could act counts (see *cut off* below).
- **unanswered**: a request to a voter (`node`) got no answer at all (`info`), although it was sent
  2F + R/2 or longer after that voter was cut off from a majority, and the voter stayed cut off (in
  that one stretch: a client may ask it again late, after it rejoined and was cut off anew) and up and
  running (a crashed or paused node answers nothing, nor one under a fault that may stop it unrecorded:
  a disk failure or corruption) until the client gave up (the `info`'s own time,
  and no sooner than R after: a read's deadline may be longer than R): by then it no longer leads, and a
  non-leader refuses at once (NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER). The node is the one
  the client names for the silence: the server that held the request longest (a client rotating
  over the controllers blames that one, not the last it tried). Not judged for a voter that is also
  a broker (a combined node): a client's write to its broker side is forwarded to the active
  controller (KIP-590), and a broker that reaches none may rightly hold it until it times out.
- **leaderless-answer**: a DescribeQuorum answer without an error names no leader. KIP-595 lets only
  the leader answer (a node that knows the leader may ask it on the client's behalf, and hands back
  the leader's answer; the others refuse with NOT_LEADER_OR_FOLLOWER), so an answer always names
  the leader that gave it; one naming nobody came from a node in an election, from its own view.
- **stale-image**: a node answered a read from its metadata image that lacks an offset committed δ
  or longer before (`--catch-up-ms`, default F + R: a fetch timing out, finding the leader, fetching),
  although since P it had been linked with every live voter, all linked with each other and none
  impaired (a live voter cut off from the others may be a candidate whose inflated epoch an observer
  adopts and then ignores the real leader: KIP-595's "disruptive voters", not judged). Offsets
  committed before P + δ get until P + 2δ (an election that a returning voter forces settles first).
  Image reads are `ok` ops answered by one node whose value carries the image's last applied
  offset: `metadata_offset` (the config workloads' `read-broker`) or `offset` of `metadata` /
  `describe-cluster` (the played-broker workloads).

Inputs: the history (its ops and the nemesis's fault windows, from their starts' invokes; a start that
failed opened no window but counts as a moment that touched every node), and `commit-times.jsonl`,
written by the cluster adapter while the run goes on: a header `{"voters": [...], "brokers": [...],
"nodes": [...], "ids": {name: node id}, "fetch_timeout_ms": F, "request_timeout_ms": R}`, then
`{"time": ns, "end": offset}` lines: by `time` (the history's clock) every offset below `end` was committed. Times are
taken after the observation: upper bounds.

The network and the nodes, segment by segment between fault events:
- links from the partition grudges (the nemesis's, and the simulator's targeted `buggify`
  partitions): `a` is linked with `b` when each hears the other;
- a node is *down* under kill / power loss (and a targeted crash), *impaired* under any other fault
  aimed at it (pause, clock skew plus its after-effect, disk stall or failure, packet loss or delay,
  corruption, anything unknown); under clock skew or an unknown fault its timers cannot be trusted
  either, and the zombie rules skip it (lossy links or a slow disk only take support away);
- a voter's time *cut off* from a majority counts only the time it could act: a kill ends it (a
  restarted process starts its timers over, so the count starts again at the restart; so do the kill
  and restart a `corrupt` start does, and those a stop reports as `restarted`), a pause stops
  it (a frozen process does nothing; its timers come due the moment it thaws, so the count goes on
  from where it stood), clock skew or an unknown fault ends it (no bound at all);
- the *healthy majority* M: a majority of the voters, none down or impaired, each linked with every
  other, such that every other voter is linked (in either direction) with none of them: the only set
  that can elect and commit;
- a node is *linked with M* while it is neither down nor impaired and is in M or linked with all of M.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from checkers.history import FaultWindow, History, Op, fault_windows
from checkers.verdict import UNKNOWN, Anomalies, Verdict

CHECKER = "quorum-progress"
COMMITS_NAME = "commit-times.jsonl"
IMAGE_READ_FS = frozenset({"metadata", "describe-cluster"})  # ops whose `offset` is the answering image's
QUORUM_F = "quorum"  # DescribeQuorum: value `leader` (a node id) and `epoch`
DOWN_FAULTS = frozenset({"kill", "lose_unsynced"})
# The process answers nothing while it lasts, as if down, and its timers stand still with it (they come
# due the moment it thaws): the time it is frozen does not count towards a cut-off voter's allowance
FROZEN_FAULTS = frozenset({"pause"})
# Faults that leave a node's timers alone: its check-quorum timer still fires on time under them
LINK_AND_DISK_FAULTS = frozenset({"packet", "disk_stall", "disk_fail", "corrupt"})
# Faults under which a node may stop by itself at any moment, unrecorded: a failed fsync or write
# fail-stops it, and a node started on damaged files may refuse them, at start-up or on a later read.
# A request it held then is reset, not refused, so its silence says nothing about leadership.
MORTAL_FAULTS = frozenset({"disk_fail", "corrupt"})
TARGETED = "buggify"
MAX_EXAMPLES = 8
NS_PER_MS = 1_000_000
INF = float("inf")


class CommitTimesError(ValueError):
    """A commit-times file that cannot be read (the message names the file and line)."""


# --- commit times ------------------------------------------------------------------------------------


def header_line(
    voters: Sequence[str],
    ids: Mapping[str, int],
    fetch_timeout_ms: int,
    request_timeout_ms: int,
    brokers: Sequence[str] = (),
) -> dict[str, Any]:
    """The first line of a commit-times file: what the rules need to know about the cluster."""
    return {
        "voters": list(voters),
        "brokers": list(brokers),
        "nodes": list(ids),
        "ids": {name: int(i) for name, i in ids.items()},
        "fetch_timeout_ms": int(fetch_timeout_ms),
        "request_timeout_ms": int(request_timeout_ms),
    }


def point_line(time_ns: int, end: int) -> dict[str, int]:
    """By `time_ns` every offset below `end` was committed."""
    return {"time": int(time_ns), "end": int(end)}


@dataclass
class CommitTimes:
    voters: tuple[str, ...]
    nodes: tuple[str, ...]
    ids: dict[str, int]
    fetch_timeout_ms: int
    request_timeout_ms: int
    times: list[int] = field(default_factory=list)
    brokers: frozenset[str] = frozenset()  # nodes with the broker role (combined ones too): they forward
    ends: list[int] = field(default_factory=list)  # running maximum, so both lists are sorted

    def add(self, time_ns: int, end: int) -> None:
        if self.times and time_ns < self.times[-1]:
            raise ValueError(f"commit times go back: {time_ns} after {self.times[-1]}")
        self.times.append(time_ns)
        self.ends.append(max(end, self.ends[-1] if self.ends else 0))

    def end_at(self, time_ns: float) -> int:
        """Every offset below this was seen committed by `time_ns`."""
        i = bisect_right(self.times, time_ns) - 1
        return self.ends[i] if i >= 0 else 0

    def committed_at(self, offset: int) -> int | None:
        """When `offset` was first seen committed (None: never)."""
        i = bisect_right(self.ends, offset)
        return self.times[i] if i < len(self.times) else None


def read_commit_times(path: str | Path) -> CommitTimes:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CommitTimesError(f"{path}: cannot read: {exc.strerror or exc}") from None
    commits: CommitTimes | None = None
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines) and commits is not None:
                break  # the last line, torn by a killed harness
            raise CommitTimesError(f"{where}: not valid JSON") from None
        if commits is None:
            commits = _header(obj, where)
            continue
        if not isinstance(obj, dict) or type(obj.get("time")) is not int or type(obj.get("end")) is not int:
            raise CommitTimesError(f"{where}: expected {{'time': int, 'end': int}}, got {line[:80]!r}")
        try:
            commits.add(obj["time"], obj["end"])
        except ValueError as exc:
            raise CommitTimesError(f"{where}: {exc}") from None
    if commits is None:
        raise CommitTimesError(f"{path}: empty (no header line)")
    return commits


def _header(obj: Any, where: str) -> CommitTimes:
    ok = isinstance(obj, dict) and isinstance(obj.get("voters"), list) and bool(obj["voters"])
    ok = ok and isinstance(obj.get("nodes", []), list) and isinstance(obj.get("ids", {}), dict)
    ok = ok and isinstance(obj.get("brokers", []), list)
    ok = ok and all(isinstance(v, str) for v in [*obj["voters"], *obj.get("nodes", []), *obj.get("brokers", [])])
    ok = ok and all(type(i) is int for i in obj.get("ids", {}).values())
    timeouts = [obj.get("fetch_timeout_ms"), obj.get("request_timeout_ms")] if ok else []
    if not ok or not all(type(t) is int and t > 0 for t in timeouts):
        raise CommitTimesError(
            f"{where}: the header needs 'voters' (names), 'nodes', 'ids' (name -> id), and positive integer "
            "'fetch_timeout_ms' and 'request_timeout_ms'"
        )
    nodes = tuple(dict.fromkeys([*obj.get("nodes", []), *obj["voters"]]))
    return CommitTimes(
        tuple(obj["voters"]),
        nodes,
        dict(obj.get("ids", {})),
        obj["fetch_timeout_ms"],
        obj["request_timeout_ms"],
        brokers=frozenset(obj.get("brokers", [])),
    )


# --- the network and the nodes, segment by segment ---------------------------------------------------


Grudge = Mapping[str, frozenset[str]]  # dst -> the nodes it cannot hear


@dataclass(frozen=True)
class Effect:
    """What one fault window does while it lasts: cut links, take nodes down, or impair them."""

    start: int
    end: float  # inf: to the end of the history
    grudge: Grudge = field(default_factory=dict)
    down: frozenset[str] = frozenset()
    impaired: frozenset[str] = frozenset()
    untimed: frozenset[str] = frozenset()  # impaired nodes whose timers cannot be trusted either
    frozen: frozenset[str] = frozenset()  # impaired nodes that answer nothing while it lasts (a pause)
    mortal: frozenset[str] = frozenset()  # impaired nodes that may stop by themselves at any moment of it


def _targets(value: Any, everyone: frozenset[str]) -> frozenset[str]:
    targets = value.get("targets") if isinstance(value, dict) else None
    if not isinstance(targets, list) or not targets:
        return everyone  # nobody named: assume the worst
    return frozenset(str(t) for t in targets)


def _grudge(value: Any) -> Grudge | None:
    grudge = value.get("grudge") if isinstance(value, dict) else None
    if not isinstance(grudge, dict):
        return None
    return {str(dst): frozenset(str(s) for s in srcs) for dst, srcs in grudge.items() if isinstance(srcs, list)}


def _isolated(nodes: Iterable[str], everyone: frozenset[str]) -> Grudge:
    cut = frozenset(nodes)
    grudge = {n: everyone - {n} for n in cut}
    for other in everyone - cut:
        grudge[other] = cut
    return grudge


def effects_of(window: FaultWindow, everyone: frozenset[str]) -> list[Effect]:
    """What a fault window does, as effects over time (a clock fault: two, see `_clock`)."""
    end = INF if window.end is None else window.end + window.aftereffect_ns
    value = window.value
    kind = window.kind
    if kind == TARGETED and isinstance(value, dict):
        kind = str(value.get("fault", ""))  # what the simulator did: a crash or a partition
        if kind == "partition" and _grudge(value) is None:  # an isolation recorded without its grudge
            return [Effect(window.start, end, grudge=_isolated(_targets(value, everyone), everyone))]
    if kind == "partition":
        grudge = _grudge(value)
        if grudge is None:
            return [Effect(window.start, end, impaired=everyone, untimed=everyone)]
        return [Effect(window.start, end, grudge=grudge)]
    targets = _targets(value, everyone)
    if kind in DOWN_FAULTS:
        return [Effect(window.start, end, down=targets)]
    if kind == "clock" and window.end is not None:
        return _clock(window, targets, end)
    untimed = frozenset() if kind in LINK_AND_DISK_FAULTS | FROZEN_FAULTS else targets
    frozen = targets if kind in FROZEN_FAULTS else frozenset()
    mortal = targets if kind in MORTAL_FAULTS else frozenset()
    return [Effect(window.start, end, impaired=targets, untimed=untimed, frozen=frozen, mortal=mortal)]


def _clock(window: FaultWindow, targets: frozenset[str], end: float) -> list[Effect]:
    """A clock fault impairs its targets until its after-effect ends; their timers may fire late (the
    zombie rules skip them) only where the clock is behind or stands still: all along a backward bump,
    a strobe or a slow rate, but after the stop alone for a forward bump or a fast rate (ahead, the
    timers fire early, which only makes a leader resign sooner)."""
    value = window.value if isinstance(window.value, dict) else {}
    mode, delta, rate = value.get("mode"), value.get("delta_ms"), value.get("rate")
    ahead = (mode == "bump" and isinstance(delta, int | float) and delta >= 0) or (
        mode == "rate" and isinstance(rate, int | float) and rate >= 1
    )
    late_from = window.end if ahead and window.end is not None else window.start
    return [
        Effect(window.start, end, impaired=targets),
        Effect(late_from, end, impaired=targets, untimed=targets),
    ]


@dataclass(frozen=True)
class Segment:
    """The state between two fault events: [start, end)."""

    start: int
    end: float
    cut: Mapping[str, frozenset[str]]  # dst -> who it cannot hear (every active grudge, merged)
    down: frozenset[str]
    impaired: frozenset[str]
    untimed: frozenset[str] = frozenset()
    frozen: frozenset[str] = frozenset()
    mortal: frozenset[str] = frozenset()

    def hears(self, dst: str, src: str) -> bool:
        return src not in self.cut.get(dst, frozenset())

    def linked(self, a: str, b: str) -> bool:
        """Each hears the other."""
        return self.hears(a, b) and self.hears(b, a)

    def touches(self, a: str, b: str) -> bool:
        """At least one hears the other."""
        return self.hears(a, b) or self.hears(b, a)

    def usable(self, node: str) -> bool:
        return node not in self.down and node not in self.impaired


def segments(effects: Sequence[Effect]) -> list[Segment]:
    """The constant stretches from time 0 on (the last one open-ended)."""
    points = sorted({0, *(e.start for e in effects if e.start > 0), *(e.end for e in effects if 0 < e.end < INF)})
    out = []
    for i, begin in enumerate(points):
        finish = points[i + 1] if i + 1 < len(points) else INF
        active = [e for e in effects if e.start <= begin < e.end]
        cut: dict[str, frozenset[str]] = {}
        for e in active:
            for dst, srcs in e.grudge.items():
                cut[dst] = cut.get(dst, frozenset()) | srcs
        down = frozenset().union(*(e.down for e in active))
        impaired = frozenset().union(*(e.impaired for e in active))
        untimed = frozenset().union(*(e.untimed for e in active))
        frozen = frozenset().union(*(e.frozen for e in active))
        mortal = frozenset().union(*(e.mortal for e in active))
        out.append(Segment(int(begin), finish, cut, down, impaired, untimed, frozen, mortal))
    return out


def healthy_majority(voters: Sequence[str], seg: Segment) -> frozenset[str] | None:
    """M (see the module docstring), or None when no such set exists."""
    majority = len(voters) // 2 + 1
    usable = [v for v in voters if seg.usable(v)]
    for size in range(len(usable), majority - 1, -1):
        for group in combinations(usable, size):
            if not all(seg.linked(a, b) for a, b in combinations(group, 2)):
                continue
            outside = [v for v in voters if v not in group and v not in seg.down]
            if all(not seg.touches(z, m) for z in outside for m in group):
                return frozenset(group)
    return None


def cut_from_majority(voter: str, voters: Sequence[str], seg: Segment) -> bool | None:
    """True when `voter` is linked (either way) with fewer than a majority counting itself; None when
    it is down (a restarted process starts its timers over: its clock starts again at the restart) or
    its timers cannot be trusted (clock skew, a pause, a fault nobody knows). Lossy links or a slow
    disk change nothing here: they can only take support away, and its timer still fires."""
    if voter in seg.down or voter in seg.untimed:
        return None
    support = 1 + sum(1 for c in voters if c != voter and c not in seg.down and seg.touches(voter, c))
    return support < len(voters) // 2 + 1


def _frozen_since(before: int | None, seg: Segment) -> int | None:
    """A cut-off voter's "since" moved on by a frozen stretch, so that `t - since` stays the time it
    could act; one frozen before it was cut off starts counting when it thaws."""
    if seg.end == INF:
        return None  # frozen to the end: nothing it holds is judged
    return int(seg.end) if before is None else before + int(seg.end - seg.start)


@dataclass
class Timeline:
    """Per segment: M; since when each node has been linked with that M; since when each voter has
    been cut off from a majority (absent: it is not; None: impaired, no bound)."""

    segs: list[Segment]
    majority: list[frozenset[str] | None]
    linked_since: list[dict[str, int]]
    cut_since: list[dict[str, int | None]]
    starts: list[int] = field(default_factory=list)

    def at(self, t: int) -> int:
        return max(0, bisect_right(self.starts, t) - 1)


def timeline(voters: Sequence[str], nodes: Iterable[str], segs: list[Segment]) -> Timeline:
    nodes = list(nodes)
    majorities: list[frozenset[str] | None] = []
    linked: list[dict[str, int]] = []
    cut: list[dict[str, int | None]] = []
    prev_m: frozenset[str] | None = None
    prev_linked: dict[str, int] = {}
    prev_cut: dict[str, int | None] = {}
    for seg in segs:
        m = healthy_majority(voters, seg)
        now_linked: dict[str, int] = {}
        if m is not None:
            for n in nodes:
                if seg.usable(n) and (n in m or all(seg.linked(n, x) for x in m)):
                    now_linked[n] = prev_linked.get(n, seg.start) if m == prev_m else seg.start
        now_cut: dict[str, int | None] = {}
        for v in voters:
            status = cut_from_majority(v, voters, seg)
            if status is None:
                now_cut[v] = None
            elif status:
                before = prev_cut.get(v)
                if v in seg.frozen:  # its clock stands still while it is frozen: that time does not count
                    now_cut[v] = _frozen_since(before, seg)
                else:
                    now_cut[v] = before if before is not None else seg.start
        majorities.append(m)
        linked.append(now_linked)
        cut.append(now_cut)
        prev_m, prev_linked, prev_cut = m, now_linked, now_cut
    return Timeline(segs, majorities, linked, cut, [s.start for s in segs])


def failed_starts(history: History, everyone: frozenset[str]) -> list[Effect]:
    """A start that failed opened no fault window, but on the way it may have touched nodes (a
    `corrupt` start that found nothing to damage has killed and restarted its target): every node
    counts as impaired from its invoke to just after its completion, so every run of linked
    segments starts again there."""
    effects = []
    invoked: dict[str, int] = {}
    for ev in history.nemesis:
        action, _, kind = ev.f.partition("-")
        if action != "start":
            continue
        if ev.type == "invoke":
            invoked[kind] = ev.time
        elif ev.type == "fail":
            effects.append(Effect(invoked.pop(kind, ev.time), ev.time + 1, impaired=everyone, untimed=everyone))
    return effects


def restarts(history: History) -> list[Effect]:
    """The moments a fault's start or stop killed nodes and started them again, each node down from
    the invoke to just after the completion: the nodes a stop names as `restarted` (a kill's, a disk
    failure's fail-stopped nodes, a corruption's), and the targets of a `corrupt` start, which kills
    each one, damages its files and starts it on them (soak seed 398: a request the cut-off voter held
    when its corruption began was reset by that kill, and judged as a silence)."""
    effects = []
    invoked: dict[str, int] = {}
    for ev in history.nemesis:
        if ev.type == "invoke":
            invoked[ev.f] = ev.time
            continue
        value = ev.value if isinstance(ev.value, dict) else {}
        nodes = set(value.get("restarted") or ())
        if ev.f == "start-corrupt":
            nodes |= set(value.get("targets") or ())
        start = invoked.pop(ev.f, ev.time)
        if nodes:
            effects.append(Effect(start, ev.time + 1, down=frozenset(nodes)))
    return effects


def build_timeline(history: History, commits: CommitTimes, extra_nodes: Iterable[str] = ()) -> Timeline:
    everyone = frozenset(commits.nodes) | frozenset(extra_nodes)
    windows = fault_windows(history, failed_starts=False, from_invoke=True)
    for w in windows:
        if isinstance(w.value, dict):
            everyone |= _targets(w.value, frozenset())
            everyone |= frozenset((_grudge(w.value) or {}).keys())
    effects = [e for w in windows for e in effects_of(w, everyone)] + failed_starts(history, everyone)
    effects += restarts(history)
    return timeline(commits.voters, sorted(everyone), segments(effects))


# --- the rules ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRead:
    op: Op
    node: str
    offset: int  # the image's last applied offset


def image_reads(history: History) -> list[ImageRead]:
    reads = []
    for op in history.ops:
        if op.type != "ok" or op.node is None or not isinstance(op.value, dict):
            continue
        offset = op.value.get("metadata_offset")
        if offset is None and op.f in IMAGE_READ_FS:
            offset = op.value.get("offset")
        if type(offset) is int:
            reads.append(ImageRead(op, op.node, offset))
    return reads


def _claims_leadership(op: Op, ids: Mapping[str, int]) -> bool:
    """A DescribeQuorum answer in which the answering node says it leads."""
    value = op.value
    return op.f == QUORUM_F and op.type == "ok" and isinstance(value, dict) and value.get("leader") == ids.get(op.node)


def _leaderless_answers(history: History, found: Anomalies) -> dict[str, Any]:
    """leaderless-answer (see the module docstring): needs nothing but the answer."""
    answers = 0
    for op in history.ops:
        value = op.value
        if op.f != QUORUM_F or op.type != "ok" or not isinstance(value, dict):
            continue
        answers += 1
        leader = value.get("leader")
        if not isinstance(leader, int) or leader < 0:
            found.add(
                "leaderless-answer",
                {
                    "op": op.id,
                    "node": op.node,
                    "leader": value.get("leader"),
                    "epoch": value.get("epoch"),
                    "time_s": op.invoke_time / 1e9,
                },
            )
    return {"quorum_answers": answers}


def _silenced_during(tl: Timeline, node: str, start: int, end: int) -> bool:
    """Whether `node` was down, paused or liable to stop by itself in some segment overlapping [start, end]."""
    segs = tl.segs
    return any(
        node in segs[k].down or node in segs[k].frozen or node in segs[k].mortal
        for k in range(tl.at(start), tl.at(end) + 1)
    )


def _cut_off_throughout(tl: Timeline, node: str, since: int, start: int, end: int) -> bool:
    """Whether `node` stayed cut off, in the one stretch that began at `since`, over all of [start, end].
    A client rotating over the controllers may send its last attempt at any time before it gives up,
    so a voter that was linked with a majority again meanwhile may have been asked in a new stretch
    (soak seed 280: refused at once for 4.6 s, elected with the others back, cut off again, and
    asked 0.1 s into that): the request's invoke says nothing about how long that one had lasted."""
    return all(tl.cut_since[k].get(node) == since for k in range(tl.at(start), tl.at(end) + 1))


def _request_end(op: Op, request_ns: int) -> int:
    """When the client stopped waiting: its completion, or for an `info` the moment it gave up (a
    client's deadline may be longer than R: a read waits 5 s); R after the invoke when unknown."""
    for end in (op.complete_time, op.gave_up_time):
        if end is not None:
            return end
    return op.invoke_time + request_ns


def _zombie_rules(history: History, commits: CommitTimes, tl: Timeline, found: Anomalies) -> dict[str, Any]:
    """zombie-leader and unanswered (see the module docstring)."""
    allowed = (2 * commits.fetch_timeout_ms + commits.request_timeout_ms // 2) * NS_PER_MS
    request_ns = commits.request_timeout_ms * NS_PER_MS
    claims = claims_judged = silences_judged = 0
    for op in history.ops:
        node, t = op.node, op.invoke_time
        if node not in commits.voters:
            continue
        claim = _claims_leadership(op, commits.ids)
        claims += claim
        if not claim and (op.type != "info" or node in commits.brokers):
            continue  # a broker (a combined node too) may rightly hold a forward while no controller is reachable
        since = tl.cut_since[tl.at(t)].get(node)
        if since is None:
            continue  # not cut off, or impaired
        if not claim:
            end = max(t + request_ns, _request_end(op, request_ns))
            if not _cut_off_throughout(tl, node, since, t, end):
                continue  # healed (or impaired) while the client may still have been asking it
            if _silenced_during(tl, node, t, end):
                continue  # a crashed or paused node answers nothing: its silence says nothing about leadership
        if claim:
            claims_judged += 1
        else:
            silences_judged += 1
        if t - since < allowed:
            continue
        example = {"op": op.id, "f": op.f, "node": node, "time_s": t / 1e9, "cut_off_since_s": since / 1e9}
        if claim:
            found.add("zombie-leader", {**example, "epoch": op.value.get("epoch")})
        else:
            found.add("unanswered", {**example, "error": op.error})
    return {
        "leadership_claims": claims,
        "claims_judged": claims_judged,
        "silences_judged": silences_judged,
        "zombie_allowance_ms": allowed / NS_PER_MS,
    }


def _stale_images(
    history: History, commits: CommitTimes, tl: Timeline, found: Anomalies, catch_up_ms: float | None
) -> dict[str, Any]:
    """stale-image (see the module docstring)."""
    delta = int(
        (commits.fetch_timeout_ms + commits.request_timeout_ms if catch_up_ms is None else catch_up_ms) * NS_PER_MS
    )
    reads = image_reads(history)
    judged = 0
    max_lag = 0.0
    for read in reads:
        t = read.op.invoke_time
        k = tl.at(t)
        m = tl.majority[k]
        since = tl.linked_since[k].get(read.node)
        if m is None or since is None or not all(v in m or v in tl.segs[k].down for v in commits.voters):
            continue  # no healthy majority, the node not linked with it, or a live voter outside it
        if t < since + 2 * delta:
            continue
        judged += 1
        first_missing = commits.committed_at(read.offset + 1)
        if first_missing is None or first_missing > t:
            continue
        lag = t - max(first_missing, since + delta)
        max_lag = max(max_lag, lag)
        if lag > delta:
            found.add(
                "stale-image",
                {
                    "op": read.op.id,
                    "node": read.node,
                    "time_s": t / 1e9,
                    "offset": read.offset,
                    "first_missing_committed_s": first_missing / 1e9,
                    "voters": sorted(m),
                    "linked_since_s": since / 1e9,
                },
            )
    return {
        "image_reads": len(reads),
        "reads_judged": judged,
        "catch_up_ms": delta / NS_PER_MS,
        "max_lag_ms": max_lag / NS_PER_MS,
    }


def check_quorum_progress(history: History, commits: CommitTimes, catch_up_ms: float | None = None) -> Verdict:
    """See the module docstring."""
    reads = image_reads(history)
    tl = build_timeline(history, commits, {r.node for r in reads})
    found = Anomalies(MAX_EXAMPLES)
    details: dict[str, Any] = {"fetch_timeout_ms": commits.fetch_timeout_ms, "segments": len(tl.segs)}
    details |= _zombie_rules(history, commits, tl, found)
    details |= _leaderless_answers(history, found)
    details |= _stale_images(history, commits, tl, found, catch_up_ms)
    details |= found.details()
    return Verdict(CHECKER, not found, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("quorum-progress")
    group.add_argument(
        "--commit-times",
        type=Path,
        metavar="FILE",
        help=f"the run's commit times (default: {COMMITS_NAME} beside the history)",
    )
    group.add_argument(
        "--catch-up-ms",
        type=float,
        metavar="MS",
        help="how long a node linked with a healthy majority may lag a commit (default: fetch + request timeouts)",
    )


def check_from_args(history: History, args: Any) -> Verdict:
    path = getattr(args, "commit_times", None)
    if path is None:
        base = getattr(args, "dumps", None) or Path(args.history).parent
        path = Path(base) / COMMITS_NAME
    if not Path(path).is_file():
        return Verdict(CHECKER, UNKNOWN, {"reason": f"no commit times ({path})"})
    return check_quorum_progress(history, read_commit_times(path), getattr(args, "catch_up_ms", None))


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    if "reads_judged" not in d:
        return [f"{verdict.checker}: {verdict.valid} ({d.get('reason', '')})"]
    counts = d["anomaly_counts"]
    lines = [
        f"{verdict.checker}: {verdict.valid} (cut-off voters: {d['claims_judged']} leadership claims and "
        f"{d['silences_judged']} unanswered requests judged, {counts.get('zombie-leader', 0)} + "
        f"{counts.get('unanswered', 0)} past {d['zombie_allowance_ms']:.0f} ms; image reads: {d['reads_judged']} "
        f"of {d['image_reads']} judged, {counts.get('stale-image', 0)} stale, largest lag {d['max_lag_ms']:.0f} ms "
        f"of {d['catch_up_ms']:.0f} ms allowed)"
    ]
    for name, what in (("zombie-leader", "said it leads"), ("unanswered", "did not answer a request")):
        for e in d["anomalies"].get(name, [])[:2]:
            lines.append(
                f"  {name}: {e['node']} {what} ({e['f']}, op {e['op']}) at {e['time_s']:.3f} s, cut off from a "
                f"majority of the voters since {e['cut_off_since_s']:.3f} s"
            )
    for e in d["anomalies"].get("leaderless-answer", [])[:2]:
        lines.append(
            f"  leaderless-answer: {e['node']} answered DescribeQuorum (op {e['op']}) at {e['time_s']:.3f} s without "
            f"an error, naming no leader (epoch {e['epoch']})"
        )
    for e in d["anomalies"].get("stale-image", [])[:2]:
        lines.append(
            f"  stale-image: {e['node']} answered from offset {e['offset']} at {e['time_s']:.3f} s; offset "
            f"{e['offset'] + 1} had committed at {e['first_missing_committed_s']:.3f} s (linked with every live "
            f"voter since {e['linked_since_s']:.3f} s)"
        )
    return lines
