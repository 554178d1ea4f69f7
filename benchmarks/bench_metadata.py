"""Metadata layer throughput on this machine (printed figures, not a test).

python benchmarks/bench_metadata.py [--records 1000000] [--snapshot-records 100000] [--seconds 1]

- records encoded / decoded per second (a PartitionChangeRecord, a ConfigRecord, a PartitionRecord);
- image replay of a log of N records (decode + validate + apply, batches of 10 as a controller
  appends them): records per second;
- a snapshot of an image holding M records: bytes, seconds to write and to load.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Callable, Iterator

from node.metadata.image import MetadataImage
from node.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
    encode_records,
)
from node.metadata.snapshot import load_snapshot, snapshot_bytes
from node.protocol.admin import ConfigResourceType
from node.raft.records import RecordBatch

BROKERS = 12
PARTITIONS_PER_TOPIC = 40


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per CPU second (a shared, loaded machine makes wall-clock rates meaningless)."""
    n, start = 0, time.process_time()
    while True:
        for _ in range(256):
            fn()
        n += 256
        elapsed = time.process_time() - start
        if elapsed >= seconds:
            return n / elapsed


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


def setup_records(rng: random.Random, topics: int) -> Iterator[MetadataRecord]:
    """Brokers, then topics with partitions and a config each: what a snapshot mostly holds."""
    for b in range(BROKERS):
        yield RegisterBrokerRecord(b, _uuid(rng), b, (BrokerEndpoint("PLAINTEXT", f"10.0.0.{b}", 9092, 0),), {})
    for b in range(BROKERS):
        yield UnfenceBrokerRecord(b, b)
    for t in range(topics):
        topic_id = _uuid(rng)
        yield TopicRecord(f"topic-{t}", topic_id)
        for p in range(PARTITIONS_PER_TOPIC):
            replicas = tuple(rng.sample(range(BROKERS), 3))
            yield PartitionRecord(p, topic_id, replicas, replicas, leader=replicas[0])
        yield ConfigRecord(ConfigResourceType.TOPIC, f"topic-{t}", "retention.ms", str(rng.randrange(10**9)))


def churn_records(rng: random.Random, image_topics: list[tuple[str, str]], n: int) -> Iterator[MetadataRecord]:
    """ISR changes (each keeps the leader in the ISR) and config writes: the workloads' traffic."""
    for _ in range(n):
        name, topic_id = image_topics[rng.randrange(len(image_topics))]
        if rng.random() < 0.3:
            yield ConfigRecord(ConfigResourceType.TOPIC, name, "retention.ms", str(rng.randrange(10**9)))
            continue
        p = rng.randrange(PARTITIONS_PER_TOPIC)
        leader = rng.randrange(BROKERS)
        others = [b for b in range(BROKERS) if b != leader]
        isr = (leader, *rng.sample(others, 2))
        yield PartitionChangeRecord(p, topic_id, isr=isr, leader=leader, replicas=isr)


def batches_of(records: Iterator[MetadataRecord], size: int, epoch: int = 1) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    pending: list[MetadataRecord] = []
    offset = 0
    for record in records:
        pending.append(record)
        if len(pending) == size:
            out.append(RecordBatch(offset, epoch, encode_records(pending)))
            offset += size
            pending = []
    if pending:
        out.append(RecordBatch(offset, epoch, encode_records(pending)))
    return out


def bench_codec(seconds: float) -> None:
    tid = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    samples = {
        "PartitionChangeRecord": PartitionChangeRecord(3, tid, isr=(1, 2, 3), leader=1),
        "ConfigRecord": ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "604800000"),
        "PartitionRecord": PartitionRecord(3, tid, (1, 2, 3), (1, 2, 3), leader=1, leader_epoch=4),
    }
    for name, record in samples.items():
        data = encode_record(record)
        enc = rate(lambda r=record: encode_record(r), seconds)
        dec = rate(lambda d=data: decode_record(d), seconds)
        print(f"  {name:<24} {len(data):4d} B   encode {enc:>10,.0f}/CPU s   decode {dec:>10,.0f}/CPU s")


def bench_replay(n: int) -> None:
    rng = random.Random(1)
    topics = 50
    setup = list(setup_records(rng, topics))
    names = [(r.name, r.topic_id) for r in setup if isinstance(r, TopicRecord)]
    records = iter([*setup, *churn_records(rng, names, n - len(setup))])
    t0 = time.perf_counter()
    log = batches_of(records, 10)
    t1, c1 = time.perf_counter(), time.process_time()
    image = MetadataImage()
    image.apply_batches(log)
    t2, c2 = time.perf_counter(), time.process_time()
    total = image.last_offset + 1
    print(f"  built the log: {total:,} records in {len(log):,} batches ({t1 - t0:.1f} s to encode)")
    print(
        f"  replay (decode + validate + apply): {t2 - t1:.2f} s wall = {total / (t2 - t1):,.0f} records/s; "
        f"{c2 - c1:.2f} s CPU = {total / (c2 - c1):,.0f} records/s"
    )


def bench_snapshot(target: int) -> None:
    rng = random.Random(2)
    topics = max(1, target // (PARTITIONS_PER_TOPIC + 2))
    image = MetadataImage()
    image.apply_batches(batches_of(setup_records(rng, topics), 1000))
    count = image.record_count()
    t0, c0 = time.perf_counter(), time.process_time()
    data = snapshot_bytes(image)
    t1, c1 = time.perf_counter(), time.process_time()
    loaded = load_snapshot(data)
    t2, c2 = time.perf_counter(), time.process_time()
    assert loaded == image
    print(f"  image of {count:,} records: snapshot {len(data):,} bytes ({len(data) / count:.0f} B/record)")
    print(f"  write {t1 - t0:.2f} s wall / {c1 - c0:.2f} s CPU; load {t2 - t1:.2f} s wall / {c2 - c1:.2f} s CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the replayed log")
    parser.add_argument("--snapshot-records", type=int, default=100_000, help="records in the snapshotted image")
    parser.add_argument("--seconds", type=float, default=1.0, help="time per codec measurement")
    args = parser.parse_args()
    print("record codec:")
    bench_codec(args.seconds)
    print(f"image replay of {args.records:,} records:")
    bench_replay(args.records)
    print(f"snapshot of ~{args.snapshot_records:,} records:")
    bench_snapshot(args.snapshot_records)


if __name__ == "__main__":
    main()
