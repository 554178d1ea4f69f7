"""One self-contained report.html: charts inlined as base64 PNG, tables, links to failing runs."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any

import pandas as pd

MAX_ROWS = 200  # longer tables are cut here; the CSV/Parquet files hold them whole

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { margin-bottom: 4px; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 32px; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.bad { color: #b00020; font-weight: 600; } .good { color: #1b7f3b; font-weight: 600; }
.muted { color: #666; font-size: 12px; } img.chart { max-width: 100%; border: 1px solid #eee; }
.cards { display: flex; gap: 16px; flex-wrap: wrap; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 16px; min-width: 120px; }
.card b { display: block; font-size: 22px; }
"""


def _table(frame: pd.DataFrame | None, columns: list[str] | None = None) -> str:
    if frame is None or frame.empty:
        return '<p class="muted">none</p>'
    shown = frame[columns] if columns else frame
    note = ""
    if len(shown) > MAX_ROWS:
        note = f'<p class="muted">first {MAX_ROWS} of {len(shown)} rows; see the CSV for all</p>'
        shown = shown.head(MAX_ROWS)
    return shown.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0) + note


def _img(path: Path | None, alt: str) -> str:
    if path is None:
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<p><img class="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _link(run_dir: str, out: Path) -> str:
    try:
        href = os.path.relpath(run_dir, out)
    except ValueError:  # another drive
        href = Path(run_dir).resolve().as_uri()
    return href.replace(os.sep, "/") + "/"


def render(summary: dict[str, Any], tables: dict[str, pd.DataFrame], charts: dict[str, Path], out: Path) -> Path:
    t = tables
    runs = summary["runs"]
    rate = summary["pass_rate"]
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>kraft-chaos report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>kraft-chaos report</h1>",
        f'<p class="muted">results root {html.escape(summary["results_root"])} · generated '
        f"{html.escape(summary['generated_at'])}</p>",
        '<div class="cards">',
        f"<div class='card'>runs<b>{runs['included']}</b></div>",
        f"<div class='card'>passed<b class='good'>{runs['passed']}</b></div>",
        f"<div class='card'>failed<b class='bad'>{runs['failed']}</b></div>",
        f"<div class='card'>unknown<b>{runs['unknown']}</b></div>",
        f"<div class='card'>pass rate<b>{'' if rate is None else f'{rate:.1%}'}</b></div>",
        f"<div class='card'>lost writes<b>{summary['commit_loss']['lost_writes']}</b></div>",
        f"<div class='card'>skipped<b>{runs['skipped']}</b></div>",
        "</div>",
        "<h2>Failing runs</h2>",
    ]
    failing = summary["failing_runs"]
    if failing:
        parts.append("<table><tr><th>run</th><th>test</th><th>nemesis</th><th>lost</th><th>anomalies</th></tr>")
        for run in failing:
            href = html.escape(_link(run["run_dir"], out), quote=True)
            parts.append(
                f'<tr><td><a href="{href}">{html.escape(run["run_id"])}</a></td>'
                f"<td>{html.escape(run['test'])}</td><td>{html.escape(run['nemesis'])}</td>"
                f"<td>{run['lost_count']}</td><td>{run['anomaly_count']}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append('<p class="good">no failing runs</p>')
    flaky = summary["flaky_tests"]
    parts += [
        "<h2>Flaky tests</h2>",
        "<p>" + (", ".join(html.escape(x) for x in flaky) if flaky else "none") + "</p>",
        "<h2>Pass rates</h2>",
        _table(t.get("pass_rate_by_test")),
        _table(t.get("pass_rate_by_nemesis")),
        "<h2>By workload</h2>",
        _table(t.get("pass_rate_by_workload")),
        _table(t.get("loss_by_workload")),
        _table(t.get("anomalies_by_workload")),
        _img(charts.get("pass_rate_trend"), "pass rate per night"),
        "<h2>Commit loss</h2>",
        _img(charts.get("commit_loss"), "lost writes by nemesis"),
        _table(t.get("loss_by_test")),
        _table(t.get("loss_by_nemesis")),
        "<h2>Anomalies by checker</h2>",
        _table(t.get("anomalies_by_checker")),
        _table(t.get("anomaly_types")),
        "<h2>Latency</h2>",
        _img(charts.get("latency_by_fault"), "p99 latency by fault"),
        _table(t.get("latency_quantiles")),
        _img(charts.get("p99_trend"), "p99 latency per night"),
        "<h2>Throughput</h2>",
        _img(charts.get("throughput"), "throughput over run time"),
        "<h2>Availability</h2>",
        _img(charts.get("unavailability"), "unavailable time"),
        _table(t.get("unavailability_summary")),
        _img(charts.get("recovery"), "failover and recovery times"),
        _table(t.get("recovery_summary")),
        _img(charts.get("failover_trend"), "failover time per night"),
        "<h2>Indeterminate (info) rates</h2>",
        _table(t.get("info_rates")),
        "<h2>Skipped</h2>",
    ]
    if summary["skipped"]:
        parts.append("<ul>")
        parts += [f"<li>{html.escape(s['path'])}: {html.escape(s['reason'])}</li>" for s in summary["skipped"]]
        parts.append("</ul>")
    else:
        parts.append('<p class="muted">nothing skipped</p>')
    if summary["warnings"]:
        parts.append("<h2>Warnings</h2><ul>")
        parts += [f"<li>{html.escape(w)}</li>" for w in summary["warnings"]]
        parts.append("</ul>")
    parts.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
