"""Analyse one run directory: check its history, write results.json, viewers, plots and report.html.

The runner calls `analyze_run` at the end of a run and `kchaos analyze` calls it on a stored run with
today's checkers. Only derived files are (re)written: history.jsonl is read, never changed. A torn last
line (the harness was killed mid-write) is dropped and reported; the prefix before it is a valid
history, because every op left pending there counts as indeterminate.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from checkers.history import History
from checkers.log_agreement import DUMP_NAME
from checkers.quorum_progress import COMMITS_NAME
from checkers.registry import CHECKERS, checker_module, get_checker
from checkers.verdict import UNKNOWN, Validity, Verdict, exit_code, merge_validity
from harness import plots, store
from harness.db import SUT_CHECKS  # importing it registers the adapters' own checkers (image-replay)
from reports import metrics
from reports.html_report import STYLE
from vocab.errors import UserError

# workload -> checkers run on its history, for workloads the registry (workloads/) does not know
DEFAULT_CHECKERS: dict[str, tuple[str, ...]] = {"config-register": ("linearizable",)}
# checker -> its options (the flags `kchaos check` would take, as attribute names)
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"linearizable": {"model": "register"}}
# checks every run gets whatever its workload (issue 13: liveness is a verdict); log-agreement and the
# system adapter's own checks (harness/db SUT_CHECKS) are added when the nodes left dumps
END_CHECKS: tuple[str, ...] = ("availability",)
VIEWER_PREFIX = "counterexample-"
MAX_NODE_FILES = 200  # links listed per node in report.html


@dataclass
class Analysis:
    """What `analyze_run` decided and wrote."""

    run: store.RunDir
    valid: Validity
    verdicts: list[Verdict]
    results_path: Path
    report_path: Path
    viewers: dict[str, Path] = field(default_factory=dict)
    plots: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    end_of_run: list[str] = field(default_factory=list)  # which of the verdicts are end-of-run checks

    @property
    def exit_code(self) -> int:
        """BRIEF §3.4: 0 valid, 1 invalid, 2 unknown."""
        return exit_code(self.valid)


# ---------------------------------------------------------------------------------------------------
# Which checkers, with which options


def _registered_workload(name: Any, sut: Any = None) -> Any:
    """The workload registry's entry (workloads/) for the test's system under test, or None for a name
    it does not know."""
    from harness.plugins import find_workload

    return find_workload(str(name), None if sut is None else str(sut))


def workload_checkers(test: Mapping[str, Any], mapping: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The checkers the test's workload names for its own history."""
    name = str(test.get("workload"))
    registered = _registered_workload(name, test.get("sut"))
    table = {**DEFAULT_CHECKERS, **({name: registered.checkers} if registered else {}), **(mapping or {})}
    return list(table.get(name, ()))


def end_checks(test: Mapping[str, Any], run: store.RunDir) -> list[str]:
    """The end-of-run checks: availability always; quorum-progress when the adapter timed the committed log;
    log agreement and the system's own checks (e.g. image replay) when nodes left committed-log dumps."""
    names = list(END_CHECKS)
    if (run.path / COMMITS_NAME).is_file():  # the adapter timed the committed log while the run went on
        names.append("quorum-progress")
    if any(run.nodes.glob(f"*/{DUMP_NAME}")):
        names.append("log-agreement")
    for name, needs in SUT_CHECKS.get(str(test.get("sut", "kraft")), {}).items():
        if any(run.nodes.glob(f"*/{needs}")):
            names.append(name)
    return names


def checker_names(
    test: Mapping[str, Any], run: store.RunDir, mapping: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """The test's own `checkers` list, else the workload's checkers and the end-of-run checks."""
    named = test.get("checkers")
    if named is not None:
        if not isinstance(named, list) or not all(isinstance(n, str) for n in named):
            raise UserError(f"{run.test_json}: 'checkers' must be a list of checker names")
        names = list(named)
    else:  # a workload nobody knows how to check gets no end-of-run verdicts either (unknown overall)
        names = workload_checkers(test, mapping)
        names += end_checks(test, run) if names else []
    unknown = [n for n in names if n not in CHECKERS]
    if unknown:
        raise UserError(f"{run.test_json}: unknown checker {unknown[0]!r} (known: {', '.join(sorted(CHECKERS))})")
    return list(dict.fromkeys(names))


def run_options(test: Mapping[str, Any], options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Checker options for a run: the workload's (registry), the availability window from the test's
    `recovery_s`, then `options` on top."""
    merged: dict[str, dict[str, Any]] = {}
    registered = _registered_workload(test.get("workload"), test.get("sut"))
    layers: list[Mapping[str, Mapping[str, Any]]] = [registered.checker_options if registered else {}]
    recovery = test.get("recovery_s")
    if isinstance(recovery, int | float) and not isinstance(recovery, bool):
        layers.append({"availability": {"recovery_window": float(recovery)}})
    layers.append(options or {})
    for layer in layers:
        for checker, opts in layer.items():
            merged.setdefault(checker, {}).update(opts)
    return merged


def availability_write_fs(test: Mapping[str, Any]) -> frozenset[str]:
    """The fs the availability checker counts as writes for this run's workload."""
    from checkers.availability import DEFAULT_WRITE_FS

    chosen = run_options(test).get("availability", {}).get("write_f")
    return frozenset(chosen or DEFAULT_WRITE_FS)


def checker_args(run: store.RunDir, options: Mapping[str, Mapping[str, Any]] | None = None) -> argparse.Namespace:
    """Every checker's flags at their defaults, exactly as `kchaos check RUN_DIR/history.jsonl` parses
    them, then `options` on top (all checkers share one namespace, as on that command line)."""
    from checkers import cli as check_cli

    parser = argparse.ArgumentParser(add_help=False)
    check_cli.register(parser.add_subparsers())
    args = parser.parse_args(["check", str(run.history_jsonl)])
    args.dumps = run.path
    for opts in (*DEFAULT_OPTIONS.values(), *(options or {}).values()):
        for key, value in opts.items():
            setattr(args, key, value)
    return args


def run_checkers(history: History, names: Sequence[str], args: argparse.Namespace) -> list[Verdict]:
    """Each checker's verdict; a checker that raises is `unknown` with the error, and the rest still run."""
    verdicts = []
    for name in names:
        try:
            verdicts.append(get_checker(name)(history, args))
        except Exception as exc:  # a crashing checker must not lose the others' verdicts
            verdicts.append(Verdict(name, UNKNOWN, {"error": f"{type(exc).__name__}: {exc}"}))
    return verdicts


def write_viewers(
    run: store.RunDir, history: History, verdicts: Sequence[Verdict], args: argparse.Namespace
) -> dict[str, Path]:
    """A counterexample viewer per invalid checker that can draw one; stale viewers are removed."""
    for old in run.path.glob(f"{VIEWER_PREFIX}*.html"):
        old.unlink()
    written: dict[str, Path] = {}
    for verdict in verdicts:
        if verdict.valid is not False:
            continue
        target = run.path / f"{VIEWER_PREFIX}{verdict.checker}.html"
        if verdict.checker == "linearizable":
            from checkers.viewer import write_html

            written[verdict.checker] = write_html(target, history, verdict, model=args.model)
        elif verdict.checker.startswith("elle-"):
            from checkers.elle.render import write_html as write_cycles

            written[verdict.checker] = write_cycles(target, verdict)
    return written


def checker_summary(verdict: Verdict) -> list[str]:
    """The checker's own console summary, or its verdict and error."""
    if "error" in verdict.details:
        return [f"{verdict.checker}: {verdict.valid} (checker failed: {verdict.details['error']})"]
    summarize = getattr(checker_module(verdict.checker), "summarize", None) if verdict.checker in CHECKERS else None
    try:
        return list(summarize(verdict)) if summarize else [f"{verdict.checker}: {verdict.valid}"]
    except (KeyError, TypeError, ValueError, IndexError):
        return [f"{verdict.checker}: {verdict.valid}"]


# ---------------------------------------------------------------------------------------------------
# Figures


@dataclass
class Figures:
    """The run's numbers, from the same derivation the Spark reports use."""

    frames: metrics.RunFrames
    latency: pd.DataFrame  # metrics.latency_quantiles by f

    @property
    def stats(self) -> dict[str, Any]:
        ops = self.frames.ops
        counts = ops["outcome"].value_counts()
        by_f = ops.groupby(["f", "outcome"]).size()
        duration = self.frames.end_ns / metrics.NS_PER_S
        return {
            "events": self.frames.events,
            "ops": len(ops),
            **{o: int(counts.get(o, 0)) for o in ("ok", "fail", "info")},
            "by_f": {str(f): {str(o): int(n) for o, n in by_f[f].items()} for f in sorted(ops["f"].dropna().unique())},
            "duration_s": duration,
            "ops_per_s": len(ops) / duration if duration > 0 else None,
            "faults": len(self.frames.faults),
        }


def figures_of(table) -> Figures:
    frames = metrics.derive(table.to_pandas())
    return Figures(frames, metrics.latency_quantiles(frames.ops, ["f"]))


# ---------------------------------------------------------------------------------------------------
# The whole analysis


def analyze_run(
    run_dir: str | os.PathLike[str] | store.RunDir,
    checkers: Mapping[str, Sequence[str]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    only: Sequence[str] | None = None,
    draw_plots: bool = True,
) -> Analysis:
    """Check a run and write history.parquet, results.json, counterexample viewers, plots, report.html.

    `checkers` maps workloads to checker names (over DEFAULT_CHECKERS), `options` checkers to their
    options (over DEFAULT_OPTIONS); `only` replaces the checker list altogether. `draw_plots=False`
    skips the plots (most of the analysis time; batch runs such as `kchaos bugs` skip them, and
    `kchaos analyze` draws them later).
    """
    run = run_dir if isinstance(run_dir, store.RunDir) else store.open_run(run_dir)
    test = store.read_test(run)
    names = list(only) if only else checker_names(test, run, checkers)
    read = store.read_history(run.history_jsonl)
    history = read.paired()
    if history.side and not only and test.get("checkers") is None and "forgery" not in names:
        names.append("forgery")  # the run had a forger: judge what it sent
    table = store.history_table(read.events)
    store.write_history_parquet(table, run.history_parquet)
    warnings = [read.truncated] if read.truncated else []
    if not names:
        warnings.append(f"no checker for workload {test.get('workload')!r}: verdict unknown")

    args = checker_args(run, run_options(test, options))
    verdicts = run_checkers(history, names, args)
    warnings += [f"checker {v.checker} failed: {v.details['error']}" for v in verdicts if "error" in v.details]
    valid = merge_validity(v.valid for v in verdicts) if verdicts else UNKNOWN
    viewers = write_viewers(run, history, verdicts, args)

    figures = figures_of(table)
    ends = set(end_checks(test, run))
    results = {
        "valid": valid,
        "workload": test.get("workload"),
        "checks": {
            "workload": [v.checker for v in verdicts if v.checker not in ends],
            "end_of_run": [v.checker for v in verdicts if v.checker in ends],
        },
        "checkers": {v.checker: v.to_json() for v in verdicts},
        "stats": figures.stats,
        "history": {"events": len(read.events), "truncated": read.truncated},
        "analyzed_at": store.iso_utc(store.utc_now()),
    }
    results_path = store.write_json_atomic(run.results_json, results)
    drawn = (
        plots.draw_all(figures.frames.ops, figures.frames.faults, figures.frames.end_ns, run.path) if draw_plots else {}
    )
    analysis = Analysis(run, valid, verdicts, results_path, run.path / "report.html", viewers, drawn, warnings)
    analysis.end_of_run = sorted(ends)
    write_report(analysis, test, figures)
    return analysis


# ---------------------------------------------------------------------------------------------------
# report.html


def verdict_word(valid: Validity) -> tuple[str, str]:
    """How a verdict is shown: (word, css class)."""
    if valid is True:
        return "valid", "good"
    if valid is False:
        return "INVALID", "bad"
    return "unknown", "muted"


def _href(run: store.RunDir, path: Path) -> str:
    return html.escape(path.relative_to(run.path).as_posix(), quote=True)


def _png(run: store.RunDir, path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<p><a href="{_href(run, path)}"><img class="chart" alt="{html.escape(alt, quote=True)}" '
        f'src="data:image/png;base64,{data}"></a></p>'
    )


def _frame_html(frame: pd.DataFrame) -> str:
    if frame.empty:
        return '<p class="muted">none</p>'
    return frame.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0)


TIMELINE_STYLE = (
    ".timeline { margin: 6px 0 12px; } .tl-row { display: flex; align-items: center; margin: 2px 0; }"
    " .tl-label { width: 130px; font-size: 12px; } .tl-label i { display: inline-block; width: 10px;"
    " height: 10px; margin-right: 6px; border-radius: 2px; } .tl-track { position: relative; flex: 1;"
    " height: 14px; background: #f3f5f7; border-radius: 2px; } .tl-track span { position: absolute; top: 0;"
    " bottom: 0; opacity: .75; border-radius: 2px; }"
)


def fault_timeline(faults: pd.DataFrame, end_s: float) -> str:
    """One row per fault kind, its windows as bars in the kind's colour (the same as in the plots),
    the row label with a swatch as the legend."""
    if faults.empty:
        return ""
    span = max(end_s, 1e-9)
    rows = []
    for kind in sorted(faults["kind"].unique()):
        color = plots.fault_color(str(kind))
        bars = []
        for w in faults[faults["kind"] == kind].itertuples(index=False):
            left = 100 * max(0.0, w.start_s) / span
            width = max(0.3, 100 * (min(w.end_s, span) - max(0.0, w.start_s)) / span)
            tip = f"{kind} {w.start_s:.2f} to {w.end_s:.2f} s {w.targets}"
            bars.append(
                f'<span style="left:{left:.3f}%;width:{width:.3f}%;background:{color}" '
                f'title="{html.escape(tip, quote=True)}"></span>'
            )
        rows.append(
            f'<div class="tl-row"><span class="tl-label"><i style="background:{color}"></i>{html.escape(str(kind))}'
            f'</span><div class="tl-track">{"".join(bars)}</div></div>'
        )
    return '<div class="timeline">' + "".join(rows) + f'<p class="muted">0 to {end_s:.1f} s</p></div>'


def _test_rows(test: Mapping[str, Any]) -> str:
    rows = []
    for key, value in test.items():
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            continue
        rows.append(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _file_links(run: store.RunDir) -> str:
    items = []
    for name in (store.TEST_FILE, store.HISTORY_JSONL, store.HISTORY_PARQUET, store.RESULTS_FILE):
        if (run.path / name).exists():
            items.append(f'<li><a href="{_href(run, run.path / name)}">{html.escape(name)}</a></li>')
    out = ["<ul>", *items, "</ul>"]
    if run.nodes.is_dir():
        for node in sorted(p for p in run.nodes.iterdir() if p.is_dir()):
            files = sorted(p for p in node.rglob("*") if p.is_file())
            links = [f'<a href="{_href(run, p)}">{html.escape(p.relative_to(node).as_posix())}</a>' for p in files]
            more = f" … and {len(files) - MAX_NODE_FILES} more" if len(files) > MAX_NODE_FILES else ""
            out.append(
                f"<h3>{html.escape(node.name)}</h3><p>"
                + (" · ".join(links[:MAX_NODE_FILES]) or "no files")
                + more
                + "</p>"
            )
    return "\n".join(out)


def render_report(analysis: Analysis, test: Mapping[str, Any], figures: Figures) -> str:
    run = analysis.run
    word, css = verdict_word(analysis.valid)
    stats = figures.stats
    rate = stats["ops_per_s"]
    cards = [
        ("verdict", f"<b class='{css}'>{word}</b>"),
        ("exit code", f"<b>{analysis.exit_code}</b>"),
        ("ops", f"<b>{stats['ops']}</b>"),
        ("ok", f"<b class='good'>{stats['ok']}</b>"),
        ("fail", f"<b>{stats['fail']}</b>"),
        ("info", f"<b>{stats['info']}</b>"),
        ("duration", f"<b>{stats['duration_s']:.2f} s</b>"),
        ("ops/s", f"<b>{'' if rate is None else f'{rate:.1f}'}</b>"),
        ("fault windows", f"<b>{stats['faults']}</b>"),
    ]
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(run.run_id)}: {word}</title>',
        f"<style>{STYLE}\npre {{ margin: 0; font-size: 12px; }} .warn {{ color: #8a5a00; }}\n{TIMELINE_STYLE}"
        "</style></head><body>",
        f"<h1>{html.escape(run.run_id)}: <span class='{css}'>{word}</span></h1>",
        f'<p class="muted">{html.escape(str(run.path))} · analysed {html.escape(store.iso_utc(store.utc_now()))}</p>',
        '<div class="cards">',
        *(f"<div class='card'>{label}{value}</div>" for label, value in cards),
        "</div>",
    ]
    if analysis.warnings:
        parts += ["<ul>", *(f"<li class='warn'>{html.escape(w)}</li>" for w in analysis.warnings), "</ul>"]
    parts += _workload_section(test, stats)
    parts += [
        "<h2>Checkers</h2>",
        "<table><tr><th>checker</th><th>judges</th><th>verdict</th><th>summary</th><th>viewer</th></tr>",
    ]
    for verdict in analysis.verdicts:
        vword, vcss = verdict_word(verdict.valid)
        viewer = analysis.viewers.get(verdict.checker)
        link = f'<a href="{_href(run, viewer)}">counterexample</a>' if viewer else ""
        summary = html.escape("\n".join(checker_summary(verdict)))
        kind = "end of run" if verdict.checker in analysis.end_of_run else "workload"
        parts.append(
            f"<tr><td>{html.escape(verdict.checker)}</td><td>{kind}</td><td class='{vcss}'>{vword}</td>"
            f"<td style='text-align:left'><pre>{summary}</pre></td><td>{link}</td></tr>"
        )
    parts.append("</table>")
    if not analysis.verdicts:
        parts.append('<p class="muted">no checker ran</p>')
    faults = figures.frames.faults.copy()
    faults["start_s"] = faults["start_ns"] / metrics.NS_PER_S
    faults["end_s"] = faults["end_ns"] / metrics.NS_PER_S
    titles = {"latency-raw": "latency of each op", "latency-quantiles": "latency quantiles", "rate": "throughput"}
    parts += [
        "<h2>Latency (ms) by f</h2>",
        _frame_html(figures.latency),
        "<h2>Fault windows</h2>",
        fault_timeline(faults, figures.frames.end_ns / metrics.NS_PER_S),
        _frame_html(faults[["kind", "targets", "start_s", "end_s", "duration_ms", "healed"]]),
        "<h2>Plots</h2>",
        *(_png(run, path, titles.get(name, name)) for name, path in analysis.plots.items()),
        "<h2>Test</h2>",
        _test_rows(test),
        "<h2>Files</h2>",
        _file_links(run),
        "</body></html>",
    ]
    return "\n".join(parts)


def _workload_section(test: Mapping[str, Any], stats: Mapping[str, Any]) -> list[str]:
    """The run's workload: what it is, and its ops by f and outcome."""
    name = str(test.get("workload"))
    registered = _registered_workload(name, test.get("sut"))
    about = html.escape(registered.description) if registered and registered.description else ""
    rows = "".join(
        f"<tr><td>{html.escape(f)}</td>"
        + "".join(f"<td>{outcomes.get(o, 0)}</td>" for o in ("ok", "fail", "info"))
        + "</tr>"
        for f, outcomes in stats["by_f"].items()
    )
    return [
        f"<h2>Workload: {html.escape(name)}</h2>",
        f'<p class="muted">{about}</p>' if about else "",
        "<table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th></tr>" + rows + "</table>",
    ]


def write_report(analysis: Analysis, test: Mapping[str, Any], figures: Figures) -> Path:
    return store.write_text_atomic(analysis.report_path, render_report(analysis, test, figures))
