"""The report on a real Spark standalone cluster (a master and two workers from PySpark's own
`spark-class`, each its own process), submitted with `kchaos report --master spark://…`: the same
summary as the shared local session's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports.standalone import standalone_cluster
from tests.reports.conftest import GAP_MS

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def _comparable(summary: dict) -> dict:
    """The summary with its output paths reduced to their names (the two reports were written apart)."""
    paths = ("tables", "charts")
    out = {k: v for k, v in summary.items() if k not in (*paths, "generated_at", "out_dir")}
    out.update({k: sorted(summary.get(k) or {}) for k in paths})
    return out


def test_a_standalone_cluster_reports_what_local_mode_reports(report, results_root: dict, tmp_path: Path) -> None:
    out = tmp_path / "cluster-report"
    with standalone_cluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "spark") as cluster:
        assert cluster.alive_workers() == 2
        argv = [sys.executable, "-m", "harness.cli", "report", str(results_root["root"]), "--out", str(out)]
        argv += ["--master", cluster.master_url, "--gap-ms", str(GAP_MS), "--conf", "spark.sql.shuffle.partitions=4"]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"on {cluster.master_url}" in done.stderr  # it ran there, not in a local session
        apps = list((tmp_path / "spark").glob("worker-*/app-*"))
        assert len({p.parent for p in apps}) == 2, apps  # both workers ran executors
    cluster_summary = json.loads((out / "summary.json").read_text())
    assert _comparable(cluster_summary) == _comparable(report.summary)


def test_the_package_zip_for_a_cluster_is_removed_when_the_job_ends() -> None:
    """A job on a cluster ships `reports` as a zip from a temp dir; the dir must not outlive the job
    (one was left in /tmp per job). The real thing: a process that makes the zip and exits."""
    code = "from reports.spark_session import _package_zip; print(_package_zip())"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    made = Path(done.stdout.strip())
    assert made.name == "kchaos_reports.zip" and made.parent.name.startswith("kchaos-reports-")
    assert not made.parent.exists()
