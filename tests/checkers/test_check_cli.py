"""`kchaos check`: exit codes, summaries, JSON, HTML, errors without tracebacks, composition."""

from __future__ import annotations

import json

import pytest

from checkers import registry
from checkers.gen import register_history
from checkers.verdict import Verdict
from harness.cli import main


def write_history(tmp_path, stale: int = 0, name: str = "history.jsonl", **kw):
    gen = register_history(300, keys=3, processes=5, crash_rate=0.05, stale_reads=stale, seed=11, **kw)
    return gen.write_jsonl(tmp_path / name), gen


def test_valid_history_exits_0(tmp_path, capsys):
    path, _ = write_history(tmp_path)
    assert main(["check", str(path), "--checker", "linearizable", "--model", "register", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("linearizable (register): valid")
    assert "3 keys: 3 valid, 0 invalid, 0 unknown" in out


def test_invalid_history_exits_1_and_names_the_op(tmp_path, capsys):
    path, gen = write_history(tmp_path, stale=1)
    html = tmp_path / "out.html"
    code = main(["check", str(path), "--html", str(html), "--timeout", "60", "--all-keys", "--jobs", "2"])
    assert code == 1
    captured = capsys.readouterr()
    assert "INVALID" in captured.out
    assert f"op {gen.stale_reads[0]} " in captured.out
    assert html.exists() and str(gen.stale_reads[0]) in html.read_text()


def test_json_output_is_the_verdict(tmp_path, capsys):
    path, _ = write_history(tmp_path, stale=1)
    assert main(["check", str(path), "--json", "--all-keys"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["checker"] == "linearizable" and verdict["valid"] is False
    assert len(verdict["results"]) == 3


def test_budget_exhausted_exits_2(tmp_path, capsys):
    path, _ = write_history(tmp_path, value_range=3)
    assert main(["check", str(path), "--max-states", "1", "--jobs", "1"]) in (0, 2)
    big = register_history(3000, processes=8, value_range=3, seed=2).write_jsonl(tmp_path / "big.jsonl")
    assert main(["check", str(big), "--max-states", "10", "--jobs", "1"]) == 2
    assert "unknown (state budget)" in capsys.readouterr().out


def test_a_search_that_runs_out_of_time_is_unknown_and_says_what_it_searched(tmp_path, capsys, monkeypatch):
    """Budgets by default: `kchaos check` (and a run's checking phase, which parses the same defaults)
    never hangs on a hard history; `--timeout 0` lifts the limit."""
    from checkers import linearizable

    assert linearizable.DEFAULT_TIMEOUT_S == 60.0
    monkeypatch.setattr(linearizable, "DEFAULT_TIMEOUT_S", 0.000001)  # the default, made tiny
    big = register_history(3000, processes=8, value_range=3, seed=2).write_jsonl(tmp_path / "big.jsonl")
    assert main(["check", str(big), "--jobs", "1"]) == 2  # no --timeout given: the default applies
    out = capsys.readouterr().out
    assert "unknown (timeout)" in out
    assert "configurations in" in out and "--timeout SECONDS (0: no limit)" in out
    assert main(["check", str(big), "--jobs", "1", "--timeout", "0"]) == 0  # no limit: decided


def test_malformed_history_is_one_line_and_exit_254(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    path.write_text('{"time": 0, "process": 0, "type": "invoke", "f": "read"}\n{"time": 1, "proc\n')
    assert main(["check", str(path)]) == 254
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kchaos: error: {path}:2: not valid JSON")
    assert "\n" not in err and "Traceback" not in err


def test_missing_file_and_bad_model_exit_254(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.jsonl")]) == 254
    assert "cannot read history" in capsys.readouterr().err
    path, _ = write_history(tmp_path)
    assert main(["check", str(path), "--model", "bogus"]) == 254
    assert "unknown model 'bogus'" in capsys.readouterr().err


def test_model_that_cannot_read_an_op_exits_254(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"time":0,"process":0,"type":"invoke","f":"frobnicate","value":1}\n'
        '{"time":1,"process":0,"type":"ok","f":"frobnicate","value":1}\n'
    )
    assert main(["check", str(path), "--jobs", "1"]) == 254
    assert "unknown f 'frobnicate'" in capsys.readouterr().err


def test_several_checkers_compose(tmp_path, capsys, monkeypatch):
    path, _ = write_history(tmp_path)
    calls = []

    def fake(history, args):
        calls.append(len(history.ops))
        return Verdict("fake", "unknown", {"note": "always unsure"})

    monkeypatch.setitem(registry.CHECKERS, "fake", f"{__name__}:FAKE")
    monkeypatch.setitem(globals(), "FAKE", fake)
    code = main(["check", str(path), "--checker", "linearizable", "--checker", "fake", "--json"])
    assert code == 2 and calls == [300]
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["checker"] == "compose" and verdict["valid"] == "unknown"
    assert verdict["checkers"]["linearizable"]["valid"] is True
    assert verdict["checkers"]["fake"]["note"] == "always unsure"


@pytest.mark.parametrize("flag", ["--all-keys", "--timeout=5"])
def test_flags_parse(tmp_path, flag):
    path, _ = write_history(tmp_path)
    assert main(["check", str(path), flag, "--jobs", "1"]) == 0
