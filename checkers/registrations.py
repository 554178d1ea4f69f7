"""Broker registrations, heartbeats, fencing and controlled shutdown (KIP-631), from the client's side.

The history is that of the registrations / isr-changes workloads (formats: `checkers.broker_ops`):
played brokers register, heartbeat, ask to be fenced or shut down, crash and come back with a new
incarnation, and read the cluster's images. Every rule below is a KIP-631 guarantee a client can
see, stated so that it holds in every execution of a correct cluster, faults included:

- Only an acknowledged write is certainly committed. A refusal or an answer that wrote nothing may
  come from a deposed controller that still believes it is active, so it proves only that some
  committed prefix of the log looked that way. Rules use such answers only where that suffices.
- A broker epoch is the offset of its registration record. Images are states at known offsets;
  `OffsetClock` relates offsets to real time through acknowledged registrations, image reads and
  linearizable barriers.
- What a controller N has applied never shrinks while it answers as the active controller (a new
  leader holds every committed entry), so N's own earlier answers bound what N knows later.
- Sessions are controller-local time: rules about them are judged only between two answers of one
  controller, with `fence_slack_ms` of slack, and skipped when a fault window that distorts time
  (clock, pause, restart, disk stall...) overlaps the interval. Skipped cases are counted.

Anomalies (a false verdict names each with examples):
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from pathlib import Path
from typing import Any

from checkers.broker_ops import (
    TIME_NEUTRAL_FAULTS,
    Anomalies,
    BrokerHistory,
    Heartbeat,
    ImageRead,
    OffsetClock,
    Registration,
    Timed,
    dumps_of,
    read_broker_history,
    summarize_anomalies,
)
from checkers.history import History
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "registrations"

EXPLANATIONS = {
    "epoch-reuse": "two acknowledged registrations of one broker id got the same broker epoch",
    "epoch-regression": "a registration acknowledged after another one of the same broker id got a lower epoch",
    "registration-lost": "an image taken after an acknowledged registration lacks it",
    "stale-epoch-accepted": "a controller accepted a heartbeat or AlterPartition with a broker epoch it had "
    "already seen superseded by a newer registration (two live incarnations)",
    "duplicate-registration-accepted": "a second incarnation registered while the first one's session at that "
    "controller was certainly live and unfenced",
    "not-fenced-after-session": "a heartbeat answered 'unfenced' after the broker's session had certainly lapsed "
    "at that controller (broker.session.timeout.ms + slack after its last contact)",
    "unfenced-before-catch-up": "a broker epoch was seen unfenced before any heartbeat of it reported "
    "current_metadata_offset >= broker_epoch",
    "fenced-leader": "a partition was led by a fenced (or unregistered) broker",
    "fenced-in-isr": "a fenced broker was in an ISR of two or more replicas (only the last ISR member may stay)",
    "shutdown-broker-leader": "a broker that completed a controlled shutdown led a partition before it registered "
    "again",
    "shutdown-broker-in-isr": "a broker that completed a controlled shutdown was in an ISR of two or more replicas "
    "before it registered again",
    "ineligible-replica-added": "an AlterPartition was accepted that added a fenced or shut-down broker to an ISR",
    "image-divergence": "two images at the same metadata offset disagree about a broker",
    "broker-epoch-regression": "a broker's epoch went down from one image offset to a later one",
    "unexpected-error": "an error code the API does not return for this request",
    "stale-read": "a linearizable read (a Raft read barrier at the active controller) answered a metadata offset "
    "below one certainly committed before it was invoked",
}
__doc__ = (__doc__ or "") + "".join(f"\n- `{k}`: {v}." for k, v in EXPLANATIONS.items()) + "\n"

# KIP-631's codes for these APIs. NOT_LEADER_OR_FOLLOWER is tolerated too: the reference controller
# passes on the Raft core's refusal when it loses leadership before the batch commits (a definite "not
# applied", like NOT_CONTROLLER, which is what Kafka answers there).
ALLOWED_ERRORS = {
    "register": frozenset({"DUPLICATE_BROKER_REGISTRATION", "NOT_CONTROLLER", "NOT_LEADER_OR_FOLLOWER"}),
    "heartbeat": frozenset(
        {"STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED", "NOT_CONTROLLER", "NOT_LEADER_OR_FOLLOWER"}
    ),
}
CLOCK_FAULTS = ("clock",)  # a fault kind containing one of these distorts a controller's sense of time


def _is_server_code(error: str | None) -> bool:
    return bool(error) and error.isupper() and " " not in error and ":" not in error  # type: ignore[union-attr]


def _dist(kinds: list[str]) -> list[str]:
    return [k for k in kinds if any(c in k for c in CLOCK_FAULTS)]


class _NodeKnowledge:
    """Per node: the highest metadata offset its answers proved applied, by completion time."""

    def __init__(self, bh: BrokerHistory) -> None:
        points: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for r in bh.registrations:
            if r.outcome == "ok" and r.epoch is not None and r.at.node and r.at.cmp is not None:
                points[r.at.node].append((r.at.cmp, r.epoch))
        for img in bh.images:
            if img.kind != "dump" and img.at.node and img.at.cmp is not None:
                points[img.at.node].append((img.at.cmp, img.offset))
        for b in bh.barriers:
            if b.at.node and b.at.cmp is not None:
                points[b.at.node].append((b.at.cmp, b.offset))
        self._times: dict[str, list[int]] = {}
        self._max: dict[str, list[int]] = {}
        for node, pts in points.items():
            pts.sort()
            high, maxes = -1, []
            for _, o in pts:
                high = max(high, o)
                maxes.append(high)
            self._times[node] = [t for t, _ in pts]
            self._max[node] = maxes

    def known(self, node: str | None, t: int) -> int:
        """The highest offset `node` had certainly applied by an answer completed before `t`."""
        if node is None or node not in self._times:
            return -1
        i = bisect_left(self._times[node], t)
        return self._max[node][i - 1] if i else -1


class _Checker:
    def __init__(self, bh: BrokerHistory, slack_ms: int | None) -> None:
        self.bh = bh
        self.s = bh.setup
        self.played = set(bh.setup.brokers) or {r.broker for r in bh.registrations} | {h.broker for h in bh.heartbeats}
        self.session_ns = self.s.session_timeout_ms * 1_000_000
        slack = slack_ms if slack_ms is not None else self.s.fence_slack_ms
        self.slack_ms = slack if slack is not None else max(1_000, self.s.session_timeout_ms)
        self.slack_ns = self.slack_ms * 1_000_000
        self.out = Anomalies(EXPLANATIONS)
        self.clock = OffsetClock(bh)
        self.knowledge = _NodeKnowledge(bh)
        self.regs: dict[int, list[Registration]] = defaultdict(list)
        self.beats: dict[int, list[Heartbeat]] = defaultdict(list)
        for r in bh.registrations:
            self.regs[r.broker].append(r)
        for h in bh.heartbeats:
            self.beats[h.broker].append(h)
        for lst in (*self.regs.values(), *self.beats.values()):
            lst.sort(key=lambda x: x.at.inv)
        self.coverage: dict[str, int] = defaultdict(int)
        self.caught_up_at = self._catch_up_times()

    # --- helpers -----------------------------------------------------------------------------------

    def _catch_up_times(self) -> dict[tuple[int, int], int]:
        """(broker, epoch) -> the earliest invocation of a heartbeat that could unfence it."""
        out: dict[tuple[int, int], int] = {}
        for r in self.bh.registrations:
            if r.at.op_id is None and r.epoch is not None:  # made (and unfenced) before the history began
                out[(r.broker, r.epoch)] = r.at.inv
        for h in self.bh.heartbeats:
            if h.catches_up and h.outcome in ("ok", "info"):
                key = (h.broker, h.epoch)
                out[key] = min(out.get(key, h.at.inv), h.at.inv)
        return out

    def _epoch_at(self, broker: int, t_inv: int, t_cmp: int) -> int | None:
        """The broker's epoch during [t_inv, t_cmp] when certain: its last registration invoked before
        t_cmp was acknowledged before t_inv."""
        last = None
        for r in self.regs.get(broker, ()):
            if r.at.inv >= t_cmp:
                break
            if r.outcome != "fail":
                last = r
        if last is None or last.outcome != "ok" or last.at.cmp is None or last.at.cmp >= t_inv:
            return None
        return last.epoch

    def _next_registration_offset(self, broker: int, epoch: int) -> float:
        """An offset below which `broker` certainly still has `epoch` (its next registration's record
        cannot lie lower): the lowest later acknowledged epoch, or just above what was committed before
        a later unacknowledged registration was invoked."""
        regs = self.regs.get(broker, ())
        base = next((r.at.inv for r in regs if r.outcome == "ok" and r.epoch == epoch), None)
        if base is None:
            return float("inf")
        bound = float("inf")
        for r in regs:
            if r.outcome == "ok" and r.epoch is not None and r.epoch > epoch:
                bound = min(bound, r.epoch)
            elif r.outcome == "info" and r.at.inv >= base:
                bound = min(bound, self.clock.before(r.at.inv) + 1)
        return bound

    def _why(self, at: Timed) -> str:
        return at.describe()

    # --- the rules ---------------------------------------------------------------------------------

    def epochs(self) -> None:
        for broker, regs in sorted(self.regs.items()):
            oks = [r for r in regs if r.outcome == "ok" and r.epoch is not None]
            by_epoch: dict[int, list[Registration]] = defaultdict(list)
            for r in oks:
                by_epoch[r.epoch].append(r)  # type: ignore[index]
            for epoch, same in sorted(by_epoch.items()):
                if len(same) > 1:
                    self.out.add(
                        "epoch-reuse",
                        {
                            "broker": broker,
                            "epoch": epoch,
                            "registrations": [self._why(r.at) for r in same],
                            "why": f"broker {broker}: {', '.join(self._why(r.at) for r in same)} all got epoch {epoch}",
                        },
                    )
            done = sorted((r for r in oks if r.at.cmp is not None), key=lambda r: r.at.cmp)  # type: ignore[arg-type, return-value]
            best: Registration | None = None
            j = 0
            for b in sorted(oks, key=lambda r: r.at.inv):
                while j < len(done) and done[j].at.cmp < b.at.inv:  # type: ignore[operator]
                    if best is None or done[j].epoch > best.epoch:  # type: ignore[operator]
                        best = done[j]
                    j += 1
                if best is not None and best.epoch > b.epoch:  # type: ignore[operator]
                    self.out.add(
                        "epoch-regression",
                        {
                            "broker": broker,
                            "earlier": {"op": self._why(best.at), "epoch": best.epoch},
                            "later": {"op": self._why(b.at), "epoch": b.epoch},
                            "why": f"broker {broker}: {self._why(b.at)} got epoch {b.epoch} after "
                            f"{self._why(best.at)} had been acknowledged with epoch {best.epoch}",
                        },
                    )

    def stale_epochs(self) -> None:
        """A heartbeat or AlterPartition with epoch e accepted by N after N applied a registration e2 > e."""
        acks: list[tuple[str, Timed, int, int]] = [
            ("heartbeat", h.at, h.broker, h.epoch) for h in self.bh.heartbeats if h.outcome == "ok"
        ]
        acks += [("alter", a.at, a.broker, a.broker_epoch) for a in self.bh.alters if a.outcome == "ok"]
        for what, at, broker, epoch in acks:
            known = self.knowledge.known(at.node, at.inv)
            for r in self.regs.get(broker, ()):
                if r.outcome != "ok" or r.epoch is None or r.epoch <= epoch or r.at.cmp is None:
                    continue
                # N had applied r: it answered r itself, or showed an offset past everything r preceded
                answered = r.at.node == at.node and r.at.cmp < at.inv
                if not answered and known < self.clock.after(r.at.cmp):
                    continue
                how = "acknowledged it" if answered else f"had already applied offset {known}, past it"
                self.out.add(
                    "stale-epoch-accepted",
                    {
                        "broker": broker,
                        "epoch": epoch,
                        "superseded_by": r.epoch,
                        "op": self._why(at),
                        "why": f"{what} {self._why(at)} of broker {broker} with epoch {epoch} was accepted, but "
                        f"{at.node} knew the registration with epoch {r.epoch} ({self._why(r.at)}): it {how}",
                    },
                )
                break

    def duplicates(self) -> None:
        """A new incarnation accepted by N within the session of an unfenced one N had just heard from.

        Both answers must fall in one of N's quorum brackets (one activation): a controller activated
        in between would start from the committed image, which may have fenced the old incarnation
        meanwhile, and a fenced broker has no valid session in Kafka."""
        spans = self._quorum_spans()
        for broker, regs in self.regs.items():
            beats = self.beats.get(broker, [])
            disturbing = [r.at for r in regs if r.outcome != "fail"]
            disturbing += [h.at for h in beats if h.outcome != "fail" and (h.want_fence or h.want_shut_down)]
            for r2 in regs:
                if r2.at.op_id is None or r2.at.node is None or r2.at.cmp is None:
                    continue
                if r2.outcome != "ok" and r2.error != "DUPLICATE_BROKER_REGISTRATION":
                    continue
                h = self._live_witness(r2, beats, disturbing, spans.get(r2.at.node, ()))
                if h is None:
                    continue
                self.coverage["duplicates_judged"] += 1
                if r2.outcome != "ok":
                    continue
                gap = (r2.at.cmp - h.at.inv) / 1e6
                self.out.add(
                    "duplicate-registration-accepted",
                    {
                        "broker": broker,
                        "registration": self._why(r2.at),
                        "live_incarnation": h.incarnation,
                        "heartbeat": self._why(h.at),
                        "why": f"{self._why(r2.at)} registered incarnation {r2.incarnation} of broker {broker} "
                        f"{gap:.0f} ms after {self._why(h.at)} had kept incarnation {h.incarnation} unfenced "
                        f"(session {self.s.session_timeout_ms} ms, slack {self.slack_ms} ms)",
                    },
                )

    def _live_witness(
        self, r2: Registration, beats: list[Heartbeat], disturbing: list[Timed], spans: Any
    ) -> Heartbeat | None:
        """A heartbeat of another incarnation that N answered 'unfenced' so shortly before r2 that its
        session at N certainly still ran when N decided r2, with nothing in between that could fence it."""
        assert r2.at.cmp is not None
        for h in beats:
            if not (
                h.outcome == "ok"
                and h.at.node == r2.at.node
                and h.incarnation is not None
                and h.incarnation != r2.incarnation
                and h.fenced is False
                and not h.shut_down
                and not h.want_fence
                and not h.want_shut_down
                and h.at.cmp is not None
                and h.at.cmp <= r2.at.inv
                and h.at.inv + self.session_ns - self.slack_ns > r2.at.cmp
            ):
                continue
            if not any(s <= h.at.inv and r2.at.cmp <= e for s, e in spans):
                self.coverage["duplicates_without_quorum_bracket"] += 1
                continue
            if any(d is not r2.at and d.inv < r2.at.cmp and (d.cmp is None or d.cmp > h.at.inv) for d in disturbing):
                continue
            if _dist(self.bh.faults_between(h.at.inv, r2.at.cmp, ignore=())):
                continue
            return h
        return None

    def sessions(self) -> None:
        """Not-caught-up heartbeats answered 'unfenced' after the session had lapsed at that controller."""
        spans = self._quorum_spans()
        ok_by_node: dict[str, list[Timed]] = defaultdict(list)
        for x in (*self.bh.registrations, *self.bh.heartbeats, *self.bh.alters):
            if x.outcome == "ok" and x.at.node and x.at.cmp is not None and x.at.op_id is not None:
                ok_by_node[x.at.node].append(x.at)
        for lst in ok_by_node.values():
            lst.sort(key=lambda t: t.inv)
        for p in self.bh.heartbeats:
            if p.outcome != "ok" or p.catches_up or p.want_fence or p.want_shut_down:
                continue
            if p.broker not in self.played or p.at.node is None or p.at.cmp is None:
                continue
            self.coverage["probes"] += 1
            span = next((s for s in spans.get(p.at.node, ()) if s[0] <= p.at.inv and p.at.cmp <= s[1]), None)
            if span is None:
                self.coverage["probes_without_quorum_bracket"] += 1
                continue
            ops = ok_by_node[p.at.node]
            start = bisect_left([t.inv for t in ops], span[0])
            activation = min((t.cmp for t in ops[start:] if t.cmp <= span[1]), default=p.at.cmp)  # type: ignore[type-var]
            # Only the registration that made epoch e and heartbeats naming e can have touched the
            # session the probe found: any other heartbeat was stale, and a later registration would
            # have made the probe itself stale.
            origins = [r.at.cmp for r in self.regs.get(p.broker, ()) if r.outcome == "ok" and r.epoch == p.epoch]
            if not origins:
                self.coverage["probes_of_unknown_epoch"] += 1
                continue
            contacts = [
                h.at
                for h in self.beats.get(p.broker, ())
                if h.at is not p.at and h.epoch == p.epoch and h.outcome != "fail" and h.at.inv < p.at.cmp
            ]
            if any(c.cmp is None for c in contacts):
                self.coverage["probes_after_unknown_contact"] += 1
                continue
            last = max([activation, *origins, *(c.cmp for c in contacts if c.node == p.at.node)])  # type: ignore[type-var]
            if last + self.session_ns + self.slack_ns >= p.at.inv:
                continue
            if self.bh.faults_on(p.at.node, last, p.at.cmp, ignore=TIME_NEUTRAL_FAULTS):
                self.coverage["probes_in_time_faults"] += 1
                continue
            self.coverage["probes_judged"] += 1
            if p.fenced is not False:
                continue
            silence = (p.at.inv - last) / 1e6
            self.out.add(
                "not-fenced-after-session",
                {
                    "broker": p.broker,
                    "epoch": p.epoch,
                    "heartbeat": self._why(p.at),
                    "silence_ms": round(silence),
                    "why": f"{self._why(p.at)} answered broker {p.broker} epoch {p.epoch} unfenced although "
                    f"{p.at.node} had had no contact with it for {silence:.0f} ms "
                    f"(session {self.s.session_timeout_ms} ms + slack {self.slack_ms} ms)",
                },
            )

    def _quorum_spans(self) -> dict[str, list[tuple[int, int]]]:
        """node -> intervals during which it was certainly leader of one epoch, so activated at most once:
        from the completion of the first to the invocation of the last of a run of its own DescribeQuorum
        answers naming it leader of the same epoch, with no other answer (or failure) of it between."""
        by_node: dict[str, list[Any]] = defaultdict(list)
        for q in self.bh.quorum:
            if q.at.node is not None:
                by_node[q.at.node].append(q)
        spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for node, views in by_node.items():
            views.sort(key=lambda q: q.at.inv)
            run: list[Any] = []
            for q in [*views, None]:
                leads = q is not None and q.at.cmp is not None and q.leader == self.s.nodes.get(node)
                if run and not (leads and q.epoch == run[0].epoch):
                    start, end = min(v.at.cmp for v in run), max(v.at.inv for v in run)
                    if start < end:
                        spans[node].append((start, end))
                    run = []
                if leads:
                    run.append(q)
        return spans

    def catch_up(self) -> None:
        """No broker epoch is unfenced before a heartbeat of it could have reported the catch-up."""
        seen: list[tuple[int, int, Timed, str]] = []
        for h in self.bh.heartbeats:
            if h.outcome == "ok" and h.fenced is False and h.at.cmp is not None:
                seen.append((h.broker, h.epoch, h.at, "heartbeat answer"))
        for img in self.bh.images:
            for broker, view in (img.brokers or {}).items():
                if not view.fenced and img.at.cmp is not None:
                    seen.append((broker, view.epoch, img.at, f"{img.kind} image at offset {img.offset}"))
        for broker, epoch, at, what in seen:
            if broker not in self.played:
                continue
            t_c = self.caught_up_at.get((broker, epoch))
            if t_c is None or at.cmp < t_c:  # type: ignore[operator]
                self.out.add(
                    "unfenced-before-catch-up",
                    {
                        "broker": broker,
                        "epoch": epoch,
                        "seen": self._why(at),
                        "why": f"{what} ({self._why(at)}) shows broker {broker} epoch {epoch} unfenced, but "
                        + (
                            "no heartbeat of that epoch ever reported catching up"
                            if t_c is None
                            else "the first heartbeat reporting its catch-up was invoked after that"
                        ),
                    },
                )

    def images(self) -> None:
        keys = self._played_partitions()
        by_offset: dict[int, dict[int, tuple[Any, ImageRead]]] = defaultdict(dict)
        history: dict[int, list[tuple[int, int, ImageRead]]] = defaultdict(list)
        for img in self.bh.images:
            for key, view in img.partitions.items():
                if keys and key not in keys:
                    continue
                self._partition_brokers(img, key, view)
            if img.brokers is not None:
                for broker, b in img.brokers.items():
                    if broker not in self.played:
                        continue
                    history[broker].append((img.offset, b.epoch, img))
                    state = (b.epoch, b.fenced)
                    prev = by_offset[img.offset].get(broker)
                    if prev is not None and prev[0] != state:
                        self.out.add(
                            "image-divergence",
                            {
                                "offset": img.offset,
                                "broker": broker,
                                "why": f"at offset {img.offset}, {self._why(prev[1].at)} shows broker {broker} "
                                f"(epoch, fenced) = {prev[0]} but {self._why(img.at)} shows {state}",
                            },
                        )
                    else:
                        by_offset[img.offset][broker] = (state, img)
        for broker, points in history.items():
            points.sort(key=lambda p: p[0])
            high: tuple[int, int, ImageRead] | None = None
            for point in points:
                if high is not None and point[1] < high[1] and point[0] > high[0]:
                    self.out.add(
                        "broker-epoch-regression",
                        {
                            "broker": broker,
                            "why": f"broker {broker} has epoch {high[1]} at offset {high[0]} ({self._why(high[2].at)}) "
                            f"but epoch {point[1]} at offset {point[0]} ({self._why(point[2].at)})",
                        },
                    )
                if high is None or point[1] > high[1]:
                    high = point
        for r in self.bh.registrations:
            if r.outcome != "ok" or r.epoch is None or r.broker not in self.played:
                continue
            low = self.clock.after(r.at.cmp) if r.at.cmp is not None else float("inf")
            for img in self.bh.images:
                if img.brokers is None or img.offset < low:
                    continue
                view = img.brokers.get(r.broker)
                if view is None or view.epoch < r.epoch:
                    self.out.add(
                        "registration-lost",
                        {
                            "broker": r.broker,
                            "epoch": r.epoch,
                            "why": f"{self._why(img.at)} at offset {img.offset} (>= {low}, past the registration) "
                            f"shows broker {r.broker} "
                            + (f"with epoch {view.epoch}" if view else "unregistered")
                            + f", but {self._why(r.at)} was acknowledged with epoch {r.epoch}",
                        },
                    )

    def _played_partitions(self) -> set[str]:
        keys = set(self.s.replicas())
        return keys | {a.key for a in self.bh.alters}

    def _partition_brokers(self, img: ImageRead, key: str, view: Any) -> None:
        """Within one image: the leader is unfenced; an ISR of two or more holds no fenced or shut-down broker."""
        unfenced = img.unfenced
        if unfenced is None:
            return
        shutting = {b for b, v in (img.brokers or {}).items() if v.in_controlled_shutdown}
        where = f"{self._why(img.at)} at offset {img.offset}: partition {key}"
        if view.leader >= 0 and view.leader not in unfenced:
            self.out.add("fenced-leader", {"partition": key, "why": f"{where} is led by fenced broker {view.leader}"})
        elif view.leader in shutting:
            self.out.add(
                "shutdown-broker-leader",
                {"partition": key, "why": f"{where} is led by broker {view.leader}, in controlled shutdown"},
            )
        if len(view.isr) >= 2:
            fenced = sorted(b for b in view.isr if b not in unfenced)
            if fenced:
                self.out.add(
                    "fenced-in-isr", {"partition": key, "why": f"{where} has ISR {list(view.isr)} with fenced {fenced}"}
                )
            down = sorted(b for b in view.isr if b in shutting and b in unfenced)
            if down:
                self.out.add(
                    "shutdown-broker-in-isr",
                    {"partition": key, "why": f"{where} has ISR {list(view.isr)} with {down} in controlled shutdown"},
                )

    def shutdowns(self) -> None:
        """After an acknowledged controlled shutdown (answered by a controller that found the broker
        unfenced, so it wrote the record), no image until the next registration shows the broker leading
        or in an ISR of two or more."""
        for s in self.bh.heartbeats:
            if not (
                s.outcome == "ok" and s.want_shut_down and s.shut_down and s.fenced is False and s.at.cmp is not None
            ):
                continue
            low = self.clock.after(s.at.cmp)
            high = self._next_registration_offset(s.broker, s.epoch)
            self.coverage["shutdowns"] += 1
            for img in self.bh.images:
                if not low <= img.offset < high:
                    continue
                for key, view in img.partitions.items():
                    where = (
                        f"{self._why(img.at)} at offset {img.offset} (>= {low}, after {self._why(s.at)} "
                        f"completed a controlled shutdown of broker {s.broker})"
                    )
                    if view.leader == s.broker:
                        self.out.add(
                            "shutdown-broker-leader", {"partition": key, "why": f"{where}: {key} is led by it"}
                        )
                    elif s.broker in view.isr and len(view.isr) >= 2:
                        self.out.add(
                            "shutdown-broker-in-isr",
                            {"partition": key, "why": f"{where}: {key} has ISR {list(view.isr)}"},
                        )

    def alters(self) -> None:
        """An acknowledged ISR change may not make a fenced or shut-down broker join an ISR or lead."""
        record_backed = defaultdict(list)
        for s in self.bh.heartbeats:
            if s.outcome == "ok" and s.want_shut_down and s.shut_down and s.fenced is False and s.at.cmp is not None:
                record_backed[(s.broker, s.epoch)].append(s.at.cmp)
        for a in self.bh.alters:
            if not a.changed or a.at.cmp is None or a.result is None:
                continue
            joining = set(a.result.isr) - set(a.from_isr) if a.from_isr is not None else set()
            for broker, role in [*((j, "join") for j in sorted(joining)), (a.broker, "lead")]:
                epoch = self._epoch_at(broker, a.at.inv, a.at.cmp)
                if epoch is None:
                    continue
                why = None
                t_c = self.caught_up_at.get((broker, epoch))
                if t_c is None or t_c > a.at.cmp:
                    why = f"broker {broker} epoch {epoch} had never reported catching up, so it was fenced"
                elif any(t < a.at.inv for t in record_backed.get((broker, epoch), ())):
                    why = f"broker {broker} epoch {epoch} had completed a controlled shutdown"
                elif role == "join" and (img := self._shown_fenced(broker, epoch, a.at)) is not None:
                    why = (
                        f"broker {broker} epoch {epoch} was fenced: {self._why(img.at)} showed it so at offset "
                        f"{img.offset}, above every unfence its heartbeats could have written"
                    )
                if why is None:
                    continue
                name = (
                    "ineligible-replica-added"
                    if role == "join"
                    else ("fenced-leader" if "fenced" in why else "shutdown-broker-leader")
                )
                self.out.add(
                    name,
                    {
                        "partition": a.key,
                        "alter": self._why(a.at),
                        "why": f"{self._why(a.at)} was accepted ({a.key} ISR {list(a.result.isr)}, "
                        f"partition epoch {a.result.partition_epoch}) with broker {broker} "
                        f"{'joining' if role == 'join' else 'as leader'}, but {why}",
                    },
                )

    def _shown_fenced(self, broker: int, epoch: int, at: Timed) -> ImageRead | None:
        """An image, read before `at` was invoked, that shows `broker` fenced in `epoch` after every
        unfence record its heartbeats invoked before `at` completed could have written (only a heartbeat
        unfences: its record is committed before its `ok`, so at or below `clock.after` of its answer).
        None when a heartbeat that may have unfenced it has no `ok` answer: nothing is certain then."""
        floor = -1.0
        for h in self.bh.heartbeats:
            if h.broker != broker or h.epoch != epoch or h.at.inv >= at.cmp or h.fenced is True:  # type: ignore[operator]
                continue
            if h.outcome != "ok" or h.at.cmp is None:
                return None
            floor = max(floor, self.clock.after(h.at.cmp))
        for img in self.bh.images:
            view = img.brokers.get(broker) if img.brokers is not None else None
            if img.kind == "dump" or img.at.cmp is None or img.at.cmp >= at.inv or view is None:
                continue
            if view.epoch == epoch and view.fenced and img.offset >= floor:
                return img
        return None

    def reads(self) -> None:
        """KIP-595 linearizable reads: a barrier reflects every record committed before it was invoked.
        Committed by then, for certain: an acknowledged registration's record (its epoch), what an image
        read showed (images apply committed records only) and what an earlier barrier answered."""
        done: list[tuple[int, int, Timed, str]] = []  # (completion, offset, op, what)
        for r in self.bh.registrations:
            if r.outcome == "ok" and r.epoch is not None and r.at.cmp is not None and r.at.op_id is not None:
                done.append((r.at.cmp, r.epoch, r.at, "the record of registration"))
        for img in self.bh.images:
            if img.kind != "dump" and img.at.cmp is not None:
                done.append((img.at.cmp, img.offset, img.at, f"{img.kind} image read"))
        for b in self.bh.barriers:
            if b.at.cmp is not None:
                done.append((b.at.cmp, b.offset, b.at, "barrier"))
        done.sort(key=lambda d: (d[0], d[1]))
        times = [d[0] for d in done]
        best: list[tuple[int, int, Timed, str]] = []  # prefix maximum by offset
        for d in done:
            best.append(d if not best or d[1] > best[-1][1] else best[-1])
        for b in self.bh.barriers:
            if b.at.cmp is None:
                continue
            self.coverage["barriers"] += 1
            i = bisect_left(times, b.at.inv)
            if not i or best[i - 1][1] <= b.offset:
                continue
            _, offset, at, what = best[i - 1]
            self.out.add(
                "stale-read",
                {
                    "barrier": self._why(b.at),
                    "offset": b.offset,
                    "committed": offset,
                    "why": f"barrier {self._why(b.at)} answered offset {b.offset}, but {what} {self._why(at)} had "
                    f"shown offset {offset} committed before the barrier was invoked",
                },
            )

    def errors(self) -> None:
        for kind, items in (("register", self.bh.registrations), ("heartbeat", self.bh.heartbeats)):
            for x in items:
                if x.outcome == "fail" and _is_server_code(x.error) and x.error not in ALLOWED_ERRORS[kind]:
                    self.out.add(
                        "unexpected-error",
                        {
                            "op": self._why(x.at),
                            "error": x.error,
                            "why": f"{kind} {self._why(x.at)} failed with {x.error}",
                        },
                    )

    def run(self) -> None:
        self.epochs()
        self.stale_epochs()
        self.duplicates()
        self.sessions()
        self.catch_up()
        self.images()
        self.shutdowns()
        self.alters()
        self.reads()
        self.errors()


def check_registrations(
    history: History, dumps: str | Path | None = None, *, fence_slack_ms: int | None = None
) -> Verdict:
    """Check a registrations / isr-changes history (and the run's image dumps, when given)."""
    bh = read_broker_history(history, dumps)
    if not bh.registrations and not bh.heartbeats:
        return Verdict(CHECKER, UNKNOWN, {"reason": "no broker registrations or heartbeats in the history"})
    checker = _Checker(bh, fence_slack_ms)
    checker.run()
    details: dict[str, Any] = {
        "anomalies": checker.out.to_json(),
        "brokers": sorted(checker.played),
        "session_timeout_ms": bh.setup.session_timeout_ms,
        "fence_slack_ms": checker.slack_ms,
        "counts": {
            "registrations": len(bh.registrations),
            "heartbeats": len(bh.heartbeats),
            "alters": len(bh.alters),
            "images": len(bh.images),
            "image_dumps": len(bh.dumps),
            "quorum_reads": len(bh.quorum),
            **dict(sorted(checker.coverage.items())),
        },
    }
    if not bh.dumps:
        details["notes"] = ["no image dumps: only the history's own reads were checked"]
    return Verdict(CHECKER, not checker.out, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("registrations")
    group.add_argument(
        "--fence-slack-ms",
        type=int,
        default=None,
        help="slack on broker.session.timeout.ms for the session rules (default: the history's setup, "
        "else the session timeout itself)",
    )


def check_from_args(history: History, args: Any) -> Verdict:
    return check_registrations(history, dumps_of(history, args), fence_slack_ms=getattr(args, "fence_slack_ms", None))


def summarize(verdict: Verdict) -> list[str]:
    brokers = len(verdict.details.get("brokers", ()))

    def headline(c: Any) -> str:
        return (
            f"{c['registrations']} registrations, {c['heartbeats']} heartbeats, {c['images']} images of "
            f"{brokers} played brokers; session rules judged {c.get('probes_judged', 0)} of "
            f"{c.get('probes', 0)} not-caught-up heartbeats, {c.get('duplicates_judged', 0)} duplicates"
        )

    return summarize_anomalies(CHECKER, verdict.valid, verdict.details, headline)
