"""The release gate: a suite's runs judged against thresholds, as JUnit XML, a one-page summary
(Markdown + HTML) and an exit code a CI job acts on (0 pass, 1 a threshold or checker failed,
2 unknown, 254 error).

Thresholds live in the suite file's `[gate]` table; `[[gate.cell]]` tables with a `match` (as
`[[cell]]`) change them for some cells. Each is checked per cell over every run (seed) of it, on the
run's measures (harness/measures.py, the reports' per-run definitions):

    [gate]
    checkers = true                        # no checker says invalid (no anomaly)     results.json
    lost = true                            # no acknowledged write lost               checkers' lost counts
    availability_during_faults_pct = 40    # worst run >= 40 % of ops during faults ok  ops' fault_state
    p99_outside_faults_ms = 500            # worst run's p99 of ok ops with no fault open <= 500 ms
    failover_s = 15                        # worst leader kill -> first committed write <= 15 s
    recovery_after_heal_s = 10             # worst final heal -> first committed write <= 10 s
    elections_per_leader_change = 3        # epochs started per epoch that elected a leader
    split_votes = 10                       # epochs that elected nobody
    leaderless_after_kill_s = 8            # kill -9 of the leader -> next leader's LeaderChange committed
    leaderless_after_resign_s = 1          # graceful stop of the leader -> the same

A threshold no run of a cell could measure (no leader kill, no op during a fault) is skipped for
that cell; a run that crashed, hung or was left out by the budget makes the cell's `checkers` case an
error (unknown).
"""

from __future__ import annotations

import html
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.suite import DIMENSIONS, RunRecord, SuiteCell, SuiteResult
from vocab.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, UserError


@dataclass(frozen=True)
class Threshold:
    key: str
    measure: str  # the RunRecord.measures key it reads
    limit: str  # "min" | "max" | "flag"
    unit: str
    about: str  # what it checks and where the measure comes from


THRESHOLDS: dict[str, Threshold] = {
    t.key: t
    for t in (
        Threshold("checkers", "invalid_checkers", "flag", "", "no checker says invalid (results.json verdicts)"),
        Threshold("lost", "lost", "flag", "", "no acknowledged write lost (the checkers' lost counts)"),
        Threshold(
            "availability_during_faults_pct",
            "availability_during_faults_pct",
            "min",
            "%",
            "ok share of the client ops invoked while a fault was open (ops' fault_state)",
        ),
        Threshold(
            "p99_outside_faults_ms",
            "p99_outside_faults_ms",
            "max",
            "ms",
            "p99 latency of ok client ops invoked with no fault open",
        ),
        Threshold(
            "failover_s", "failover_s", "max", "s", "leader kill -> first committed write (reports' recovery, start)"
        ),
        Threshold(
            "recovery_after_heal_s",
            "recovery_after_heal_s",
            "max",
            "s",
            "final heal -> first committed write (availability checker's time_to_recover_s)",
        ),
        Threshold(
            "elections_per_leader_change",
            "elections_per_leader_change",
            "max",
            "",
            "epochs started per epoch that elected a leader (elections checker: committed LeaderChange records)",
        ),
        Threshold("split_votes", "split_votes", "max", "", "epochs that elected nobody (elections checker)"),
        Threshold(
            "leaderless_after_kill_s",
            "leaderless_after_kill_s",
            "max",
            "s",
            "kill -9 of the leader -> the next leader's LeaderChange committed (elections checker)",
        ),
        Threshold(
            "leaderless_after_resign_s",
            "leaderless_after_resign_s",
            "max",
            "s",
            "graceful stop of the leader (EndQuorumEpoch) -> the next leader's LeaderChange committed",
        ),
    )
}
DEFAULTS: dict[str, Any] = {"checkers": True, "lost": True}


def _limit(key: str, value: Any, where: str) -> Any:
    threshold = THRESHOLDS.get(key)
    if threshold is None:
        raise UserError(f"{where}: unknown threshold {key!r} (known: {', '.join(THRESHOLDS)})")
    if threshold.limit == "flag":
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise UserError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


@dataclass
class GateConfig:
    limits: dict[str, Any]
    per_cell: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)

    def for_cell(self, cell: SuiteCell) -> dict[str, Any]:
        dims = {"workload": cell.workload, "nemesis": cell.nemesis, "cluster": cell.cluster, "backend": cell.backend}
        limits = dict(self.limits)
        for match, changes in self.per_cell:
            if all(dims[d] == v for d, v in match.items()):
                limits.update(changes)
        return {k: v for k, v in limits.items() if v is not False}


def gate_config(raw: Mapping[str, Any], where: Any) -> GateConfig:
    """The `[gate]` table: thresholds, and `[[gate.cell]]` changes for matching cells."""
    limits = dict(DEFAULTS)
    per_cell: list[tuple[dict[str, str], dict[str, Any]]] = []
    for key, value in raw.items():
        if key == "cell":
            if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
                raise UserError(f"{where.of('cell')}: expected [[gate.cell]] tables")
            for i, entry in enumerate(value, start=1):
                loc = f"{where.path}: gate.cell[{i}]"
                match = entry.get("match", {})
                if not isinstance(match, Mapping) or any(d not in DIMENSIONS for d in match):
                    raise UserError(f"{loc}.match: expected a table of {', '.join(DIMENSIONS)}")
                changes = {k: _limit(k, v, f"{loc}.{k}") for k, v in entry.items() if k != "match"}
                per_cell.append((dict(match), changes))
            continue
        limits[key] = _limit(key, value, where.of(key))
    return GateConfig(limits, per_cell)


@dataclass
class Case:
    """One JUnit test case: a cell against one threshold."""

    cell: SuiteCell
    threshold: str
    status: str  # pass | fail | unknown | skipped
    message: str
    detail: str = ""
    value: float | None = None
    runs: list[RunRecord] = field(default_factory=list)  # the runs that failed it


@dataclass
class GateResult:
    suite: SuiteResult
    cases: list[Case]

    @property
    def exit_code(self) -> int:
        statuses = {c.status for c in self.cases}
        return EXIT_INVALID if "fail" in statuses else EXIT_UNKNOWN if "unknown" in statuses else EXIT_VALID

    @property
    def verdict(self) -> str:
        return {EXIT_VALID: "PASS", EXIT_INVALID: "FAIL", EXIT_UNKNOWN: "UNKNOWN"}[self.exit_code]


def _run_line(record: RunRecord) -> str:
    return f"seed {record.seed}: {record.line or record.verdict} (run {record.run_dir or 'none'})"


def _checkers_case(cell: SuiteCell, result: SuiteResult) -> Case:
    records = result.cell_records(cell)
    invalid = [r for r in records if r.verdict == "invalid"]
    unknown = [r for r in records if r.verdict == "unknown"]
    missing = len(result.suite.seeds) - len(records)
    if invalid:
        first = invalid[0]
        detail = "\n".join(map(_run_line, invalid))
        return Case(cell, "checkers", "fail", first.line or "invalid", detail, None, invalid)
    if unknown or missing:
        seeds = len(result.suite.seeds)
        why = unknown[0].line if unknown else f"{missing} of {seeds} runs not run ({result.stopped_by})"
        return Case(cell, "checkers", "unknown", why, "\n".join(map(_run_line, unknown)), None, unknown)
    return Case(cell, "checkers", "pass", f"{len(records)} runs valid")


def _measure_case(cell: SuiteCell, result: SuiteResult, key: str, limit: Any) -> Case:
    threshold = THRESHOLDS[key]
    broken = [r for r in result.cell_records(cell) if "error" in r.measures]
    if broken:  # a measure that could not be computed never passes silently
        why = f"measures not computed: {broken[0].measures['error']}"
        return Case(cell, key, "unknown", why, "\n".join(f"seed {r.seed}: {r.run_dir}" for r in broken), None, broken)
    measured = [(r, r.measures.get(threshold.measure)) for r in result.cell_records(cell) if r.measures]
    if key == "lost":
        bad = [r for r, v in measured if v]
        if bad:
            total = sum(int(r.measures.get("lost") or 0) for r in bad)
            detail = "\n".join(map(_run_line, bad))
            return Case(cell, key, "fail", f"{total} acknowledged writes lost", detail, total, bad)
        return Case(cell, key, "pass", "no acknowledged write lost", value=0)
    values = [(r, float(v)) for r, v in measured if isinstance(v, int | float)]
    unrecovered = [r for r, _ in measured if key == "failover_s" and r.measures.get("failover_unrecovered")]
    if key.startswith("leaderless_"):
        unrecovered = [r for r, _ in measured if r.measures.get("leaderless_unrecovered")]
    if unrecovered:
        what = (
            "no leader committed after a leader stop"
            if key.startswith("leaderless_")
            else "no write committed after a leader kill"
        )
        msg = f"{what} (limit {limit:g} {threshold.unit})"
        return Case(cell, key, "fail", msg, "\n".join(map(_run_line, unrecovered)), None, unrecovered)
    if not values:
        return Case(cell, key, "skipped", "not measured in this cell (nothing to measure)")
    pick = min if threshold.limit == "min" else max
    worst_record, worst = pick(values, key=lambda rv: rv[1])
    ok = worst >= limit if threshold.limit == "min" else worst <= limit
    sign = ">=" if threshold.limit == "min" else "<="
    text = f"{worst:.1f} {threshold.unit} (limit {sign} {limit:g} {threshold.unit}, worst of {len(values)} runs)"
    if ok:
        return Case(cell, key, "pass", text, value=worst)
    bad = [r for r, v in values if (v < limit if threshold.limit == "min" else v > limit)]
    detail = "\n".join(f"seed {r.seed}: {v:.1f} {threshold.unit} (run {r.run_dir})" for r, v in values if r in bad)
    return Case(cell, key, "fail", text, detail, worst, [worst_record])


def evaluate(result: SuiteResult, config: GateConfig) -> GateResult:
    cases: list[Case] = []
    for cell in result.suite.cells:
        limits = config.for_cell(cell)
        for key in THRESHOLDS:
            if key not in limits:
                continue
            if key == "checkers":
                cases.append(_checkers_case(cell, result))
            else:
                cases.append(_measure_case(cell, result, key, limits[key]))
    return GateResult(result, cases)


# --- outputs ----------------------------------------------------------------------------------------


def junit_xml(gate: GateResult) -> str:
    """One <testsuite> for the suite; a <testcase> per cell and threshold (classname: the cell)."""
    suite = gate.suite
    name = suite.suite_id + (f" [bugs: {', '.join(suite.suite.bugs)}]" if suite.suite.bugs else "")
    counts = {s: sum(1 for c in gate.cases if c.status == s) for s in ("fail", "unknown", "skipped")}
    root = ET.Element("testsuites", name=name, tests=str(len(gate.cases)), failures=str(counts["fail"]))
    ts = ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(len(gate.cases)),
        failures=str(counts["fail"]),
        errors=str(counts["unknown"]),
        skipped=str(counts["skipped"]),
        time=f"{suite.wall_s:.1f}",
    )
    for case in gate.cases:
        wall = sum(r.wall_s for r in suite.cell_records(case.cell)) if case.threshold == "checkers" else 0.0
        tc = ET.SubElement(ts, "testcase", classname=case.cell.id, name=case.threshold, time=f"{wall:.1f}")
        if case.status == "fail":
            ET.SubElement(tc, "failure", message=case.message, type=case.threshold).text = case.detail or case.message
        elif case.status == "unknown":
            ET.SubElement(tc, "error", message=case.message, type="unknown").text = case.detail or case.message
        elif case.status == "skipped":
            ET.SubElement(tc, "skipped", message=case.message)
        else:
            ET.SubElement(tc, "system-out").text = case.message
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


MARK = {"pass": "pass", "fail": "**FAIL**", "unknown": "unknown", "skipped": "-"}


def summary_markdown(gate: GateResult) -> str:
    from harness.suite import table_markdown

    suite = gate.suite
    keys = [k for k in THRESHOLDS if any(c.threshold == k for c in gate.cases)]
    by = {(c.cell.id, c.threshold): c for c in gate.cases}
    bugs = f" with planted bugs {', '.join(suite.suite.bugs)}" if suite.suite.bugs else ""
    lines = [
        f"# Release gate: {gate.verdict} ({suite.suite_id}{bugs})",
        "",
        f"Exit code {gate.exit_code}. {len(gate.cases)} checks over {len(suite.suite.cells)} cells and "
        f"{len(suite.records)} runs ({sum(c.status == 'fail' for c in gate.cases)} failed, "
        f"{sum(c.status == 'unknown' for c in gate.cases)} unknown); wall {suite.wall_s:.0f} s.",
        "",
        "| cell | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for cell in suite.suite.cells:
        cells = []
        for key in keys:
            case = by.get((cell.id, key))
            if case is None:
                cells.append("")
            elif case.value is not None and key != "lost":
                cells.append(f"{MARK[case.status]} {case.value:.1f}")
            else:
                cells.append(MARK[case.status])
        lines.append(f"| {cell.id} | " + " | ".join(cells) + " |")
    failures = [c for c in gate.cases if c.status in ("fail", "unknown")]
    if failures:
        lines += ["", "## Failures", ""]
        for case in failures:
            lines.append(f"- **{case.cell.id} / {case.threshold}** ({case.status}): {case.message}")
            lines += [f"  - {line}" for line in case.detail.splitlines()[:10]]
    lines += ["", "## Thresholds", ""]
    lines += [f"- `{k}`: {THRESHOLDS[k].about}" for k in keys]
    lines += ["", "## Runs by cell", "", table_markdown(suite)]
    return "\n".join(lines) + "\n"


def summary_html(gate: GateResult) -> str:
    """The same page as HTML, self-contained."""
    suite = gate.suite
    keys = [k for k in THRESHOLDS if any(c.threshold == k for c in gate.cases)]
    by = {(c.cell.id, c.threshold): c for c in gate.cases}
    colour = {"pass": "#1a7f37", "fail": "#cf222e", "unknown": "#9a6700", "skipped": "#888"}
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    rows = []
    for cell in suite.suite.cells:
        tds = []
        for key in keys:
            case = by.get((cell.id, key))
            if case is None:
                tds.append("<td></td>")
                continue
            text = case.status + (f" {case.value:.1f}" if case.value is not None and key != "lost" else "")
            tip = html.escape(case.message + ("\n" + case.detail if case.detail else ""), quote=True)
            tds.append(f'<td style="color:{colour[case.status]}" title="{tip}">{html.escape(text)}</td>')
        rows.append(f"<tr><th>{html.escape(cell.id)}</th>{''.join(tds)}</tr>")
    failures = [c for c in gate.cases if c.status in ("fail", "unknown")]
    items = "".join(
        f"<li><b>{html.escape(c.cell.id)} / {html.escape(c.threshold)}</b> ({c.status}): {html.escape(c.message)}"
        f"<pre>{html.escape(c.detail)}</pre></li>"
        for c in failures
    )
    verdict_colour = colour["pass" if gate.exit_code == 0 else "fail" if gate.exit_code == 1 else "unknown"]
    bugs = f" with planted bugs {', '.join(suite.suite.bugs)}" if suite.suite.bugs else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>gate {html.escape(suite.suite_id)}: {gate.verdict}</title><style>"
        "body{font-family:sans-serif;margin:24px} table{border-collapse:collapse} td,th{border:1px solid #ddd;"
        "padding:4px 8px;text-align:left} pre{margin:2px 0;font-size:12px}</style></head><body>"
        f'<h1>Release gate: <span style="color:{verdict_colour}">{gate.verdict}</span></h1>'
        f"<p>{html.escape(suite.suite_id + bugs)} · exit code {gate.exit_code} · {len(suite.records)} runs · "
        f"wall {suite.wall_s:.0f} s · {html.escape(str(suite.root))}</p>"
        f"<table><tr><th>cell</th>{head}</tr>{''.join(rows)}</table>"
        + (f"<h2>Failures</h2><ul>{items}</ul>" if items else "")
        + "<h2>Thresholds</h2><ul>"
        + "".join(f"<li><code>{k}</code>: {html.escape(THRESHOLDS[k].about)}</li>" for k in keys)
        + "</ul></body></html>\n"
    )


def write_outputs(gate: GateResult, junit: Path, summary: Path) -> list[Path]:
    from harness import store

    written = []
    for path, text in ((junit, junit_xml(gate)), (summary, summary_markdown(gate))):
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(store.write_text_atomic(path, text))
    written.append(store.write_text_atomic(summary.with_suffix(".html"), summary_html(gate)))
    return written


__all__ = ["THRESHOLDS", "Case", "GateConfig", "GateResult", "evaluate", "gate_config", "junit_xml", "write_outputs"]
