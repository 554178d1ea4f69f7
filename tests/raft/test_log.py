"""The in-memory log view: appends, the epoch -> start-offset cache, end_offset_for_epoch, truncation."""

from __future__ import annotations

import pytest

from node.raft.log import LogError, OffsetAndEpoch, RaftLog
from node.raft.records import RecordBatch
from tests.raft.helpers import batch, chain


def test_log_epoch_cache_records_the_start_of_each_epoch():
    log = RaftLog(chain((2, 1), (1, 1), (3, 3), (1, 5)))
    assert log.epoch_entries() == [OffsetAndEpoch(0, 1), OffsetAndEpoch(3, 3), OffsetAndEpoch(6, 5)]
    assert (log.end_offset, log.last_epoch, len(log)) == (7, 5, 4)


def test_log_end_offset_for_epoch():
    log = RaftLog(chain((2, 1), (1, 1), (3, 3), (1, 5)))
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)  # starts epoch 3
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)  # unknown: the largest smaller one
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(6, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(7, 5)  # the last epoch ends at the log end
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(7, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # before every epoch
    assert RaftLog().end_offset_for_epoch(4) == OffsetAndEpoch(0, 0)


def test_log_truncation_at_batch_boundaries():
    log = RaftLog(chain((2, 1), (1, 1), (3, 3), (1, 5)))
    log.truncate(9)  # past the end: nothing to do
    assert log.end_offset == 7
    log.truncate(3)
    assert log.end_offset == 3 and log.last_epoch == 1
    assert log.epoch_entries() == [OffsetAndEpoch(0, 1)]
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 1)
    log.append(batch(3, 4, 2))
    assert log.epoch_entries()[-1] == OffsetAndEpoch(3, 4)


def test_log_truncation_inside_a_batch_is_refused():
    log = RaftLog(chain((3, 1)))
    with pytest.raises(LogError):
        log.truncate(1)
    assert log.end_offset == 3


def test_log_truncation_drops_control_batches_after_it():
    log = RaftLog([RecordBatch(0, 1, (b"c",), control=True), batch(1, 1), RecordBatch(2, 2, (b"c",), control=True)])
    assert log.control_bases == [0, 2]
    log.truncate(1)
    assert log.control_bases == [0]


def test_log_append_must_be_contiguous_and_epochs_monotonic():
    log = RaftLog(chain((2, 3)))
    with pytest.raises(LogError):
        log.append(batch(5, 3))
    with pytest.raises(LogError):
        log.append(batch(2, 2))


def test_log_read_whole_batches_bounded_by_bytes_and_below():
    log = RaftLog(chain((2, 1), (1, 1), (3, 3)))
    assert [b.base_offset for b in log.read(0, 1 << 20)] == [0, 2, 3]
    assert [b.base_offset for b in log.read(0, 1)] == [0]  # at least one batch
    assert [b.base_offset for b in log.read(2, 1 << 20, below=6)] == [2, 3]
    assert [b.base_offset for b in log.read(2, 1 << 20, below=5)] == [2]
    assert log.read(6, 100) == []
    with pytest.raises(LogError):
        log.read(1, 100)


def test_log_epoch_and_batch_lookup():
    log = RaftLog(chain((2, 1), (3, 3)))
    assert log.epoch_at(1) == 1 and log.epoch_at(4) == 3
    assert log.batch_at(4).base_offset == 2
    with pytest.raises(LogError):
        log.batch_at(5)
