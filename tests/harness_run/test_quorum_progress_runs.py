"""Runs of the correct cluster that quorum-progress once called invalid (issue 24): every fault kind at
once on 3 controllers + 2 brokers, a fault every 5 s. One seed per cause (docs/trust/quorum-progress.md):
a voter that lost its leader forwarded DescribeQuorum to it and held the client's request (the cluster,
fixed); a kill counted as time cut off (the checker, fixed); an `info` judged as if its client had given
up R after the invoke, not when it did (the checker, fixed)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main

EVERY_FAULT = "partition,packet,clock,kill,pause,disk_stall,disk_fail,lose_unsynced,corrupt"


@pytest.mark.parametrize(
    ("workload", "seed"),
    [
        ("registrations", 28),  # c3, prospective, forwarded DescribeQuorum to the leader it had lost
        ("isr-changes", 148),  # c1 asked 0.3 s after its restart; the 5 s before, all were down
        ("config-register", 78),  # c1 paused 2.8 s into a read whose client waited 5 s
    ],
)
def test_the_correct_cluster_keeps_quorum_progress_valid(tmp_path, capsys, workload, seed):
    argv = ["run", "--backend", "sim", "--workload", workload, "--seed", str(seed), "--time-limit", "60"]
    argv += ["--nodes", "3+2", "--nemesis", EVERY_FAULT, "--nemesis-interval", "5", "--nemesis-duration", "5"]
    argv += ["--recovery", "10", "--results", str(tmp_path), "--no-progress"]
    main(argv)
    (results,) = tmp_path.glob("*/[0-9]*/results.json")  # not the `latest` link
    verdict = json.loads(results.read_text())["checkers"]["quorum-progress"]
    assert verdict["valid"] is True, capsys.readouterr().out
