"""A node whose storage acknowledges appends without fsyncing them (the planted bug for the cluster test):
`python acks_without_fsync_node.py node start --config FILE` runs `python -m node.runtime` with it."""

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from node.runtime import file_storage


def flush_without_fsync(self: file_storage.FileStorage) -> None:
    self._dirty = False
    if self._dir_dirty:
        file_storage.fsync_dir(self.log_dir)
        self._dir_dirty = False


file_storage.FileStorage.flush = flush_without_fsync  # type: ignore[method-assign]
sys.argv[0] = "node.runtime"
runpy.run_module("node.runtime", run_name="__main__", alter_sys=True)
