"""matplotlib charts (PNG) from the report tables; a chart whose table is empty is left out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

Tables = dict[str, pd.DataFrame]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best", ncol=2)


def latency_by_fault(tables: Tables, path: Path) -> Path | None:
    q = tables.get("latency_quantiles")
    if q is None or q.empty:
        return None
    ok = q[q["outcome"] == "ok"].copy()
    if ok.empty:
        return None
    ok["op"] = ok["workload"] + " " + ok["f"]
    faults = sorted(ok["fault"].unique(), key=lambda k: (k != "calm", k))
    ops = sorted(ok["op"].unique())
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(faults)
    for i, fault in enumerate(faults):
        rows = ok[ok["fault"] == fault].set_index("op").reindex(ops)
        ax.bar(np.arange(len(ops)) + i * width, rows["p99_ms"], width, label=fault)
    ax.set_xticks(np.arange(len(ops)) + 0.4 - width / 2, ops, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("p99 latency of ok ops (ms, log)")
    ax.set_title("p99 latency: calm vs each active fault")
    _legend(ax)
    return _save(fig, path)


def _lines(frame: pd.DataFrame, x: str, y: str, series: str, title: str, ylabel: str, path: Path):
    if frame is None or frame.empty:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, rows in frame.groupby(series, sort=True):
        ax.plot(rows[x], rows[y], marker="o" if len(rows) < 40 else None, label=str(name), linewidth=1.2)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("seconds since run start" if x == "second" else x)
    ax.grid(alpha=0.3)
    if x == "date":
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    _legend(ax)
    return _save(fig, path)


def throughput(tables: Tables, path: Path) -> Path | None:
    t = tables.get("throughput_by_test")
    ok = None if t is None else t[t["outcome"] == "ok"]
    return _lines(ok, "second", "ops_per_s", "test", "Throughput of ok ops (mean over runs)", "ops/s", path)


def pass_rate_trend(tables: Tables, path: Path) -> Path | None:
    t = tables.get("pass_rate_trend")
    return _lines(t, "date", "pass_rate", "test", "Pass rate per night", "pass rate", path)


def _trend(tables: Tables, name: str, detail: str, y: str, title: str, path: Path) -> Path | None:
    """A per-night line for each test and `detail` (f or fault kind)."""
    t = tables.get(name)
    if t is None or t.empty:
        return None
    t = t.assign(series=t["test"] + " " + t[detail])
    return _lines(t, "date", y, "series", title, "ms", path)


def p99_trend(tables: Tables, path: Path) -> Path | None:
    return _trend(tables, "p99_trend", "f", "p99_ms", "p99 latency of ok ops per night", path)


def failover_trend(tables: Tables, path: Path) -> Path | None:
    return _trend(tables, "failover_trend", "kind", "p50_ms", "Median failover time per night", path)


def _bars(labels: list[str], values: list[float], title: str, ylabel: str, path: Path) -> Path | None:
    if not labels:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.bar(range(len(labels)), values, color="#4c72b0")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return _save(fig, path)


def recovery(tables: Tables, path: Path) -> Path | None:
    t = tables.get("recovery_summary")
    if t is None or t.empty:
        return None
    t = t.dropna(subset=["p50_ms"])
    labels = [f"{k} {e} {f}" for k, e, f in zip(t["kind"], t["event"], t["f"])]
    return _bars(labels, t["p50_ms"].tolist(), "Median time to next success (failover/recovery)", "ms", path)


def commit_loss(tables: Tables, path: Path) -> Path | None:
    t = tables.get("loss_by_nemesis")
    if t is None or t.empty:
        return None
    return _bars(
        t["nemesis"].tolist(), t["lost_writes"].tolist(), "Lost acknowledged writes by nemesis", "writes", path
    )


def unavailability(tables: Tables, path: Path) -> Path | None:
    t = tables.get("unavailability_summary")
    if t is None or t.empty:
        return None
    labels = [f"{a} {f}" for a, f in zip(t["test"], t["f"])]
    return _bars(labels, t["total_s"].tolist(), "Total unavailable time", "seconds", path)


CHARTS: dict[str, Callable[[Tables, Path], Path | None]] = {
    "latency_by_fault": latency_by_fault,
    "throughput": throughput,
    "unavailability": unavailability,
    "recovery": recovery,
    "commit_loss": commit_loss,
    "pass_rate_trend": pass_rate_trend,
    "p99_trend": p99_trend,
    "failover_trend": failover_trend,
}


def draw_all(tables: Tables, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}
    for name, draw in CHARTS.items():
        path = draw(tables, out / f"{name}.png")
        if path is not None:
            drawn[name] = path
    return drawn
