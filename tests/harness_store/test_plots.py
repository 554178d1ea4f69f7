"""Fault windows, time windows and the tables behind the plots; shading lands on the windows."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from harness import plots
from harness.store import history_table
from reports import metrics

MS = 1_000_000


def _frames(events: list[tuple[int, object, str, str, object]]) -> metrics.RunFrames:
    rows = [
        {"index": i, "time": t * MS, "process": p, "type": ty, "f": f, "value": v}
        for i, (t, p, ty, f, v) in enumerate(events)
    ]
    return metrics.derive(history_table(rows).to_pandas())


NEMESIS_EVENTS = [
    (0, 0, "invoke", "read", None),
    (100, "nemesis", "invoke", "start-partition", {"targets": ["n1"]}),
    (102, "nemesis", "info", "start-partition", {"targets": ["n1"]}),
    (300, "nemesis", "invoke", "start-pause", {"targets": ["n2"]}),
    (301, "nemesis", "fail", "start-pause", None),  # injected nothing: no window
    (500, "nemesis", "invoke", "stop-partition", None),
    (505, "nemesis", "info", "stop-partition", None),
    (600, "nemesis", "invoke", "start-kill", {"targets": ["n3"]}),
    (601, "nemesis", "info", "start-kill", {"targets": ["n3"]}),
    (700, "nemesis", "invoke", "start-partition", {"targets": ["n2"]}),
    (704, "nemesis", "info", "start-partition", {"targets": ["n2"]}),
    (900, 0, "ok", "read", 1),
]


def test_fault_windows_pair_start_and_stop_and_open_ones_run_to_the_end() -> None:
    spans = plots.fault_spans(_frames(NEMESIS_EVENTS).faults)
    assert spans == [
        plots.FaultSpan("partition", 0.102, 0.505, True),  # start completion -> stop completion
        plots.FaultSpan("kill", 0.601, 0.9, False),  # never stopped: to the last event
        plots.FaultSpan("partition", 0.704, 0.9, False),
    ]


def _x_extent(patch) -> tuple[float, float]:
    if isinstance(patch, Rectangle):
        return patch.get_x(), patch.get_x() + patch.get_width()
    xs = np.asarray(patch.get_xy())[:, 0]  # older matplotlib: axvspan draws a Polygon
    return float(xs.min()), float(xs.max())


def test_shading_covers_exactly_the_fault_windows() -> None:
    frames = _frames(NEMESIS_EVENTS)
    spans = plots.fault_spans(frames.faults)
    for draw in (plots.latency_raw, plots.latency_quantiles, plots.rate):
        fig = draw(frames.ops, spans, 0.9)
        try:
            for ax in fig.axes:  # every panel
                shaded = [x for extent in sorted(_x_extent(p) for p in ax.patches) for x in extent]
                want = [x for s in sorted(spans, key=lambda s: (s.start_s, s.end_s)) for x in (s.start_s, s.end_s)]
                assert shaded == pytest.approx(want), draw.__name__
                assert ax.get_xlim() == pytest.approx((0, 0.9))
        finally:
            plt.close(fig)


@pytest.mark.parametrize(
    ("end_s", "width"), [(60.0, 2.0), (0.061, 0.002), (400.0, 10.0), (40.0, 1.0), (0.0, 1.0), (3.9, 0.1)]
)
def test_window_width_is_round_and_gives_about_forty_windows(end_s: float, width: float) -> None:
    assert plots.window_seconds(end_s) == pytest.approx(width)


def _ops(rows: list[tuple[str, str, int, int | None]]) -> pd.DataFrame:
    """(f, outcome, invoke ms, complete ms) -> the columns the plots read."""
    return pd.DataFrame(
        {
            "f": [r[0] for r in rows],
            "outcome": [r[1] for r in rows],
            "invoke_ns": [r[2] * MS for r in rows],
            "complete_ns": pd.array([None if r[3] is None else r[3] * MS for r in rows], dtype="Int64"),
            "latency_ms": [np.nan if r[3] is None else float(r[3] - r[2]) for r in rows],
        }
    )


def test_quantiles_per_window_by_invocation_time() -> None:
    ops = _ops([("read", "ok", 0, 1), ("read", "ok", 100, 102), ("read", "ok", 200, 203), ("read", "ok", 300, 304),
                ("read", "ok", 1100, 1110), ("read", "info", 1200, None), ("write", "fail", 50, 60)])  # fmt: skip
    table = plots.quantile_table(ops, 1.0).set_index(["f", "window"])
    first = table.loc[("read", 0.0)]
    assert first["count"] == 4 and first["p50"] == 2.5 and first["max"] == 4.0
    assert first["p95"] == pytest.approx(3.85) and first["p99"] == pytest.approx(3.97)
    assert table.loc[("read", 1.0), "count"] == 1 and table.loc[("read", 1.0), "max"] == 10.0
    assert table.loc[("write", 0.0), "max"] == 10.0


def test_rate_counts_completions_per_window() -> None:
    ops = _ops([("read", "ok", 0, 100), ("read", "ok", 0, 400), ("read", "fail", 0, 450), ("read", "ok", 0, 700),
                ("write", "ok", 0, 800), ("read", "info", 0, None)])  # fmt: skip
    table = plots.rate_table(ops, 0.5)
    got = {(r.f, r.outcome, r.window): r.ops_per_s for r in table.itertuples()}
    assert got == {("read", "ok", 0): 4.0, ("read", "fail", 0): 2.0, ("read", "ok", 1): 2.0, ("write", "ok", 1): 2.0}


def test_side_processes_are_one_series_each():
    """The forger sends a dozen kinds of forged request; the plots show it as one series, named after it."""
    import pandas as pd

    from harness.plots import fold_side_processes

    ops = pd.DataFrame({"process": ["0", "12", "forger", "forger-2"], "f": ["read", "write", "forge-a", "forge-b"]})
    assert fold_side_processes(ops)["f"].tolist() == ["read", "write", "forger", "forger"]


def test_a_log_latency_axis_reads_in_plain_numbers_at_1_2_5_steps() -> None:
    """Latencies from 3 ms to 4 s on a log axis: ticks at 1, 2 and 5 times each power of ten (no more:
    each tick costs its own artists), labelled 2, 5, 10, 20, ... rather than 10^1 and 2x10^1."""
    ops = _ops([("write", "ok", i * 100, i * 100 + ms) for i, ms in enumerate((3, 40, 700, 4000))])
    fig = plots.latency_raw(ops, [], 1.0)
    try:
        (ax,) = fig.axes
        fig.canvas.draw()
        low, high = ax.get_ylim()
        shown = [t for t in ax.yaxis.get_ticklocs(minor=True) if low <= t <= high]
        mantissas = {round(t / 10 ** np.floor(np.log10(t)), 6) for t in shown}
        assert ax.get_yscale() == "log" and mantissas == {2.0, 5.0}, shown
        labels = {t.get_text() for t in [*ax.get_yticklabels(), *ax.get_yticklabels(minor=True)] if t.get_text()}
        assert {"10", "100", "1000"} <= labels and all("^" not in label and "times" not in label for label in labels)
    finally:
        plt.close(fig)
