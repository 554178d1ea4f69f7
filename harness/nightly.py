"""Nightly runs: tonight's suite judged by its gate, the last N nights kept, and a trend report that
compares tonight with the nights before and names regressions.

A night is one suite root (`<results>/suites/<name>/<timestamp>/`, harness/suite.py). The trend
report reads each kept night's `runs.jsonl` (per-run verdicts and measures, harness/measures.py) and
needs no Spark. Per cell it takes each night's worst run of each measure (the gate's view), and names:

- a **new failure**: the cell is invalid tonight and was not on the previous night;
- a **regression** of a measure: tonight's worst is worse than the median of the earlier nights by
  more than the noise, which is the largest of a share of that median (25 % of a p99, failover or
  recovery time; none for availability, a percentage already), three median absolute deviations of
  the earlier nights, and a floor (50 ms of p99, 0.5 s of failover or recovery, 10 points of
  availability).

It also lists cells that were fixed (invalid on the previous night, valid tonight).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.suite import SUITE_FILE, RunRecord, read_journal

# measure -> (worse when "higher" or "lower", absolute noise floor, relative noise, unit)
TRENDED: dict[str, tuple[str, float, float, str]] = {
    "p99_outside_faults_ms": ("higher", 50.0, 0.25, "ms"),
    "failover_s": ("higher", 0.5, 0.25, "s"),
    "recovery_after_heal_s": ("higher", 0.5, 0.25, "s"),
    "availability_during_faults_pct": ("lower", 10.0, 0.0, "%"),
}
MAD_FACTOR = 3.0
_NIGHT_RE = re.compile(r"^\d{8}T\d{6}Z$")


@dataclass
class Night:
    root: Path
    id: str
    records: dict[str, RunRecord]
    seeds: tuple[int, ...] = ()  # the seeds the night was to run (its suite.json)

    @property
    def name(self) -> str:
        return self.root.name

    def cells(self) -> list[str]:
        return sorted({r.cell for r in self.records.values()})

    def verdict(self, cell: str) -> str:
        verdicts = {r.verdict for r in self.records.values() if r.cell == cell}
        return "invalid" if "invalid" in verdicts else "unknown" if "unknown" in verdicts or not verdicts else "valid"

    def worst(self, cell: str, measure: str) -> float | None:
        """The cell's worst run of `measure` this night (None when no run measured it)."""
        values = [
            float(v)
            for r in self.records.values()
            if r.cell == cell and isinstance(v := r.measures.get(measure), int | float) and not isinstance(v, bool)
        ]
        if not values:
            return None
        return min(values) if TRENDED[measure][0] == "lower" else max(values)


def nights(suite_dir: Path) -> list[Night]:
    """The suite's nights, oldest first (timestamped folders holding a suite.json)."""
    found = []
    if suite_dir.is_dir():
        for path in sorted(suite_dir.iterdir()):
            if path.is_symlink() or not _NIGHT_RE.match(path.name) or not (path / SUITE_FILE).is_file():
                continue
            try:
                meta = json.loads((path / SUITE_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            found.append(Night(path, str(meta.get("id", path.name)), read_journal(path), _seeds(meta)))
    return found


def _seeds(meta: dict[str, Any]) -> tuple[int, ...]:
    try:
        return tuple(int(seed) for seed in meta.get("seeds") or ())
    except (TypeError, ValueError):
        return ()


def next_seeds(suite_dir: Path, count: int) -> str:
    """`count` seeds after the highest seed any kept night was to run, as `A..B` (`kchaos nightly
    --seeds next`): on the simulator the same seed replays the same schedule until the code changes,
    so a night that repeats last night's seeds mostly repeats its runs; this way each night explores
    schedules no kept night ran. From 1 when no night is kept."""
    highest = max((seed for night in nights(suite_dir) for seed in night.seeds), default=0)
    return f"{highest + 1}..{highest + count}"


def prune(suite_dir: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` nights; returns what was removed (only suite roots)."""
    removed = []
    for night in nights(suite_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(night.root)
        removed.append(night.root)
    return removed


@dataclass
class Finding:
    cell: str
    kind: str  # new-failure | regression | fixed
    text: str
    measure: str = ""


@dataclass
class Trend:
    tonight: Night
    earlier: list[Night]
    findings: list[Finding] = field(default_factory=list)

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in ("new-failure", "regression")]


def _noise(baseline: float, history: list[float], floor: float, relative: float) -> float:
    mad = statistics.median([abs(v - baseline) for v in history]) if history else 0.0
    return max(relative * abs(baseline), MAD_FACTOR * mad, floor)


def trend(all_nights: list[Night]) -> Trend:
    """Tonight (the newest night) against the earlier ones (see the module docstring)."""
    tonight, earlier = all_nights[-1], all_nights[:-1]
    result = Trend(tonight, earlier)
    previous = earlier[-1] if earlier else None
    for cell in tonight.cells():
        verdict = tonight.verdict(cell)
        before = previous.verdict(cell) if previous and cell in previous.cells() else None
        if verdict == "invalid" and before in ("valid", "unknown", None) and previous is not None:
            first = next(
                r
                for r in sorted(tonight.records.values(), key=lambda r: r.seed)
                if r.cell == cell and r.verdict == "invalid"
            )
            was = "not run" if before is None else before
            result.findings.append(
                Finding(
                    cell,
                    "new-failure",
                    f"invalid tonight (was {was}): seed {first.seed}: {first.line} ({first.run_dir})",
                )
            )
        elif verdict == "valid" and before == "invalid":
            result.findings.append(Finding(cell, "fixed", "valid tonight, invalid the night before"))
        for measure, (worse, floor, relative, unit) in TRENDED.items():
            now = tonight.worst(cell, measure)
            history = [v for n in earlier if (v := n.worst(cell, measure)) is not None]
            if now is None or not history:
                continue
            baseline = statistics.median(history)
            noise = _noise(baseline, history, floor, relative)
            delta = now - baseline if worse == "higher" else baseline - now
            if delta > noise:
                result.findings.append(
                    Finding(
                        cell,
                        "regression",
                        f"{measure} {now:.1f} {unit} tonight, median {baseline:.1f} {unit} over {len(history)} "
                        f"earlier nights (noise {noise:.1f} {unit})",
                        measure,
                    )
                )
    return result


def trend_markdown(t: Trend) -> str:
    lines = [
        f"# Nightly trend: {t.tonight.id}",
        "",
        f"Tonight against {len(t.earlier)} earlier nights"
        + (f" ({t.earlier[0].name} to {t.earlier[-1].name})" if t.earlier else "")
        + f": {len(t.regressions)} regressions.",
        "",
    ]
    if t.findings:
        lines += ["| cell | finding | detail |", "|---|---|---|"]
        lines += [f"| {f.cell} | {f.kind} | {f.text.replace('|', '/')} |" for f in t.findings]
    else:
        lines.append("No new failure and no measure worse beyond noise.")
    nights_shown = [*t.earlier, t.tonight]
    lines += ["", "## Cells by night (verdict; worst p99 outside faults ms / failover s)", ""]
    lines += ["| cell | " + " | ".join(n.name for n in nights_shown) + " |", "|---|" + "---|" * len(nights_shown)]
    for cell in t.tonight.cells():
        row = []
        for n in nights_shown:
            if cell not in n.cells():
                row.append("-")
                continue
            p99, failover = n.worst(cell, "p99_outside_faults_ms"), n.worst(cell, "failover_s")
            figures = f"{'-' if p99 is None else f'{p99:.0f}'} / {'-' if failover is None else f'{failover:.1f}'}"
            row.append(f"{n.verdict(cell)}; {figures}")
        lines.append(f"| {cell} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def trend_html(t: Trend) -> str:
    """The trend page as self-contained HTML (the Markdown's tables, rendered)."""
    rows = "".join(
        f"<tr><td>{html.escape(f.cell)}</td><td>{html.escape(f.kind)}</td><td>{html.escape(f.text)}</td></tr>"
        for f in t.findings
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>nightly trend {html.escape(t.tonight.id)}</title><style>body{{font-family:sans-serif;margin:24px}}"
        "table{border-collapse:collapse} td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}</style>"
        f"</head><body><h1>Nightly trend: {html.escape(t.tonight.id)}</h1>"
        f"<p>{len(t.regressions)} regressions against {len(t.earlier)} earlier nights.</p>"
        + (f"<table><tr><th>cell</th><th>finding</th><th>detail</th></tr>{rows}</table>" if rows else "")
        + f"<pre>{html.escape(trend_markdown(t))}</pre></body></html>\n"
    )


def write_trend(t: Trend) -> list[Path]:
    from harness import store

    out = []
    for name, text in (("trend.md", trend_markdown(t)), ("trend.html", trend_html(t))):
        out.append(store.write_text_atomic(t.tonight.root / name, text))
    data: dict[str, Any] = {
        "tonight": t.tonight.id,
        "earlier": [n.id for n in t.earlier],
        "findings": [f.__dict__ for f in t.findings],
        "regressions": len(t.regressions),
    }
    out.append(store.write_json_atomic(t.tonight.root / "trend.json", data))
    return out


__all__ = ["Finding", "Night", "Trend", "nights", "prune", "trend", "trend_markdown", "write_trend"]
