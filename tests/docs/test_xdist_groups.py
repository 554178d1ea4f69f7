"""The suite's worker groups hold: tests that judge host-wide state (tests/conftest.py's SHARED_HOST_STATE)
and tests that share a module fixture run on one pytest-xdist worker. pytest 9.2's structured node ids
silently broke xdist's `loadgroup` (pytest-dev/pytest-xdist#1386): the groups were ignored, and docker
and VM tests overlapped. This runs a small suite with our conftest on two workers and looks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

GROUPED = """\
import os
from pathlib import Path

import pytest


def _record(name):
    (Path(__file__).parent.parent.parent / "seen" / name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    _record(f"{__name__.rsplit('.', 1)[-1]}-{i}")
"""

SHARED_FIXTURE = (
    GROUPED.replace("def test_grouped(i):", "def test_grouped(i, made_once):")
    + """

@pytest.fixture(scope="module")
def made_once():
    return object()
"""
)


def test_grouped_tests_run_on_one_worker(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "tests" / "harness_vagrant").mkdir(parents=True)
    (root / "tests" / "other").mkdir()
    (root / "seen").mkdir()
    shutil.copy(TESTS / "conftest.py", root / "tests" / "conftest.py")
    (root / "tests" / "harness_vagrant" / "test_vms_like.py").write_text(GROUPED)
    (root / "tests" / "other" / "test_module_fixture.py").write_text(SHARED_FIXTURE)
    (root / "tests" / "other" / "test_free.py").write_text(GROUPED)
    for d in ("tests", "tests/harness_vagrant", "tests/other"):
        (root / d / "__init__.py").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen: dict[str, set[str]] = {}
    for f in (root / "seen").iterdir():
        seen.setdefault(f.name.rsplit("-", 1)[0], set()).add(f.read_text())
    assert set(seen) == {"test_vms_like", "test_module_fixture", "test_free"}
    assert len(seen["test_vms_like"]) == 1, seen  # the vms group: one worker
    assert len(seen["test_module_fixture"]) == 1, seen  # a module fixture: its file on one worker
