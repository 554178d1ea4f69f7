"""Jepsen EDN histories (issue 29): the same histories in EDN and in our JSONL get the same verdicts,
and an EDN form that does not fit is a one-line error naming the line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.edn import JEPSEN_FAIL
from checkers.elle.commands import list_append_from_args, rw_register_from_args
from checkers.history import HistoryError
from checkers.history_files import load_any as load_history
from checkers.linearizable import check

ROOT = Path(__file__).resolve().parents[2]

# (name, EDN text, the same events as JSONL objects, model or Elle checker, verdict)
REGISTER_OK = """[{:process 0, :type :invoke, :f :write, :value 1, :time 10, :index 0}
 {:process 1, :type :invoke, :f :read, :value nil, :time 20, :index 1}
 {:process 0, :type :ok, :f :write, :value 1, :time 30, :index 2}
 {:process 1, :type :ok, :f :read, :value 1, :time 40, :index 3}
 {:process :nemesis, :type :info, :f :start, :value nil, :time 45, :index 4}
 {:process 0, :type :invoke, :f :cas, :value [1 2], :time 50, :index 5}
 {:process 0, :type :ok, :f :cas, :value [1 2], :time 60, :index 6}]
"""


REGISTER_STALE = REGISTER_OK.replace(
    "]\n",
    "\n {:process 1, :type :invoke, :f :read, :value nil, :time 70, :index 7}\n"
    " {:process 1, :type :ok, :f :read, :value 1, :time 80, :index 8}]\n",
)


def _jsonl_of(edn: str) -> list[dict]:
    """The JSONL a user would write for the same plain-register EDN lines (test fixtures only)."""
    out = []
    for line in edn.strip().strip("[]").splitlines():
        body = line.strip().strip("[]{}")
        fields = dict(part.strip().split(" ", 1) for part in body.split(", "))
        value = fields[":value"]
        ev = {
            "process": "nemesis" if fields[":process"] == ":nemesis" else int(fields[":process"]),
            "type": fields[":type"][1:],
            "f": fields[":f"][1:],
            "value": None if value == "nil" else json.loads(value.replace(" ", ",")),
            "time": int(fields[":time"]),
            "index": int(fields[":index"]),
        }
        out.append(ev)
    return out


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _both(tmp_path: Path, edn: str, jsonl: list[dict]) -> tuple:
    e = load_history(_write(tmp_path, "h.edn", edn))
    j = load_history(_write(tmp_path, "h.jsonl", "".join(json.dumps(ev) + "\n" for ev in jsonl)))
    return e, j


@pytest.mark.parametrize(("edn", "verdict"), [(REGISTER_OK, True), (REGISTER_STALE, False)])
def test_register_histories_read_the_same_as_jsonl(tmp_path, edn, verdict):
    e, j = _both(tmp_path, edn, _jsonl_of(edn))
    assert [(o.f, o.key, o.invoke_value, o.value, o.type) for o in e.ops] == [
        (o.f, o.key, o.invoke_value, o.value, o.type) for o in j.ops
    ]
    assert [ev.process for ev in e.nemesis] == ["nemesis"]
    assert check(e, "register").valid is verdict
    assert check(j, "register").valid is verdict


@pytest.mark.parametrize("verdict", [True, False])
def test_independent_keys_split_into_keys_as_jsonl_does(tmp_path, verdict):
    stale = 1 if verdict else 2  # key :b reads 1 after 2 was written and acknowledged
    edn = "\n".join(
        [
            "{:process 0, :type :invoke, :f :write, :value [:a 2], :time 1}",
            "{:process 0, :type :ok, :f :write, :value [:a 2], :time 2}",
            "{:process 1, :type :invoke, :f :write, :value [:b 1], :time 3}",
            "{:process 1, :type :ok, :f :write, :value [:b 1], :time 4}",
            "{:process 0, :type :invoke, :f :cas, :value [:b [1 2]], :time 5}",
            "{:process 0, :type :ok, :f :cas, :value [:b [1 2]], :time 6}",
            "{:process 1, :type :invoke, :f :read, :value [:b nil], :time 7}",
            f"{{:process 1, :type :ok, :f :read, :value [:b {3 - stale}], :time 8}}",
        ]
    )
    jsonl = [
        {"process": 0, "type": "invoke", "f": "write", "key": "a", "value": 2, "time": 1},
        {"process": 0, "type": "ok", "f": "write", "key": "a", "value": 2, "time": 2},
        {"process": 1, "type": "invoke", "f": "write", "key": "b", "value": 1, "time": 3},
        {"process": 1, "type": "ok", "f": "write", "key": "b", "value": 1, "time": 4},
        {"process": 0, "type": "invoke", "f": "cas", "key": "b", "value": [1, 2], "time": 5},
        {"process": 0, "type": "ok", "f": "cas", "key": "b", "value": [1, 2], "time": 6},
        {"process": 1, "type": "invoke", "f": "read", "key": "b", "value": None, "time": 7},
        {"process": 1, "type": "ok", "f": "read", "key": "b", "value": 3 - stale, "time": 8},
    ]
    e, j = _both(tmp_path, edn, jsonl)
    assert e.keys() == j.keys() == ["a", "b"]
    assert check(e, "register").valid is check(j, "register").valid is verdict


def test_a_failed_cas_means_it_did_not_happen_as_in_jepsen(tmp_path):
    """Knossos drops :fail ops; so do we for EDN (the JSONL equivalent says so in its error)."""
    edn = "\n".join(
        [
            "{:process 0, :type :invoke, :f :write, :value 1}",
            "{:process 0, :type :ok, :f :write, :value 1}",
            "{:process 1, :type :invoke, :f :cas, :value [1 2]}",
            "{:process 1, :type :fail, :f :cas, :value [1 2]}",
        ]
    )
    e = load_history(_write(tmp_path, "h.edn", edn))
    assert e.ops[1].error == JEPSEN_FAIL
    assert check(e, "register").valid is True  # as a compare observation it would be invalid


def test_newer_jepsen_op_records_and_the_file_sniffed_without_an_edn_name(tmp_path):
    text = (
        "#jepsen.history.Op{:index 0, :time 1, :type :invoke, :process 0, :f :write, :value 1}\n"
        "#jepsen.history.Op{:index 1, :time 2, :type :ok, :process 0, :f :write, :value 1}\n"
        "#jepsen.history.Op{:index 2, :time 3, :type :invoke, :process 1, :f :read, :value nil}\n"
        "#jepsen.history.Op{:index 3, :time 4, :type :ok, :process 1, :f :read, :value 2}\n"
    )
    h = load_history(_write(tmp_path, "history", text))
    assert [(o.f, o.value) for o in h.ops] == [("write", 1), ("read", 2)]
    assert check(h, "register").valid is False


LIST_APPEND = {
    True: "[[:append :x 1] [:r :y [1]]]",
    False: "[[:append :x 1] [:r :y [2]]]",  # reads an append nobody made
}


@pytest.mark.parametrize("verdict", [True, False])
def test_elle_list_append_micro_ops_are_detected_by_content(tmp_path, verdict):
    edn = "\n".join(
        [
            "{:process 0, :type :invoke, :f :txn, :value [[:append :y 1]], :time 1}",
            "{:process 0, :type :ok, :f :txn, :value [[:append :y 1]], :time 2}",
            "{:process 1, :type :invoke, :value [[:append :x 1] [:r :y nil]], :time 3}",
            f"{{:process 1, :type :ok, :value {LIST_APPEND[verdict]}, :time 4}}",
        ]
    )
    read = [1] if verdict else [2]
    jsonl = [
        {"process": 0, "type": "invoke", "f": "txn", "value": [["append", "y", 1]], "time": 1},
        {"process": 0, "type": "ok", "f": "txn", "value": [["append", "y", 1]], "time": 2},
        {"process": 1, "type": "invoke", "f": "txn", "value": [["append", "x", 1], ["r", "y", None]], "time": 3},
        {"process": 1, "type": "ok", "f": "txn", "value": [["append", "x", 1], ["r", "y", read]], "time": 4},
    ]
    e, j = _both(tmp_path, edn, jsonl)
    args = type("Args", (), {})()
    assert list_append_from_args(e, args).valid is list_append_from_args(j, args).valid is verdict


@pytest.mark.parametrize(("model", "verdict"), [("snapshot-isolation", True), ("serializable", False)])
def test_an_ok_read_of_nil_in_list_append_read_the_empty_list_as_elle_says(tmp_path, model, verdict):
    """Write skew: each reads the other's list empty, then appends to its own (G2-item)."""
    edn = "\n".join(
        [
            "{:process 0, :type :invoke, :f :txn, :value [[:r :x nil] [:append :y 1]], :time 1}",
            "{:process 1, :type :invoke, :f :txn, :value [[:r :y nil] [:append :x 1]], :time 2}",
            "{:process 0, :type :ok, :f :txn, :value [[:r :x nil] [:append :y 1]], :time 3}",
            "{:process 1, :type :ok, :f :txn, :value [[:r :y nil] [:append :x 1]], :time 4}",
        ]
    )
    jsonl = [
        {"process": 0, "type": "invoke", "f": "txn", "value": [["r", "x", None], ["append", "y", 1]], "time": 1},
        {"process": 1, "type": "invoke", "f": "txn", "value": [["r", "y", None], ["append", "x", 1]], "time": 2},
        {"process": 0, "type": "ok", "f": "txn", "value": [["r", "x", []], ["append", "y", 1]], "time": 3},
        {"process": 1, "type": "ok", "f": "txn", "value": [["r", "y", []], ["append", "x", 1]], "time": 4},
    ]
    e, j = _both(tmp_path, edn, jsonl)
    args = type("Args", (), {"consistency_model": model})()
    assert list_append_from_args(e, args).valid is list_append_from_args(j, args).valid is verdict


@pytest.mark.parametrize("verdict", [True, False])
def test_elle_rw_register_micro_ops(tmp_path, verdict):
    seen = 2 if verdict else 1  # 1 was overwritten by 2 before this read began: stale
    edn = "\n".join(
        [
            "{:process 0, :type :invoke, :f :txn, :value [[:w :x 1]], :time 1}",
            "{:process 0, :type :ok, :f :txn, :value [[:w :x 1]], :time 2}",
            "{:process 0, :type :invoke, :f :txn, :value [[:w :x 2]], :time 3}",
            "{:process 0, :type :ok, :f :txn, :value [[:w :x 2]], :time 4}",
            "{:process 1, :type :invoke, :f :txn, :value [[:r :x nil]], :time 5}",
            f"{{:process 1, :type :ok, :f :txn, :value [[:r :x {seen}]], :time 6}}",
        ]
    )
    jsonl = [
        {"process": 0, "type": "invoke", "f": "txn", "value": [["w", "x", 1]], "time": 1},
        {"process": 0, "type": "ok", "f": "txn", "value": [["w", "x", 1]], "time": 2},
        {"process": 0, "type": "invoke", "f": "txn", "value": [["w", "x", 2]], "time": 3},
        {"process": 0, "type": "ok", "f": "txn", "value": [["w", "x", 2]], "time": 4},
        {"process": 1, "type": "invoke", "f": "txn", "value": [["r", "x", None]], "time": 5},
        {"process": 1, "type": "ok", "f": "txn", "value": [["r", "x", seen]], "time": 6},
    ]
    e, j = _both(tmp_path, edn, jsonl)
    args = type("Args", (), {"linearizable_keys": True})()  # lets Elle infer version order from real time
    assert rw_register_from_args(e, args).valid is rw_register_from_args(j, args).valid is verdict


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "{:process 0, :type :invoke, :f :read, :value nil}\n{:process 0, :type :ok, :f :read :value}\n",
            ":2: not an EDN op map",
        ),
        ("{:process 0, :type :invoke, :f :read}\n\n{:process 0, :type :done, :f :read}\n", ":3: :type must be"),
        ("{:process 0, :type :invoke, :f :cas, :value 3}\n", ":1: a cas :value must be [old new]"),
        ("[{:process 0, :type :invoke, :f :read}\n 17]\n", ":2: expected an op map"),
    ],
)
def test_a_form_that_does_not_fit_is_named_by_line(tmp_path, text, where):
    path = _write(tmp_path, "bad.edn", text)
    with pytest.raises(HistoryError, match="^" + re.escape(f"{path}{where}")):
        load_history(path)


def test_kchaos_check_says_it_in_one_line_without_a_traceback(tmp_path):
    path = _write(tmp_path, "bad.edn", "{:process 0, :type :invoke, :f :cas, :value 3}\n")
    out = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(path)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert out.returncode == 254
    assert out.stderr.strip().count("\n") == 0 and "bad.edn:1: a cas :value must be [old new]" in out.stderr
    assert "Traceback" not in out.stderr
