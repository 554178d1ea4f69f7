"""Discovery, filters and what gets skipped: bad runs never fail the job and are reported by name."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from harness.cli import main
from reports.ingest import Filters, discover, parse_since
from vocab.errors import EXIT_ERROR, UserError


def _reasons(found) -> dict[str, str]:
    return {s.path: s.reason for s in found.skipped}


def test_discovery_skips_what_is_not_a_usable_run(results_root: dict) -> None:
    found = discover(results_root["root"], Filters())
    bad = results_root["bad"]
    reasons = _reasons(found)
    assert "truncated or corrupt" in reasons[str(bad["truncated"])]
    assert "no results.json" in reasons[str(bad["no_results"])]
    assert "not a test folder" in reasons[str(bad["non_run"])]
    assert "schema_version 7" in reasons[str(bad["foreign"])]
    assert len(found.skipped) == 4  # README.md and the `latest` symlinks are not noise
    assert any(str(bad["fallback"]) in w and "history.jsonl" in w for w in found.warnings)
    ids = {r.run_id for r in found.runs}
    assert len(ids) == len(results_root["good"]) and "set-kill/20261121T000000Z" in ids
    formats = {r.run_id: r.history_format for r in found.runs}
    assert formats["set-kill/20261121T000000Z"] == "jsonl"
    assert formats["hand-made/20261105T120000Z"] == "jsonl"
    assert list(formats.values()).count("parquet") == 16


def test_filters(results_root: dict) -> None:
    root = results_root["root"]
    only = discover(root, Filters(tests=["set-*"]))
    assert only.runs and all(r.name.startswith("set-") for r in only.runs)
    assert only.filtered_out > 0
    since = discover(root, Filters(since=datetime(2026, 11, 3, tzinfo=UTC)))
    assert since.runs and all(r.started_at >= datetime(2026, 11, 3, tzinfo=UTC) for r in since.runs)
    assert len(since.runs) < len(discover(root, Filters()).runs)
    glob = discover(root, Filters(runs_glob="hand-made/*"))
    assert [r.run_id for r in glob.runs] == ["hand-made/20261105T120000Z"]


def test_parse_since() -> None:
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    assert parse_since("2026-11-20") == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_since("2026-11-20T10:00Z") == datetime(2026, 11, 20, 10, tzinfo=UTC)
    assert parse_since("2d", now) == datetime(2026, 11, 21, 12, tzinfo=UTC)
    assert parse_since("6h", now) == datetime(2026, 11, 23, 6, tzinfo=UTC)
    with pytest.raises(UserError, match="--since 'yesterday'"):
        parse_since("yesterday")


@pytest.mark.spark
def test_report_lists_what_it_skipped(report, results_root: dict) -> None:
    skipped = {s["path"]: s["reason"] for s in report.summary["skipped"]}
    for key in ("truncated", "no_results", "non_run", "foreign"):
        assert str(results_root["bad"][key]) in skipped
    on_disk = json.loads((report.out / "summary.json").read_text())
    assert on_disk["runs"]["skipped"] == 4 and len(on_disk["skipped"]) == 4
    html = report.report.read_text()
    assert str(results_root["bad"]["truncated"]) in html and "no results.json" in html


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "/nonexistent/results"], "results root /nonexistent/results: not a directory"),
        (["report", ".", "--since", "last week"], "--since 'last week'"),
        (["report", ".", "--gap-ms", "0"], "--gap-ms 0.0: must be positive"),
        (["report", ".", "--conf", "oops"], "--conf 'oops': expected key=value"),
        (["report", ".", "--store", "pyproject.toml"], "--store pyproject.toml: not a directory"),
    ],
)
def test_cli_user_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
