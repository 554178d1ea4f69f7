"""`--sut kafka` pieces that need no cluster: the set-up (jars, doctor row), where it may run, the
workload variant, the client's error mapping, and the prefix-reads checker (both verdicts)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from checkers.prefix_reads import check_prefix_reads
from harness.db.kafka import dist
from harness.db.kafka.db import KafkaDB, cluster_id
from harness.plugins import get_workload
from harness.test_spec import load_test
from tests.kafka.histories import paired
from vocab.db import DBError
from vocab.errors import UserError
from workloads.kafka_admin import failure

# --- set-up ------------------------------------------------------------------------------------------


def test_setup_fetched_the_pinned_jars_and_doctor_says_so():
    jars = dist.installed_jars()
    names = {j.name for j in jars}
    assert dist.SERVER_JAR in names and f"kafka-clients-{dist.KAFKA_VERSION}.jar" in names
    assert any(n.startswith("log4j-slf4j-impl-") for n in names)  # without a binding Kafka logs nothing
    row = dist.probe()
    assert row.startswith(f"Kafka {dist.KAFKA_VERSION}: {len(jars)} jars") and "; Java " in row


def test_doctor_has_a_kafka_row(capsys):
    from harness.doctor_cli import _kafka_probe

    assert "--sut kafka runs on netns, docker, ssh, not on sim" in _kafka_probe()


def test_an_incomplete_fetch_does_not_count(tmp_path):
    (tmp_path / dist.SERVER_JAR).write_bytes(b"jar")
    assert dist.installed_jars(tmp_path) == []  # no manifest: a fetch that was interrupted
    (tmp_path / dist.MANIFEST).write_text(f"{dist.SERVER_JAR}\nkafka-clients-x.jar\n")
    assert dist.installed_jars(tmp_path) == []  # a listed jar is missing
    (tmp_path / "kafka-clients-x.jar").write_bytes(b"jar")
    assert len(dist.installed_jars(tmp_path)) == 2
    with pytest.raises(dist.KafkaDistError, match="are not in"):
        dist.classpath(tmp_path / "elsewhere")


# --- where it runs, what it runs -----------------------------------------------------------------------


def test_kafka_is_refused_on_sim_and_for_unreached_faults_with_the_reason():
    with pytest.raises(UserError, match="kafka is not available on the sim backend"):
        load_test(None, {"sut": "kafka", "backend": "sim"})
    with pytest.raises(UserError, match="lose_unsynced faults cannot be done to kafka nodes: Kafka memory-maps"):
        load_test(None, {"sut": "kafka", "backend": "netns", "nemesis": "kill,lose_unsynced"})
    # measured: the JVM honours the clock and disk shims, so these run
    load_test(None, {"sut": "kafka", "backend": "netns", "nemesis": "packet,clock,disk_stall,disk_fail"})
    with pytest.raises(UserError, match="that workload runs on etcd, not on kafka"):
        load_test(None, {"sut": "kafka", "backend": "netns", "workload": "register"})


def _inventory(tmp_path: Path, vms: tuple[bool, ...], clocks: tuple[str, ...] = ()) -> str:
    hosts = "".join(
        f'[[hosts]]\nname = "h{i}"\naddress = "10.0.0.{i}"\n'
        + (f'vm = "{tmp_path}"\n' if vm else "")
        + (f'clock = "{clocks[i - 1]}"\n' if clocks else "")
        for i, vm in enumerate(vms, 1)
    )
    path, key = tmp_path / "inventory.toml", tmp_path / "id_ed25519"
    key.write_text("a key\n")
    path.write_text(f'[defaults]\nuser = "root"\nkey = "{key}"\nroot = "/root/kchaos"\n\n{hosts}')
    return str(path)


def test_lose_unsynced_is_a_power_loss_on_vms_and_so_reaches_kafka_and_etcd_there(tmp_path):
    """On hosts that are VMs of `kchaos vagrant up`, lose_unsynced is the whole guest's power loss: no FUSE
    mount, so Kafka's memory-mapped files and etcd's bbolt are no obstacle. One host that is not a VM
    and the refusal stands."""
    vms = _inventory(tmp_path, (True, True, True))
    for sut, workload in (("kafka", "config-register"), ("etcd", "register")):
        spec = load_test(
            None, {"sut": sut, "workload": workload, "backend": "ssh", "inventory": vms, "nemesis": "lose_unsynced"}
        )
        assert spec.nemesis == ("lose_unsynced",)
    mixed = _inventory(tmp_path, (True, False, True))
    with pytest.raises(UserError, match="lose_unsynced faults cannot be done to kafka nodes"):
        load_test(None, {"sut": "kafka", "backend": "ssh", "inventory": mixed, "nemesis": "kill,lose_unsynced"})
    with pytest.raises(UserError, match="corrupt faults cannot be done to kafka nodes"):  # a VM changes nothing here
        load_test(None, {"sut": "kafka", "backend": "ssh", "inventory": vms, "nemesis": "corrupt"})


class HostWithoutJava:
    """Around the adapter only: a remote-host backend (it has `ship_files`) whose hosts answer `java
    -version` as told. The real hosts are in tests/harness_ssh/test_ssh_run.py."""

    def __init__(self, code: int, output: str) -> None:
        self.code, self.output, self.shipped = code, output, 0

    def exec(self, node: str, argv: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, self.code, "", self.output)

    def ship_files(self, node: str, files: list[Path], name: str) -> str:
        self.shipped += 1
        return f"/opt/{name}"

    def address(self, node: str) -> str:
        return "192.0.2.1"

    def data_dir(self, node: str) -> str:
        return f"/hosts/{node}/data"


@pytest.mark.parametrize(
    ("code", "output", "says"),
    [
        (127, "sh: 1: exec: java: not found", "java on the host of n1: not found (--sut kafka over ssh needs Java 17+"),
        (0, 'openjdk version "11.0.21" 2023-10-17', "java on the host of n1 is Java 11; Kafka 4.1.1 needs Java 17+"),
    ],
)
def test_a_host_without_java_17_stops_the_install_in_one_line_before_anything_is_shipped(tmp_path, code, output, says):
    backend = HostWithoutJava(code, output)
    db = KafkaDB(["n1", "n2", "n3"], cluster_id())
    with pytest.raises(DBError) as caught:
        db.install(backend, tmp_path)  # type: ignore[arg-type]
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value), caught.value
    assert backend.shipped == 0 and not (tmp_path / "nodes").exists()


def test_config_register_has_a_kafka_variant_with_kafkas_checkers():
    kafka = get_workload("config-register", "kafka")
    ours = get_workload("config-register", "kraft")
    assert kafka is not ours and get_workload("config-register") is ours
    assert kafka.checkers == ("prefix-reads", "committed-loss") and "linearizable" in ours.checkers


@pytest.mark.parametrize("name", ["registrations", "isr-changes"])
def test_the_broker_workloads_have_kafka_variants_that_only_observe(name):
    kafka, ours = get_workload(name, "kafka"), get_workload(name, "kraft")
    assert kafka is not ours and get_workload(name) is ours  # the reference cluster's keeps the name
    assert kafka.checkers == ("metadata-answers",) and "registrations" in ours.checkers
    # no write on Kafka: liveness is a Metadata answer after the final heal
    assert kafka.checker_options["availability"]["write_f"] == ["kafka-metadata", "kafka-describe-cluster"]
    assert kafka.checker_options["metadata-answers"] == {"elr": True}  # Kafka 4.1's new clusters run KIP-966
    load_test(None, {"sut": "kafka", "backend": "netns", "workload": name, "nemesis": "partition,kill,pause"})


def test_cluster_shapes_and_ids():
    combined = KafkaDB(["n1", "n2", "n3"], cluster_id())
    assert combined.controllers == combined.brokers == ["n1", "n2", "n3"]
    split = KafkaDB(["c1", "c2", "c3", "b1", "b2"], cluster_id())
    assert split.controllers == ["c1", "c2", "c3"] and split.brokers == ["b1", "b2"]
    assert split.node_id("b1") == 4 and split.node_of(4) == "b1" and split.node_of(9) is None
    assert len(cluster_id()) == 22 and cluster_id() != cluster_id()


def test_no_cluster_id_starts_with_a_dash_that_kafka_storage_would_take_for_an_option():
    # One plain base64url id in 64 starts with "-": 2,000 draws meet one but for a chance of ~1e-14.
    ids = [cluster_id() for _ in range(2000)]
    assert not [cid for cid in ids if cid.startswith("-")]
    assert any("-" in cid for cid in ids) and all(len(cid) == 22 for cid in ids)  # still Kafka's alphabet


# --- the client's error mapping ------------------------------------------------------------------------


def _exc(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


@pytest.mark.parametrize(
    ("code", "write_type"),
    [
        (KafkaError.INVALID_CONFIG, "fail"),  # the server refused it
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "fail"),
        (KafkaError.NOT_CONTROLLER, "info"),  # librdkafka may have retried behind it
        (KafkaError.REQUEST_TIMED_OUT, "info"),  # a forwarding broker lost track of it
        (KafkaError.UNKNOWN, "info"),  # UNKNOWN_SERVER_ERROR
        (KafkaError._TIMED_OUT, "info"),  # librdkafka gave up waiting: it may have been sent
        (KafkaError._TRANSPORT, "info"),
    ],
)
def test_a_write_fails_only_when_it_certainly_did_not_happen(code, write_type):
    assert failure(_exc(code), "n1", read=False).type == write_type
    assert failure(_exc(code), "n1", read=True).type == "fail"  # a read changes nothing


# --- the prefix-reads checker --------------------------------------------------------------------------


def _history(ops: list[tuple[Any, ...]]) -> Any:
    """(process, f, value, start ms, end ms, type, node) -> a paired history on key "k"."""
    events: list[dict[str, Any]] = []
    for process, f, value, start, end, kind, node in ops:
        invoke = value if f == "write" else None
        events.append(
            {"time": start * 10**6, "process": process, "type": "invoke", "f": f, "value": invoke, "key": "k"}
        )
        done = None if f == "write" else value
        events.append(
            {"time": end * 10**6, "process": process, "type": kind, "f": f, "value": done, "key": "k", "node": node}
        )
    return paired(events)


def test_stale_but_ordered_reads_are_valid_and_the_window_is_measured():
    h = _history(
        [
            (0, "write", 1, 0, 10, "ok", "n1"),
            (0, "write", 2, 20, 30, "ok", "n2"),
            (1, "read", 1, 40, 41, "ok", "n3"),  # stale: 2 was acknowledged at 30 ms
            (1, "read", 2, 50, 51, "ok", "n3"),
            (2, "read", None, 5, 6, "ok", "n1"),
        ]
    )
    v = check_prefix_reads(h)
    assert v.valid is True
    assert v.details["stale_reads"] == 1 and v.details["stale_window"]["max_ms"] == 10.0
    assert v.details["by_node"]["n3"]["stale_window"]["count"] == 1


def test_a_node_going_back_or_nodes_disagreeing_on_the_order_is_invalid():
    back = _history(
        [
            (0, "write", 1, 0, 10, "ok", "n1"),
            (0, "write", 2, 20, 30, "ok", "n1"),
            (1, "read", 2, 40, 41, "ok", "n3"),
            (1, "read", 1, 50, 51, "ok", "n3"),  # n3 showed 2, then 1: written before 2 began
        ]
    )
    v = check_prefix_reads(back)
    assert v.valid is False and v.details["anomaly_types"] == ["order-cycle"]
    concurrent = _history(
        [
            (0, "write", 1, 0, 30, "ok", "n1"),
            (1, "write", 2, 0, 30, "ok", "n1"),  # concurrent: either order is fine, but one for all
            (2, "read", 1, 40, 41, "ok", "n2"),
            (2, "read", 2, 50, 51, "ok", "n2"),
            (3, "read", 2, 40, 41, "ok", "n3"),
            (3, "read", 1, 50, 51, "ok", "n3"),
        ]
    )
    assert check_prefix_reads(concurrent).details["anomaly_types"] == ["order-cycle"]
    seen_first = _history(
        [
            (0, "write", 1, 0, 100, "info", None),  # never acknowledged: only a read orders it
            (1, "read", 1, 20, 21, "ok", "n2"),  # 1 was committed by 21 ms, so before a write begun at 30
            (2, "write", 2, 30, 40, "ok", "n1"),
            (3, "read", 2, 50, 51, "ok", "n3"),
            (3, "read", 1, 60, 61, "ok", "n3"),
        ]
    )
    assert check_prefix_reads(seen_first).details["anomaly_types"] == ["order-cycle"]
    reset = _history(
        [(0, "write", 1, 0, 10, "ok", "n1"), (1, "read", 1, 20, 21, "ok", "n2"), (1, "read", None, 30, 31, "ok", "n2")]
    )
    assert check_prefix_reads(reset).details["anomaly_types"] == ["went-back"]


def test_values_nobody_wrote_or_only_a_failed_write_wrote_are_invalid():
    h = _history(
        [
            (0, "write", 1, 0, 10, "fail", "n1"),
            (1, "read", 1, 20, 21, "ok", "n2"),
            (1, "read", 7, 30, 31, "ok", "n2"),
        ]
    )
    assert check_prefix_reads(h).details["anomaly_types"] == ["failed-read", "unexpected"]
    assert check_prefix_reads(_history([(0, "write", 1, 0, 10, "ok", "n1")])).valid == "unknown"


def test_the_class_data_sharing_archive_is_made_from_a_serving_node(tmp_path):
    """setup.sh makes the archive once per machine; a cached archive hid a broken import in this path."""
    for jar in dist.installed_jars():
        (tmp_path / jar.name).symlink_to(jar)
    (tmp_path / dist.MANIFEST).write_text("\n".join(j.name for j in dist.installed_jars()) + "\n", encoding="utf-8")
    archive, took = dist.make_archive(tmp_path)
    assert archive == dist.archive_path(tmp_path) and took is not None
    assert archive.stat().st_size > 10_000_000  # Kafka's loaded classes, not an empty file
    assert dist.make_archive(tmp_path) == (archive, None)  # made once, then cached


def test_a_container_gets_the_jdk_directory_and_the_etc_files_it_links_to():
    """The docker backend mounts these read-only: the real JDK (not /usr/bin/java's link) and Debian's
    /etc/java-* where conf/ points, so `java` runs in an image that has no JDK."""
    java, _ = dist.java_version()
    mounts = dist.java_mounts(java)
    home = Path(java).resolve().parents[1]
    assert home in mounts and (home / "bin" / "java").is_file()
    for link in (p for p in home.rglob("*") if p.is_symlink() and p.resolve().is_relative_to("/etc")):
        assert any(link.resolve().is_relative_to(m) for m in mounts), link
    assert not any(a != b and a.is_relative_to(b) for a in mounts for b in mounts)  # outermost only


def test_a_clock_fault_reaches_etcd_only_where_it_steps_the_hosts_own_clock(tmp_path):
    """etcd (Go) reads the clock without libc, so libfaketime misses it and clock faults are refused; on
    hosts with `clock = "guest"` (the VMs of `kchaos vagrant up`) the fault steps the host's kernel clock,
    which every program reads. One host with the shim and the refusal stands."""
    guest = _inventory(tmp_path, (True, True, True), ("guest", "guest", "guest"))
    spec = load_test(
        None, {"sut": "etcd", "workload": "register", "backend": "ssh", "inventory": guest, "nemesis": "clock"}
    )
    assert spec.nemesis == ("clock",)
    mixed = _inventory(tmp_path, (True, True, True), ("guest", "libfaketime", "guest"))
    with pytest.raises(UserError, match="clock faults cannot be done to etcd nodes"):
        load_test(
            None, {"sut": "etcd", "workload": "register", "backend": "ssh", "inventory": mixed, "nemesis": "clock"}
        )
    with pytest.raises(UserError, match="disk_stall faults cannot be done to etcd nodes"):  # still the shim's
        load_test(
            None, {"sut": "etcd", "workload": "register", "backend": "ssh", "inventory": guest, "nemesis": "disk_stall"}
        )
