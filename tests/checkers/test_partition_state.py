"""The partition-state and partition-cas checkers: a correct AlterPartition story passes; a lost or
duplicated change, a stale compare-and-set accepted, leader outside the ISR, epochs going back and an
image that disagrees with the log each fail with the right anomaly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.models import PartitionCasModel, get_model
from checkers.partition_cas import check_partition_cas
from checkers.partition_state import EXPLANATIONS, check_partition_state, summarize
from tests.checkers.broker_histories import B0, B1, B2, BrokerHistoryBuilder, valid_run


def anomalies(builder, dumps=None) -> dict:
    return check_partition_state(builder.history(), dumps).details.get("anomalies", {})


def test_a_correct_story_is_valid():
    h = valid_run().history()
    state = check_partition_state(h)
    assert state.valid is True, state.details["anomalies"]
    assert state.details["counts"]["versions"] == 5
    assert "partition-state: valid" in summarize(state)[0]
    assert check_partition_cas(h).valid is True


def test_a_lost_alter_partition():
    h = valid_run()
    h.metadata(30, at=8_500, leader=B0, isr=[B0, B1], le=0, pe=1)  # past the restart's offset 20
    found = anomalies(h)
    assert "lost-alter" in found and "partition-epoch-regression" in found


def test_a_lost_alter_partition_in_a_final_dump(tmp_path):
    h = valid_run()
    node = tmp_path / "nodes" / "c3"
    node.mkdir(parents=True)
    image = {
        "brokers": [],
        "topics": [
            {"name": "isr-0", "topic_id": "x", "partitions": [
                {"partition_id": 0, "replicas": [B0, B1, B2], "isr": [B0, B1], "leader": B0, "leader_epoch": 0,
                 "partition_epoch": 1},
            ]}
        ],
    }  # fmt: skip
    (node / "metadata-image.json").write_text(json.dumps({"last_offset": 60, "image": image}))
    found = anomalies(h, tmp_path)
    assert "lost-alter" in found
    assert "dump image" in found["lost-alter"]["examples"][0]["why"]


def test_a_duplicated_alter_partition_is_not_linearizable():
    h = valid_run()
    # a second compare-and-set from epoch 1, concurrent with "grow", also accepted
    h.alter(at=602, le=0, pe=1, isr=[B0, B2], from_isr=[B0, B1])
    verdict = check_partition_cas(h.history())
    assert verdict.valid is False
    assert verdict.details["invalid_keys"] == ["isr-0/0"]
    found = anomalies(h)
    assert "version-conflict" in found


def test_the_same_change_applied_twice():
    h = valid_run()
    h.metadata(13, at=720, leader=B0, isr=[B0, B1, B2], le=0, pe=3)  # epoch 3 = epoch 2: nothing changed
    h.answer("after-fence", value={})  # (keeps the story; the fence's epoch-3 read now conflicts)
    found = anomalies(h)
    assert "duplicate-change" in found


def test_a_stale_epoch_alter_partition_accepted():
    h = valid_run()
    # after "grow" (epoch 2) was acknowledged, a compare-and-set naming epoch 0 is accepted
    h.alter(at=1_000, le=0, pe=0, isr=[B0, B2], from_isr=[B0, B1, B2])
    assert check_partition_cas(h.history()).valid is False
    assert "version-conflict" in anomalies(h)


def test_an_alter_from_a_deposed_leader_accepted():
    h = valid_run()
    # B0 led epoch 2; epoch 3 is led by B1 (leader epoch 1). B0 asks with the old leader epoch at epoch 3.
    h.alter(at=5_800, le=0, pe=3, isr=[B0, B1], from_isr=[B1, B2])
    found = anomalies(h)
    assert "stale-alter-accepted" in found
    # the compare-and-sets alone cannot tell: epoch 3 was the controller's own move, seen only in images
    assert check_partition_cas(h.history()).valid is True


def test_leader_not_in_isr_and_isr_outside_replicas():
    h = valid_run()
    h.metadata(9, at=25, leader=B1, isr=[B0, 7], le=0, pe=0, node="c3")
    found = anomalies(h)
    assert {"leader-not-in-isr", "isr-outside-replicas", "version-conflict"} <= set(found)


def test_epochs_going_back():
    h = valid_run()
    h.metadata(45, at=12_300, leader=B2, isr=[B2], le=2, pe=3)
    assert "partition-epoch-regression" in anomalies(h)
    h = valid_run()
    h.metadata(46, at=12_400, leader=B0, isr=[B0, B2], le=1, pe=6)  # leader epoch below epoch 4's 2
    found = anomalies(h)
    assert "leader-epoch-regression" in found


def test_a_leader_change_without_a_new_leader_epoch():
    h = valid_run()
    h.metadata(46, at=12_400, leader=B0, isr=[B0, B2], le=2, pe=5)
    assert "leader-change-without-epoch-bump" in anomalies(h)


def test_an_image_disagreeing_with_the_log():
    h = valid_run()
    h.metadata(12, at=720, leader=B0, isr=[B0, B1], le=0, pe=2, node="c3")  # same offset, same epoch, other ISR
    found = anomalies(h)
    assert {"image-divergence", "version-conflict"} <= set(found)


def test_an_alter_answer_other_than_asked():
    h = valid_run()
    h.answer("grow", value={"result": {"leader": B0, "leader_epoch": 0, "isr": [B0, B1], "partition_epoch": 2}})
    assert "alter-result-mismatch" in anomalies(h)


def test_an_unexpected_alter_error():
    h = valid_run()
    h.alter(at=6_000, le=1, pe=3, isr=[B1], from_isr=[B1, B2], broker=B1, broker_epoch=6, type="fail",
            result={"error": "CLUSTER_AUTHORIZATION_FAILED"})  # fmt: skip
    assert list(anomalies(h)) == ["unexpected-error"]


def test_an_unknown_outcome_may_or_may_not_have_happened():
    h = valid_run()
    h.alter(at=6_000, le=1, pe=3, isr=[B1], from_isr=[B1, B2], broker=B1, broker_epoch=6, type="info")
    assert check_partition_cas(h.history()).valid is True
    assert anomalies(h) == {}


def test_every_anomaly_is_tested():
    source = Path(__file__).read_text()
    untested = {n for n in EXPLANATIONS if f'"{n}"' not in source}
    assert untested <= {"empty-isr", "replicas-changed"}, untested


def test_empty_isr_and_changed_replicas():
    h = BrokerHistoryBuilder()
    h.setup()
    h.op(
        "metadata",
        {"node": "b1"},
        {"offset": 3, "brokers": [B0], "partitions": {"isr-0/0": {"leader": -1, "leader_epoch": 0, "isr": [],
                                                                   "partition_epoch": 0, "replicas": [B0]}}},
        inv=10,
    )  # fmt: skip
    found = anomalies(h)
    assert {"empty-isr", "replicas-changed"} <= set(found)


class TestCasModel:
    """The sequential model on its own."""

    def op(self, pe, le, isr, sender=B0, result=None, type="ok"):
        from checkers.history import Op

        value = {"topic": "t", "partition": 0, "broker": sender, "leader_epoch": le, "partition_epoch": pe, "isr": isr}
        done = {**value, "result": result} if result else value
        return Op(0, 1, "alter", "t/0", value, done, type, 0, 1, 0, 1)

    def test_registered(self):
        assert isinstance(get_model("partition-cas"), PartitionCasModel)

    @pytest.mark.parametrize(
        ("state", "legal"),
        [
            (None, True),
            ((2, 0, B0, (B0,)), True),  # exactly the named version
            ((1, 0, B1, (B1,)), True),  # an older one: the controller moved it on meanwhile
            ((3, 1, B0, (B0,)), False),  # a newer one: the compare-and-set must fail
            ((2, 1, B0, (B0,)), False),  # the named epoch with another leader epoch
            ((2, 0, B1, (B1,)), False),  # the named epoch led by someone else
        ],
    )
    def test_compare_and_set(self, state, legal):
        m = PartitionCasModel()
        op = self.op(2, 0, [B0, B1], result={"leader": B0, "leader_epoch": 0, "isr": [B0, B1], "partition_epoch": 3})
        ok, new = m.step(state, op)
        assert ok is legal
        if legal:
            assert new == (3, 0, B0, (B0, B1))

    def test_unchanged_isr_keeps_the_version_and_is_no_observation(self):
        m = PartitionCasModel()
        op = self.op(2, 0, [B0], result={"leader": B0, "leader_epoch": 0, "isr": [B0], "partition_epoch": 2})
        assert m.step((2, 0, B0, (B0,)), op) == (True, (2, 0, B0, (B0,)))
        assert not m.keep(op)  # no record was written: a deposed controller may have answered it

    def refusal(self, pe, le, error):
        from checkers.history import Op

        value = {"topic": "t", "partition": 0, "broker": B0, "leader_epoch": le, "partition_epoch": pe, "isr": [B0]}
        return Op(0, 1, "alter", "t/0", value, {**value, "error": error}, "fail", 0, 1, 0, 1)

    def test_a_stale_refusal_is_an_observation_of_a_newer_version(self):
        m = PartitionCasModel()
        state = (2, 0, B0, (B0, B1))
        fenced = self.refusal(2, 0, "FENCED_LEADER_EPOCH")
        assert m.keep(fenced)
        ok, after = m.step(state, fenced)  # hidden changes got it to a newer leader epoch
        assert ok and after == (2.5, 1, None, None)
        assert "epoch 3 or later" in m.describe_state(after)
        cas = self.op(2, 0, [B0], result={"leader": B0, "leader_epoch": 0, "isr": [B0], "partition_epoch": 3})
        assert m.step(after, cas)[0] is False  # the refusal said that version was gone
        behind = self.refusal(1, 0, "INVALID_UPDATE_VERSION")
        assert m.step(state, behind) == (True, state)  # true of the state: nothing learnt
        assert not m.keep(self.refusal(2, 0, "NOT_LEADER_OR_FOLLOWER"))

    def test_failed_ops_are_dropped(self):
        m = PartitionCasModel()
        assert not m.keep(self.op(2, 0, [B0], type="fail"))
        assert m.keep(self.op(2, 0, [B0], type="info"))


def test_a_refusal_that_claims_a_newer_leader_epoch_than_the_later_changes_had():
    """A FENCED_LEADER_EPOCH refusal says the partition's leader epoch was past the asked one (KIP-497
    with KAFKA-14154: a controller behind the request answers NOT_CONTROLLER instead); the later
    acknowledged change at an older leader epoch contradicts it."""
    h = valid_run()
    h.alter(at=450, le=1, pe=1, isr=[B0], from_isr=None, type="fail", result={"error": "FENCED_LEADER_EPOCH"})
    verdict = check_partition_cas(h.history())
    assert verdict.valid is False
    assert "as a refusal said" in json.dumps(verdict.details)


@pytest.mark.parametrize(
    ("at", "le", "pe", "error"),
    [
        (5_700, 0, 2, "FENCED_LEADER_EPOCH"),  # the fence at 5.6 s moved leadership on (leader epoch 1)
        (450, 0, 0, "INVALID_UPDATE_VERSION"),  # the shrink at 0.3 s made partition epoch 1
        (450, 1, 1, "NOT_CONTROLLER"),  # no claim about the version
        (450, 1, 1, "NOT_LEADER_OR_FOLLOWER"),
    ],
)
def test_refusals_true_of_the_state_or_no_claim_at_all_are_fine(at, le, pe, error):
    h = valid_run()
    h.alter(at=at, le=le, pe=pe, isr=[B0], from_isr=None, type="fail", result={"error": error})
    verdict = check_partition_cas(h.history())
    assert verdict.valid is True, verdict.details
