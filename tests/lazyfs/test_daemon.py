"""The lazyfs daemon's own command line and start-up refusals: one line naming what is wrong, exit 254."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.lazyfs import start_lazyfs
from harness.backends.shell import BackendError
from tests.lazyfs.conftest import needs_root
from vocab.errors import EXIT_ERROR

REPO = Path(__file__).resolve().parents[2]


def daemon(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.backends.lazyfs", *argv], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_a_missing_mount_point_is_refused_in_one_line(tmp_path):
    done = daemon(str(tmp_path / "state"), str(tmp_path / "nowhere"))
    assert done.returncode == EXIT_ERROR
    assert done.stderr.strip().splitlines() == [
        f"lazyfs: mount point {tmp_path / 'nowhere'}: not an existing directory"
    ]


def test_a_state_dir_that_cannot_be_made_is_refused_in_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "mnt").mkdir()
    done = daemon(str(tmp_path / "file" / "state"), str(tmp_path / "mnt"))
    assert done.returncode == EXIT_ERROR
    assert done.stderr.strip().splitlines() == [f"lazyfs: state dir {tmp_path / 'file' / 'state'}: Not a directory"]


@pytest.mark.root
@needs_root
def test_mounting_over_a_mount_is_refused(mounted):
    with pytest.raises(BackendError, match="already a mount point"):
        start_lazyfs(mounted.ledger, mounted.root.parent / "other-state", mounted.root)
