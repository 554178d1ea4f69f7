"""The forgery checker: both verdicts, on hand-built histories and node dumps."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.forgery import check_forgery, judge, summarize
from checkers.history import Event, pair


class Builder:
    """Forger ops as a run records them: invoke, then completion, one process at a time."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.process = "forger"
        self.crashes = 0

    def op(self, kind: str, outcome: str, codes: list[str] | None = None, error: str | None = None, **value) -> None:
        t = len(self.events)
        invoke = {"kind": kind, **value}
        done = {**invoke, "codes": codes} if codes else invoke
        self.events.append(Event(t, t, self.process, "invoke", f"forge-{kind}", invoke, node="c1"))
        self.events.append(Event(t + 1, t + 1, self.process, outcome, f"forge-{kind}", done, node="c1", error=error))
        if outcome == "info":
            self.crashes += 1
            self.process = f"forger-{self.crashes}"

    def history(self):
        return pair(self.events)


def refused_as_the_kips_say() -> Builder:
    b = Builder()
    b.op("envelope-from-client", "fail", ["CLUSTER_AUTHORIZATION_FAILED"], markers=["7000000:0"])
    b.op("write-without-acl", "fail", ["TOPIC_AUTHORIZATION_FAILED"], markers=["7000001:0"])
    b.op("vote-on-broker-listener", "info", error="ConnectionLostError: connection closed", forged_epoch=1_000_002)
    b.op("begin-quorum-epoch-on-broker-listener", "fail", ["CLUSTER_AUTHORIZATION_FAILED"], forged_epoch=1_000_003)
    b.op("broker-registration-without-cluster-action", "fail", ["NOT_CONTROLLER"], markers=["forged-1-4"])
    b.op("write-with-bad-login", "fail", error="SASL_AUTHENTICATION_FAILED: bad password", markers=["7000005:0"])
    b.op("fetch-on-broker-listener", "fail", error="ConnectError: NETWORK_EXCEPTION: connection refused")
    return b


def write_node(root: Path, node: str, image: dict, epochs: list[int]) -> None:
    d = root / "nodes" / node
    d.mkdir(parents=True)
    (d / "metadata-image.json").write_text(json.dumps({"image": image}))
    lines = [json.dumps({"offset": i, "epoch": e, "digest": "x"}) for i, e in enumerate(epochs)]
    (d / "committed-log.jsonl").write_text("\n".join(lines) + "\n")


CLEAN_IMAGE = {"configs": {"2:kchaos-forger": {"leader.replication.throttled.replicas": "1:2,3:4"}}, "topics": ["t"]}


def test_every_forgery_refused_and_absent_is_valid(tmp_path) -> None:
    write_node(tmp_path, "c1", CLEAN_IMAGE, [1, 1, 2, 5])
    verdict = check_forgery(refused_as_the_kips_say().history(), tmp_path)
    assert verdict.valid is True, verdict.details
    outcomes = verdict.details["outcomes"]
    assert outcomes["vote-on-broker-listener"] == {"undecided": 1}
    assert outcomes["broker-registration-without-cluster-action"] == {"not-served": 1}
    assert outcomes["write-with-bad-login"] == {"refused": 1}
    assert outcomes["fetch-on-broker-listener"] == {"not-sent": 1}
    assert verdict.details["nodes_checked"] == 1
    assert "7 forged requests" in summarize(verdict)[0]


def test_an_accepted_forgery_is_invalid(tmp_path) -> None:
    b = refused_as_the_kips_say()
    b.op("alter-partition-without-cluster-action", "ok", ["NONE"])
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is False
    (violation,) = verdict.details["violations"]
    assert violation["problem"] == "accepted" and violation["kind"] == "alter-partition-without-cluster-action"


def test_a_refusal_for_the_wrong_reason_is_invalid(tmp_path) -> None:
    """Refused by content, not by authorization: the request got past the check it should have failed."""
    b = Builder()
    b.op("alter-partition-without-cluster-action", "fail", ["STALE_BROKER_EPOCH"])
    b.op("envelope-from-client", "fail", ["NONE", "TOPIC_AUTHORIZATION_FAILED"])  # the inner request was run
    verdict = check_forgery(b.history(), None)
    assert verdict.valid is False
    assert [v["problem"] for v in verdict.details["violations"]] == ["wrong-refusal", "wrong-refusal"]


def test_a_marker_in_a_node_image_is_an_effect_even_when_the_answer_was_a_timeout(tmp_path) -> None:
    b = Builder()
    b.op("write-without-acl", "info", error="REQUEST_TIMED_OUT", markers=["7000000:0"])
    leaked = {"configs": {"2:kchaos-forger": {"leader.replication.throttled.replicas": "1:2,7000000:0"}}}
    write_node(tmp_path, "c1", CLEAN_IMAGE, [1])
    write_node(tmp_path, "c2", leaked, [1])
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is False
    (violation,) = verdict.details["violations"]
    assert violation == {"problem": "effect", "node": "c2", "op": 0, "marker": "7000000:0", "in": "metadata-image.json"}


def test_a_marker_must_match_exactly() -> None:
    b = Builder()
    b.op("create-topic-without-acl", "fail", ["TOPIC_AUTHORIZATION_FAILED"], markers=["forged-1-5"])
    assert judge(b.history().side[0]) == "refused"


def test_a_prefix_of_a_marker_is_not_the_marker(tmp_path) -> None:
    b = Builder()
    b.op("create-topic-without-acl", "fail", ["TOPIC_AUTHORIZATION_FAILED"], markers=["forged-1-5"])
    write_node(tmp_path, "c1", {"topics": ["forged-1-50"]}, [1])
    assert check_forgery(b.history(), tmp_path).valid is True
    write_node(tmp_path, "c2", {"topics": ["forged-1-5"]}, [1])
    assert check_forgery(b.history(), tmp_path).valid is False


def test_a_forged_epoch_in_a_committed_log_is_an_effect(tmp_path) -> None:
    b = Builder()
    b.op("vote-on-broker-listener", "info", error="ConnectionLostError: closed", forged_epoch=1_000_007)
    write_node(tmp_path, "c1", CLEAN_IMAGE, [1, 2, 1_000_007, 1_000_007])
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is False
    assert verdict.details["violations"][0] == {
        "problem": "effect",
        "node": "c1",
        "op": 0,
        "epoch": 1_000_007,
        "in": "committed-log.jsonl",
    }


def test_forger_ops_are_side_ops_that_client_checkers_never_see() -> None:
    b = refused_as_the_kips_say()
    b.events.append(Event(100, 100, 0, "invoke", "read", None, key="k"))
    b.events.append(Event(101, 101, 0, "ok", "read", 3, key="k"))
    history = b.history()
    assert [op.f for op in history.ops] == ["read"]
    assert len(history.side) == 7 and {op.process for op in history.side} == {"forger", "forger-1"}


def test_no_forger_no_violation_and_a_note() -> None:
    verdict = check_forgery(Builder().history(), None)
    assert verdict.valid is True and "no forger ran" in verdict.details["note"]


def test_quorum_forgeries_the_fuzzer_found_refused_are_valid(tmp_path) -> None:
    b = Builder()
    b.op("end-quorum-epoch-from-non-voter", "fail", ["INVALID_REQUEST"], forged_epoch=2**31 - 1)
    b.op("vote-from-non-voter", "fail", ["INCONSISTENT_VOTER_SET"], forged_epoch=1_000_001)
    b.op("begin-quorum-epoch-at-int32-max", "fail", ["INVALID_REQUEST"], forged_epoch=2**31 - 1)
    b.op("replayed-vote-of-past-epoch", "fail", ["FENCED_LEADER_EPOCH"], replayed_epoch=0)
    write_node(tmp_path, "c1", CLEAN_IMAGE, [1, 2, 3])
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is True, verdict.details
    assert all(counts == {"refused": 1} for counts in verdict.details["outcomes"].values())


def test_quorum_forgeries_accepted_or_processed_are_invalid(tmp_path) -> None:
    b = Builder()
    b.op("end-quorum-epoch-from-non-voter", "ok", ["NONE"], forged_epoch=2**31 - 1)  # the old node's answer
    b.op("replayed-vote-of-past-epoch", "fail", ["INVALID_QUORUM_STATE"], replayed_epoch=0)
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is False
    problems = {(v["kind"], v["problem"]) for v in verdict.details["violations"]}
    assert problems == {
        ("end-quorum-epoch-from-non-voter", "accepted"),
        ("replayed-vote-of-past-epoch", "wrong-refusal"),
    }


def test_a_committed_entry_at_the_int32_limit_is_an_effect(tmp_path) -> None:
    b = Builder()
    b.op("end-quorum-epoch-from-non-voter", "info", error="ConnectionLostError", forged_epoch=2**31 - 1)
    write_node(tmp_path, "c1", CLEAN_IMAGE, [1, 2**31 - 1])
    verdict = check_forgery(b.history(), tmp_path)
    assert verdict.valid is False and verdict.details["violations"][0]["problem"] == "effect"
