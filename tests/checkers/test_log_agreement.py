"""Log agreement over committed-log dumps: agree, diverge, two leaders in an epoch, HWM regression."""

from __future__ import annotations

import json

import pytest

from checkers.log_agreement import DumpError, check_log_agreement


def log(*epochs: int, leader: int | None = None, tag: str = "") -> list[dict]:
    """Entries at offsets 0.. with the given epochs; digests depend on offset, epoch and tag."""
    entries = [{"offset": i, "epoch": e, "digest": f"{i:02x}{e:02x}{tag}"} for i, e in enumerate(epochs)]
    if leader is not None:
        entries[0].update(control=True, leader_id=leader)
    return entries


def test_prefixes_that_agree_are_valid():
    dumps = {"n1": log(1, 1, 2, 2, leader=1), "n2": log(1, 1, 2, leader=1), "n3": log(1, 1, leader=1)}
    verdict = check_log_agreement(dumps)
    assert verdict.valid is True
    assert verdict.details["nodes"]["n1"]["last_offset"] == 3
    assert verdict.details["leaders_by_epoch"] == {"1": [1]}


def test_divergence_names_the_first_offset_and_the_nodes():
    dumps = {"n1": log(1, 1, 2, 2), "n2": log(1, 1, 2, 2), "n3": log(1, 1, 3, 3)}
    dumps["n2"][3]["digest"] = "ffff"  # same epoch, other records
    verdict = check_log_agreement(dumps)
    assert verdict.valid is False
    found = verdict.details["findings"]["divergence"][0]
    assert found["first_offset"] == 2
    assert found["divergent_offsets"] == 2
    assert [v["nodes"] for v in found["versions"]] == [["n1", "n2"], ["n3"]]


def test_two_leaders_in_one_epoch():
    dumps = {"n1": log(1, 1, leader=1), "n2": log(1, 1, leader=1)}
    observations = [
        {"node": "n1", "time": 1, "epoch": 2, "leader_id": 1},
        {"node": "n3", "time": 2, "epoch": 2, "leader_id": 3},
        {"node": "n2", "time": 3, "epoch": 2, "leader_id": -1},  # unknown leader is no claim
    ]
    verdict = check_log_agreement(dumps, observations)
    assert verdict.valid is False
    assert verdict.details["violations"] == ["multiple-leaders"]
    assert set(verdict.details["findings"]["multiple-leaders"][0]["leaders"]) == {"1", "3"}


def test_high_watermark_going_back():
    dumps = {"n1": log(1, 1, 1, 1)}
    observations = [
        {"node": "n1", "time": 10, "high_watermark": 3},
        {"node": "n2", "time": 11, "high_watermark": 1},  # another node may lag
        {"node": "n1", "time": 20, "high_watermark": 2},
        {"node": "n1", "time": 30, "high_watermark": None},  # unknown after a restart is fine
    ]
    verdict = check_log_agreement(dumps, observations)
    assert verdict.valid is False
    assert verdict.details["violations"] == ["hwm-regression"]
    assert verdict.details["findings"]["hwm-regression"][0] == {
        "node": "n1",
        "from": 3,
        "to": 2,
        "time_from": 10,
        "time_to": 20,
    }


def test_gap_and_epoch_order_within_a_node():
    entries = log(2, 1, 1)
    del entries[1]
    verdict = check_log_agreement({"n1": entries})
    assert verdict.valid is False
    assert verdict.details["violations"] == ["epoch-order", "gap"]


def test_committed_entries_missing_from_every_dump():
    verdict = check_log_agreement({"n1": log(1, 1)}, [{"node": "n1", "time": 1, "high_watermark": 5}])
    assert verdict.valid is False
    assert verdict.details["violations"] == ["committed-missing"]


def test_directory_layouts_and_observations_file(tmp_path):
    nodes = tmp_path / "nodes"
    for name in ("n1", "n2"):
        (nodes / name).mkdir(parents=True)
        lines = [json.dumps(e) for e in log(1, 1, 2, leader=1)]
        (nodes / name / "committed-log.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "observations.jsonl").write_text(json.dumps({"node": "n1", "time": 1, "epoch": 1, "leader_id": 2}))
    verdict = check_log_agreement(tmp_path)
    assert sorted(verdict.details["nodes"]) == ["n1", "n2"]
    assert verdict.valid is False  # the observation names leader 2 for epoch 1, the log says 1
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.json").write_text(json.dumps(log(1, 2)))
    (flat / "b.jsonl").write_text("\n".join(json.dumps(e) for e in log(1)))
    assert check_log_agreement(flat).valid is True


def test_bad_dump_names_file_and_line(tmp_path):
    (tmp_path / "n1.jsonl").write_text(
        '{"offset": 0, "epoch": 1, "digest": "aa"}\n{"offset": "x", "epoch": 1, "digest": "bb"}\n'
    )
    with pytest.raises(DumpError, match=r"n1.jsonl:2: 'offset' must be an integer"):
        check_log_agreement(tmp_path)


def test_no_dumps_is_unknown():
    assert check_log_agreement({}).valid == "unknown"
