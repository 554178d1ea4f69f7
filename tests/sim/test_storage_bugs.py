"""The simulator runs the real FileStorage on SimFS, so storage bugs are caught by a chaos run: each
FileStorage below has one planted durability bug, and a sweep of seeds with power losses finds it
(an invariant fails or a node cannot start on what its own disk kept), while the correct FileStorage
passes the same seeds. (A bug in start-up's CRC check needs the corrupt fault: see
test_storage_faults.py; one in start-up's fsync: test_injected_bugs.py.)"""

from __future__ import annotations

import os

import pytest

from node.raft.quorum_state import QuorumStateData
from node.runtime.file_storage import QUORUM_STATE_NAME, FileStorage, encode_quorum_state
from node.sim.disk import SimDisk
from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, RunResult, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig


def replace_quorum_state(storage: FileStorage, state: QuorumStateData, *, fsync_temp: bool, fsync_dir: bool) -> None:
    """FileStorage's temp file + fsync + rename + directory fsync, with steps left out."""
    fs = storage.fs
    tmp = storage.quorum_state_path.with_name(QUORUM_STATE_NAME + ".tmp")
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fs.write(fd, encode_quorum_state(state))
    if fsync_temp:
        fs.fsync(fd)
    fs.close(fd)
    fs.replace(tmp, storage.quorum_state_path)
    if fsync_dir:
        fs.fsync_dir(storage.log_dir)


class NoTempFileFsync(FileStorage):
    """quorum-state: the temp file is renamed over the old one without being fsynced first."""

    def write_quorum_state(self, state: QuorumStateData) -> None:
        replace_quorum_state(self, state, fsync_temp=False, fsync_dir=True)


class NoDirFsyncAfterRename(FileStorage):
    """quorum-state: renamed into place, but the directory is not fsynced after the rename."""

    def write_quorum_state(self, state: QuorumStateData) -> None:
        replace_quorum_state(self, state, fsync_temp=True, fsync_dir=False)


class NoDirFsyncForNewSegment(FileStorage):
    """A new segment's directory entry is never fsynced by flush()."""

    def _roll(self, base_offset: int):  # type: ignore[no-untyped-def]
        segment = super()._roll(base_offset)
        self._dir_dirty = False
        return segment


FAULTS = FaultConfig(kinds=("lose_unsynced", "partition"), interval_ms=(300, 1500), duration_ms=(100, 1500))


def sweep_run(seed: int, storage: type[FileStorage]) -> RunResult:
    return run(
        RunConfig(
            sim=SimConfig(seed=seed, voters=3, disk_factory=lambda n: SimDisk(n, storage_factory=storage)),
            workload=WorkloadConfig(interval_ms=20),
            faults=FAULTS,
            duration_ms=10_000,
        )
    )


@pytest.mark.parametrize(
    ("storage", "symptom"),
    [
        (NoTempFileFsync, "cannot start on its own disk: corrupt quorum-state file"),
        # The vote or epoch the rename stored is gone after a power loss: seen at the election it
        # decided (votes are durable when they elect), or at the restart (the epoch went back).
        (NoDirFsyncAfterRename, "epoch went back|election safety"),
        (NoDirFsyncForNewSegment, "durable on only"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_a_planted_storage_bug_is_caught_by_a_seed_sweep_with_power_losses(storage, symptom):
    for seed in range(40):
        result = sweep_run(seed, storage)
        if not result.valid:
            assert result.violation is not None, result.failure
            assert any(s in result.violation.message for s in symptom.split("|")), result.failure
            return
    pytest.fail(f"{storage.__name__} survived 40 seeds of power losses")


def test_the_correct_storage_passes_the_sweep():
    failures = [f"seed {seed}: {r.failure}" for seed in range(12) if not (r := sweep_run(seed, FileStorage)).valid]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_the_correct_storage_passes_a_long_sweep():
    failures = [f"seed {seed}: {r.failure}" for seed in range(12, 200) if not (r := sweep_run(seed, FileStorage)).valid]
    assert not failures, "\n".join(failures)
