"""Fixtures for the results-store tests: a fresh results root per test, and no stray KCHAOS_RESULTS."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import store


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(store.ENV_ROOT, raising=False)
    return tmp_path / "results"
