"""Partition leadership and ISR (KIP-497, KIP-631), from the answers of the isr-changes workload.

Only the controller changes a partition's leader and ISR, and every change is one record that bumps
the partition epoch by one (KIP-497's zkVersion). So a partition epoch names one state for good:
whoever shows version k of a partition (an AlterPartition answer, any node's image, a final dump) must
show the same leader, leader epoch and ISR. Versions are immutable facts even when a deposed
controller answers from a stale image, which makes the rules below hold under every fault:

- per answer: leader in the ISR (or no leader), ISR within the replicas and not empty, replicas fixed;
- per partition epoch: one state (`version-conflict`); along epochs: the leader epoch never goes back,
  grows whenever the leader changes, and consecutive versions differ (a record applied twice shows as
  a version that changed nothing);
- images: the same metadata offset shows the same version everywhere, and a higher offset never an
  older version;
- AlterPartition as a compare-and-set on (leader epoch, partition epoch): an accepted change came
  from the leader named by the version it replaced, with that version's leader epoch, and produced
  exactly the asked ISR at the next partition epoch; once acknowledged it is never lost (every image
  past it has reached it). Linearizability of the compare-and-sets with controller moves in between
  is the `partition-cas` checker (model `partition-cas` in `checkers.models`).

Anomalies:
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

from checkers.broker_ops import (
    Alter,
    Anomalies,
    BrokerHistory,
    OffsetClock,
    PartitionView,
    Timed,
    dumps_of,
    read_broker_history,
    summarize_anomalies,
)
from checkers.history import History
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "partition-state"

EXPLANATIONS = {
    "leader-not-in-isr": "a partition's leader was not in its ISR",
    "isr-outside-replicas": "an ISR held a broker that is not a replica (or held one twice)",
    "empty-isr": "a partition had an empty ISR",
    "replicas-changed": "a partition's replicas differ from the ones it was created with",
    "version-conflict": "two answers show different states (leader, leader epoch, ISR) for one partition epoch",
    "leader-epoch-regression": "a later partition epoch has a lower leader epoch",
    "leader-change-without-epoch-bump": "the leader changed but the leader epoch did not grow",
    "duplicate-change": "consecutive partition epochs show the same state: a change that changed nothing",
    "image-divergence": "two images at the same metadata offset show different versions of a partition",
    "partition-epoch-regression": "an image at a higher metadata offset shows an older partition epoch",
    "alter-result-mismatch": "an accepted AlterPartition answered a state other than the one asked for",
    "stale-alter-accepted": "an AlterPartition was accepted although its leader or leader epoch did not match "
    "the version it replaced",
    "lost-alter": "an image taken after an acknowledged AlterPartition had not reached its partition epoch",
    "unexpected-error": "an AlterPartition error code outside KIP-497's",
}
__doc__ = (__doc__ or "") + "".join(f"\n- `{k}`: {v}." for k, v in EXPLANATIONS.items()) + "\n"

ALTER_ERRORS = frozenset(
    {
        "NOT_CONTROLLER",
        "STALE_BROKER_EPOCH",
        "NOT_LEADER_OR_FOLLOWER",
        "FENCED_LEADER_EPOCH",
        "INVALID_UPDATE_VERSION",
        "INELIGIBLE_REPLICA",
        "UNKNOWN_TOPIC_ID",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NEW_LEADER_ELECTED",
        "OPERATION_NOT_ATTEMPTED",
    }
)


class _Obs:
    """One observation of a partition version and where it came from."""

    __slots__ = ("at", "offset", "source", "view")

    def __init__(self, view: PartitionView, at: Timed, source: str, offset: int | None = None) -> None:
        self.view, self.at, self.source, self.offset = view, at, source, offset

    def describe(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{self.source} {self.at.describe()}{where}"


def _state_text(view: PartitionView) -> str:
    return f"leader {view.leader}, leader epoch {view.leader_epoch}, ISR {sorted(view.isr)}"


class _Checker:
    def __init__(self, bh: BrokerHistory) -> None:
        self.bh = bh
        self.out = Anomalies(EXPLANATIONS)
        self.replicas = bh.setup.replicas()
        self.keys = set(self.replicas) | {a.key for a in bh.alters}
        self.obs: dict[str, list[_Obs]] = defaultdict(list)
        for a in bh.alters:
            if a.result is not None:
                self.obs[a.key].append(_Obs(a.result, a.at, "AlterPartition answer"))
        for img in bh.images:
            for key, view in img.partitions.items():
                if key in self.keys:
                    self.obs[key].append(_Obs(view, img.at, f"{img.kind} image", img.offset))

    def invariants(self) -> None:
        for key, items in sorted(self.obs.items()):
            created = self.replicas.get(key)
            for o in items:
                v = o.view
                where = f"{o.describe()}: partition {key}"
                replicas = v.replicas if v.replicas is not None else created
                if not v.isr:
                    self.out.add("empty-isr", {"partition": key, "why": f"{where} has an empty ISR"})
                elif v.leader >= 0 and v.leader not in v.isr:
                    self.out.add(
                        "leader-not-in-isr",
                        {"partition": key, "why": f"{where}: leader {v.leader} not in ISR {list(v.isr)}"},
                    )
                if replicas is not None and (len(set(v.isr)) != len(v.isr) or not set(v.isr) <= set(replicas)):
                    self.out.add(
                        "isr-outside-replicas",
                        {"partition": key, "why": f"{where}: ISR {list(v.isr)}, replicas {list(replicas)}"},
                    )
                if v.replicas is not None and created is not None and tuple(v.replicas) != created:
                    self.out.add(
                        "replicas-changed",
                        {
                            "partition": key,
                            "why": f"{where}: replicas {list(v.replicas)}, created with {list(created)}",
                        },
                    )

    def versions(self) -> dict[str, dict[int, _Obs]]:
        """Version conflicts; returns one representative observation per (partition, epoch)."""
        chosen: dict[str, dict[int, _Obs]] = defaultdict(dict)
        for key, items in sorted(self.obs.items()):
            for o in items:
                first = chosen[key].get(o.view.partition_epoch)
                if first is None:
                    chosen[key][o.view.partition_epoch] = o
                elif first.view.state != o.view.state:
                    self.out.add(
                        "version-conflict",
                        {
                            "partition": key,
                            "partition_epoch": o.view.partition_epoch,
                            "why": f"partition {key} epoch {o.view.partition_epoch}: {first.describe()} shows "
                            f"{_state_text(first.view)}; {o.describe()} shows {_state_text(o.view)}",
                        },
                    )
        for key, versions in sorted(chosen.items()):
            ordered = sorted(versions.items())
            high: _Obs | None = None
            for (pe, o), (pe2, o2) in itertools.pairwise(ordered):
                if pe2 == pe + 1 and o.view.state == o2.view.state:
                    self.out.add(
                        "duplicate-change",
                        {
                            "partition": key,
                            "why": f"partition {key} epochs {pe} ({o.describe()}) and {pe2} ({o2.describe()}) both "
                            f"show {_state_text(o.view)}",
                        },
                    )
            for pe, o in ordered:
                if high is not None:
                    if o.view.leader_epoch < high.view.leader_epoch:
                        self.out.add(
                            "leader-epoch-regression",
                            {
                                "partition": key,
                                "why": f"partition {key}: epoch {high.view.partition_epoch} has leader epoch "
                                f"{high.view.leader_epoch} ({high.describe()}) but epoch {pe} has "
                                f"{o.view.leader_epoch} ({o.describe()})",
                            },
                        )
                    elif o.view.leader != high.view.leader and o.view.leader_epoch == high.view.leader_epoch:
                        self.out.add(
                            "leader-change-without-epoch-bump",
                            {
                                "partition": key,
                                "why": f"partition {key}: leader {high.view.leader} at epoch "
                                f"{high.view.partition_epoch} and {o.view.leader} at epoch {pe}, both with leader "
                                f"epoch {o.view.leader_epoch}",
                            },
                        )
                if high is None or o.view.leader_epoch >= high.view.leader_epoch:
                    high = o
        return chosen

    def images(self) -> None:
        for key, items in sorted(self.obs.items()):
            imgs = sorted((o for o in items if o.offset is not None), key=lambda o: o.offset)  # type: ignore[arg-type, return-value]
            newest: _Obs | None = None
            by_offset: dict[int, _Obs] = {}
            for o in imgs:
                same = by_offset.setdefault(o.offset, o)  # type: ignore[arg-type]
                if same is not o and (same.view.partition_epoch, same.view.state) != (
                    o.view.partition_epoch,
                    o.view.state,
                ):
                    self.out.add(
                        "image-divergence",
                        {
                            "partition": key,
                            "offset": o.offset,
                            "why": f"partition {key} at offset {o.offset}: {same.describe()} shows epoch "
                            f"{same.view.partition_epoch} ({_state_text(same.view)}), {o.describe()} shows epoch "
                            f"{o.view.partition_epoch} ({_state_text(o.view)})",
                        },
                    )
                if (
                    newest is not None
                    and o.offset > newest.offset
                    and o.view.partition_epoch < newest.view.partition_epoch
                ):  # type: ignore[operator]
                    self.out.add(
                        "partition-epoch-regression",
                        {
                            "partition": key,
                            "why": f"partition {key}: {newest.describe()} shows epoch {newest.view.partition_epoch}, "
                            f"the later {o.describe()} shows epoch {o.view.partition_epoch}",
                        },
                    )
                if newest is None or o.view.partition_epoch >= newest.view.partition_epoch:
                    newest = o

    def alters(self, chosen: dict[str, dict[int, _Obs]]) -> None:
        clock = OffsetClock(self.bh)
        for a in self.bh.alters:
            if a.outcome == "fail":
                if a.error and a.error.isupper() and ":" not in a.error and a.error not in ALTER_ERRORS:
                    self.out.add(
                        "unexpected-error",
                        {"op": a.at.describe(), "why": f"AlterPartition {a.at.describe()} failed with {a.error}"},
                    )
                continue
            if a.result is None:
                continue
            self._result(a, chosen)
            if a.changed:
                self._replaced(a, chosen)
                self._durable(a, clock)

    def _result(self, a: Alter, chosen: dict[str, dict[int, _Obs]]) -> None:
        r = a.result
        assert r is not None
        problems = []
        if r.leader != a.broker:
            problems.append(f"leader {r.leader}, not the asking broker {a.broker}")
        if r.leader_epoch != a.leader_epoch:
            problems.append(f"leader epoch {r.leader_epoch}, not {a.leader_epoch}")
        if r.partition_epoch not in (a.partition_epoch, a.partition_epoch + 1):
            problems.append(f"partition epoch {r.partition_epoch} after {a.partition_epoch}")
        elif set(r.isr) != set(a.isr):
            problems.append(f"ISR {sorted(r.isr)}, not {sorted(a.isr)}")
        elif r.partition_epoch == a.partition_epoch:
            before = chosen.get(a.key, {}).get(a.partition_epoch)
            known = (
                set(before.view.isr) if before is not None else (set(a.from_isr) if a.from_isr is not None else None)
            )
            if known is not None and known != set(a.isr):
                problems.append(f"no new partition epoch although the ISR changed from {sorted(known)}")
        if problems:
            self.out.add(
                "alter-result-mismatch",
                {"partition": a.key, "why": f"AlterPartition {a.at.describe()} on {a.key}: " + "; ".join(problems)},
            )

    def _replaced(self, a: Alter, chosen: dict[str, dict[int, _Obs]]) -> None:
        before = chosen.get(a.key, {}).get(a.partition_epoch)
        if before is None or (before.view.leader == a.broker and before.view.leader_epoch == a.leader_epoch):
            return
        self.out.add(
            "stale-alter-accepted",
            {
                "partition": a.key,
                "why": f"AlterPartition {a.at.describe()} from broker {a.broker} with leader epoch {a.leader_epoch} "
                f"replaced epoch {a.partition_epoch} of {a.key}, which {before.describe()} shows with "
                f"{_state_text(before.view)}",
            },
        )

    def _durable(self, a: Alter, clock: OffsetClock) -> None:
        assert a.result is not None and a.at.cmp is not None
        low = clock.after(a.at.cmp)
        for o in self.obs.get(a.key, ()):
            if o.offset is not None and o.offset >= low and o.view.partition_epoch < a.result.partition_epoch:
                self.out.add(
                    "lost-alter",
                    {
                        "partition": a.key,
                        "why": f"{o.describe()} (past offset {low}, which follows {a.at.describe()}) shows "
                        f"{a.key} at epoch {o.view.partition_epoch}, below the acknowledged epoch "
                        f"{a.result.partition_epoch}",
                    },
                )
                return

    def run(self) -> None:
        self.invariants()
        chosen = self.versions()
        self.images()
        self.alters(chosen)


def check_partition_state(history: History, dumps: str | Path | None = None) -> Verdict:
    bh = read_broker_history(history, dumps)
    checker = _Checker(bh)
    if not checker.obs and not bh.alters:
        return Verdict(CHECKER, UNKNOWN, {"reason": "no partition states in the history"})
    checker.run()
    details: dict[str, Any] = {
        "anomalies": checker.out.to_json(),
        "partitions": sorted(checker.keys),
        "counts": {
            "alters": len(bh.alters),
            "alters_ok": sum(1 for a in bh.alters if a.outcome == "ok"),
            "alters_changed": sum(1 for a in bh.alters if a.changed),
            "observations": sum(len(v) for v in checker.obs.values()),
            "versions": sum(len({o.view.partition_epoch for o in v}) for v in checker.obs.values()),
            "image_dumps": len(bh.dumps),
        },
    }
    return Verdict(CHECKER, not checker.out, details)


def check_from_args(history: History, args: Any) -> Verdict:
    return check_partition_state(history, dumps_of(history, args))


def summarize(verdict: Verdict) -> list[str]:
    partitions = len(verdict.details.get("partitions", ()))

    def headline(c: Any) -> str:
        return (
            f"{partitions} partitions, {c['versions']} versions seen in {c['observations']} answers; "
            f"{c['alters_changed']} of {c['alters']} AlterPartitions changed the ISR"
        )

    return summarize_anomalies(CHECKER, verdict.valid, verdict.details, headline)
