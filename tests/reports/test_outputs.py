"""The outputs: tables on disk, summary.json, report.html rendering in headless Chromium, the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageStat

from harness.cli import main

pytestmark = pytest.mark.spark

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
# Injected into a copy of the report: records script errors, failed resource loads and console.error,
# then writes them and the state of every image into the DOM, which --dump-dom prints.
HOOK = """<script>
window.__problems = [];
window.addEventListener('error', function (e) {
  window.__problems.push(e.message || ('failed to load ' + (e.target && (e.target.src || e.target.href))));
}, true);
var __err = console.error;
console.error = function () { window.__problems.push([].join.call(arguments, ' ')); __err.apply(console, arguments); };
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = document.createElement('pre');
  out.id = 'kchaos-check';
  out.textContent = JSON.stringify({problems: window.__problems, images: imgs.length,
    drawn: imgs.filter(function (i) { return i.complete && i.naturalWidth > 100; }).length});
  document.body.appendChild(out);
});
</script>"""


def _chromium(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="kchaos-chromium-")
    try:
        return subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_tables_are_written_as_parquet_and_csv(report) -> None:
    out = report.out
    for name in ("ops", "faults", "runs"):
        parts = list((out / "tables" / name).glob("date=*/test=*/*.parquet"))
        assert parts, name
    ops = pq.read_table(out / "tables" / "ops")
    assert ops.num_rows == int(report.data.tables["runs"]["ops"].sum())
    assert list((out / "csv" / "ops").glob("date=*/test=*/*.csv"))
    for name in ("latency_quantiles", "pass_rate_by_test", "loss_by_nemesis", "recovery_summary"):
        assert (out / "tables" / f"{name}.parquet").exists() and (out / "csv" / f"{name}.csv").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema_version"] == 1
    failing = {r["run_id"] for r in summary["failing_runs"]}
    runs = report.data.tables["runs"]
    assert failing == set(runs.loc[runs["valid"] == "false", "run_id"]) and failing


def test_report_links_every_failing_run(report) -> None:
    html = report.report.read_text()
    hrefs = set(re.findall(r'href="([^"]+)"', html))
    for run in report.summary["failing_runs"]:
        href = os.path.relpath(run["run_dir"], report.out) + "/"
        assert href in hrefs, run["run_id"]
        assert (report.out / href / "results.json").exists()
    assert "<script" not in html  # self-contained and static
    assert len(re.findall(r'src="data:image/png;base64,', html)) == len(report.summary["charts"]) >= 7


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (setup.sh installs it)")
def test_report_renders_in_chromium_without_errors(report, tmp_path: Path) -> None:
    page = report.report.read_text().replace("<head>", "<head>" + HOOK, 1)
    checked = report.out / "report-checked.html"
    checked.write_text(page)
    done = _chromium(["--virtual-time-budget=10000", "--dump-dom", checked.as_uri()], tmp_path)
    found = re.search(r'<pre id="kchaos-check">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    state = json.loads(found.group(1).replace("&quot;", '"'))
    assert state["problems"] == []
    assert state["images"] == len(report.summary["charts"]) and state["drawn"] == state["images"]

    shot = tmp_path / "report.png"
    _chromium(["--window-size=1280,2400", f"--screenshot={shot}", report.report.as_uri()], tmp_path)
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 2400)
    stats = ImageStat.Stat(image)
    assert stats.stddev[0] > 20  # not a blank page: text, tables and charts
    dark = sum(image.histogram()[:128]) / (image.size[0] * image.size[1])
    assert dark > 0.01
    keep = os.environ.get("KCHAOS_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def test_cli_end_to_end(spark, results_root: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`kchaos report` with filters: progress on the console, a summary at the end, and the session it
    found (the shared one) left running."""
    out = tmp_path / "out"
    argv = ["report", str(results_root["root"]), "--out", str(out), "--test", "hand-made", "--gap-ms", "500"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "pairing operations" in err and "pass rate" in err and "lost writes" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"]["included"] == 1 and summary["filters"]["tests"] == ["hand-made"]
    assert summary["failing_runs"][0]["run_id"] == "hand-made/20261105T120000Z"
    assert (out / "report.html").exists()
    assert spark.range(3).count() == 3  # still usable
