"""The kraft adapter's own end-of-run checks on dumps made with the node's code: image replay (both
verdicts), the committed-value timeline (exact at every offset it covers), and the log tap."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from checkers.image_reads import load_timeline
from checkers.verdict import UNKNOWN
from harness.db.kraft_checks import apply_committed, build_timeline, check_image_replay, write_timeline
from harness.db.kraft_tap import TAP_FILE, LogTap
from node.metadata.dump import committed_log_jsonl, image_dump_json, log_entries, snapshot_dump, snapshot_dump_json
from node.metadata.image import MetadataImage, build_image
from node.metadata.snapshot import snapshot_bytes, snapshot_id
from node.protocol.admin import ConfigResourceType
from tests.metadata.random_controller import RandomController


def _log(seed: int = 3, n: int = 80) -> list[Any]:
    return RandomController(random.Random(seed)).batches(n)


def _snapshot(batches: list[Any]) -> SimpleNamespace:
    """The snapshot of the image after `batches` (as `node.raft.storage.LoadedSnapshot` has it)."""
    image = build_image(batches)
    return SimpleNamespace(snapshot_id=snapshot_id(image), data=snapshot_bytes(image))


def _dump(run: Path, node: str, batches: list[Any], snapshot_at: int = 0, image: MetadataImage | None = None) -> Path:
    """Write a node's dumps: the log after its first `snapshot_at` batches (replaced by a snapshot)."""
    directory = run / "nodes" / node
    directory.mkdir(parents=True, exist_ok=True)
    snapshot = _snapshot(batches[:snapshot_at]) if snapshot_at else None
    (directory / "metadata-snapshot.json").write_text(snapshot_dump_json(snapshot))
    (directory / "committed-log.jsonl").write_text(committed_log_jsonl(batches[snapshot_at:], with_records=True))
    (directory / "metadata-image.json").write_text(image_dump_json(image or build_image(batches)))
    return directory


def _topic_configs(image: MetadataImage) -> dict[str, str]:
    return {
        f"{name}/{config}": value
        for rtype, name in image.config_resources
        if rtype == ConfigResourceType.TOPIC
        for config, value in image.configs(rtype, name).items()
    }


def test_images_equal_to_their_replayed_logs_are_valid_with_or_without_a_snapshot(tmp_path: Path) -> None:
    batches = _log()
    _dump(tmp_path, "c1", batches)
    _dump(tmp_path, "c2", batches, snapshot_at=30)
    _dump(tmp_path, "b1", batches[:60])  # behind: its image and log end earlier
    verdict = check_image_replay(tmp_path)
    assert verdict.valid is True, verdict.details
    assert verdict.details["nodes_replayed"] == ["b1", "c1", "c2"]


def test_a_log_that_still_holds_records_under_its_snapshot_is_replayed_from_the_snapshot(tmp_path: Path) -> None:
    batches = _log()
    directory = _dump(tmp_path, "c1", batches, snapshot_at=30)
    # the log was not cut at the snapshot yet: it still starts 10 batches earlier
    (directory / "committed-log.jsonl").write_text(committed_log_jsonl(batches[20:], with_records=True))
    assert check_image_replay(tmp_path).valid is True


def test_an_image_that_skipped_a_batch_is_an_image_mismatch(tmp_path: Path) -> None:
    batches = _log()
    skipped = MetadataImage()
    for i, batch in enumerate(batches):  # a node that lost one batch's effect, and replays on
        if i == 40:
            skipped.set_position(batch.last_offset, batch.epoch)
        else:
            apply_committed(skipped, batch)
    _dump(tmp_path, "c1", batches)
    _dump(tmp_path, "c2", batches, image=skipped)
    verdict = check_image_replay(tmp_path)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["image-mismatch"]
    example = verdict.details["anomalies"]["image-mismatch"][0]
    assert example["node"] == "c2" and example["differs_in"]


def test_a_record_that_does_not_match_its_digest_and_an_image_past_the_log(tmp_path: Path) -> None:
    batches = _log()
    directory = _dump(tmp_path, "c1", batches)
    lines = (directory / "committed-log.jsonl").read_text().splitlines()
    entry = json.loads(lines[5])
    entry["record"] = base64.b64encode(b"not the record").decode()
    lines[5] = json.dumps(entry)
    (directory / "committed-log.jsonl").write_text("\n".join(lines) + "\n")
    _dump(tmp_path, "c2", batches[:50], image=build_image(batches))  # an image ahead of its log
    verdict = check_image_replay(tmp_path)
    assert verdict.valid is False
    assert verdict.details["anomaly_types"] == ["digest-mismatch", "image-outside-log"]


def test_a_committed_record_seen_during_the_run_must_still_be_in_the_final_logs(tmp_path: Path) -> None:
    batches = _log()
    _dump(tmp_path, "c1", batches)
    tap = LogTap(tmp_path)
    tap.add([(snapshot_dump(None), list(log_entries(batches[:20], with_records=True)))])
    assert check_image_replay(tmp_path).valid is True
    other = _log(seed=4)  # another history: the record at some offset differs from the final one
    (tmp_path / TAP_FILE).write_text("".join(json.dumps(e) + "\n" for e in log_entries(other[:20], with_records=True)))
    verdict = check_image_replay(tmp_path)
    assert verdict.valid is False and "committed-entry-changed" in verdict.details["anomaly_types"]


def test_a_log_with_a_hole_is_not_replayed_over_it(tmp_path: Path) -> None:
    batches = _log()
    directory = _dump(tmp_path, "c1", batches)
    lines = (directory / "committed-log.jsonl").read_text().splitlines()
    (directory / "committed-log.jsonl").write_text("\n".join(lines[:10] + lines[12:]) + "\n")
    verdict = check_image_replay(tmp_path)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["log-gap"]


def test_no_dumps_with_records_cannot_be_judged(tmp_path: Path) -> None:
    (tmp_path / "nodes" / "c1").mkdir(parents=True)
    (tmp_path / "nodes" / "c1" / "committed-log.jsonl").write_text('{"offset": 0, "epoch": 1, "digest": "x"}\n')
    verdict = check_image_replay(tmp_path)
    assert verdict.valid == UNKNOWN and verdict.details["nodes_without_dumps"] == ["c1"]


def test_the_timeline_is_the_committed_image_at_every_offset(tmp_path: Path) -> None:
    batches = _log(seed=5, n=120)
    _dump(tmp_path, "c1", batches, snapshot_at=40)
    _dump(tmp_path, "c2", batches)
    path = write_timeline(tmp_path, complete=True)
    timeline = load_timeline(path)
    last = batches[-1].last_offset
    assert timeline.intervals == [(-1, last)] and timeline.end == last and timeline.complete
    for i, batch in enumerate(batches):
        expected = _topic_configs(build_image(batches[: i + 1]))
        keys = set(expected) | {key for (_, key) in timeline.changes}
        shown = {k: timeline.value(0, k, batch.last_offset) for k in keys}
        assert {k: v for k, v in shown.items() if v is not None} == expected, f"at offset {batch.last_offset}"


def test_the_timeline_has_a_gap_where_no_record_survived(tmp_path: Path) -> None:
    batches = _log(seed=6, n=100)
    _dump(tmp_path, "c1", batches, snapshot_at=70)  # every final log starts at batch 70
    tap = LogTap(tmp_path)
    tap.add([(snapshot_dump(None), list(log_entries(batches[:30], with_records=True)))])
    intervals, entries, end = build_timeline(tmp_path)
    first_gap, second_start = batches[29].last_offset, batches[70].base_offset - 1
    assert intervals == [[-1, first_gap], [second_start, batches[-1].last_offset]] and end == batches[-1].last_offset
    base = {e["key"]: e["value"] for e in entries if e["offset"] == second_start}
    assert base == _topic_configs(build_image(batches[:70]))  # the whole state where the stretch starts


def test_the_tap_follows_the_nodes_and_jumps_a_gap_through_a_snapshot(tmp_path: Path) -> None:
    batches = _log(seed=7, n=60)
    tap = LogTap(tmp_path)
    head = (snapshot_dump(None), list(log_entries(batches[:10], with_records=True)))
    assert tap.add([head]) == sum(len(b.records) for b in batches[:10])
    assert tap.add([head]) == 0  # nothing new
    # both nodes snapshotted past the tap's end; the one further on also has more records
    ahead = (snapshot_dump(_snapshot(batches[:20])), list(log_entries(batches[20:40], with_records=True)))
    behind = (snapshot_dump(_snapshot(batches[:15])), list(log_entries(batches[15:30], with_records=True)))
    tap.add([ahead, behind])
    lines = [json.loads(line) for line in (tmp_path / TAP_FILE).read_text().splitlines()]
    snapshots = [line["snapshot"]["end_offset"] for line in lines if "snapshot" in line]
    assert snapshots == [batches[15].base_offset]  # the nearer snapshot, then records from both views
    assert tap.end == batches[39].last_offset + 1
    offsets = [line["offset"] for line in lines if "offset" in line]
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
