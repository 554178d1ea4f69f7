"""Validation against Porcupine's test histories: every verdict must match its MANIFEST.tsv."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from checkers.history import load_history
from checkers.linearizable import check

PORCUPINE = Path(__file__).resolve().parents[3] / "shared" / "histories" / "porcupine"
if not PORCUPINE.is_dir():  # the checkout is not under /work/main
    PORCUPINE = Path("/work/shared/histories/porcupine")


def manifest() -> list[dict[str, str]]:
    if not (PORCUPINE / "MANIFEST.tsv").exists():
        return []
    with (PORCUPINE / "MANIFEST.tsv").open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


ROWS = manifest()
pytestmark = pytest.mark.skipif(not ROWS, reason=f"no Porcupine histories at {PORCUPINE}")


def test_the_manifest_lists_every_history():
    files = {str(p.relative_to(PORCUPINE)) for p in PORCUPINE.rglob("*.jsonl")}
    assert files == {r["file"] for r in ROWS}
    assert len(ROWS) == 58


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_verdict_matches_porcupine(row):
    history = load_history(PORCUPINE / row["file"])
    assert len(history.ops) == int(row["ops"])
    verdict = check(history, row["model"], timeout=120)
    assert verdict.valid is (row["expected"] == "linearizable")
    if verdict.valid is False:
        bad = [r for r in verdict.details["results"] if r["valid"] is False]
        assert bad and all(any(not s["legal"] for s in r["stuck"]) for r in bad)


def test_every_key_of_c10_bad_is_decided():
    history = load_history(PORCUPINE / "kv" / "c10-bad.jsonl")
    verdict = check(history, "kv", all_keys=True, jobs=2)
    assert verdict.valid is False
    assert verdict.details["unknown_keys"] == []
    assert len(verdict.details["invalid_keys"]) >= 1


def test_failed_reads_with_timeouts_are_dropped():
    # etcd_100..102 hold the 17 failed, timed-out reads; they are linearizable per Porcupine.
    history = load_history(PORCUPINE / "etcd" / "etcd_100.jsonl")
    failed_reads = [o for o in history.ops if o.f == "read" and o.type == "fail"]
    assert failed_reads and all(o.error == "timed-out" for o in failed_reads)
    assert check(history).valid is True
