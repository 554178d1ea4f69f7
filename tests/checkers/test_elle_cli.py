"""`kchaos check` with the transactional, set-full and log-agreement checkers, and the cycle drawing."""

from __future__ import annotations

import json
import re

import pytest

from harness.cli import main
from tests.checkers.txn_builder import Builder, append, r


def write_history(path, builder: Builder) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in builder.events))


def read_skew() -> Builder:
    return Builder().concurrent((0, [append("x", 1), append("y", 1)]), (1, [r("x", []), r("y", [1])]))


def test_model_decides_exit_code_and_html_draws_the_cycle(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    write_history(history, read_skew())
    html = tmp_path / "cycles.html"
    argv = ["check", str(history), "--checker", "elle-list-append", "--consistency-model", "serializable"]
    assert main([*argv, "--cycles-html", str(html)]) == 1
    out = capsys.readouterr().out
    assert "G-single: 1  <- violates the model" in out
    assert "read x = [] without 1" in out
    page = html.read_text()
    assert page.count("<svg") == 1 and "G-single" in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]  # nothing fetched
    assert "<script" not in page
    assert main(["check", str(history), "--checker", "elle-list-append", "--consistency-model", "read-committed"]) == 0


def test_rw_register_and_unknown_exit_codes(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(history, Builder().txn(0, [["w", "x", 1]], kind="fail"))
    assert main(["check", str(history), "--checker", "elle-rw-register"]) == 2  # no ok transaction


def test_bad_history_is_a_one_line_error(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    write_history(history, Builder().txn(0, [append("x", 1)]).txn(1, [append("x", 1)]))
    assert main(["check", str(history), "--checker", "elle-list-append"]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unique" in err[0]


def test_set_full_and_log_agreement_from_the_command_line(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    events = [
        {"time": 1, "process": 0, "type": "invoke", "f": "add", "value": 1},
        {"time": 2, "process": 0, "type": "ok", "f": "add", "value": 1},
        {"time": 3, "process": 1, "type": "invoke", "f": "read", "value": None, "node": "n1"},
        {"time": 4, "process": 1, "type": "ok", "f": "read", "value": [], "node": "n1"},
    ]
    history.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["check", str(history), "--checker", "set-full"]) == 1
    assert "lost on n1: 1" in capsys.readouterr().out
    nodes = tmp_path / "nodes" / "n1"
    nodes.mkdir(parents=True)
    (nodes / "committed-log.jsonl").write_text(json.dumps({"offset": 0, "epoch": 1, "digest": "ab"}) + "\n")
    assert main(["check", str(history), "--checker", "log-agreement"]) == 0  # dumps beside the history
    (nodes / "committed-log.jsonl").write_text("not json\n")
    assert main(["check", str(history), "--checker", "log-agreement", "--dumps", str(tmp_path)]) == 254


def test_anomalies_without_cycles_are_drawn_and_explained(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    builder = Builder().txn(0, [append("x", 1)], kind="fail").txn(1, [append("x", 2)]).txn(2, [r("x", [1, 2])])
    write_history(history, builder)
    html = tmp_path / "cycles.html"
    argv = ["check", str(history), "--checker", "elle-list-append", "--consistency-model", "read-committed"]
    assert main([*argv, "--cycles-html", str(html)]) == 1
    out = capsys.readouterr().out
    assert "dirty-update: 1  <- violates the model  (a failed transaction's write sits" in out
    page = html.read_text()
    assert page.count("<svg") == 2  # G1a: failed writer -> reader; dirty-update: failed -> committed
    assert "a committed append follows a failed one" in page
    assert "the failed txn at index 0 appended 1, and the committed txn at index 2 appended 2" in page


def test_rw_register_assumption_flags(tmp_path, capsys):
    # T1 reads y 1 and writes x 1, y 2; T2 reads x 1 and y 1: a G-single once writes follow reads
    history = tmp_path / "history.jsonl"
    builder = Builder().txn(0, [r("y", 1), ["w", "x", 1], ["w", "y", 2]]).txn(0, [r("x", 1), r("y", 1)])
    write_history(history, builder)
    argv = ["check", str(history), "--checker", "elle-rw-register", "--consistency-model", "serializable"]
    assert main(argv) == 0
    assert main([*argv, "--wfr-keys"]) == 1
    assert "G-single: 1  <- violates the model" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--cycle-search-budget", "many"])
    assert stop.value.code == 254
    assert "--cycle-search-budget: invalid int value: 'many'" in capsys.readouterr().err
