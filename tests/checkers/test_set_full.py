"""Committed loss (set-full): one known-answer history per category."""

from __future__ import annotations

from typing import Any

from checkers.history import History, pair, read_events
from checkers.set_full import check_set_full


class SetHistory:
    """Ops in the order added, each invoked and completed back to back unless `open_` is used."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0

    def _event(self, process: Any, kind: str, f: str, value: Any, node: str | None = None) -> None:
        self.t += 1_000_000  # 1 ms per event
        event = {"time": self.t, "process": process, "type": kind, "f": f, "value": value}
        if node is not None:
            event["node"] = node
        self.events.append(event)

    def add(self, process: Any, element: Any, kind: str = "ok") -> SetHistory:
        self._event(process, "invoke", "add", element)
        self._event(process, kind, "add", element)
        return self

    def read(self, process: Any, elements: list[Any], node: str | None = None) -> SetHistory:
        self._event(process, "invoke", "read", None, node)
        self._event(process, "ok", "read", elements, node)
        return self

    def history(self) -> History:
        return pair(read_events(self.events))


def elements(verdict, category: str) -> list[Any]:
    return verdict.details[category]["elements"]


def test_everything_read_back_is_valid_with_latencies():
    h = SetHistory().add(0, 1).add(1, 2).read(2, [1, 2], "n1").read(3, [1, 2], "n2").history()
    verdict = check_set_full(h)
    assert verdict.valid is True
    assert verdict.details["lost"]["count"] == 0
    visible = verdict.details["latency_ms"]["visible"]
    assert visible["0.0"] == 1.0  # element 2 acked at 4 ms, read invoked at 5 ms
    assert visible["1.0"] == 3.0  # element 1 acked at 2 ms, first read invoked at 5 ms


def test_lost_on_one_node_and_on_all():
    h = (
        SetHistory()
        .add(0, 1)
        .add(0, 2)
        .read(1, [1], "n1")  # n1's final read lacks 2
        .read(2, [1, 2], "n2")
        .add(0, 3)
        .read(3, [1, 2], "n1")  # 3 missing on both final reads
        .read(4, [1, 2], "n2")
        .history()
    )
    verdict = check_set_full(h)
    assert verdict.valid is False
    assert elements(verdict, "lost") == [3]
    assert verdict.details["lost"]["on_all_nodes"]["elements"] == [3]
    assert verdict.details["lost_by_node"]["n1"]["elements"] == [3]


def test_lost_on_one_node_only():
    h = SetHistory().add(0, 1).read(1, [1], "n1").read(2, [], "n2").history()
    verdict = check_set_full(h)
    assert verdict.valid is False
    assert elements(verdict, "lost") == [1]
    assert verdict.details["lost"]["on_all_nodes"]["count"] == 0
    assert verdict.details["lost_by_node"] == {
        "n1": {"count": 0, "elements": []},
        "n2": {"count": 1, "elements": [1]},
    }


def test_stale_element_comes_back():
    h = SetHistory().add(0, 1).read(1, [1]).read(1, []).read(1, [1]).history()
    verdict = check_set_full(h)
    assert verdict.valid is True
    assert elements(verdict, "stale") == [1]
    assert elements(verdict, "lost") == []


def test_never_read_makes_the_verdict_unknown_when_nothing_was_checked():
    h = SetHistory().read(1, []).add(0, 1).history()
    verdict = check_set_full(h)
    assert elements(verdict, "never_read") == [1]
    assert verdict.valid == "unknown"


def test_unexpected_element():
    h = SetHistory().add(0, 1).read(1, [1, 99]).history()
    verdict = check_set_full(h)
    assert verdict.valid is False
    assert elements(verdict, "unexpected") == [99]


def test_failed_add_that_shows_up():
    h = SetHistory().add(0, 1, kind="fail").read(1, [1]).history()
    verdict = check_set_full(h)
    assert verdict.valid is False
    assert elements(verdict, "failed_present") == [1]


def test_recovered_info_add_and_missing_info_add():
    h = SetHistory().add(0, 1, kind="info").add(1, 2, kind="info").read(2, [1]).history()
    verdict = check_set_full(h)
    assert verdict.valid is True
    assert elements(verdict, "recovered") == [1]
    assert elements(verdict, "lost") == []  # 2 was never acknowledged nor seen: not lost


def test_info_add_seen_then_gone_is_lost():
    h = SetHistory().add(0, 1, kind="info").read(1, [1]).read(1, []).history()
    verdict = check_set_full(h)
    assert verdict.valid is False
    assert elements(verdict, "lost") == [1]
    assert elements(verdict, "recovered") == [1]


def test_final_read_before_the_ack_does_not_count_as_loss():
    b = SetHistory()
    b._event(0, "invoke", "add", 1)
    b.read(1, [], "n1")  # n1's last read began before the add was acknowledged
    b._event(0, "ok", "add", 1)
    b.read(2, [1], "n2")
    verdict = check_set_full(b.history())
    assert verdict.valid is True
    assert elements(verdict, "lost") == []
