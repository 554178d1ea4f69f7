"""Forgery: forged and unauthorised requests changed nothing.

A run's forger (harness/forger.py) sends requests that no correct node accepts: an Envelope from a
plain client, inter-node APIs without ClusterAction, quorum RPCs on a broker's listener, admin writes
without ACLs or with a bad SASL login. This checker judges its ops (the history's side ops whose
f is "forge-<kind>") against the rules of the KIPs, and looks for their effects in what every node
left behind (`nodes/<node>/metadata-image.json` and `committed-log.jsonl` beside the history).

What each kind's refusal must say (the rule that refuses it):

| kind | refusal | rule |
|---|---|---|
| envelope-from-client | CLUSTER_AUTHORIZATION_FAILED | KIP-590: the forwarder needs ClusterAction |
| alter-partition-without-cluster-action | CLUSTER_AUTHORIZATION_FAILED | KIP-497 |
| broker-registration-without-cluster-action | CLUSTER_AUTHORIZATION_FAILED | KIP-631 |
| broker-heartbeat-without-cluster-action | CLUSTER_AUTHORIZATION_FAILED | KIP-631 |
| vote / begin-quorum-epoch / fetch-on-broker-listener | CLUSTER_AUTHORIZATION_FAILED | KIP-595/KIP-500 |
| write-without-acl | TOPIC_AUTHORIZATION_FAILED | KIP-590 + ACLs (AlterConfigs on the topic) |
| create-topic-without-acl | TOPIC_ or CLUSTER_AUTHORIZATION_FAILED | ACLs (Create) |
| create-acl-without-alter | CLUSTER_AUTHORIZATION_FAILED | ACLs (Alter on the cluster) |
| write-with-bad-login | SASL_AUTHENTICATION_FAILED | SASL/PLAIN (KIP-43) |
| end-quorum-epoch / vote-from-non-voter | INCONSISTENT_VOTER_SET, INVALID_REQUEST | KIP-595 (voter-only) |
| begin-quorum-epoch-at-int32-max | INVALID_REQUEST (observers: INCONSISTENT_VOTER_SET) | int32 epochs |
| replayed-vote-of-past-epoch | FENCED_LEADER_EPOCH | KIP-595 Vote handling step 2 |

The quorum kinds may also be refused as CLUSTER_AUTHORIZATION_FAILED or INVALID_CLUSTER_ID before
the quorum rules are reached; an answer without error (a vote answered NONE, granted or not) means
the node processed a request it must refuse, and is `accepted`.

Any kind may also be refused as "not served here or now" before anything is looked at
(NOT_CONTROLLER, BROKER_NOT_AVAILABLE) or fail before it was sent (a refused connection). An `info`
op (no answer, a lost connection: what a real node's listener does with an API it does not serve,
an ambiguous answer) is undecided: only the effect check can judge it.

Violations: `accepted` (answered without any error), `wrong-refusal` (refused with a code that shows
the request was processed past authorization, e.g. INVALID_REQUEST or STALE_BROKER_EPOCH), `effect`
(a forged marker in a node's final image, or a committed entry at a forged epoch). Valid when there
is none; the details count each kind's outcomes and say whether the effects could be checked.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from checkers.history import History, Op
from checkers.verdict import Verdict

CHECKER = "forgery"
PREFIX = "forge-"
CLUSTER_AUTH = frozenset({"CLUSTER_AUTHORIZATION_FAILED"})
QUORUM_REFUSALS = CLUSTER_AUTH | {"INVALID_CLUSTER_ID"}
EXPECTED: dict[str, frozenset[str]] = {
    "envelope-from-client": CLUSTER_AUTH,
    "alter-partition-without-cluster-action": CLUSTER_AUTH,
    "broker-registration-without-cluster-action": CLUSTER_AUTH,
    "broker-heartbeat-without-cluster-action": CLUSTER_AUTH,
    "vote-on-broker-listener": CLUSTER_AUTH,
    "begin-quorum-epoch-on-broker-listener": CLUSTER_AUTH,
    "fetch-on-broker-listener": CLUSTER_AUTH,
    "write-without-acl": frozenset({"TOPIC_AUTHORIZATION_FAILED"}),
    "create-topic-without-acl": frozenset({"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}),
    "create-acl-without-alter": CLUSTER_AUTH,
    "write-with-bad-login": frozenset({"SASL_AUTHENTICATION_FAILED"}),
    # Quorum RPCs on the controller listener (issue 24): refused by the voter-only rule, by the epoch
    # limit or fence, or earlier by authorization or a clusterId mismatch, never processed.
    "end-quorum-epoch-from-non-voter": QUORUM_REFUSALS | {"INCONSISTENT_VOTER_SET", "INVALID_REQUEST"},
    "vote-from-non-voter": QUORUM_REFUSALS | {"INCONSISTENT_VOTER_SET", "INVALID_REQUEST"},
    "begin-quorum-epoch-at-int32-max": QUORUM_REFUSALS | {"INVALID_REQUEST", "INCONSISTENT_VOTER_SET"},
    "replayed-vote-of-past-epoch": QUORUM_REFUSALS
    | {"FENCED_LEADER_EPOCH", "INCONSISTENT_VOTER_SET", "INVALID_REQUEST"},
}
NOT_SERVED = frozenset({"NOT_CONTROLLER", "BROKER_NOT_AVAILABLE"})
IMAGE_DUMP = "metadata-image.json"
LOG_DUMP = "committed-log.jsonl"
MAX_LISTED = 10


def forged_ops(history: History) -> list[Op]:
    return [op for op in history.side if op.f.startswith(PREFIX)]


def _codes(op: Op) -> list[str]:
    value = op.value if isinstance(op.value, dict) else {}
    codes = [c for c in value.get("codes", []) if isinstance(c, str) and c != "NONE"]
    if not codes and isinstance(op.error, str) and op.error.split(":")[0].isupper():
        codes = [op.error.split(":")[0]]
    return codes


def judge(op: Op) -> str:
    """refused | not-served | not-sent | undecided | accepted | wrong-refusal | unknown-kind"""
    kind = op.f[len(PREFIX) :]
    if kind not in EXPECTED:
        return "unknown-kind"
    if op.type == "info":
        return "undecided"
    if op.type == "ok":
        return "accepted"
    codes = _codes(op)
    if not codes:
        return "not-sent"  # a definite client-side failure: nothing reached a server
    if all(c in EXPECTED[kind] for c in codes):
        return "refused"
    if all(c in NOT_SERVED for c in codes):
        return "not-served"
    return "wrong-refusal"


def _strings(obj: Any) -> Iterator[str]:
    """Every string in a JSON document, and each item of comma-separated lists (Kafka list configs)."""
    if isinstance(obj, str):
        yield obj
        if "," in obj:
            yield from (item.strip() for item in obj.split(","))
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from _strings(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _strings(item)


def _node_dirs(root: Path) -> list[Path]:
    nodes = root / "nodes" if (root / "nodes").is_dir() else root
    return sorted(p for p in nodes.iterdir() if p.is_dir()) if nodes.is_dir() else []


def _max_epoch(path: Path) -> int:
    epoch = -1
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                epoch = max(epoch, int(json.loads(line).get("epoch", -1)))
    return epoch


def effects(ops: Iterable[Op], root: Path) -> tuple[list[dict[str, Any]], int]:
    """Markers of forged ops found in the nodes' images, forged epochs in their committed logs; and
    how many nodes left an image to look in."""
    markers: dict[str, int] = {}
    forged_epochs: dict[int, int] = {}
    for op in ops:
        value = op.invoke_value if isinstance(op.invoke_value, dict) else {}
        for marker in value.get("markers", []):
            markers[str(marker)] = op.id
        if isinstance(value.get("forged_epoch"), int):
            forged_epochs[value["forged_epoch"]] = op.id
    found: list[dict[str, Any]] = []
    checked = 0
    lowest = min(forged_epochs, default=None)
    for node_dir in _node_dirs(root):
        image = node_dir / IMAGE_DUMP
        if image.is_file():
            checked += 1
            present = set(_strings(json.loads(image.read_text(encoding="utf-8"))))
            for marker in sorted(set(markers) & present):
                found.append({"node": node_dir.name, "op": markers[marker], "marker": marker, "in": IMAGE_DUMP})
        log = node_dir / LOG_DUMP
        if lowest is not None and log.is_file():
            epoch = _max_epoch(log)
            if epoch >= lowest:
                op_id = forged_epochs.get(epoch, forged_epochs[lowest])
                found.append({"node": node_dir.name, "op": op_id, "epoch": epoch, "in": LOG_DUMP})
    return found, checked


def check_forgery(history: History, root: Path | None) -> Verdict:
    ops = forged_ops(history)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    violations: list[dict[str, Any]] = []
    for op in ops:
        kind = op.f[len(PREFIX) :]
        verdict = judge(op)
        outcomes[kind][verdict] += 1
        if verdict in ("accepted", "wrong-refusal"):
            violations.append(
                {"op": op.id, "kind": kind, "problem": verdict, "node": op.node, "codes": _codes(op), "type": op.type}
            )
    found, checked = effects(ops, root) if root is not None and root.is_dir() else ([], 0)
    violations += [{"problem": "effect", **f} for f in found]
    details: dict[str, Any] = {
        "ops": len(ops),
        "outcomes": {kind: dict(counts) for kind, counts in sorted(outcomes.items())},
        "nodes_checked": checked,
        "violations": violations[:MAX_LISTED],
        "violation_count": len(violations),
    }
    if not ops:
        details["note"] = "the history holds no forged requests (no forger ran)"
    if ops and not checked:
        details["note"] = "no node left a metadata image: effects not checked, answers only"
    return Verdict(CHECKER, not violations, details)


def check_from_args(history: History, args: Any) -> Verdict:
    root = getattr(args, "dumps", None)
    if root is None:
        source = getattr(args, "history", None) or getattr(history, "source", None)
        root = Path(source).parent if source else None
    return check_forgery(history, Path(root) if root is not None else None)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    totals: Counter[str] = Counter()
    for counts in d.get("outcomes", {}).values():
        totals.update(counts)
    spread = ", ".join(f"{n} {what}" for what, n in sorted(totals.items())) or "none"
    searched = d.get("nodes_checked", 0)
    lines = [
        f"{CHECKER}: {verdict.valid} ({d.get('ops', 0)} forged requests: {spread}; {searched} node images searched)"
    ]
    for v in d.get("violations", []):
        lines.append(f"  {v['problem']}: {json.dumps(v, default=str)}")
    if d.get("note"):
        lines.append(f"  {d['note']}")
    return lines
