"""The history loader: pairing, info semantics, nemesis windows, and clear errors naming file:line."""

from __future__ import annotations

import json
import os

import pytest

from checkers.history import HistoryError, fault_windows, load_history, pair, read_events
from checkers.verdict import UNKNOWN, Verdict, compose, exit_code
from tests.checkers.test_porcupine_histories import PORCUPINE


def write(tmp_path, lines, name="history.jsonl"):
    path = tmp_path / name
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return path


def ev(t, p, type_, f, value=None, **extra):
    return {"time": t, "process": p, "type": type_, "f": f, "value": value, **extra}


def test_pairs_invokes_with_the_same_process_next_event(tmp_path):
    path = write(
        tmp_path,
        [
            ev(0, 0, "invoke", "write", 1, key="a"),
            ev(1, 1, "invoke", "read", key="a"),
            ev(2, 1, "ok", "read", 1, key="a"),
            ev(3, 0, "ok", "write", 1, key="a", node="n1"),
            ev(4, 1, "invoke", "read", key="b"),
            ev(5, 1, "fail", "read", error="timeout"),
        ],
    )
    h = load_history(path)
    assert [(o.f, o.type, o.invoke_time, o.complete_time) for o in h.ops] == [
        ("write", "ok", 0, 3),
        ("read", "ok", 1, 2),
        ("read", "fail", 4, 5),
    ]
    assert h.ops[1].value == 1 and h.ops[1].invoke_value is None
    assert h.ops[0].node == "n1"
    assert h.ops[2].key == "b" and h.ops[2].error == "timeout"
    assert [o.id for o in h.ops] == [0, 1, 4]  # index defaults to the event's position
    assert h.keys() == ["a", "b"]
    assert h.source == str(path)


def test_info_and_missing_completion_stay_open_to_the_end():
    h = pair(
        read_events(
            [
                ev(0, 0, "invoke", "write", 5),
                ev(1, 1, "invoke", "write", 6),
                ev(2, 0, "info", "write", None, error="timeout"),
                ev(3, 2, "invoke", "read"),
            ]
        )
    )
    by_process = {o.process: o for o in h.ops}
    assert by_process[0].type == "info" and by_process[0].complete_time is None
    assert by_process[0].value == 5  # the invoke's value, not the info's
    assert by_process[0].complete_index == 2
    assert by_process[1].type == "info" and by_process[1].complete_index is None
    assert by_process[2].type == "info"
    assert all(o.key is None for o in h.ops)


def test_nemesis_events_are_kept_apart_and_give_fault_windows():
    h = pair(
        read_events(
            [
                ev(0, "nemesis", "invoke", "start-partition", [["n1"], ["n2", "n3"]]),
                ev(1, 0, "invoke", "read"),
                ev(2, "nemesis", "info", "start-partition", [["n1"], ["n2", "n3"]]),
                ev(3, 0, "ok", "read"),
                ev(4, "nemesis", "invoke", "stop-partition"),
                ev(5, "nemesis", "info", "stop-partition"),
                ev(6, "nemesis", "invoke", "start-kill", ["n2"]),
                ev(7, "nemesis", "info", "start-kill", ["n2"]),
            ]
        )
    )
    assert len(h.ops) == 1 and len(h.nemesis) == 6
    windows = [w.to_json() for w in fault_windows(h)]
    assert windows == [
        {"kind": "partition", "start": 2, "end": 5, "value": [["n1"], ["n2", "n3"]]},
        {"kind": "kill", "start": 7, "end": None, "value": ["n2"]},
    ]
    assert [(w.start, w.end) for w in fault_windows(h, from_invoke=True)] == [(0, 5), (6, None)]


def test_a_failed_start_opens_a_window_unless_asked_not_to():
    h = pair(
        read_events(
            [
                ev(0, "nemesis", "invoke", "start-corrupt", {"mode": "truncate-log"}),
                ev(1, "nemesis", "fail", "start-corrupt", {"kind": "corrupt"}, error="nothing to corrupt"),
                ev(4, "nemesis", "invoke", "start-corrupt"),
                ev(5, "nemesis", "info", "start-corrupt", {"kind": "corrupt", "targets": ["n1"]}),
                ev(8, "nemesis", "invoke", "stop-corrupt"),
                ev(9, "nemesis", "info", "stop-corrupt"),
            ]
        )
    )
    assert fault_windows(h)[0].start == 1  # by default the failed start counts, up to the stop
    assert [(w.start, w.end, w.value) for w in fault_windows(h, failed_starts=False)] == [
        (5, 9, {"kind": "corrupt", "targets": ["n1"]})
    ]


@pytest.mark.parametrize(
    ("lines", "line", "words"),
    [
        (["{not json"], 1, "not valid JSON"),
        ([ev(0, 0, "invoke", "read"), {"process": 0, "type": "ok", "f": "read"}], 2, "'time'"),
        ([ev(0, 0, "invoke", "read"), ev(1, 0, "done", "read")], 2, "'type'"),
        ([ev(0, 0, "invoke", 7)], 1, "'f'"),
        ([ev(0, 1.5, "invoke", "read")], 1, "'process'"),
        (["[1, 2]"], 1, "JSON object"),
        ([ev(0, 0, "ok", "read", 1)], 1, "without an invoke"),
        ([ev(0, 0, "invoke", "read"), ev(1, 0, "invoke", "read")], 2, "still outstanding"),
        ([ev(0, 0, "invoke", "read"), ev(1, 0, "ok", "write")], 2, "does not match"),
        (
            [ev(0, 0, "invoke", "write", 1), ev(1, 0, "info", "write", 1), "", ev(2, 0, "invoke", "read")],
            4,
            "after its 'info' at line 2",
        ),
    ],
)
def test_bad_histories_name_file_and_line(tmp_path, lines, line, words):
    path = write(tmp_path, lines)
    with pytest.raises(HistoryError) as err:
        load_history(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: ")
    assert words in message
    assert "\n" not in message


def test_unreadable_file_is_a_history_error(tmp_path):
    with pytest.raises(HistoryError, match="cannot read history"):
        load_history(tmp_path / "missing.jsonl")


def test_blank_lines_are_skipped_and_lines_still_counted(tmp_path):
    path = write(tmp_path, [ev(0, 0, "invoke", "read"), "", ev(1, 0, "ok", "read", 3)])
    events = list(read_events(path))
    assert [e.line for e in events] == [1, 3]
    assert [e.index for e in events] == [0, 1]


def test_verdicts_compose_false_over_unknown_over_true():
    t, f, u = Verdict("a", True, {}), Verdict("b", False, {"x": 1}), Verdict("c", UNKNOWN, {})
    assert compose([t, u]).valid == UNKNOWN
    assert compose([t, u, f]).valid is False
    assert compose([t, t]).valid is True
    composed = compose([t, f]).to_json()
    assert composed["checkers"]["b"] == {"checker": "b", "valid": False, "x": 1}
    assert [exit_code(v) for v in (True, False, UNKNOWN)] == [0, 1, 2]
    with pytest.raises(ValueError):
        Verdict("z", "maybe", {})


@pytest.mark.parametrize("chunk", [1 << 22, 1000])
def test_the_whole_chunk_parse_and_the_line_by_line_one_load_the_same_history(tmp_path, monkeypatch, chunk):
    """`load_history` decodes each chunk of a regular file with one parser call; blank lines, CRLF
    line ends or anything irregular send a chunk line by line. Both must give what the reference
    reader gives, whatever the chunk size."""
    from checkers import history as history_module

    monkeypatch.setattr(history_module, "CHUNK_BYTES", chunk)
    from checkers.gen import register_history

    gen = register_history(400, keys=3, processes=6, crash_rate=0.1, fail_rate=0.05, seed=4)
    regular = gen.write_jsonl(tmp_path / "regular.jsonl")
    text = regular.read_text()
    blank = tmp_path / "blank.jsonl"
    blank.write_text(text.replace("\n", "\n\n", 5))
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    from checkers.history import _decoded_at_once

    assert _decoded_at_once(regular.read_bytes()) is not None  # the one-call path is taken...
    assert _decoded_at_once(blank.read_bytes()) is None and _decoded_at_once(crlf.read_bytes()) is None
    reference = pair(read_events(regular), source="x")
    for path in (regular, blank, crlf):
        loaded = load_history(path)
        assert loaded.ops == reference.ops and loaded.nemesis == reference.nemesis


def test_two_events_on_one_line_are_refused_with_the_line(tmp_path):
    path = tmp_path / "two.jsonl"
    first, second = json.dumps(ev(0, 0, "invoke", "read")), json.dumps(ev(1, 0, "ok", "read", 3))
    path.write_text(f"{first},{second}\n{first}\n")
    with pytest.raises(HistoryError, match=r"two.jsonl:1: not valid JSON"):
        load_history(path)


def test_a_bad_line_far_into_the_file_is_named_with_its_number(tmp_path, monkeypatch):
    from checkers import history as history_module

    monkeypatch.setattr(history_module, "CHUNK_BYTES", 1000)
    lines = []
    for i in range(200):
        lines += [json.dumps(ev(2 * i, 0, "invoke", "read")), json.dumps(ev(2 * i + 1, 0, "ok", "read", 3))]
    lines[357] = '{"time": 715, "process": 0, "type": "ok", "f": "read"'
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))  # and no newline at the end
    with pytest.raises(HistoryError, match=r"bad.jsonl:358: not valid JSON"):
        load_history(path)
    lines[357] = json.dumps(ev(715, 0, "ok", "read", 3))
    path.write_text("\n".join(lines))
    assert len(load_history(path).ops) == 200


def _reference_load(path):
    """The Python loader alone (what `load_history` falls back to)."""
    from checkers.history import _decoded_chunks, _fast_rows, _pair_rows

    with open(path, "rb") as handle:
        return _pair_rows(_fast_rows(_decoded_chunks(handle, str(path)), str(path)), str(path))


def test_the_compiled_loader_gives_what_the_python_one_gives(tmp_path):
    """`load_history` tries the compiled loader first (checkers/_lincore.c): on every shape it takes,
    and on those it hands back to Python, the history must be the same."""
    from checkers import history as history_module
    from checkers.gen import register_history

    if history_module._lincore is None and not os.environ.get("CI"):
        pytest.skip("checkers._lincore is not built")
    odd = [
        ev(0, 0, "invoke", "write", {"nested": [1, {"a": None}]}, key="k", node="n1"),
        ev(1, "nemesis", "invoke", "start-partition", {"grudge": {"n1": ["n2"]}}),
        ev(2, 1, "invoke", "read", None, key="k"),
        ev(3, 0, "ok", "write", {"nested": [1, {"a": None}]}, key="k"),
        ev(4, 1, "ok", "read", 'esc"aped \\ é', key="k", error=None),
        ev(5, 2, "invoke", "cas", [1.5, 1234567890123456789], key="k"),
        ev(6, "nemesis", "info", "start-partition", None, error="timeout"),
        ev(7, 2, "info", "cas", [1.5, 1234567890123456789], key="k", error="timed out"),
        ev(8, 3, "invoke", "write", [True, False, None, -4], key=7),
    ]
    cases = {
        "odd.jsonl": [json.dumps(e) for e in odd],  # spaces after separators too
        "side.jsonl": [json.dumps(e) for e in [*odd[:2], ev(9, "forger", "invoke", "write", 1)]],
        "listkey.jsonl": [json.dumps(ev(0, 0, "invoke", "read", None, key=[1, 2]))],
    }
    for name, lines in cases.items():
        write(tmp_path, lines, name)
    gen = register_history(500, keys=3, processes=6, crash_rate=0.1, fail_rate=0.05, seed=9)
    paths = [tmp_path / n for n in cases] + [gen.write_jsonl(tmp_path / "gen.jsonl")]
    paths += sorted(PORCUPINE.glob("*/*.jsonl"))[:20]
    for path in paths:
        fast, ref = load_history(path), _reference_load(path)
        assert (fast.ops, fast.nemesis, fast.side) == (ref.ops, ref.nemesis, ref.side), path
    fast = load_history(tmp_path / "odd.jsonl")
    assert fast.ops[0].invoke_value == {"nested": [1, {"a": None}]} and fast.ops[1].value == 'esc"aped \\ é'
    assert fast.ops[2].value == [1.5, 1234567890123456789] and fast.ops[2].complete_time is None
    assert fast.ops[3].type == "info" and fast.ops[3].key == 7  # never completed
    assert [e.f for e in fast.nemesis] == ["start-partition"] * 2 and fast.nemesis[0].line == 2
    assert (
        history_module._lincore is None
        or history_module._lincore.load((tmp_path / "gen.jsonl").read_bytes(), history_module.Op, history_module._loads)
        is not None
    )  # the generated shape is the common one: the compiled path took it
    leading_zero = tmp_path / "zero.jsonl"
    leading_zero.write_text('{"time": 07, "process": 0, "type": "invoke", "f": "read"}\n')
    with pytest.raises(HistoryError, match=r"zero.jsonl:1: not valid JSON"):
        load_history(leading_zero)  # the compiled path is no laxer than the JSON parser


def test_load_history_names_the_line_of_bytes_that_are_not_utf8(tmp_path) -> None:
    """Fuzzer finding: the compiled fast path let a UnicodeDecodeError (and a traceback) out."""
    from checkers.history import HistoryError, load_history

    path = tmp_path / "history.jsonl"
    good = b'{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "write", "value": 1}\n'
    path.write_bytes(good + b'{"index": 1, "time": 2, "process": 0, "type": "ok", "f": "writ\xff", "value": 1}\n')
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert ":2:" in str(caught.value) and "\n" not in str(caught.value)
