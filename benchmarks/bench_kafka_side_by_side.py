"""Apache Kafka 4.1.1 and the reference cluster side by side: committed config changes per second and
failover, same client (confluent-kafka), same machine, same run, same shape (3 controllers + 2
brokers, real processes on loopback, the same quorum and heartbeat timeouts: benchmarks/kafka_loopback.py).

    PYTHONPATH=$PWD python benchmarks/bench_kafka_side_by_side.py \
        [--seconds 10] [--in-flight 8] [--clients N] [--trials 5]

- throughput: IncrementalAlterConfigs SET of one topic config (a new value each time), `--in-flight`
  requests outstanding, spread over `--clients` AdminClients (default one per request: Writer says
  why) bootstrapped on the brokers (which forward to the active controller), for `--seconds`; a
  change counts when its future succeeds (the controller committed it). Latency p50/p99 of those.
- failover: kill -9 of the active controller (found by each system's own answer: DescribeQuorum for
  Kafka, /v1/status for the reference cluster), then `--in-flight` SETs kept outstanding (each with a
  5 s request timeout, a new one as soon as one fails) until the first succeeds: the time from the
  kill to that success. The killed controller is started again and the cluster is whole before the
  next trial.
The clusters run one after the other (never both at once), so neither takes CPU from the other; on a
shared machine both are slowed, which the ratios partly cancel. Kafka's JVMs run as the harness runs
them (harness/db/kafka: 256 MB heap, C1 only, the serial GC: sized for a shared 2-core machine),
which costs Kafka throughput a long-lived production JVM would have.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka.admin as ck

from benchmarks.kafka_loopback import Side, kafka_side, reference_side

TOPIC = "bench"
KEY = "retention.ms"
REQUEST_TIMEOUT_S = 5.0
FAILOVER_LIMIT_S = 60.0


@dataclass
class Result:
    name: str
    changes: int = 0
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    failovers: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.changes / self.seconds if self.seconds else 0.0


class Writer:
    """SETs of KEY on TOPIC, each with its own value, spread over `clients` AdminClients (each its own
    connections): a new SET goes to the client with the fewest outstanding. Kafka's broker reads one
    request of a connection at a time (it mutes the connection until it has answered), so requests
    pipelined on one client wait in line; one client per in-flight request measures the servers."""

    def __init__(self, bootstrap: str, clients: int) -> None:
        self.admins = [ck.AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}) for _ in range(clients)]
        self.outstanding = [0] * clients
        self.value = 1000

    def submit(self) -> Future:
        self.value += 1
        i = self.outstanding.index(min(self.outstanding))
        resource = ck.ConfigResource(ck.ResourceType.TOPIC, TOPIC)
        op = ck.AlterConfigOpType.SET
        resource.add_incremental_config(ck.ConfigEntry(KEY, str(self.value), incremental_operation=op))
        future = self.admins[i].incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource]
        self.outstanding[i] += 1
        future.add_done_callback(lambda _: self._done(i))
        return future

    def _done(self, i: int) -> None:
        self.outstanding[i] -= 1


def error_name(future: Future) -> str | None:
    exc = future.exception()
    if exc is None:
        return None
    first = exc.args[0] if exc.args else None
    return first.name() if hasattr(first, "name") else type(exc).__name__


def throughput(writer: Writer, in_flight: int, seconds: float, result: Result) -> None:
    started: dict[Future, float] = {}
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        while len(started) < in_flight:
            started[writer.submit()] = time.monotonic()
        done, _ = wait(list(started), timeout=REQUEST_TIMEOUT_S * 2, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for future in done:
            began = started.pop(future)
            problem = error_name(future)
            if problem is None and now <= end:
                result.changes += 1
                result.latencies.append(now - began)
            elif problem is not None:
                result.errors[problem] = result.errors.get(problem, 0) + 1
    result.seconds = min(time.monotonic(), end) - t0
    wait(list(started), timeout=REQUEST_TIMEOUT_S * 2)  # drain: nothing outstanding into the next part


def first_commit_after(writer: Writer, in_flight: int, since: float) -> float:
    """Seconds from `since` to the first SET that succeeds; SETs kept outstanding `in_flight` at a time."""
    outstanding: set[Future] = set()
    while time.monotonic() - since < FAILOVER_LIMIT_S:
        while len(outstanding) < in_flight:
            outstanding.add(writer.submit())
        done, outstanding = wait(outstanding, timeout=1.0, return_when=FIRST_COMPLETED)
        if any(error_name(f) is None for f in done):
            took = time.monotonic() - since
            wait(outstanding, timeout=REQUEST_TIMEOUT_S * 2)
            return took
        if done and all(error_name(f) is not None for f in done):
            time.sleep(0.02)  # a refusal answers at once: don't spin
    raise RuntimeError(f"no committed change within {FAILOVER_LIMIT_S:.0f} s of the kill")


def measure(side: Side, seconds: float, in_flight: int, clients: int, trials: int) -> Result:
    result = Result(side.name)
    writer = Writer(side.bootstrap, clients)
    writer.admins[0].create_topics([ck.NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)
    first_commit_after(writer, 1, time.monotonic())  # the topic is in every broker's image
    throughput(writer, in_flight, seconds, result)
    for _ in range(trials):
        leader = side.leader()
        assert leader is not None, f"{side.name}: no active controller"
        t0 = time.monotonic()
        side.kill(leader)
        result.failovers.append(first_commit_after(writer, in_flight, t0))
        side.restart(leader)
    return result


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(results: list[Result], in_flight: int, clients: int) -> str:
    lines = [
        f"in-flight {in_flight} over {clients} client(s); config changes per second (committed SETs), "
        "latency, failover (kill -9 of the active controller -> first committed change)",
        f"{'system':10} {'changes/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'failover median s':>18} "
        f"{'min s':>6} {'max s':>6}  trials  errors",
    ]
    for r in results:
        errors = ",".join(f"{k}:{v}" for k, v in sorted(r.errors.items())) or "-"
        lines.append(
            f"{r.name:10} {r.rate:10.1f} {quantile(r.latencies, 0.5) * 1000:8.1f} "
            f"{quantile(r.latencies, 0.99) * 1000:8.1f} {statistics.median(r.failovers):18.2f} "
            f"{min(r.failovers):6.2f} {max(r.failovers):6.2f}  {len(r.failovers):6}  {errors}"
        )
    by = {r.name: r for r in results}
    if {"kafka", "reference"} <= set(by):
        k, ref = by["kafka"], by["reference"]
        lines.append(
            f"reference / kafka: changes/s x{ref.rate / k.rate:.2f}, "
            f"p50 latency x{quantile(ref.latencies, 0.5) / quantile(k.latencies, 0.5):.2f}, "
            f"failover median x{statistics.median(ref.failovers) / statistics.median(k.failovers):.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the throughput part (each system)")
    parser.add_argument("--in-flight", type=int, default=8, help="SETs outstanding at once")
    parser.add_argument(
        "--clients", type=int, help="AdminClients the in-flight SETs are spread over (default: one per SET)"
    )
    parser.add_argument("--trials", type=int, default=5, help="failover trials per system")
    parser.add_argument("--dir", type=Path, help="where the clusters' logs go (default: a temporary dir)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.in_flight < 1 or args.trials < 1:
        parser.error("--seconds, --in-flight and --trials must be positive")
    clients = args.clients or args.in_flight
    base = args.dir or Path(tempfile.mkdtemp(prefix="kafka-side-by-side-"))
    results = []
    for start in (
        lambda: kafka_side(base / "kafka", acls=False, split=True),
        lambda: reference_side(base / "reference", acls=False),
    ):
        with start() as side:
            try:
                results.append(measure(side, args.seconds, args.in_flight, clients, args.trials))
            except Exception:
                print(side.logs(), file=sys.stderr)
                raise
            print(report(results[-1:], args.in_flight, clients), flush=True)
    print(report(results, args.in_flight, clients))
    return 0


if __name__ == "__main__":
    sys.exit(main())
