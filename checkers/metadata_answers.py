"""Each Metadata answer alone: the invariants every committed metadata image satisfies (KIP-631, KIP-497).

A Kafka client's Metadata answer (librdkafka's `list_topics`) carries the unfenced brokers and, per
partition, the leader, the replicas and the ISR, but no metadata offset, broker epoch or partition
epoch. Without those no two answers can be ordered, so the only rules that are sound are the ones that
hold within one image whatever its lag (a broker answers from a committed prefix of the metadata log,
applied batch by batch, so from a state the controller once had):

- a partition's leader is an unfenced broker (`fenced-leader`): KIP-631 fences a broker by moving its
  leaderships and removing it from every ISR in the batch that fences it;
- an ISR of two or more members holds no fenced broker (`fenced-in-isr`); the last member may stay,
  as Kafka keeps it (with no leader) so that it can come back as the leader;
- the leader is in the ISR, the ISR is not empty, within the replicas and without duplicates.

With `--elr` (the cluster runs KIP-966's Eligible Leader Replicas, on by default in new Apache Kafka
4.1 clusters) an ISR may be empty: the controller moves the last ISR member to the ELR when it is
fenced, so the partition has no leader and no ISR until an ELR member comes back. Then an empty ISR
is an anomaly (`empty-isr`) only when the answer names a leader.

"Fenced" in one answer means "not among the brokers the answer lists": Metadata lists exactly the
registered, unfenced brokers. The rules apply to every Metadata answer of the history, whichever
client got it; the offset-based rules of `registrations` and `partition-state` (an image placed after
an acknowledged write, images ordered by offset) judge only the answers that carry an offset.

Measured, never judged (`fencing`): for every kill or pause of a node whose broker id the answers
reveal (`answered_by` of the node's own answers), in the other nodes' answers during the fault: the
first that no longer lists the broker (`first_unlisted_s` after the fault started), the last that still
lists it (`last_listed_s`) and the last that still names it a leader (`last_led_s`). On Apache Kafka
this is the fencing delay clients see: `broker.session.timeout.ms` plus each image's lag. A fault
shorter than that ends with the broker still listed (`unlisted_seen` false).

Ops (the contract with `workloads/played_brokers.py`; `node` of the completion is who answered):

- `metadata` {node}: our client's Metadata; ok: `brokers` (unfenced ids), `partitions` {"topic/p":
  {leader, isr, replicas, ...}}, `offset`.
- `kafka-metadata` {node}: librdkafka's `list_topics` from a broker; ok: `brokers`, `controller`,
  `partitions` {"topic/p": {leader, isr, replicas}}, `answered_by` (the answering broker's id).
- `kafka-describe-cluster` {node}: librdkafka's `describe_cluster`; ok: `brokers`, `controller`. Counted:
  no per-answer rule reaches it (it names brokers only, and nothing in one list contradicts itself).

Anomalies:
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkers.broker_ops import Anomalies, BrokerOpsError, summarize_anomalies
from checkers.history import History, Op, fault_windows
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "metadata-answers"
METADATA_F = ("metadata", "kafka-metadata")
COUNTED_F = ("kafka-describe-cluster",)
FENCING_FAULTS = ("kill", "pause")
MAX_FAULTS_LISTED = 20
NS_PER_S = 1e9

EXPLANATIONS = {
    "fenced-leader": "an answer named a leader that is not among its unfenced brokers",
    "fenced-in-isr": "an answer's ISR of two or more held a broker that is not among its unfenced brokers",
    "leader-not-in-isr": "an answer's leader was not in the partition's ISR",
    "empty-isr": "an answer showed a partition with an empty ISR",
    "isr-outside-replicas": "an answer's ISR held a broker that is not a replica, or one broker twice",
}
__doc__ = (__doc__ or "") + "".join(f"\n- `{k}`: {v}." for k, v in EXPLANATIONS.items()) + "\n"


def _ids(value: Any, what: str, op: Op) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise BrokerOpsError(f"op {op.id} ({op.f}): {what} must be a list of broker ids, got {value!r}")
    return value


def _leader(value: Any, key: str, op: Op) -> int:
    leader = value.get("leader") if isinstance(value, Mapping) else None
    if not isinstance(leader, int) or isinstance(leader, bool):
        raise BrokerOpsError(f"op {op.id} ({op.f}): partitions[{key!r}].leader must be a broker id, got {leader!r}")
    return leader


def judge_answer(op: Op, out: Anomalies, *, elr: bool = False) -> int:
    """Add the anomalies of one ok Metadata answer to `out`; the number of partitions it showed
    (`elr`: an empty ISR without a leader is valid, module docstring)."""
    v = op.value
    if not isinstance(v, Mapping):
        raise BrokerOpsError(f"op {op.id} ({op.f}): value must be an object, got {v!r}")
    unfenced = set(_ids(v.get("brokers"), "brokers", op))
    parts = v.get("partitions")
    if not isinstance(parts, Mapping):
        raise BrokerOpsError(f"op {op.id} ({op.f}): partitions must be an object, got {parts!r}")
    who = f"op {op.id} ({op.f}, process {op.process}" + (f", answered by {op.node})" if op.node else ")")
    for key, p in sorted(parts.items()):
        leader = _leader(p, key, op)
        isr = _ids(p.get("isr"), f"partitions[{key!r}].isr", op)
        replicas = p.get("replicas")
        where = f"{who}: partition {key}, brokers {sorted(unfenced)}"
        if leader >= 0 and leader not in unfenced:
            out.add("fenced-leader", {"partition": key, "op": op.id, "why": f"{where}, is led by {leader}"})
        if len(isr) >= 2 and set(isr) - unfenced:
            fenced = sorted(set(isr) - unfenced)
            out.add("fenced-in-isr", {"partition": key, "op": op.id, "why": f"{where}, has ISR {isr} with {fenced}"})
        if not isr and not (elr and leader < 0):
            out.add("empty-isr", {"partition": key, "op": op.id, "why": f"{where}, has an empty ISR"})
        elif leader >= 0 and leader not in isr:
            out.add("leader-not-in-isr", {"partition": key, "op": op.id, "why": f"{where}: leader {leader}, ISR {isr}"})
        if replicas is not None:
            replicas = _ids(replicas, f"partitions[{key!r}].replicas", op)
            if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
                out.add(
                    "isr-outside-replicas",
                    {"partition": key, "op": op.id, "why": f"{where}: ISR {isr}, replicas {replicas}"},
                )
    return len(parts)


def _listed(op: Op) -> list[int]:
    brokers = op.value.get("brokers")
    return brokers if isinstance(brokers, list) else []


def _leaders(op: Op) -> set[Any]:
    parts = op.value.get("partitions")
    return {p.get("leader") for p in parts.values() if isinstance(p, Mapping)} if isinstance(parts, Mapping) else set()


def _since(time: int | None, start: int) -> float | None:
    return None if time is None else round((time - start) / NS_PER_S, 3)


def fencing_delays(history: History) -> dict[str, Any] | None:
    """How long killed or paused brokers stay listed and leaders in the others' answers (module
    docstring); None when no fault could be matched to a broker id."""
    answers = [
        op
        for op in history.ops
        if op.type == "ok" and op.f in (*METADATA_F, *COUNTED_F) and op.complete_time is not None
        if isinstance(op.value, Mapping)
    ]
    ids = {op.node: op.value["answered_by"] for op in answers if isinstance(op.value.get("answered_by"), int)}
    last = max((op.complete_time for op in answers), default=0)
    faults: list[dict[str, Any]] = []
    for w in fault_windows(history, failed_starts=False):
        targets = w.value.get("targets") if isinstance(w.value, Mapping) else None
        if w.kind not in FENCING_FAULTS or not isinstance(targets, list):
            continue
        end = w.end if w.end is not None else last
        for node in (t for t in targets if t in ids):
            broker = ids[node]
            seen = [op for op in answers if op.node != node and w.start <= op.invoke_time and op.complete_time <= end]
            unlisted = [op.complete_time for op in seen if broker not in _listed(op)]
            listed = [op.complete_time for op in seen if broker in _listed(op)]
            led = [op.complete_time for op in seen if broker in _leaders(op)]
            faults.append(
                {
                    "fault": w.kind,
                    "node": node,
                    "broker": broker,
                    "fault_s": round((end - w.start) / NS_PER_S, 3),
                    "answers": len(seen),
                    "unlisted_seen": bool(unlisted),
                    "first_unlisted_s": _since(min(unlisted, default=None), w.start),
                    "last_listed_s": _since(max(listed, default=None), w.start),
                    "last_led_s": _since(max(led, default=None), w.start),
                }
            )
    if not faults:
        return None

    def most(key: str) -> float | None:
        values = [f[key] for f in faults if f[key] is not None and f["unlisted_seen"]]
        return max(values) if values else None

    return {
        "faults": len(faults),
        "unlisted_seen": sum(f["unlisted_seen"] for f in faults),
        "max_first_unlisted_s": most("first_unlisted_s"),
        "max_last_listed_s": most("last_listed_s"),
        "max_last_led_s": most("last_led_s"),
        "per_fault": faults[:MAX_FAULTS_LISTED],
    }


def check_metadata_answers(history: History, *, elr: bool = False) -> Verdict:
    """Judge every ok Metadata answer of the history alone (module docstring)."""
    out = Anomalies(EXPLANATIONS)
    counts = {f: 0 for f in (*METADATA_F, *COUNTED_F)}
    anomalous = {f: 0 for f in METADATA_F}  # answers with at least one anomaly, by client
    partitions = 0
    for op in history.ops:
        if op.type != "ok" or op.f not in counts:
            continue
        counts[op.f] += 1
        if op.f in METADATA_F:
            before = sum(len(found) for found in out.found.values())
            partitions += judge_answer(op, out, elr=elr)
            anomalous[op.f] += sum(len(found) for found in out.found.values()) > before
    if not any(counts[f] for f in METADATA_F):
        return Verdict(CHECKER, UNKNOWN, {"reason": "no Metadata answers in the history"})
    details = {
        "anomalies": out.to_json(),
        "counts": {"answers": counts, "anomalous_answers": anomalous, "partitions_judged": partitions},
    }
    fencing = fencing_delays(history)
    if fencing is not None:
        details["fencing"] = fencing
    return Verdict(CHECKER, not out, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("metadata-answers")
    group.add_argument(
        "--elr",
        action="store_true",
        help="the cluster runs KIP-966 Eligible Leader Replicas: an empty ISR without a leader is valid",
    )


def check_from_args(history: History, args: Any) -> Verdict:
    return check_metadata_answers(history, elr=bool(getattr(args, "elr", False)))


def summarize(verdict: Verdict) -> list[str]:
    def headline(c: Any) -> str:
        a = c["answers"]
        return (
            f"{a['metadata']} Metadata answers of our client, {a['kafka-metadata']} of librdkafka "
            f"({c['partitions_judged']} partition states), {a['kafka-describe-cluster']} librdkafka "
            "DescribeCluster answers; anomalous answers: "
            + ", ".join(f"{n} {f}" for f, n in c["anomalous_answers"].items())
        )

    lines = summarize_anomalies(CHECKER, verdict.valid, verdict.details, headline)
    fencing = verdict.details.get("fencing")
    if fencing:
        lines.insert(
            1,
            f"  fencing seen for {fencing['unlisted_seen']} of {fencing['faults']} killed/paused brokers; "
            f"max s after the fault: first unlisted {fencing['max_first_unlisted_s']}, last listed "
            f"{fencing['max_last_listed_s']}, last leader {fencing['max_last_led_s']}",
        )
    return lines
