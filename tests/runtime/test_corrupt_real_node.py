"""The `corrupt` fault against a real node process (`python -m node.runtime node start`): every mode's
damage makes it refuse to start with one line naming the file; once undone, the files are byte for
byte what they were and the node starts."""

from __future__ import annotations

import random
from pathlib import Path

from node.runtime.corruption import CORRUPT_MODES, corrupt_data_dir, restore_corruption
from node.runtime.file_storage import LOG_DIR_NAME, segment_name
from node.runtime.fs import OS_FS
from node.runtime.local_cluster import NodeProcess, NodeSpec, find_leader, http_json, kill_all, plan_cluster, wait_for
from tests.runtime.test_real_cluster import _start_expecting_refusal

SETTINGS = {
    "quorum.election.timeout.ms": "300",
    "quorum.fetch.timeout.ms": "600",
    "metadata.log.segment.bytes": "1024",  # several segments from a few dozen records
    "metadata.log.max.snapshot.interval.records": "40",  # one snapshot, and the log below it deleted
}
RECORDS = 60


def files(data_dir: Path) -> dict[str, bytes]:
    """Every file's bytes, except the lock file (each start writes its pid there)."""
    return {
        str(p.relative_to(data_dir)): p.read_bytes()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def fill(spec: NodeSpec) -> None:
    """Run the node, append RECORDS records, wait for its snapshot and the deletion of the log below
    it, and stop it cleanly."""
    proc = NodeProcess(spec).start()
    try:
        wait_for(lambda: find_leader([spec]), 60, what="node 1 to lead")
        for i in range(RECORDS):
            status, doc = http_json(spec.metrics_url + "/v1/append", f"record-{i}\n".encode(), timeout=10)
            assert status == 200, doc
        log_dir = spec.data_dir / LOG_DIR_NAME
        wait_for(
            lambda: list(log_dir.glob("*.checkpoint")) and not (log_dir / segment_name(0)).exists(),
            60,
            what="a snapshot and the log before it deleted",
        )
        assert proc.stop(30) == 0, proc.log_text()
    finally:
        kill_all([proc])


def test_a_real_node_refuses_every_mode_of_damage_and_starts_once_it_is_undone(tmp_path):
    plan = plan_cluster(tmp_path, voters=1, settings=SETTINGS)
    spec = plan.nodes[0]
    fill(spec)
    log_dir = spec.data_dir / LOG_DIR_NAME
    assert len(list(log_dir.glob("*.log"))) >= 2 and len(list(log_dir.glob("*.checkpoint"))) == 1
    pristine = files(spec.data_dir)
    for i, mode in enumerate(CORRUPT_MODES):
        corruption = corrupt_data_dir(OS_FS, spec.data_dir, mode, random.Random(i))
        error = _start_expecting_refusal(plan, spec)
        spec.log_path.unlink()  # one refusal per log
        assert "refusing to start" in error and Path(corruption.path).name in error, (mode, error)
        assert restore_corruption(OS_FS, corruption)
        assert files(spec.data_dir) == pristine, mode
    proc = NodeProcess(spec).start()
    try:
        leader = wait_for(lambda: find_leader([spec]), 60, what="node 1 to lead again")
        assert leader["log_end_offset"] >= RECORDS
        assert proc.stop(30) == 0, proc.log_text()
    finally:
        kill_all([proc])
