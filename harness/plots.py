"""A run's three plots (PNG, matplotlib Agg), every one with the nemesis fault windows shaded.

- latency-raw.png: one point per op at its invocation time, y its latency; colour = outcome, marker = f;
- latency-quantiles.png: p50 / p95 / p99 / max latency per time window, one panel per f;
- rate.png: completed ops per second over time, per f and outcome.

Inputs are the ops and fault windows of `reports.metrics.derive`, so the plots count exactly what the
Spark reports count (same pairing, same windows: start- completion to the next stop- completion of
the kind, or to the end of the run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import LogFormatter, LogLocator

from reports.metrics import NS_PER_S
from vocab.faults.catalogue import KIND_COLORS, OTHER_COLOR

LATENCY_RAW = "latency-raw.png"
LATENCY_QUANTILES = "latency-quantiles.png"
RATE = "rate.png"

OUTCOME_COLORS = {"ok": "#1b9e4b", "fail": "#d62728", "info": "#ff9f1c"}
MARKERS = ("o", "^", "s", "D", "v", "P", "X", "*")  # one per f
LINE_STYLES = ("-", "--", ":", "-.")  # one per f
PLOT_QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max"))
TARGET_WINDOWS = 40  # about this many time windows across a run
DPI = 90


@dataclass(frozen=True)
class FaultSpan:
    """A fault window in seconds since the run start; `healed` False: still open at the end."""

    kind: str
    start_s: float
    end_s: float
    healed: bool


def fault_spans(faults: pd.DataFrame) -> list[FaultSpan]:
    """The windows of `reports.metrics.fault_windows`, in seconds, by start."""
    spans = [
        FaultSpan(str(r.kind), r.start_ns / NS_PER_S, r.end_ns / NS_PER_S, bool(r.healed))
        for r in faults.itertuples(index=False)
    ]
    return sorted(spans, key=lambda s: (s.start_s, s.kind))


def window_seconds(end_s: float, target: int = TARGET_WINDOWS) -> float:
    """A round window width (1, 2 or 5 times a power of ten seconds) giving about `target` windows."""
    if end_s <= 0:
        return 1.0
    raw = end_s / target
    exp = math.floor(math.log10(raw))
    for step in (1, 2, 5, 10):
        width = step * 10.0**exp
        if width >= raw:
            return width
    return 10.0 ** (exp + 1)  # pragma: no cover - the loop always returns


def fault_color(kind: str) -> str:
    """Each kind's own colour (the same in every plot, report.html and the history viewer)."""
    return KIND_COLORS.get(kind, OTHER_COLOR)


def _shade(ax: Axes, spans: list[FaultSpan]) -> list[Patch]:
    """Shade each fault window in its kind's colour (overlapping kinds mix); one legend handle per kind."""
    kinds: dict[str, None] = {}
    for span in spans:
        kinds.setdefault(span.kind)
        ax.axvspan(span.start_s, span.end_s, color=fault_color(span.kind), alpha=0.15, linewidth=0, zorder=0)
    return [Patch(color=fault_color(kind), alpha=0.3, label=f"{kind} (fault)") for kind in sorted(kinds)]


def _log_scale(ax: Axes, smallest: float) -> None:
    """Log y when every value is positive, labelled with plain numbers (5, 10, 200), not powers of ten.
    Minor ticks at 2 and 5 times each power of ten only: the eight per decade by default were a quarter
    of the drawing time (each tick is a handful of artists), and 2 and 5 are the ones worth a label."""
    if smallest > 0:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter())
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))


def _frame_axes(axes: list[Axes], spans: list[FaultSpan], end_s: float, empty: bool) -> None:
    """Shade the fault windows on every panel; time axis, grid and one legend (on the last panel)."""
    fault_handles: list[Patch] = []
    for ax in axes:
        fault_handles = _shade(ax, spans)
        ax.set_xlim(0, max(end_s, 1e-9))
        ax.grid(True, alpha=0.3)
    last = axes[-1]
    handles = [h for ax in axes for h in ax.get_legend_handles_labels()[0]]
    handles = list({h.get_label(): h for h in handles}.values()) + fault_handles
    if handles:
        last.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if empty:
        last.text(0.5, 0.5, "no completed ops", transform=last.transAxes, ha="center", va="center", color="#666")
    last.set_xlabel("time since run start (s)")


# Titles are placed with `y=1.0`: matplotlib's automatic title placement measures every tick label
# of the axes to keep clear of them (none sits above ours), about a tenth of a run's analysis.


def _save(fig: Figure, path: Path) -> Path:
    """Fixed margins in inches (legend to the right): tight_layout costs as much as drawing."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=0.8 / width, right=1 - 1.6 / width, bottom=0.55 / height, top=1 - 0.4 / height, hspace=0.15
    )
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _timed(ops: pd.DataFrame) -> pd.DataFrame:
    """Ops that completed (they have a latency), with invocation time in seconds."""
    done = ops[ops["latency_ms"].notna()]
    return done.assign(t_s=done["invoke_ns"] / NS_PER_S)


def latency_raw(ops: pd.DataFrame, spans: list[FaultSpan], end_s: float) -> Figure:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    done = _timed(ops)
    fs = sorted(done["f"].dropna().unique())
    for i, f in enumerate(fs):
        for outcome, color in OUTCOME_COLORS.items():
            part = done[(done["f"] == f) & (done["outcome"] == outcome)]
            if len(part):
                ax.plot(
                    part["t_s"], part["latency_ms"], linestyle="none", marker=MARKERS[i % len(MARKERS)],
                    markersize=3, alpha=0.6, color=color, label=f"{f} {outcome}", rasterized=True,
                )  # fmt: skip
    if len(done):
        _log_scale(ax, float(done["latency_ms"].min()))
    ax.set_ylabel("latency (ms)")
    ax.set_title("latency of each op (by invocation time)", y=1.0)
    _frame_axes([ax], spans, end_s, empty=not len(done))
    return fig


def quantile_table(ops: pd.DataFrame, width_s: float) -> pd.DataFrame:
    """p50/p95/p99/max latency (ms) of completed ops per f and time window (by invocation time)."""
    done = _timed(ops)
    done = done.assign(window=(done["t_s"] // width_s) * width_s)
    grouped = done.groupby(["f", "window"])["latency_ms"]
    out = pd.DataFrame({name: grouped.quantile(q, interpolation="linear") for q, name in PLOT_QUANTILES})
    out["count"] = grouped.size()
    return out.reset_index()


def latency_quantiles(ops: pd.DataFrame, spans: list[FaultSpan], end_s: float) -> Figure:
    width = window_seconds(end_s)
    table = quantile_table(ops, width)
    fs = sorted(table["f"].unique()) or [""]
    fig, axes = plt.subplots(len(fs), 1, figsize=(10, 2.2 + 2.3 * len(fs)), sharex=True, squeeze=False)
    for ax, f in zip(axes[:, 0], fs):
        part = table[table["f"] == f]
        mid = part["window"] + width / 2
        for _, name in PLOT_QUANTILES:
            ax.plot(mid, part[name], marker=".", linewidth=1, label=name)
        if len(part):
            _log_scale(ax, float(part["p50"].min()))
        ax.set_ylabel(f"{f} latency (ms)" if f else "latency (ms)")
    axes[0, 0].set_title(f"latency quantiles per {width:g} s window", y=1.0)
    _frame_axes(list(axes[:, 0]), spans, end_s, empty=table.empty)
    return fig


def rate_table(ops: pd.DataFrame, width_s: float) -> pd.DataFrame:
    """Completed ops per second per f, outcome and time window (window i covers [i, i+1) * width_s,
    by completion time)."""
    done = ops[ops["complete_ns"].notna()]
    window = (done["complete_ns"].astype("int64") / NS_PER_S // width_s).astype("int64")
    counts = done.assign(window=window).groupby(["f", "outcome", "window"]).size().rename("ops").reset_index()
    counts["ops_per_s"] = counts["ops"] / width_s
    return counts


def rate(ops: pd.DataFrame, spans: list[FaultSpan], end_s: float) -> Figure:
    width = window_seconds(end_s)
    table = rate_table(ops, width)
    windows = np.arange(int(end_s // width) + 1)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    styles = {f: LINE_STYLES[i % len(LINE_STYLES)] for i, f in enumerate(sorted(table["f"].unique()))}
    for (f, outcome), part in table.groupby(["f", "outcome"], sort=True):
        series = part.set_index("window")["ops_per_s"].reindex(windows, fill_value=0.0)
        ax.step(
            (windows + 0.5) * width, series.to_numpy(), where="mid", color=OUTCOME_COLORS.get(outcome),
            linestyle=styles[f], label=f"{f} {outcome}",
        )  # fmt: skip
    ax.set_ylabel("ops/s")
    ax.set_title(f"completed ops per second ({width:g} s windows)", y=1.0)
    _frame_axes([ax], spans, end_s, empty=table.empty)
    return fig


def fold_side_processes(ops: pd.DataFrame) -> pd.DataFrame:
    """Ops of side processes (a process named by a word, e.g. the forger's "forger-2") under one series
    per side process, named after it: a forger sends a dozen kinds of request, and a series each would
    bury the workload's own ops and the fault legend."""
    if "process" not in ops.columns or ops.empty:
        return ops
    process = ops["process"].astype(str)
    side = ~process.str.fullmatch(r"-?\d+")
    if not side.any():
        return ops
    family = process.str.replace(r"-\d+$", "", regex=True)
    return ops.assign(f=ops["f"].where(~side, family))


def draw_all(ops: pd.DataFrame, faults: pd.DataFrame, end_ns: int, out: Path) -> dict[str, Path]:
    """All three plots into `out`; returns name -> path."""
    ops = fold_side_processes(ops)
    spans = fault_spans(faults)
    end_s = end_ns / NS_PER_S
    return {
        "latency-raw": _save(latency_raw(ops, spans, end_s), out / LATENCY_RAW),
        "latency-quantiles": _save(latency_quantiles(ops, spans, end_s), out / LATENCY_QUANTILES),
        "rate": _save(rate(ops, spans, end_s), out / RATE),
    }
