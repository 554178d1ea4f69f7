"""The incremental store (`kchaos report --store PATH`): a second report ingests only the new runs, a
changed run is ingested again, ops no manifest row points to are never read, and the report over the
store equals a from-scratch report."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.cli import main
from reports.ingest import Filters, vet_run
from reports.job import JobOptions, run_job
from reports.pipeline import derive_ops
from reports.store import append_ops, new_batch
from reports.synth import synthesize
from tests.reports.conftest import GAP_MS
from tests.reports.test_standalone_cluster import _comparable

pytestmark = pytest.mark.spark


def _batches(spark, store: Path) -> dict[str, int]:
    """Manifest rows per ingest batch, read from the store itself."""
    rows = spark.read.parquet(str(store / "runs")).groupBy("ingest").count().collect()
    return {r["ingest"]: r["count"] for r in rows}


def test_a_second_report_ingests_only_new_runs_and_equals_a_fresh_report(
    spark, report, results_root: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root, store = results_root["root"], tmp_path / "store"
    good = results_root["good"]
    cut = datetime(2026, 11, 3, tzinfo=UTC)
    late = [p for p in good if json.loads((p / "test.json").read_text())["started_at"] >= "2026-11-03"]
    assert 0 < len(late) < len(good)

    # Night 1: only the runs from 3 November on exist for the report (a --since filter stands in for
    # the older runs not being there yet).
    first = run_job(
        spark,
        JobOptions(
            root=str(root), out=str(tmp_path / "r1"), filters=Filters(since=cut), gap_ms=GAP_MS, store=str(store)
        ),
    )
    assert first.summary["store"]["ingested"] == len(late) and first.summary["store"]["unchanged"] == 0
    assert list(_batches(spark, store).values()) == [len(late)]

    # Night 2, through the CLI: the older runs are new to the store; the late ones are not read again.
    out = tmp_path / "r2"
    argv = ["report", str(root), "--out", str(out), "--store", str(store), "--gap-ms", str(GAP_MS)]
    assert main(argv) == 0
    assert "ingesting" in capsys.readouterr().err
    second = json.loads((out / "summary.json").read_text())
    assert second["store"]["ingested"] == len(good) - len(late)
    assert second["store"]["unchanged"] == len(late) and second["store"]["changed"] == 0
    assert second["store"]["runs_in_store"] == len(good)
    assert sorted(_batches(spark, store).values()) == sorted([len(late), len(good) - len(late)])

    # The report over the store is the report over the results root from scratch.
    second.pop("store")
    assert _comparable(second) == _comparable(report.summary)


def test_a_changed_run_is_ingested_again_and_nothing_else(spark, tmp_path: Path) -> None:
    root, store = tmp_path / "results", tmp_path / "store"
    made = synthesize(root, runs=3, ops=3 * 800, nights=1, seed=4, formats=("parquet",))

    def once(name: str) -> dict:
        return run_job(spark, JobOptions(root=str(root), out=str(tmp_path / name), gap_ms=GAP_MS, store=str(store)))

    first = once("r1")
    assert first.summary["store"]["ingested"] == 3
    before = first.data.tables["runs"].set_index("run_id")

    again = once("r2")
    want = {"path": str(store), "batch": None, "ingested": 0, "changed": 0, "unchanged": 3, "runs_in_store": 3}
    assert again.summary["store"] == want

    # An ingest killed after writing ops but before its manifest rows: those ops are never read.
    orphan = vet_run(made[0], f"{made[0].parent.name}/{made[0].name}")
    append_ops(derive_ops(spark, [orphan])[0], str(store), new_batch())
    assert spark.read.parquet(str(store / "ops")).select("ingest").distinct().count() == 2  # on disk
    assert len(_batches(spark, store)) == 1  # but in no manifest row

    # A re-checked run: its results.json now says invalid, with 7 more lost writes.
    changed = made[1]
    run_id = f"{changed.parent.name}/{changed.name}"
    results = json.loads((changed / "results.json").read_text())
    results["valid"] = False
    results["checkers"]["lost-probe"] = {"valid": False, "lost-count": 7}
    (changed / "results.json").write_text(json.dumps(results))
    third = once("r3")
    assert (third.summary["store"]["ingested"], third.summary["store"]["changed"]) == (1, 1)
    assert third.summary["store"]["unchanged"] == 2 and third.summary["store"]["runs_in_store"] == 3
    assert sorted(_batches(spark, store).values()) == [1, 3]
    runs = third.data.tables["runs"].set_index("run_id")
    assert runs.loc[run_id, "valid"] == "false" and run_id in third.summary["commit_loss"]["runs_that_lost"]
    assert runs.loc[run_id, "lost_count"] == before.loc[run_id, "lost_count"] + 7
    assert (runs["ops"] == before["ops"]).all()  # neither the old version's ops nor the orphans are read

    fresh = run_job(spark, JobOptions(root=str(root), out=str(tmp_path / "fresh"), gap_ms=GAP_MS))
    third.summary.pop("store")
    assert _comparable(third.summary) == _comparable(fresh.summary)
