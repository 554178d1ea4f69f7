"""The registrations checker: a correct story passes; each broken KIP-631 rule fails with its anomaly,
and answers that a correct cluster may give under faults (stale refusals, fresh sessions after a
failover, unknown outcomes) are no anomaly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.registrations import EXPLANATIONS, check_registrations, summarize
from tests.checkers.broker_histories import B0, B1, B2, valid_run


def anomalies(builder, dumps=None) -> dict:
    verdict = check_registrations(builder.history(), dumps)
    return verdict.details.get("anomalies", {})


def test_a_correct_story_is_valid_and_judges_its_probe():
    verdict = check_registrations(valid_run().history())
    assert verdict.valid is True, verdict.details["anomalies"]
    counts = verdict.details["counts"]
    assert counts["probes_judged"] == 1  # the crashed broker's probe was within a quorum bracket
    assert counts["shutdowns"] == 1
    assert "registrations: valid" in summarize(verdict)[0]


def test_epoch_reuse():
    h = valid_run()
    h.answer("restart", value={"epoch": 5})  # the new incarnation gets the epoch the first one had
    found = anomalies(h)
    assert "epoch-reuse" in found
    assert found["epoch-reuse"]["examples"][0]["broker"] == B0


def test_epoch_going_back():
    h = valid_run()
    h.answer("restart", value={"epoch": 4})
    assert "epoch-regression" in anomalies(h)


def test_two_live_incarnations_a_duplicate_accepted():
    h = valid_run()
    h.answer("duplicate", type="ok", value={"epoch": 15, "error": None})
    found = anomalies(h)
    # accepting it also superseded the live incarnation: its next heartbeats were stale, yet accepted
    assert {"duplicate-registration-accepted", "stale-epoch-accepted", "registration-lost"} == set(found)
    assert "i1-dup" in found["duplicate-registration-accepted"]["examples"][0]["why"]


def test_a_duplicate_accepted_by_another_controller_is_no_proof():
    """The controller that accepted it may have been activated after the last heartbeat it heard of."""
    h = valid_run()
    h.answer("duplicate", type="ok", value={"epoch": 15, "error": None}, node="c2")
    assert "duplicate-registration-accepted" not in anomalies(h)  # (the images then show it lost)


def test_a_duplicate_after_the_session_lapsed_is_fine():
    h = valid_run()
    h.register(B0, "i0-late", 9, at=5_800)  # B0's last contact was at 2005 ms: its session lapsed
    assert "duplicate-registration-accepted" not in anomalies(h)


def test_two_live_incarnations_a_stale_epoch_accepted():
    h = valid_run()
    h.answer("stale-beat", type="ok", value={"fenced": False, "caught_up": True, "shut_down": False, "error": None})
    found = anomalies(h)
    assert "stale-epoch-accepted" in found
    assert found["stale-epoch-accepted"]["examples"][0]["superseded_by"] == 20


def test_a_stale_epoch_accepted_by_a_controller_that_never_saw_the_new_one_is_no_proof():
    h = valid_run()
    h.answer("stale-beat", type="ok", node="c3", value={"fenced": True, "caught_up": True, "shut_down": False})
    assert "stale-epoch-accepted" not in anomalies(h)


def test_not_fenced_after_its_session():
    h = valid_run()
    h.answer("probe", value={"fenced": False})
    found = anomalies(h)
    # and since the probe kept that incarnation unfenced, the restart 500 ms later was a duplicate
    assert set(found) == {"not-fenced-after-session", "duplicate-registration-accepted"}
    assert found["not-fenced-after-session"]["examples"][0]["silence_ms"] > 4_000


def test_unfenced_probe_answered_by_a_controller_without_quorum_bracket_is_not_judged():
    h = valid_run()
    h.answer("probe", value={"fenced": False}, node="c2")  # c2 may have been activated just before
    verdict = check_registrations(h.history())
    assert "not-fenced-after-session" not in verdict.details["anomalies"]
    assert verdict.details["counts"]["probes_without_quorum_bracket"] >= 1


def test_unfenced_probe_during_a_clock_or_pause_fault_is_not_judged():
    h = valid_run()
    h.answer("probe", value={"fenced": False})
    h.events.append({"time": 3_000 * 10**6, "process": "nemesis", "type": "info", "f": "start-pause", "value": {}})
    h.events.append({"time": 4_000 * 10**6, "process": "nemesis", "type": "info", "f": "stop-pause", "value": {}})
    verdict = check_registrations(h.history())
    assert "not-fenced-after-session" not in verdict.details["anomalies"]
    assert verdict.details["counts"]["probes_in_time_faults"] == 1


@pytest.mark.parametrize(("kind", "targets", "judged"), [("pause", ["c2"], True), ("pause", ["c1"], False),
                                                          ("clock", ["c3"], True), ("clock", None, False)])  # fmt: skip
def test_a_time_fault_skips_the_probe_only_when_it_hit_the_controller_that_answered(kind, targets, judged):
    h = valid_run()
    h.answer("probe", value={"fenced": False})  # answered by c1
    value = {"kind": kind} | ({"targets": targets} if targets else {})
    h.events.append({"time": 3_000 * 10**6, "process": "nemesis", "type": "info", "f": f"start-{kind}", "value": value})
    h.events.append({"time": 4_000 * 10**6, "process": "nemesis", "type": "info", "f": f"stop-{kind}", "value": {}})
    verdict = check_registrations(h.history())
    assert ("not-fenced-after-session" in verdict.details["anomalies"]) is judged
    assert verdict.details["counts"].get("probes_in_time_faults", 0) == (0 if judged else 1)


def test_unfenced_probe_after_a_heartbeat_of_unknown_outcome_is_not_judged():
    h = valid_run()
    h.answer("probe", value={"fenced": False})
    h.beat(B0, 5, at=6_000, type="info")  # may reach the controller at any time before the probe
    assert "not-fenced-after-session" not in anomalies(h)


def test_unfenced_before_catch_up_in_a_heartbeat_answer():
    h = valid_run()
    h.answer("lagging", value={"fenced": False})
    found = anomalies(h)
    assert list(found) == ["unfenced-before-catch-up"]


def test_unfenced_before_catch_up_in_an_image():
    h = valid_run()
    h.cluster(21, {B0: (20, False), B1: (6, False), B2: (7, False)}, at=7_650)
    assert "unfenced-before-catch-up" in anomalies(h)


def test_a_fenced_leader_in_an_image():
    h = valid_run()
    h.metadata(17, at=5_700, leader=B0, isr=[B0, B1, B2], le=0, pe=2, unfenced=[B1, B2])
    found = anomalies(h)
    assert "fenced-leader" in found and "fenced-in-isr" in found


def test_a_fenced_broker_added_to_an_isr_by_alter_partition():
    h = valid_run()
    h.answer(
        "add-lagging",
        type="ok",
        value={"error": None, "result": {"leader": B1, "leader_epoch": 1, "isr": [B1, B2, B0], "partition_epoch": 4}},
    )
    found = anomalies(h)
    assert "ineligible-replica-added" in found
    assert "never reported catching up" in found["ineligible-replica-added"]["examples"][0]["why"]


def _join_of_fenced_b0(h) -> None:
    """B1 adds B0 (epoch 5, crashed at 2 s, fenced by 5.6 s) back into the ISR before B0 restarts."""
    h.alter(
        at=7_200, le=1, pe=3, isr=[B1, B2, B0], from_isr=[B1, B2], broker=B1, broker_epoch=6,
        result={"result": {"leader": B1, "leader_epoch": 1, "isr": [B1, B2, B0], "partition_epoch": 4}},
    )  # fmt: skip


def test_a_broker_fenced_after_its_session_added_to_an_isr_by_alter_partition():
    h = valid_run()
    h.barrier(13, at=2_100)  # everything committed before 2.1 s (B0's unfences too) is at or below 13
    _join_of_fenced_b0(h)  # the image at 5.61 s, offset 16, showed B0 epoch 5 fenced
    found = anomalies(h)
    assert "ineligible-replica-added" in found
    assert "was fenced" in found["ineligible-replica-added"]["examples"][0]["why"]


@pytest.mark.parametrize("why", ["no offset bound", "a heartbeat of unknown outcome"])
def test_a_join_is_not_judged_when_a_heartbeat_may_have_unfenced_the_broker_after_the_image(why):
    h = valid_run()
    if why == "a heartbeat of unknown outcome":
        h.barrier(13, at=2_100)
        h.beat(B0, 5, at=6_000, type="info")  # may have unfenced B0 after the image showed it fenced
    # else: nothing bounds the offset of B0's last unfence below the image's 16
    _join_of_fenced_b0(h)
    assert "ineligible-replica-added" not in anomalies(h)


def test_a_barrier_answering_below_what_was_committed_before_it():
    h = valid_run()
    h.barrier(40, at=12_150)  # the barrier answered 44 at 12.105 s
    found = anomalies(h)
    assert list(found) == ["stale-read"]
    assert "offset 44 committed before" in found["stale-read"]["examples"][0]["why"]


def test_a_barrier_concurrent_with_a_higher_answer_is_fine():
    h = valid_run()
    h.barrier(43, at=12_102)  # invoked before the barrier answering 44 completed
    assert anomalies(h) == {}


def test_the_last_fenced_isr_member_may_stay():
    h = valid_run()
    h.metadata(17, at=5_700, leader=-1, isr=[B0], le=2, pe=9, unfenced=[B1, B2])
    assert anomalies(h) == {}


def test_a_shut_down_broker_still_leading():
    h = valid_run()
    h.metadata(43, at=10_400, leader=B1, isr=[B1, B2], le=1, pe=3, unfenced=[B0, B1, B2])
    found = anomalies(h)
    assert "shutdown-broker-leader" in found
    assert "controlled shutdown" in found["shutdown-broker-leader"]["examples"][0]["why"]


def test_a_stale_image_from_before_the_shutdown_is_fine():
    h = valid_run()
    h.metadata(30, at=10_400, leader=B1, isr=[B1, B2], le=1, pe=3, unfenced=[B0, B1, B2])  # offset below the anchor
    assert anomalies(h) == {}


def test_a_lost_registration_and_diverging_images():
    h = valid_run()
    h.cluster(24, {B0: (5, True), B1: (6, False), B2: (7, False)}, at=8_210, node="c2")
    found = anomalies(h)
    assert "image-divergence" in found and "registration-lost" not in found  # offset 24 may precede it
    h.cluster(45, {B0: (5, True), B1: (6, False), B2: (7, False)}, at=12_300, node="c2")  # past the barrier
    assert "registration-lost" in anomalies(h)


def test_an_unexpected_error():
    h = valid_run()
    h.answer("duplicate", value={"error": "INVALID_REQUEST"})
    assert list(anomalies(h)) == ["unexpected-error"]


def test_image_dumps_are_read_from_the_run_directory(tmp_path):
    h = valid_run()
    node = tmp_path / "nodes" / "b2"
    node.mkdir(parents=True)
    image = {
        "brokers": [
            {"broker_id": B0, "broker_epoch": 20, "fenced": False, "in_controlled_shutdown": False},
            {"broker_id": B1, "broker_epoch": 6, "fenced": False, "in_controlled_shutdown": True},
            {"broker_id": B2, "broker_epoch": 7, "fenced": False, "in_controlled_shutdown": False},
        ],
        "topics": [
            {
                "name": "isr-0",
                "topic_id": "x",
                "partitions": [
                    {"partition_id": 0, "replicas": [B0, B1, B2], "isr": [B1, B2], "leader": B1, "leader_epoch": 1,
                     "partition_epoch": 3},
                ],
            }
        ],
    }  # fmt: skip
    (node / "metadata-image.json").write_text(json.dumps({"last_offset": 50, "image": image}))
    verdict = check_registrations(h.history(), tmp_path)
    assert verdict.details["counts"]["image_dumps"] == 1
    assert {"shutdown-broker-leader", "shutdown-broker-in-isr"} <= set(verdict.details["anomalies"])


def test_every_anomaly_has_an_explanation_and_a_test():
    names = set(EXPLANATIONS)
    source = Path(__file__).read_text()
    untested = {n for n in names if f'"{n}"' not in source}
    assert untested <= {"broker-epoch-regression"}, untested


def test_broker_epoch_going_back_between_images():
    h = valid_run()
    h.cluster(30, {B0: (5, True), B1: (6, False), B2: (7, False)}, at=8_400)
    found = anomalies(h)
    assert "broker-epoch-regression" in found


@pytest.mark.parametrize("bad", [{"broker": "x"}, "not an object"])
def test_malformed_ops_name_the_op(bad):
    h = valid_run()
    h.op("heartbeat", bad, {"fenced": True}, inv=50)
    with pytest.raises(ValueError, match=r"op \d+ \(heartbeat\)"):
        check_registrations(h.history())


def test_b2_is_played_and_others_are_not():
    verdict = check_registrations(valid_run().history())
    assert verdict.details["brokers"] == [B0, B1, B2]


def test_kchaos_check_runs_the_played_broker_checkers(tmp_path, capsys):
    from harness.cli import main

    good = valid_run().write(tmp_path / "good.jsonl")
    argv = [
        "check",
        str(good),
        "--checker",
        "registrations",
        "--checker",
        "partition-state",
        "--checker",
        "partition-cas",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "registrations: valid" in out and "partition-state: valid" in out and "partition-cas: valid" in out
    h = valid_run()
    h.answer("probe", value={"fenced": False})
    bad = h.write(tmp_path / "bad.jsonl")
    assert main(["check", str(bad), "--checker", "registrations", "--fence-slack-ms", "500"]) == 1
    assert "not-fenced-after-session" in capsys.readouterr().out
    h = valid_run()
    h.op("alter", {"topic": "isr-0"}, None, inv=50, type="fail")
    broken = h.write(tmp_path / "broken.jsonl")
    assert main(["check", str(broken), "--checker", "partition-state"]) == 254
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "(alter)" in err and "Traceback" not in err


def test_a_controller_that_may_have_been_activated_again_in_between_proves_nothing():
    """A failed DescribeQuorum (or another epoch) at c1 breaks its bracket: a new activation would start
    c1 from the committed image, where the old incarnation may have been fenced meanwhile."""
    h = valid_run()
    h.answer("duplicate", type="ok", value={"epoch": 15, "error": None})
    h.op("quorum", {"node": "c1"}, {"error": "NOT_LEADER_OR_FOLLOWER"}, inv=2_900, type="fail", node="c1")
    found = anomalies(h)
    assert "duplicate-registration-accepted" not in found
    h = valid_run()
    h.answer("probe", value={"fenced": False})
    h.quorum(at=6_950, epoch=4)  # c1 leads a new epoch just before the probe: its sessions restarted
    verdict = check_registrations(h.history())
    assert "not-fenced-after-session" not in verdict.details["anomalies"]
