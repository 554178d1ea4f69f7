"""Runs of the correct cluster that quorum-progress once called invalid (issue 24): every fault kind at
once on 3 controllers + 2 brokers, a fault every 5 s. One seed per cause (docs/trust/quorum-progress.md):
a voter that lost its leader forwarded DescribeQuorum to it and held the client's request (the cluster,
fixed); a kill counted as time cut off (the checker, fixed); an `info` judged as if its client had given
up R after the invoke, not when it did (the checker, fixed); a voter judged by the stretch cut off it
was in when the client first asked, although it rejoined the others and was cut off anew before the
client's last attempt reached it (the checker, fixed: docs/trust/soak-280.md); a voter killed by a
`corrupt` start while it held a request, judged as silent (the checker, fixed: docs/trust/soak-398.md)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main

EVERY_FAULT = "partition,packet,clock,kill,pause,disk_stall,disk_fail,lose_unsynced,corrupt"
SOAK_FAULTS = (
    "partition,packet,redeliver,clock,kill,pause,disk_stall,disk_fail,lose_unsynced,corrupt"  # suites/soak.toml
)


@pytest.mark.parametrize(
    ("workload", "seed", "faults"),
    [
        ("registrations", 28, EVERY_FAULT),  # c3, prospective, forwarded DescribeQuorum to the leader it had lost
        ("isr-changes", 148, EVERY_FAULT),  # c1 asked 0.3 s after its restart; the 5 s before, all were down
        ("config-register", 78, EVERY_FAULT),  # c1 paused 2.8 s into a read whose client waited 5 s
        # the soak's run on ab601fb: c1 refused a read at once for 4.6 s, rejoined c2 and c3 and led epoch
        # 5, was cut off again, and got the client's last attempt 0.1 s into that new stretch
        ("config-register", 280, SOAK_FAULTS),
        # the soak's run on 38fc020: c1, cut off 6.3 s and refusing at once, was killed by a `corrupt`
        # start 2 ms after the client's last attempt reached it; the kill reset that attempt (docs/trust/soak-398.md)
        ("config-append", 398, SOAK_FAULTS),
    ],
)
def test_the_correct_cluster_keeps_quorum_progress_valid(tmp_path, capsys, workload, seed, faults):
    argv = ["run", "--backend", "sim", "--workload", workload, "--seed", str(seed), "--time-limit", "60"]
    argv += ["--nodes", "3+2", "--nemesis", faults, "--nemesis-interval", "5", "--nemesis-duration", "5"]
    argv += ["--recovery", "10", "--results", str(tmp_path), "--no-progress"]
    if faults == SOAK_FAULTS:
        argv += ["--rate", "50", "--concurrency", "5"]  # the soak's, spelled out as in its test.json
    main(argv)
    (results,) = tmp_path.glob("*/[0-9]*/results.json")  # not the `latest` link
    verdict = json.loads(results.read_text())["checkers"]["quorum-progress"]
    assert verdict["valid"] is True, capsys.readouterr().out
