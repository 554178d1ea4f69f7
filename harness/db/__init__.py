"""The system-under-test adapters the harness knows (`SUTS`), what each runs on and what it checks.

Each adapter implements `vocab.db.DB`; the runner only speaks that protocol, so another system (etcd,
ZooKeeper, a Kafka build) plugs in as another adapter registered here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from checkers.registry import CHECKERS
from vocab.db import DB, DBError

# name -> factory(test spec) -> DB
SUTS: dict[str, Callable[[Any], DB]] = {}


def _kraft(spec: Any) -> DB:
    from harness.db.kraft import KraftDB
    from node.runtime.server_config import PRE_VOTE_KEY

    settings = {} if getattr(spec, "pre_vote", True) else {PRE_VOTE_KEY: "false"}
    settings.update(getattr(spec, "sut_settings", {}))
    return KraftDB(spec.cluster, settings, bugs=getattr(spec, "bugs", ()))


def _etcd(spec: Any) -> DB:
    import secrets

    from harness.db.etcd import EtcdDB

    problem = sut_problem("etcd", spec.backend, brokers=spec.cluster.brokers)
    if problem:
        raise DBError(problem)
    return EtcdDB(spec.nodes, token=f"kchaos-{secrets.token_hex(4)}", settings=getattr(spec, "sut_settings", {}))


def _kafka(spec: Any) -> DB:
    from harness.db.kafka.db import KafkaDB, cluster_id

    problem = sut_problem("kafka", spec.backend)
    if problem:
        raise DBError(problem)
    return KafkaDB(spec.nodes, cluster_id(), getattr(spec, "sut_settings", {}))


SUTS["kraft"] = _kraft
SUTS["etcd"] = _etcd
SUTS["kafka"] = _kafka

# name -> the backends its adapter runs on (etcd is a real program: the simulator runs only our node core)
SUT_BACKENDS: dict[str, tuple[str, ...]] = {
    "kraft": ("sim", "netns", "docker", "ssh"),
    "etcd": ("netns", "docker", "ssh"),
    "kafka": ("netns", "docker", "ssh"),
}

# name -> the end-of-run checks its adapter brings, each with the node dump file that shows a run has
# what it needs (they need the system's own code, so they live beside the adapter and are registered
# here as checkers: `kchaos check`, `kchaos analyze`, results.json)
SUT_CHECKS: dict[str, dict[str, str]] = {
    "kraft": {
        "image-replay": "metadata-snapshot.json",
        "at-most-once": "committed-log.jsonl",
        "elections": "committed-log.jsonl",  # LeaderChange records: a measure the gate puts thresholds on
    }
}
CHECKERS.setdefault("image-replay", "harness.db.kraft_checks:check_from_args")
CHECKERS.setdefault("at-most-once", "harness.db.kraft_at_most_once:check_from_args")


# name -> fault kinds that cannot be done to its nodes: refused before a run, so that no verdict claims
# a fault it never had. etcd is Go: it reads the clock and does file I/O without libc, so the clock and
# disk preload shims miss it (measured: under libfaketime at -3 days it logs the true time); its bbolt
# database cannot mmap a file on the lazyfs FUSE mount (measured: "failed to open database ... no
# such device"), so no lose_unsynced; and the adapter knows no etcd file format to corrupt.
# Kafka (measured with the JVM of `--sut kafka`, docs/concepts/suts.md): the JVM reads the clock and
# fsyncs through libc, so the clock shim (a +1 h skew reached System.currentTimeMillis and Instant.now,
# sleeps stayed real) and the disk shim (FileChannel.force failed with EIO on demand) reach it; but its
# index files are memory-mapped, and the lazyfs FUSE mount refuses mmap ("No such device"), so no
# lose_unsynced; and the adapter knows no Kafka file format to corrupt.
SUT_UNREACHED_FAULTS: dict[str, frozenset[str]] = {
    "etcd": frozenset({"clock", "disk_stall", "disk_fail", "lose_unsynced", "corrupt"}),
    "kafka": frozenset({"lose_unsynced", "corrupt"}),
}
# (sut, kind) -> the one-line reason of a refusal, where the measurement says more than "unreached"
SUT_FAULT_REASONS: dict[tuple[str, str], str] = {
    ("kafka", "lose_unsynced"): "Kafka memory-maps its index files and the lazyfs mount (direct_io) refuses mmap",
    ("kafka", "corrupt"): "the adapter knows no Kafka file format to corrupt",
}


# On hosts that are VMs of `kchaos vagrant up`, lose_unsynced is a power loss of the whole guest (its
# qemu SIGKILLed, then a boot from its disk: vm_faults.py). No FUSE mount is involved, so it reaches any
# system, memory-mapped files included (measured on Kafka and etcd: docs/concepts/suts.md).
VM_POWER_LOSS = "lose_unsynced"
# On hosts whose clock faults step the host's own kernel clock (`clock = "guest"`, as `kchaos vagrant
# up` writes for its VMs: remote_faults.py), no shim is involved, so a clock fault reaches any program,
# Go's included (measured on etcd: docs/concepts/suts.md).
GUEST_CLOCK = "clock"


def sut_problem(
    sut: str,
    backend: str,
    workload_suts: Sequence[str] | None = None,
    brokers: int = 0,
    faults: Sequence[str] = (),
    vm_hosts: bool = False,
    guest_clocks: bool = False,
) -> str | None:
    """Why `sut` cannot run on `backend`, with a workload written for `workload_suts`, with broker-only
    nodes or with these fault kinds; None when it can. `vm_hosts`: every host is a VM (VM_POWER_LOSS);
    `guest_clocks`: every host's clock faults step its own kernel clock (GUEST_CLOCK)."""
    backends = SUT_BACKENDS.get(sut)
    if backends is not None and backend not in backends:
        return f"{sut} is not available on the {backend} backend (it runs on {', '.join(backends)})"
    reached_anyway = ({VM_POWER_LOSS} if vm_hosts else set()) | ({GUEST_CLOCK} if guest_clocks else set())
    refused = SUT_UNREACHED_FAULTS.get(sut, frozenset()) - reached_anyway
    unreached = [kind for kind in faults if kind in refused]
    if unreached:
        reasons = "; ".join(dict.fromkeys(r for k in unreached if (r := SUT_FAULT_REASONS.get((sut, k)))))
        why = f": {reasons}" if reasons else ""
        return f"{', '.join(unreached)} faults cannot be done to {sut} nodes{why} (see docs/concepts/suts.md)"
    if workload_suts is not None and sut not in workload_suts:
        return f"that workload runs on {', '.join(workload_suts)}, not on {sut}"
    if sut == "etcd" and brokers:
        return "etcd has no brokers: every member votes (use --nodes N, e.g. --nodes 3)"
    return None


def sut_settings_problem(sut: str, backend: str, settings: Mapping[str, str]) -> str | None:
    """Why these node settings (`--sut-setting`) cannot be used, or None. The reference cluster's are
    checked here by its own config readers (on the simulator, each must also map to a simulated
    config field: harness/db/kraft_settings.py); Kafka's are checked by Kafka (its `kafka-storage format`
    reads them before any node starts) and etcd's by etcd (a member that refuses a flag exits, and the
    wait for the cluster quotes it)."""
    if not settings or sut != "kraft":
        return None
    from harness.db.kraft_settings import settings_problem

    return settings_problem(settings, backend)


def make_db(name: str, spec: Any) -> DB:
    try:
        return SUTS[name](spec)
    except KeyError:
        raise DBError(f"unknown system under test {name!r} (known: {', '.join(sorted(SUTS))})") from None
