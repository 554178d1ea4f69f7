"""lazyfs under the netns backend: data dirs are mounts, lose_unsynced forgets what a node had not synced,
a 3-voter cluster keeps every acknowledged write when all voters lose power at once (and a cluster whose
storage acknowledges before fsyncing does not), and nothing is left behind, even after SIGKILL."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.backends.ledger import heal
from harness.backends.netns import NetnsBackend
from harness.backends.resources import link_names, netns_names
from harness.db.kraft import KraftDB
from harness.test_spec import Cluster
from node.client import AlterConfigOp, ConfigResource, NewTopic, SyncAdminClient
from node.client.errors import KafkaError
from tests.harness_netns.conftest import heal_if_left, marked_pids, new_marker
from tests.lazyfs.conftest import fuse_mounts, needs_root
from vocab.faults.kinds import DiskFault, FaultNotSupported

pytestmark = [pytest.mark.root, needs_root]
HERE = Path(__file__).parent
REPO = HERE.parent.parent
BUGGY_NODE = str(HERE / "acks_without_fsync_node.py")
TOPICS = [f"t{i}" for i in range(4)]
WRITES_PER_TOPIC = 6
# Fast failure detection so the restarted quorum elects a leader quickly.
SETTINGS = {"quorum.election.timeout.ms": "1000", "quorum.fetch.timeout.ms": "2000"}


def leftovers(backend: NetnsBackend) -> dict[str, list[str]]:
    """What this backend's run could have left on the host (its own names only: other runs share it)."""
    return {
        "netns": sorted(n for n in netns_names() if n.startswith(backend.bridge)),
        "links": sorted(n for n in link_names() if n.startswith(backend.bridge)),
        "mounts": fuse_mounts(backend.run_dir),
        "daemons": [str(p) for p in daemons_alive(backend)],
    }


NOTHING = {"netns": [], "links": [], "mounts": [], "daemons": []}


def daemons_alive(backend: NetnsBackend) -> list[int]:
    return [m.popen.pid for m in backend.lazyfs.mounts.values() if m.popen.poll() is None]


def test_lose_unsynced_kills_the_node_and_forgets_its_unsynced_writes(tmp_path):
    backend = NetnsBackend(tmp_path, ["n1", "n2"])
    try:
        backend.setup()
        with pytest.raises(FaultNotSupported):
            backend.lose_unsynced("n1")  # not enabled: the data dirs are plain directories
        backend.enable_faults(["lose_unsynced"])
        assert "lose_unsynced" in backend.faults
        data = Path(backend.data_dir("n1"))
        assert data == tmp_path / "nodes" / "n1" / "data" and fuse_mounts(tmp_path) == sorted(
            str(tmp_path / "nodes" / n / "data") for n in ("n1", "n2")
        )
        script = (
            "import os, sys, time\n"
            "d = sys.argv[1]\n"
            "fd = os.open(d + '/synced', os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b'kept'); os.fsync(fd)\n"
            "dfd = os.open(d, os.O_RDONLY); os.fsync(dfd)\n"
            "os.write(fd, b'+lost')\n"
            "open(d + '/unsynced', 'wb').write(b'gone')\n"
            "print('ready', flush=True); time.sleep(600)\n"
        )
        backend.start("n1", [sys.executable, "-c", script, str(data)])
        deadline = time.monotonic() + 60
        while not (data / "unsynced").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (data / "synced").read_bytes() == b"kept+lost"  # the node is running (nothing lost by reading)
        backend.lose_unsynced("n1")
        assert not backend.is_alive("n1")
        assert (data / "synced").read_bytes() == b"kept"
        assert not (data / "unsynced").exists()
        assert backend.lazyfs.last_loss["n1"]["vanished"] == ["/unsynced"]

        # torn writes: the same loss keeps a seeded prefix of the un-synced tail
        backend.lazyfs.tear_writes(seed=1)
        tail = b"t" * 4000
        backend.start("n1", [sys.executable, "-c", script.replace("b'+lost'", repr(tail)), str(data)])
        while not (data / "unsynced").exists() and time.monotonic() < deadline + 60:
            time.sleep(0.05)
        backend.lose_unsynced("n1")
        torn = (data / "synced").read_bytes()
        assert torn.startswith(b"kept") and tail.startswith(torn[4:])
        assert 0 < len(torn) - 4 < len(tail)  # seed 1 keeps part of the tail (the same part every time)
        assert not (data / "unsynced").exists()  # its name was never durable, whatever its data
        daemons = daemons_alive(backend)
        assert len(daemons) == 2
    finally:
        backend.teardown()
        heal_if_left(tmp_path)
    assert leftovers(backend) == NOTHING
    assert (tmp_path / "nodes" / "n1" / "lazyfs" / "disk" / "synced").read_bytes() == torn  # the files stay


def _write_configs(admin: SyncAdminClient) -> dict[str, str]:
    """Sequential acknowledged config writes; returns the last acknowledged value per topic."""
    acked = {}
    for i in range(WRITES_PER_TOPIC):
        for topic in TOPICS:
            value = str(1000 + i)
            admin.incremental_alter_config(ConfigResource.topic(topic), [AlterConfigOp.set("retention.ms", value)])
            acked[topic] = value
    return acked


def _read_configs(admin: SyncAdminClient) -> dict[str, str | None]:
    described = admin.describe_configs(
        [ConfigResource.topic(t) for t in TOPICS], keys=["retention.ms"], linearizable=True
    )
    return {r.name: described.resources[r].values().get("retention.ms") for r in described.resources}


def _read_from_quorum(quorum: list[str], deadline_s: float, login: dict[str, str]) -> dict[str, str | None]:
    """Read once the restarted quorum has an active controller again (retrying until then)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with SyncAdminClient(quorum, request_timeout_ms=10_000, **login) as admin:
                return _read_configs(admin)
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _power_loss_cluster(tmp_path: Path, argv_prefix: list[str] | None) -> tuple[dict, dict, dict]:
    """3 controllers + 1 broker on lazyfs; acknowledged writes; every voter loses power at once; restart.
    Returns (acknowledged, read back, what each voter's power loss forgot)."""
    db = KraftDB(Cluster(controllers=3, brokers=1), SETTINGS)
    backend = NetnsBackend(tmp_path, list(db.nodes))
    try:
        backend.setup()
        backend.enable_faults(["lose_unsynced"])
        db.install(backend, tmp_path)
        if argv_prefix is not None:  # the same nodes, started by the buggy wrapper instead
            for node in db.nodes:
                backend.kill(node)
                config = tmp_path / "nodes" / node / "server.properties"
                argv = [*argv_prefix, "node", "start", "--config", str(config)]
                backend.start(node, argv, env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=REPO)
        db.wait_ready(180)
        bootstrap = [db.broker_address(b) for b in db.brokers]
        quorum = [db.controller_address(c) for c in db.controllers]  # linearizable reads ask the active controller
        with SyncAdminClient(bootstrap, request_timeout_ms=30_000, **db.login()) as admin:
            admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS])
            acked = _write_configs(admin)
        with SyncAdminClient(quorum, request_timeout_ms=30_000, **db.login()) as admin:
            assert _read_configs(admin) == acked
        with ThreadPoolExecutor(len(db.controllers)) as pool:  # all voters at once
            list(pool.map(backend.lose_unsynced, db.controllers))
        losses = dict(backend.lazyfs.last_loss)
        for node in db.controllers:
            backend.restart(node)
        if argv_prefix is None:
            db.wait_ready(180)  # the whole cluster recovers
        # (with the planted bug the broker holds metadata the quorum forgot, so only the quorum is asked)
        read = _read_from_quorum(quorum, login=db.login(), deadline_s=180)
    finally:
        db.teardown()
        backend.teardown()
        heal_if_left(tmp_path)
    assert leftovers(backend) == NOTHING
    return acked, read, losses


def test_a_quorum_keeps_every_acknowledged_write_when_every_voter_loses_power(tmp_path):
    acked, read, losses = _power_loss_cluster(tmp_path, None)
    assert set(losses) == {"c1", "c2", "c3"}
    assert any(loss["lost_bytes"] for loss in losses.values())  # the power loss did forget something
    assert read == acked


def test_a_quorum_that_acknowledges_before_fsync_loses_acknowledged_writes(tmp_path):
    acked, read, _ = _power_loss_cluster(tmp_path, [sys.executable, BUGGY_NODE])
    assert read != acked  # the writes were acknowledged, then forgotten by every voter


def start_driver(run_dir: Path, marker: str) -> tuple[subprocess.Popen[str], dict]:
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "driver.py"), str(run_dir), marker], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert driver.stdout is not None
    line = driver.stdout.readline()
    assert line, f"driver exited with {driver.wait()} before it was ready"
    return driver, json.loads(line)


def test_a_sigkilled_harness_leaves_mounts_and_daemons_that_heal_removes(tmp_path):
    run_dir = tmp_path / "run"
    marker = new_marker()
    driver, info = start_driver(run_dir, marker)
    try:
        driver.kill()
        driver.wait()
        assert fuse_mounts(tmp_path) == sorted(info["mounts"].values())  # still mounted, still served
        for mount in info["mounts"].values():
            assert (Path(mount) / "held").read_bytes() == b"x"
        assert all(os.path.exists(f"/proc/{pid}") for pid in info["daemons"].values())
        report = heal(run_dir / "ledger.jsonl")
        assert report.ok, report.failed
        assert sum("mount" in r for r in report.removed) == 2
    finally:
        heal_if_left(run_dir)
    assert fuse_mounts(tmp_path) == []
    assert not marked_pids(marker)
    for pid in info["daemons"].values():
        assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    assert not [n for n in netns_names() if n.startswith(info["bridge"])]
    assert info["bridge"] not in link_names()
    for node in info["mounts"]:
        assert (run_dir / "nodes" / node / "lazyfs" / "disk" / "held").read_bytes() == b"x"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_harness_unmounts_and_stops_its_daemons(tmp_path, sig):
    run_dir = tmp_path / "run"
    marker = new_marker()
    driver, info = start_driver(run_dir, marker)
    try:
        driver.send_signal(sig)
        assert driver.wait(timeout=60) != 0
        left = fuse_mounts(tmp_path)
    finally:
        driver.kill()
        driver.wait()
        heal_if_left(run_dir)
    assert left == []
    assert not marked_pids(marker)
    for pid in info["daemons"].values():
        assert not os.path.exists(f"/proc/{pid}")


def test_a_whole_run_with_lazyfs_data_dirs_under_partitions_and_kills_is_valid_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """The runner's path (enable_faults before the cluster starts, data dirs from the backend, collect,
    teardown) with lazyfs under every node; kill -9 without a power loss loses nothing, so the run is valid."""
    from harness.runner import run_test
    from tests.harness_run.helpers import sim_spec

    enable = NetnsBackend.enable_faults
    monkeypatch.setattr(NetnsBackend, "enable_faults", lambda self, kinds: enable(self, [*kinds, "lose_unsynced"]))
    spec = sim_spec(
        seed=5,
        backend="netns",
        cluster=Cluster(controllers=3, brokers=1),
        time_limit_s=15.0,
        nemesis_interval_s=2.0,
        nemesis_duration_s=3.0,
        concurrency=4,
        rate=20.0,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False)
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    assert result.error is None, result.error
    assert result.valid is True, result.checker_lines
    run_dir = result.run.path
    for node in ("c1", "c2", "c3", "b1"):
        state = run_dir / "nodes" / node / "lazyfs"
        assert list((state / "disk" / "__cluster_metadata-0").glob("*.log")), node  # the data went through lazyfs
        assert "unmounted" in (state / "daemon.log").read_text()
        assert (run_dir / "nodes" / node / "committed-log.jsonl").is_file()
    assert fuse_mounts(tmp_path) == []


def test_lose_unsynced_composes_with_disk_faults_a_failed_fsync_made_nothing_durable(tmp_path):
    backend = NetnsBackend(tmp_path, ["n1"])
    try:
        backend.setup()
        backend.enable_faults(["lose_unsynced", "disk_fail"])
        backend.disk("n1", DiskFault("fail", ops=("fsync",), errno="EIO"))
        data = Path(backend.data_dir("n1"))
        script = (
            "import os, sys, time\n"
            "def sync(fd):\n"
            "    try:\n        os.fsync(fd); return 'ok'\n"
            "    except OSError as e:\n        return str(e.errno)\n"
            "fd = os.open(sys.argv[1] + '/f', os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b'data')\n"
            "print('dir', sync(os.open(sys.argv[1], os.O_RDONLY)), 'file', sync(fd), flush=True)\n"
            "time.sleep(600)\n"
        )
        backend.start("n1", [sys.executable, "-c", script, str(data)])
        out = tmp_path / "nodes" / "n1" / "stdout.log"
        deadline = time.monotonic() + 60
        while "file" not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        _, dir_sync, _, file_sync = out.read_text().split()
        assert file_sync == str(errno.EIO) and (data / "f").read_bytes() == b"data"
        backend.lose_unsynced("n1")
        # the failed fsync made nothing durable: the name only if the directory's own fsync went through
        assert (data / "f").read_bytes() == b"" if dir_sync == "ok" else not (data / "f").exists()
    finally:
        backend.teardown()
        heal_if_left(tmp_path)
    assert leftovers(backend) == NOTHING
