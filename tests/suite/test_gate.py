"""The release gate: thresholds per cell over every run's measures, JUnit XML a CI reads (a case per
cell and threshold; failures carry the verdict line and the run directory), a one-page summary, and
exit codes 0 pass / 1 failed / 2 unknown / 254 error. End to end: suites/gate.toml passes on the
correct cluster and fails for planted bugs of each component."""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.gate import evaluate, gate_config, junit_xml, summary_html, summary_markdown
from harness.suite import RunRecord, SuiteResult, load_suite
from node.bugs import CATALOGUE
from vocab.errors import UserError

GATE_TOML = Path(__file__).resolve().parents[2] / "suites" / "gate.toml"

SUITE = """\
name = "judged"
seeds = 2

[matrix]
workloads = ["config-register"]
nemeses = { kill = ["kill"], calm = [] }
clusters = ["3"]

[gate]
availability_during_faults_pct = 50
p99_outside_faults_ms = 100
failover_s = 5

[[gate.cell]]
match = { nemesis = "calm" }
p99_outside_faults_ms = 20
"""


def record(cell: str, seed: int, verdict: str = "valid", **measures) -> RunRecord:
    line = {"invalid": "linearizable: False (2 ops)", "unknown": "run lost: hung"}.get(verdict, "")
    base = {"invalid_checkers": [], "anomalies": 0, "lost": 0, "recovery_after_heal_s": 1.0}
    return RunRecord(cell, seed, verdict, 0, line, [], f"/r/{cell}/{seed}", 1.0, None, {**base, **measures})


def judged(tmp_path: Path, records: list[RunRecord]) -> tuple[SuiteResult, object]:
    path = tmp_path / "judged.toml"
    path.write_text(SUITE)
    suite = load_suite(path)
    result = SuiteResult(suite, tmp_path, "judged/1", {r.key: r for r in records}, [], 3.0)
    return result, evaluate(result, gate_config(suite.gate, suite.where))


KILL, CALM = "config-register/kill/3/sim", "config-register/calm/3/sim"


def test_thresholds_pass_fail_skip_and_unknown_per_cell(tmp_path) -> None:
    good = [
        record(KILL, 1, availability_during_faults_pct=80.0, p99_outside_faults_ms=50.0, failover_s=2.0),
        record(KILL, 2, availability_during_faults_pct=60.0, p99_outside_faults_ms=90.0, failover_s=4.5),
        record(CALM, 1, p99_outside_faults_ms=10.0),
        record(CALM, 2, p99_outside_faults_ms=19.0),
    ]
    _, gate = judged(tmp_path, good)
    status = {(c.cell.id, c.threshold): c.status for c in gate.cases}
    assert status[(KILL, "availability_during_faults_pct")] == "pass"
    assert status[(CALM, "availability_during_faults_pct")] == "skipped"  # no op during a fault
    assert status[(CALM, "failover_s")] == "skipped" and status[(KILL, "failover_s")] == "pass"
    assert gate.exit_code == 0 and gate.verdict == "PASS"

    bad = [
        record(KILL, 1, "invalid", availability_during_faults_pct=40.0, p99_outside_faults_ms=50.0, failover_s=6.0),
        record(KILL, 2, lost=3, availability_during_faults_pct=60.0, p99_outside_faults_ms=50.0, failover_s=1.0),
        record(CALM, 1, p99_outside_faults_ms=30.0),  # over the calm cells' own 20 ms
        record(CALM, 2, "unknown"),
    ]
    _, gate = judged(tmp_path, bad)
    cases = {(c.cell.id, c.threshold): c for c in gate.cases}
    assert cases[(KILL, "checkers")].status == "fail" and "linearizable: False" in cases[(KILL, "checkers")].message
    assert cases[(KILL, "lost")].status == "fail" and cases[(KILL, "lost")].message == "3 acknowledged writes lost"
    assert cases[(KILL, "availability_during_faults_pct")].status == "fail"
    assert cases[(KILL, "availability_during_faults_pct")].value == 40.0
    assert (
        cases[(KILL, "failover_s")].status == "fail"
        and "/r/config-register/kill/3/sim/1" in cases[(KILL, "failover_s")].detail
    )
    assert cases[(CALM, "p99_outside_faults_ms")].status == "fail"
    assert cases[(CALM, "checkers")].status == "unknown"
    assert gate.exit_code == 1

    suite = ET.fromstring(junit_xml(gate)).find("testsuite")
    assert suite is not None and suite.get("failures") == "5" and suite.get("errors") == "1"
    failure = suite.find(f"testcase[@classname='{KILL}'][@name='checkers']/failure")
    assert failure is not None and failure.get("message") == "linearizable: False (2 ops)"
    assert "/r/config-register/kill/3/sim/1" in (failure.text or "")
    assert suite.find(f"testcase[@classname='{CALM}'][@name='checkers']/error") is not None
    assert suite.find(f"testcase[@classname='{CALM}'][@name='failover_s']/skipped") is not None
    page = summary_markdown(gate)
    assert page.startswith("# Release gate: FAIL") and "| config-register/kill/3/sim | **FAIL** |" in page
    assert "<title>gate judged/1: FAIL</title>" in summary_html(gate)

    broken = [
        record(KILL, 1, failover_s=1.0),
        RunRecord(KILL, 2, "valid", 0, "", [], "/r/k/2", 1.0, None, {"error": "KeyError: 'time'"}),
    ]
    _, gate = judged(tmp_path, [*broken, record(CALM, 1), record(CALM, 2)])
    case = next(c for c in gate.cases if c.cell.id == KILL and c.threshold == "failover_s")
    assert case.status == "unknown" and "KeyError" in case.message and gate.exit_code == 2

    only_unknown = [r if r.verdict != "invalid" else record(KILL, 1, failover_s=1.0) for r in bad[:1]]
    _, gate = judged(tmp_path, [*only_unknown, record(KILL, 2, failover_s=1.0), record(CALM, 1, "unknown")])
    assert gate.exit_code == 2 and gate.verdict == "UNKNOWN"  # CALM seed 2 never ran, seed 1 unknown


def test_the_elections_thresholds_fail_a_live_lock_and_a_leader_that_never_came(tmp_path) -> None:
    """A run whose checkers are all valid still fails on too many epochs per elected leader; a leader
    stop after which no leader committed fails the leaderless threshold even with no time measured."""
    (tmp_path / "e").mkdir()
    path = tmp_path / "e" / "judged.toml"
    extra = "failover_s = 5\nelections_per_leader_change = 3\nleaderless_after_resign_s = 1\n"
    path.write_text(SUITE.replace("failover_s = 5\n", extra))
    suite = load_suite(path)
    runs = [
        record(KILL, 1, elections_per_leader_change=1.2, leaderless_after_resign_s=0.05, leaderless_unrecovered=0),
        record(KILL, 2, elections_per_leader_change=7.8, leaderless_after_resign_s=None, leaderless_unrecovered=1),
        record(CALM, 1, elections_per_leader_change=1.0),
        record(CALM, 2, elections_per_leader_change=2.0),
    ]
    result = SuiteResult(suite, tmp_path, "judged/1", {r.key: r for r in runs}, [], 3.0)
    cases = {(c.cell.id, c.threshold): c for c in evaluate(result, gate_config(suite.gate, suite.where)).cases}
    assert cases[(KILL, "checkers")].status == "pass"
    assert cases[(KILL, "elections_per_leader_change")].status == "fail"
    assert cases[(KILL, "elections_per_leader_change")].value == 7.8
    assert cases[(KILL, "leaderless_after_resign_s")].status == "fail"
    assert "no leader committed" in cases[(KILL, "leaderless_after_resign_s")].message
    assert cases[(CALM, "elections_per_leader_change")].status == "pass"
    assert cases[(CALM, "leaderless_after_resign_s")].status == "skipped"


def test_bad_thresholds_are_one_line(tmp_path) -> None:
    for change, message in (
        ("failover_s = -5", "judged.toml:12: gate.failover_s: expected a number >= 0, got -5"),
        ("latency = 5", "judged.toml:12: gate.latency: unknown threshold 'latency'"),
        ("checkers = 5", "judged.toml:12: gate.checkers: expected true or false"),
        ('failover_s = 5\n[[gate.cell]]\nmatch = { size = "xl" }', "gate.cell[1].match: expected a table of"),
    ):
        path = tmp_path / "judged.toml"
        path.write_text(SUITE.replace("failover_s = 5", change))
        suite = load_suite(path)
        with pytest.raises(UserError) as caught:
            gate_config(suite.gate, suite.where)
        assert message in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    path.write_text(SUITE.replace("failover_s = 5", "failover_s = -5"))
    assert main(["gate", str(path), "--results", str(tmp_path)]) == 254  # refused before any run


@pytest.fixture
def results() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kchaos-gate-") as root:
        yield Path(root)


# The shipped file's wall limits (9 min before no run starts, 3 min before a run counts as hung) suit a gate
# that has the machine to itself; these tests share 2 cores with the suite's other workers (pytest-xdist),
# where a run of seconds can take minutes. One job each: the workers already fill the cores. What is judged
# (the runs, their verdicts, the thresholds) is the file's.
SHARED_MACHINE = ("--jobs", "1", "--budget", "45m", "--run-timeout", "15m")


def gate(results: Path, *argv: str) -> tuple[int, ET.Element, str]:
    junit = results / f"junit-{len(list(results.glob('junit-*')))}.xml"
    argv = (*SHARED_MACHINE, *argv)
    code = main(["gate", str(GATE_TOML), "--results", str(results), "--junit", str(junit), "--quiet", *argv])
    summary = junit.parent.glob("suites/gate/latest/gate-summary.md")
    return code, ET.parse(junit).getroot(), next(iter(summary)).read_text()


@pytest.mark.timeout(2700)  # 34 runs one at a time: 2 min alone, 15-20 min beside the suite's other workers
def test_the_shipped_gate_passes_on_the_correct_cluster(results, capsys) -> None:
    code, junit, summary = gate(results)
    capsys.readouterr()
    suite = junit.find("testsuite")
    assert suite is not None
    assert code == 0, [(c.get("classname"), c.get("name"), c[0].get("message")) for c in suite if len(c)]
    assert suite.get("failures") == "0" and suite.get("errors") == "0" and int(suite.get("tests")) >= 40
    assert summary.startswith("# Release gate: PASS")
    assert (results / "suites" / "gate" / "latest" / "gate-summary.html").is_file()


# One planted bug per component (raft, controller, broker, metadata, storage) runs in a quick
# `-m "not slow"` pass; the rest of the catalogue is marked slow.
SOME_BUGS = (
    "raft-vote-not-persisted",
    "ctl-envelope-unauthorized",
    "broker-read-offset-not-applied",
    "metadata-snapshot-omits-configs",
    "storage-flush-skips-fsync",
)

# The gate file's second seed is for Raft's Figure 8, which its all-kinds cells never catch at seed 1
# (docs/figures.md, the bug matrix), and for the follower that keeps a deposed leader's tail, which they stopped
# catching at seed 1 when issue 30's election changes moved the runs' timing (seed 2: four cells); every other
# bug fails seed 1 already, so the test runs only that seed for them and keeps the suite's time in bounds.
NEEDS_BOTH_SEEDS = {"raft-hwm-before-leader-change-committed", "raft-follower-truncates-to-leader-epoch-end"}

# Planted bugs the gate does not catch yet (docs/trust/rules.md would say why): none. The last
# one, a follower that copied a deposed leader's tail (`raft-follower-truncates-to-leader-epoch-end`), is
# caught since the simulator checks that a follower repairs a divergence (invariant 11, node/sim/invariants.py):
# registrations x all at seed 1, isr-changes x all at seed 2. (An old candidacy's Vote granted,
# `raft-vote-older-epoch-granted`, is caught since the forger's replayed Vote and the redeliver cell
# joined the gate: measured at e3960b4.)
# The test fails when a bug listed here starts being caught, or one not listed stops, so that this list
# and the page stay true.
NOT_CAUGHT_BY_GATE: set[str] = set()


# The gate run that caught each bug when this was written (2026-11-30, `kchaos gate --bug B --fail-fast`
# through the file's cells in order: 246 runs for the 33 bugs), named first with `--first`. Only the order
# moves: the test still asks whether the shipped gate fails, and if a listed run stops catching its bug, the
# gate goes on through every other cell and answers as before, only slower (the JUnit property
# `first_run_caught` of the test says which happened). With it the 33 tests run 49 runs, the 17 of
# `raft-end-quorum-epoch-ignored` among them: a threshold catches that one, not an invalid run, so
# `--fail-fast` never stops early for it and it has no entry.
CAUGHT_FIRST_BY = {
    "broker-forward-resend-ambiguous": "config-append/kill-leader/3+2/sim#1",
    "broker-read-offset-not-applied": "config-append/all/3+2/sim#1",
    "ctl-alter-partition-ignores-partition-epoch": "isr-changes/all/3+2/sim#1",
    "ctl-config-change-not-atomic": "config-append/all/3+2/sim#1",
    "ctl-envelope-unauthorized": "config-register/all/3+2/sim#1",
    "ctl-fenced-replica-into-isr": "isr-changes/all/3+2/sim#1",
    "ctl-no-fence-after-failover": "isr-changes/graceful-leader/3+2/sim#1",
    "ctl-read-without-barrier": "isr-changes/all/3+2/sim#1",
    "ctl-shutdown-before-leaders-moved": "isr-changes/kill-leader/3+2/sim#1",
    "ctl-stale-alter-partition-answer": "isr-changes/all/3+2/sim#1",
    "ctl-stale-heartbeat-accepted": "isr-changes/all/3+2/sim#1",
    "ctl-unfence-before-catch-up": "isr-changes/all/3+2/sim#1",
    "metadata-snapshot-omits-configs": "config-append/all/3+2/sim#1",
    "raft-begin-epoch-accepts-older-epoch": "config-append/kill-leader/3+2/sim#1",
    "raft-candidate-outbids-higher-epoch": "config-register/pause-leader/3+2/sim#1",
    "raft-describe-quorum-answered-by-non-leader": "isr-changes/all/3+2/sim#1",
    "raft-election-majority-off-by-one": "config-append/all/3+2/sim#1",
    "raft-follower-fetch-before-flush": "config-append/all/3+2/sim#1",
    "raft-follower-truncates-to-leader-epoch-end": "config-register/all/3+2/sim#2",
    "raft-hwm-before-leader-change-committed": "isr-changes/all/3+2/sim#2",
    "raft-leader-ignores-last-fetched-epoch": "config-append/all/3+2/sim#1",
    "raft-leader-never-resigns": "registrations/all/3+2/sim#1",
    "raft-leader-reelected-same-epoch": "config-register/no-pre-vote/3+2/sim#1",
    "raft-read-barrier-counts-late-fetches": "config-register/pause-leader/3+2/sim#1",
    "raft-vote-granted-twice-in-epoch": "config-append/kill-leader/3+2/sim#1",
    "raft-vote-not-persisted": "config-append/all/3+2/sim#1",
    "raft-vote-older-epoch-granted": "config-register/pause-leader/3+2/sim#1",
    "raft-vote-skips-log-up-to-date-check": "config-register/no-pre-vote/3+2/sim#1",
    "storage-crc-not-checked-on-load": "config-append/all/3+2/sim#1",
    "storage-flush-skips-fsync": "config-append/all/3+2/sim#1",
    "storage-quorum-state-rename-without-fsync": "config-append/all/3+2/sim#1",
    "storage-segment-roll-no-dir-fsync": "config-append/all/3+2/sim#1",
}


def catalogue_params() -> list:
    """Every planted bug, one test each (so that pytest-xdist spreads the catalogue over its workers)."""
    return [pytest.param(b.name, marks=() if b.name in SOME_BUGS else (pytest.mark.slow,)) for b in CATALOGUE]


# `--fail-fast`: the gate's answer for a bug is known at its first invalid run, and the cells after it
# only cost time (the whole catalogue once took 4,000 s of the suite's 10,000, one bug 1,000 s alone).
# A bug that only a measure catches (no run invalid) still runs every cell.
@pytest.mark.timeout(2700)  # 17 runs one at a time (34 for Figure 8): ~1 min alone, 19 min seen beside the suite
@pytest.mark.parametrize("bug", catalogue_params())
def test_the_shipped_gate_fails_for_a_planted_bug(results, bug, capsys, record_property) -> None:
    seeds = () if bug in NEEDS_BOTH_SEEDS else ("--seeds", "1")  # seed 1 of every cell catches each other bug
    first = ("--first", CAUGHT_FIRST_BY[bug]) if bug in CAUGHT_FIRST_BY else ()
    code, junit, summary = gate(results, "--bug", bug, *seeds, "--fail-fast", *first)
    capsys.readouterr()
    if first:
        journal = (results / "suites" / "gate" / "latest" / "runs.jsonl").read_text().splitlines()
        record_property("first_run_caught", json.loads(journal[0])["verdict"] == "invalid")
    failures = junit.findall(".//failure")
    if bug in NOT_CAUGHT_BY_GATE:
        assert code == 0 and not failures, f"{bug} is caught now: drop it from NOT_CAUGHT_BY_GATE ({summary})"
        return
    assert code == 1, summary
    assert bug in junit.get("name", "")
    assert failures and all(f.get("message") for f in failures)
    assert any(str(results / "suites" / "gate") in (f.text or "") for f in failures)  # names the bug's run
    assert summary.startswith("# Release gate: FAIL (gate/") and bug in summary.splitlines()[0]


def test_the_not_caught_list_names_only_planted_bugs() -> None:
    names = {b.name for b in CATALOGUE}
    assert not (NOT_CAUGHT_BY_GATE | NEEDS_BOTH_SEEDS | set(SOME_BUGS) | set(CAUGHT_FIRST_BY)) - names
