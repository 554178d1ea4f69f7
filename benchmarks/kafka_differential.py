"""Differential check: one scripted sequence of admin operations, sent through the same
confluent-kafka AdminClient to Apache Kafka 4.1.1 (3 combined nodes) and to the reference cluster
(3 controllers + 2 brokers), both real processes on loopback with the ACL authorizer on. Each
operation's answer is reduced to what Kafka documents for it (the error code's name, the values
asked for), and the two answers are compared; the table lists every operation as same or different.

Every difference the check finds is either fixed in the reference cluster or named in
KNOWN_DIFFERENCES (and in docs/concepts/suts.md, "Differences from Kafka") with its reason; the test
(tests/kafka/test_kafka_differential.py) fails on any other difference.

    PYTHONPATH=$PWD python benchmarks/kafka_differential.py            # both clusters, the table
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka.admin as ck
from confluent_kafka import KafkaException

from benchmarks.kafka_loopback import Side, kafka_side, reference_side

TIMEOUT_S = 15.0
SETTLE_S = 15.0  # how long a read waits for an earlier write to reach the broker that answers it
TOPIC = "diff-a"
LIST_KEY = "cleanup.policy"  # a list-typed topic config (APPEND / SUBTRACT apply)
NUM_KEY = "retention.ms"
SHOWN_KEYS = (LIST_KEY, NUM_KEY)
BROKER_KEY = "message.max.bytes"
BROKER_KEYS = ("log.cleaner.threads", "log.cleanup.policy", "log.retention.ms", BROKER_KEY, "min.insync.replicas")

# Operation name -> why the reference cluster answers it differently from Kafka (docs/concepts/suts.md).
KNOWN_DIFFERENCES: dict[str, str] = {
    "describe configs: every value and source": (
        "Kafka 4's storage format writes a cluster-wide min.insync.replicas=1 (a ConfigRecord for the "
        "default broker resource), so Kafka names its source DYNAMIC_DEFAULT_BROKER_CONFIG; the reference "
        "cluster writes no bootstrap configs and answers DEFAULT_CONFIG with the same value"
    ),
    "describe broker configs": (
        "min.insync.replicas as above; log.retention.ms is null in Kafka (its default comes from "
        "log.retention.hours, 168) and 604800000 in the reference cluster, which has no *.hours/*.minutes "
        "fallbacks and states the effective value"
    ),
    "incremental SET broker config, unknown": (
        "Kafka stores any unknown broker config name (custom configs for plugins); the reference cluster "
        "accepts only the broker configs it models and answers INVALID_CONFIG"
    ),
    **dict.fromkeys(
        (
            "create partitions 3 -> 5",
            "partition count after growing",
            "create partitions 5 -> 2",
            "create partitions, unknown topic",
        ),
        "the reference cluster does not serve CreatePartitions (KIP-195): its workloads never grow a "
        "topic; librdkafka refuses locally with _UNSUPPORTED_FEATURE (the API is not in ApiVersions)",
    ),
}

# A listed difference in a dict answer must be in exactly these keys (else it is a new difference).
DIFFERING_KEYS: dict[str, set[str]] = {
    "describe configs: every value and source": {"min.insync.replicas"},
    "describe broker configs": {"log.retention.ms", "min.insync.replicas"},
}


Answer = object  # something JSON-able: "ok", an error code's name, or the values asked for


def error_name(exc: BaseException) -> str:
    """A failed future's Kafka error code name (TOPIC_ALREADY_EXISTS, ...); the client's own errors
    (bad arguments it refuses to send) as `client: <type>`."""
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        return exc.args[0].name()
    return f"client: {type(exc).__name__}"


def error_text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "str"):
        return exc.args[0].str()
    return str(exc)


@dataclass(frozen=True)
class Outcome:
    answer: Answer  # compared
    detail: str = ""  # shown (an error's message), not compared


def outcome(call: Callable[[], Answer]) -> Outcome:
    try:
        return Outcome(call())
    except Exception as exc:
        return Outcome(error_name(exc), error_text(exc)[:160])


def settled(call: Callable[[], Answer], done: Callable[[Answer], bool]) -> Outcome:
    """A read after a write: ask until `done(answer)` or SETTLE_S (brokers answer from their metadata
    image, which trails the controller by a moment on both systems); the last answer counts."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        got = outcome(call)
        if done(got.answer) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


# -- the operations -------------------------------------------------------------------------------


def create(admin: ck.AdminClient, name: str, partitions: int, rf: int, config: dict | None = None, **kw) -> str:  # type: ignore[no-untyped-def]
    futures = admin.create_topics([ck.NewTopic(name, partitions, rf, config=config or {})], **kw)
    futures[name].result(TIMEOUT_S)
    return "ok"


def incremental(admin: ck.AdminClient, topic: str, *entries: tuple[str, str | None, str], kind: str = "TOPIC") -> str:
    resource = ck.ConfigResource(ck.ResourceType[kind], topic)
    for key, value, op in entries:
        op_type = getattr(ck.AlterConfigOpType, op)
        resource.add_incremental_config(ck.ConfigEntry(key, value, incremental_operation=op_type))
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    return "ok"


def describe(
    admin: ck.AdminClient, topic: str, keys: tuple[str, ...] = SHOWN_KEYS, kind: str = "TOPIC"
) -> dict[str, list]:
    resource = ck.ConfigResource(ck.ResourceType[kind], topic)
    found = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    return {k: [found[k].value, source_name(found[k].source)] for k in keys if k in found}


def source_name(source: object) -> str:
    with contextlib.suppress(ValueError):
        return ck.ConfigSource(source).name
    return str(source)


def every_value(admin: ck.AdminClient, topic: str) -> dict[str, list]:
    """Every config of a fresh topic: value and source."""
    resource = ck.ConfigResource(ck.ResourceType.TOPIC, topic)
    found = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    return {k: [e.value, source_name(e.source)] for k, e in sorted(found.items())}


def legacy_alter(admin: ck.AdminClient, resource: ck.ConfigResource) -> str:
    """AlterConfigs (deprecated in the client, still served by both): replaces the whole dynamic config."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    return "ok"


def config_names(admin: ck.AdminClient, topic: str) -> list[str]:
    resource = ck.ConfigResource(ck.ResourceType.TOPIC, topic)
    return sorted(admin.describe_configs([resource])[resource].result(TIMEOUT_S))


def user_topics(admin: ck.AdminClient) -> list[str]:
    return sorted(t for t in admin.list_topics(timeout=TIMEOUT_S).topics if not t.startswith("__"))


def partitions_of(admin: ck.AdminClient, topic: str) -> int | str:
    md = admin.list_topics(topic=topic, timeout=TIMEOUT_S).topics[topic]
    if md.error is not None:
        return md.error.name()
    return len(md.partitions)


def cluster_shape(admin: ck.AdminClient) -> dict:
    """What both must agree on though the shapes differ: a 22-character cluster id, the controller
    one of the listed nodes, every listed node a broker of Metadata."""
    got = admin.describe_cluster().result(TIMEOUT_S)
    brokers = set(admin.list_topics(timeout=TIMEOUT_S).brokers)
    ids = {n.id for n in got.nodes}
    return {
        "cluster_id_chars": len(got.cluster_id or ""),
        "controller_listed": got.controller is not None and got.controller.id in ids,
        "nodes_are_the_brokers": ids == brokers,
    }


ALICE_READ = ("TOPIC", TOPIC, "LITERAL", "User:alice", "*", "READ", "ALLOW")
ALICE_PREFIX = ("TOPIC", "diff-", "PREFIXED", "User:alice", "*", "DESCRIBE", "ALLOW")


def binding(spec: tuple[str, ...]) -> ck.AclBinding:
    restype, name, pattern, principal, host, op, perm = spec
    return ck.AclBinding(
        ck.ResourceType[restype],
        name,
        ck.ResourcePatternType[pattern],
        principal,
        host,
        ck.AclOperation[op],
        ck.AclPermissionType[perm],
    )


def alice_filter(operation: str = "ANY") -> ck.AclBindingFilter:
    return ck.AclBindingFilter(
        ck.ResourceType.ANY,
        None,
        ck.ResourcePatternType.ANY,
        "User:alice",
        None,
        ck.AclOperation[operation],
        ck.AclPermissionType.ANY,
    )


def as_tuple(b: ck.AclBinding) -> list[str]:
    return [
        b.restype.name,
        b.name,
        b.resource_pattern_type.name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission_type.name,
    ]


def create_acls(admin: ck.AdminClient, *specs: tuple[str, ...]) -> str:
    bindings = [binding(s) for s in specs]
    futures = admin.create_acls(bindings)
    for b in bindings:
        futures[b].result(TIMEOUT_S)
    return "ok"


def describe_acls(admin: ck.AdminClient, operation: str = "ANY") -> list[list[str]]:
    return sorted(as_tuple(b) for b in admin.describe_acls(alice_filter(operation)).result(TIMEOUT_S))


def delete_acls(admin: ck.AdminClient, operation: str = "ANY") -> list[list[str]]:
    flt = alice_filter(operation)
    return sorted(as_tuple(b) for b in admin.delete_acls([flt])[flt].result(TIMEOUT_S))


def script(admin: ck.AdminClient) -> list[tuple[str, Outcome]]:
    """The scripted sequence; each step's outcome in order. Reads after writes use `settled`."""
    a = admin
    steps: list[tuple[str, Outcome]] = []

    def step(name: str, call: Callable[[], Answer], done: Callable[[Answer], bool] | None = None) -> Answer:
        got = settled(call, done) if done else outcome(call)
        steps.append((name, got))
        return got.answer

    # topics
    step("create topic", lambda: create(a, TOPIC, 3, 2))
    step("list topics (after create)", lambda: user_topics(a), lambda t: TOPIC in t)
    step("create topic again (duplicate)", lambda: create(a, TOPIC, 1, 1))
    step("create topic, 0 partitions", lambda: create(a, "diff-zero", 0, 1))
    step("create topic, -2 partitions", lambda: create(a, "diff-neg", -2, 1))
    step("create topic, replication factor 9", lambda: create(a, "diff-rf", 1, 9))
    step("create topic, bad config value", lambda: create(a, "diff-badval", 1, 1, {LIST_KEY: "bogus"}))
    step("create topic, unknown config", lambda: create(a, "diff-unknown", 1, 1, {"no.such.config": "1"}))
    step("create topic, illegal name", lambda: create(a, "diff/slash", 1, 1))
    step("create topic, name too long", lambda: create(a, "d" * 250, 1, 1))
    step("create topic, validate only", lambda: create(a, "diff-validate", 1, 1, validate_only=True))
    step("create topic with config", lambda: create(a, "diff-b", 1, 1, {NUM_KEY: "12345"}))
    step("list topics", lambda: user_topics(a), lambda t: "diff-b" in t)  # type: ignore[operator]
    # configs
    step("describe configs (defaults)", lambda: describe(a, TOPIC), lambda d: isinstance(d, dict))
    step("describe configs (set at create)", lambda: describe(a, "diff-b"), lambda d: isinstance(d, dict))
    step("describe configs: the config names", lambda: config_names(a, TOPIC))
    step("describe configs: every value and source", lambda: every_value(a, "diff-b"))
    step("describe configs, unknown topic", lambda: describe(a, "diff-nope"))
    step("incremental SET", lambda: incremental(a, TOPIC, (NUM_KEY, "60000", "SET")))
    step("describe after SET", lambda: describe(a, TOPIC), lambda d: _value(d, NUM_KEY) == "60000")
    step("incremental APPEND", lambda: incremental(a, TOPIC, (LIST_KEY, "compact", "APPEND")))
    step("describe after APPEND", lambda: describe(a, TOPIC), lambda d: "compact" in str(_value(d, LIST_KEY)))
    step("incremental APPEND (already there)", lambda: incremental(a, TOPIC, (LIST_KEY, "compact", "APPEND")))
    step("incremental SUBTRACT", lambda: incremental(a, TOPIC, (LIST_KEY, "delete", "SUBTRACT")))
    step("describe after SUBTRACT", lambda: describe(a, TOPIC), lambda d: _value(d, LIST_KEY) == "compact")
    step("incremental DELETE", lambda: incremental(a, TOPIC, (NUM_KEY, None, "DELETE")))
    step("describe after DELETE", lambda: describe(a, TOPIC), lambda d: _value(d, NUM_KEY) != "60000")
    step("incremental DELETE (not set)", lambda: incremental(a, TOPIC, ("retention.bytes", None, "DELETE")))
    step("incremental SET, unknown config", lambda: incremental(a, TOPIC, ("no.such.config", "1", "SET")))
    step("incremental SET, bad value", lambda: incremental(a, TOPIC, (NUM_KEY, "soon", "SET")))
    step("incremental SET, bad list item", lambda: incremental(a, TOPIC, (LIST_KEY, "bogus", "SET")))
    step("incremental APPEND to a non-list config", lambda: incremental(a, TOPIC, (NUM_KEY, "5", "APPEND")))
    step("incremental SET, gzip level 0", lambda: incremental(a, TOPIC, ("compression.gzip.level", "0", "SET")))
    step("incremental SET, tiered storage on", lambda: incremental(a, TOPIC, ("remote.storage.enable", "true", "SET")))
    step("incremental SET, unknown topic", lambda: incremental(a, "diff-nope", (NUM_KEY, "1", "SET")))
    step(
        "incremental SET twice in one request",
        lambda: incremental(a, TOPIC, (NUM_KEY, "1", "SET"), (NUM_KEY, "2", "SET")),
    )
    step("describe after the refused writes", lambda: describe(a, TOPIC), lambda d: _value(d, NUM_KEY) != "60000")
    legacy = ck.ConfigResource(ck.ResourceType.TOPIC, TOPIC, set_config={NUM_KEY: "5000"})
    step("legacy AlterConfigs (replaces all)", lambda: legacy_alter(a, legacy))
    step("describe after legacy AlterConfigs", lambda: describe(a, TOPIC), lambda d: _value(d, NUM_KEY) == "5000")
    # broker configs (of the lowest broker id: node ids differ, the broker's role does not)
    broker = str(min(a.list_topics(timeout=TIMEOUT_S).brokers))
    step("describe broker configs", lambda: describe(a, broker, BROKER_KEYS, "BROKER"))
    # message.max.bytes: a per-broker dynamic config; its change restarts Kafka's log cleaner (which
    # ran the harness's 256 MB heap out of memory until harness/db/kafka sized the dedupe buffer)
    size = (BROKER_KEY, "2000000", "SET")
    step("incremental SET broker config", lambda: incremental(a, broker, size, kind="BROKER"))
    step(
        "describe broker configs after SET",
        lambda: describe(a, broker, (BROKER_KEY,), "BROKER"),
        lambda d: _value(d, BROKER_KEY) == "2000000",
    )
    step(
        "incremental SET broker config, bad value",
        lambda: incremental(a, broker, (BROKER_KEY, "x", "SET"), kind="BROKER"),
    )
    step(
        "incremental SET broker config, unknown",
        lambda: incremental(a, broker, ("no.such.config", "1", "SET"), kind="BROKER"),
    )
    step(
        "incremental DELETE broker config",
        lambda: incremental(a, broker, (BROKER_KEY, None, "DELETE"), kind="BROKER"),
    )
    step(
        "describe broker configs after DELETE",
        lambda: describe(a, broker, (BROKER_KEY,), "BROKER"),
        lambda d: _value(d, BROKER_KEY) == "1048588",
    )
    # partitions
    grow = ck.NewPartitions(TOPIC, 5)
    step("create partitions 3 -> 5", lambda: a.create_partitions([grow])[TOPIC].result(TIMEOUT_S) or "ok")
    step("partition count after growing", lambda: partitions_of(a, TOPIC), lambda n: n == 5)
    shrink = ck.NewPartitions(TOPIC, 2)
    step("create partitions 5 -> 2", lambda: a.create_partitions([shrink])[TOPIC].result(TIMEOUT_S) or "ok")
    unknown = ck.NewPartitions("diff-nope", 2)
    step(
        "create partitions, unknown topic",
        lambda: a.create_partitions([unknown])["diff-nope"].result(TIMEOUT_S) or "ok",
    )
    # cluster
    step("describe cluster", lambda: cluster_shape(a))
    # ACLs
    step("create ACLs (literal + prefixed)", lambda: create_acls(a, ALICE_READ, ALICE_PREFIX))
    step("describe ACLs", lambda: describe_acls(a), lambda acls: isinstance(acls, list) and len(acls) == 2)
    step("describe ACLs, one operation", lambda: describe_acls(a, "READ"), lambda acls: acls == [list(ALICE_READ)])
    step(
        "create ACL, principal without type",
        lambda: create_acls(a, ("TOPIC", TOPIC, "LITERAL", "alice", "*", "READ", "ALLOW")),
    )
    step(
        "create ACL, empty resource name",
        lambda: create_acls(a, ("TOPIC", "", "LITERAL", "User:alice", "*", "READ", "ALLOW")),
    )
    step(
        "create ACL, cluster resource, wrong name",
        lambda: create_acls(a, ("BROKER", "x", "LITERAL", "User:alice", "*", "ALTER", "ALLOW")),
    )
    step("delete ACLs, one operation", lambda: delete_acls(a, "READ"))
    step("delete ACLs, the rest", lambda: delete_acls(a))
    step("describe ACLs after delete", lambda: describe_acls(a), lambda acls: acls == [])
    # delete
    step("delete topic", lambda: a.delete_topics([TOPIC])[TOPIC].result(TIMEOUT_S) or "ok")
    step("list topics after delete", lambda: user_topics(a), lambda t: TOPIC not in t)  # type: ignore[operator]
    step("delete topic again (unknown)", lambda: a.delete_topics([TOPIC])[TOPIC].result(TIMEOUT_S) or "ok")
    step("delete topic, never existed", lambda: a.delete_topics(["diff-nope"])["diff-nope"].result(TIMEOUT_S) or "ok")
    return steps


def _value(described: Answer, key: str) -> object:
    return described.get(key, [None])[0] if isinstance(described, dict) else None


# -- running and comparing --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    operation: str
    kafka: Outcome
    reference: Outcome

    @property
    def same(self) -> bool:
        return self.kafka.answer == self.reference.answer


def run_side(side: Side) -> list[tuple[str, Outcome]]:
    admin = ck.AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 3})
    return script(admin)


def compare(kafka: list[tuple[str, Outcome]], reference: list[tuple[str, Outcome]]) -> list[Row]:
    assert [n for n, _ in kafka] == [n for n, _ in reference]
    return [Row(name, k, r) for (name, k), (_, r) in zip(kafka, reference, strict=True)]


def short(o: Outcome) -> str:
    text = json.dumps(o.answer, separators=(",", ":")) if not isinstance(o.answer, str) else o.answer
    if len(text) > 200:
        text = text[:200] + f"... ({len(text)} chars)"
    return text + (f" ({o.detail})" if o.detail else "")


def shown(row: Row) -> tuple[Outcome, Outcome]:
    """Two different dict answers: only the keys where they differ."""
    k, r = row.kafka.answer, row.reference.answer
    if row.same or not (isinstance(k, dict) and isinstance(r, dict)):
        return row.kafka, row.reference
    keys = sorted(key for key in set(k) | set(r) if k.get(key) != r.get(key))
    return Outcome({key: k.get(key) for key in keys}), Outcome({key: r.get(key) for key in keys})


def table(rows: list[Row]) -> str:
    lines = [f"{'operation':44} {'verdict':9} answers"]
    for row in rows:
        verdict = "same" if row.same else ("KNOWN" if row.operation in KNOWN_DIFFERENCES else "DIFFERENT")
        kafka, reference = shown(row)
        lines.append(f"{row.operation:44} {verdict:9} kafka: {short(kafka)}")
        if not row.same:
            lines.append(f"{'':54} reference: {short(reference)}")
    differ = [r for r in rows if not r.same]
    lines.append(f"{len(rows)} operations, {len(rows) - len(differ)} the same, {len(differ)} different")
    return "\n".join(lines)


def unexplained(rows: list[Row]) -> list[str]:
    """Operations that differ without a listed reason, and listed ones that no longer differ."""
    differ = {r.operation for r in rows if not r.same}
    wrong_keys = {r.operation for r in rows if r.operation in DIFFERING_KEYS and not r.same and not _listed_keys(r)}
    return sorted((differ ^ set(KNOWN_DIFFERENCES)) | wrong_keys)


def _listed_keys(row: Row) -> bool:
    """The row's two dict answers differ in exactly the listed keys."""
    kafka = shown(row)[0].answer
    return isinstance(kafka, dict) and set(kafka) == DIFFERING_KEYS[row.operation]


def differential(base: Path) -> list[Row]:
    with kafka_side(base / "kafka") as kafka:
        on_kafka = run_side(kafka)
    with reference_side(base / "reference") as reference:
        on_reference = run_side(reference)
    return compare(on_kafka, on_reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where the clusters' logs go (default: a temporary dir)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        base = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafka-diff-")))
        rows = differential(base)
    print(table(rows))
    wrong = unexplained(rows)
    if wrong:
        print("not as listed in KNOWN_DIFFERENCES: " + "; ".join(wrong), file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
