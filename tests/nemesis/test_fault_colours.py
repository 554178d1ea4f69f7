"""Each fault kind shaded in its own colour, with a legend, in the run plots and in report.html."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.colors import to_hex

from harness import plots
from harness.run_report import fault_timeline
from vocab.faults.catalogue import KIND_COLORS

SPANS = [
    plots.FaultSpan("partition", 1.0, 4.0, True),
    plots.FaultSpan("clock", 2.0, 6.0, True),  # overlaps the partition
    plots.FaultSpan("partition", 7.0, 8.0, True),
    plots.FaultSpan("buggify", 3.0, 3.1, True),
]


def test_plots_shade_each_kind_in_its_colour_with_one_legend_entry_per_kind():
    ops = pd.DataFrame({"f": [], "outcome": [], "invoke_ns": [], "complete_ns": [], "latency_ms": []})
    fig = plots.latency_raw(ops, SPANS, 10.0)
    try:
        ax = fig.axes[0]
        shaded = sorted((p.get_x(), to_hex(p.get_facecolor())) for p in ax.patches)
        assert shaded == sorted((s.start_s, KIND_COLORS[s.kind]) for s in SPANS)
        legend = {t.get_text(): to_hex(h.get_facecolor()) for t, h in zip(
            ax.get_legend().get_texts(), ax.get_legend().legend_handles, strict=True)}  # fmt: skip
        assert legend == {f"{k} (fault)": KIND_COLORS[k] for k in ("buggify", "clock", "partition")}
    finally:
        plt.close(fig)
    assert plots.fault_color("meteor") == "#777777"


def test_report_timeline_has_a_row_per_kind_with_its_colour_and_bars_where_the_windows_are():
    faults = pd.DataFrame(
        {
            "kind": ["partition", "clock", "partition"],
            "targets": ["c1", "c2", "c1"],
            "start_s": [1.0, 2.0, 7.0],
            "end_s": [4.0, 6.0, 8.0],
        }
    )
    html = fault_timeline(faults, 10.0)
    rows = html.split('class="tl-row"')[1:]
    assert [r.split("</i>")[1].split("<")[0] for r in rows] == ["clock", "partition"]
    clock, partition = rows
    assert f"background:{KIND_COLORS['clock']}" in clock and KIND_COLORS["partition"] not in clock
    assert partition.count("<span style=") == 2
    assert "left:10.000%;width:30.000%" in partition and "left:70.000%;width:10.000%" in partition
    assert fault_timeline(faults.iloc[0:0], 10.0) == ""
