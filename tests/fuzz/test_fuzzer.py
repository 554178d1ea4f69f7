"""The fuzzer itself: a short run of every target keeps the contract, the fuzzer can fail, the CLI.

(The long run is `kchaos fuzz --budget 10m --seed N`; docs/trust/fuzzing.md has its record.)
"""

from __future__ import annotations

import random
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.fuzz import runner
from harness.fuzz.inprocess import NodeUnderTest
from harness.fuzz.mutate import mutate_value, sample
from harness.fuzz.real_node import fuzz_real_node
from harness.fuzz.real_voters import RealVoters, fuzz_real_voters
from node.process.process import CONTROLLER_LISTENER
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse
from node.protocol.registry import REQUESTS, RESPONSE_FOR, RESPONSES
from node.raft.base import LAST_EPOCH
from tests.fuzz.planted import plant_a_crash

CODEC = BinaryCodec()


def test_a_short_run_of_every_target_keeps_the_contract():
    report = runner.run(seed=11, max_inputs=1500)
    assert report.findings == {}, report.lines()
    for name in runner.TARGETS:
        stats = report.stats[name]
        assert stats.inputs > 0, name
        assert 0 < stats.refused < stats.inputs, (name, stats)  # both refused and accepted inputs were tried


@pytest.mark.parametrize("cls", REQUESTS + RESPONSES, ids=lambda c: c.__name__)
def test_every_message_type_is_sampled_and_encodes(cls):
    rng = random.Random(cls.__name__)
    for _ in range(20):
        message = sample(cls, rng)
        frame = CODEC.encode_response(1, message) if cls in RESPONSE_FOR.values() else CODEC.encode_request(1, message)
        assert type(CODEC.decode(frame).message) is cls


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    cls=st.sampled_from(REQUESTS + RESPONSES),
    seed=st.integers(0, 2**32 - 1),
    listener=st.sampled_from([CONTROLLER_LISTENER, "BROKER"]),
)
def test_hypothesis_any_mutated_frame_on_either_listener_is_answered_or_refused(cls, seed, listener):
    node = _NODE.get("node") or _NODE.setdefault("node", NodeUnderTest.from_properties(runner.COMBINED, 1))
    rng = random.Random(seed)
    node.feed_frame(listener, runner.mutated_frame(cls, rng), ("hyp", seed))  # a Finding fails the test
    node.advance(rng.choice((0, 100, 1000)))
    node.still_serves()


_NODE: dict[str, NodeUnderTest] = {}


def test_mutations_reach_the_edges_of_the_wire_types():
    rng = random.Random(5)
    seen = set()
    for _ in range(3000):
        message = mutate_value(sample(rng.choice(REQUESTS), rng), rng)
        seen.update(getattr(message, f) for f in message.__slots__ if isinstance(getattr(message, f), int))
    assert {2**31 - 1, -(2**31), 2**63 - 1, -1} <= seen


def test_the_fuzzer_reports_a_node_that_raises(monkeypatch):
    """A fuzzer that cannot fail proves nothing: a core that raises on some input is a finding."""
    plant_a_crash(monkeypatch)
    report = runner.run(seed=2, max_inputs=600, targets=("controller",))
    assert any("RuntimeError('planted')" in line for line in report.lines()), report.lines()
    assert len(report.findings) == 1 and next(iter(report.findings.values())).count > 1  # one kind, many inputs
    keys = [found.key for found in report.findings.values()]
    assert all(key.target == "controller" and 1 <= key.input <= runner.RESET_EVERY for key in keys)
    assert any("replay: kchaos fuzz --replay controller:" in line for line in report.lines())


def test_a_finding_replays_from_its_key_alone_with_its_input_and_traceback(monkeypatch):
    plant_a_crash(monkeypatch)
    report = runner.run(seed=2, max_inputs=600, targets=("controller",))
    key = next(iter(report.findings.values())).key
    seen = runner.replay(runner.ReplayKey.parse(str(key)))
    assert seen.finding is not None and "planted" in str(seen.finding)
    assert seen.at == key.input  # the same input of the same episode, not an earlier or a later one
    assert "decodes as DescribeQuorumRequest" in seen.input[1]
    assert "CONTROLLER" in seen.input[0] and "hex:" in seen.input[2]
    assert seen.state.startswith("node 1: ")
    assert isinstance(seen.finding.__cause__, RuntimeError)  # the node's own traceback is kept


def test_a_replay_of_an_episode_that_keeps_the_contract_says_so():
    seen = runner.replay(runner.ReplayKey("responses", 7, 400))
    assert seen.finding is None and seen.at == 400
    assert seen.input and "high watermark" in seen.state


def test_runs_of_one_seed_draw_the_same_inputs():
    """The replay keys are only worth printing if a run is a function of its seed."""
    first, second = runner.run(seed=5, max_inputs=900), runner.run(seed=5, max_inputs=900)
    assert first.stats == second.stats
    assert runner.run(seed=6, max_inputs=900).stats != first.stats


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("responses", "expected TARGET:SEED:INPUT"),
        ("nope:1:2", "unknown target 'nope'"),
        ("files:x:2", "must be integers"),
        ("files:1:0", "INPUT 1..3000"),
        ("files:-1:5", "SEED is 0.."),
    ],
)
def test_a_bad_replay_key_is_refused_in_one_line(capsys, text, says):
    assert main(["fuzz", "--replay", text]) == 254
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err and "--replay" in err


def test_kchaos_fuzz_replay_prints_the_finding_its_input_and_the_traceback(monkeypatch, capsys):
    plant_a_crash(monkeypatch)
    report = runner.run(seed=2, max_inputs=600, targets=("controller",))
    key = next(iter(report.findings.values())).key
    assert main(["fuzz", "--replay", str(key)]) == 1
    out = capsys.readouterr().out
    assert f"FINDING at input {key.input}: InboundRequest raised RuntimeError('planted')" in out
    assert "decodes as DescribeQuorumRequest" in out and "traceback:" in out and "RuntimeError: planted" in out


def test_kchaos_fuzz_replay_takes_no_run_options(capsys):
    assert main(["fuzz", "--replay", "files:1:2", "--seed", "0"]) == 254
    assert "--seed does not apply" in capsys.readouterr().err


def test_real_node_over_loopback_survives_mutated_frames_and_serves_fresh_clients():
    run = fuzz_real_node(seed=4, frames=120)
    assert "120 frames" in run.lines[0]
    assert not run.findings and "contract held" in run.lines[1], run.lines


def test_real_node_reports_a_broken_contract_as_a_finding_not_a_traceback(monkeypatch):
    """`kchaos fuzz --real-node` and `kchaos nightly --fuzz-real-node` print findings and exit 1; an
    exception out of the loop would be a traceback instead. A probe that fails stands in for a node
    that stopped serving."""
    import harness.fuzz.real_node as real_node

    def unserved(port: int) -> None:
        raise AssertionError(f"a fresh client on port {port} got no ApiVersions answer")

    monkeypatch.setattr(real_node, "probe_api_versions", unserved)
    run = fuzz_real_node(seed=4, frames=30)
    assert run.findings and "got no ApiVersions answer" in run.findings[0], run.lines
    assert run.lines[-1].startswith("  FINDING") and "1 frames" in run.lines[0], run.lines


def test_real_voters_answer_what_a_real_node_asks_and_the_contract_holds():
    """Voters 2 and 3 played over sockets: the node connects to them, asks them for votes and
    fetches, gets answers built from its reported state, and keeps the contract."""
    run = fuzz_real_voters(seed=5, frames=200)
    assert not run.findings, run.lines
    assert "200 frames to node 1" in run.lines[0] and "contract held" in run.lines[-1], run.lines
    (counts,) = re.findall(r"(\d+) answers to what it asked and (\d+) requests", run.lines[0])
    answers, requests = int(counts[0]), int(counts[1])
    assert answers > 0 and requests > 0 and answers + requests == 200
    asked = run.lines[1]
    assert "Fetch " in asked and "Vote " in asked, asked  # it followed someone, and ran for election


def test_loyal_real_voters_let_a_real_node_lead_and_commit_its_clients_writes(tmp_path):
    """The loyal phases over sockets: votes granted, fetches to its log end, a client's reads and
    writes; the real process becomes leader and its high watermark passes the writes it took."""
    voters = RealVoters(seed=2, workdir=tmp_path)
    rng, led_at = random.Random(2), None
    try:
        voters.start()
        deadline = time.monotonic() + 60
        for step in range(1, 5001):
            voters._loyal_step(rng.random(), rng)
            if step % 10 == 0:
                voters.refresh_view()
                if voters.tally.roles["leader"] and voters.view.high_watermark > 20:
                    led_at = step
                    break
            if time.monotonic() > deadline:
                break
        assert led_at is not None, (voters.tally.roles, voters.view)
        voters.probe()  # alive, and fresh clients served on both listeners
    finally:
        assert voters.close() == 0


def test_real_voters_start_afresh_a_node_brought_to_the_last_epoch(tmp_path):
    """An edge-valued epoch from a voter (BeginQuorumEpoch at LAST_EPOCH) leaves the node where it may
    never stand again, so it would never lead in a loyal phase again: it is stopped cleanly and started
    on a fresh data dir, and counted. (CI once saw a loyal phase end without a leader this way.)"""
    voters = RealVoters(seed=1, workdir=tmp_path)
    try:
        voters.start()
        for _ in range(50):
            voters.refresh_view()
            if voters.view.cluster_id:
                break
            time.sleep(0.1)
        message = BeginQuorumEpochRequest(voters.view.cluster_id, 2, LAST_EPOCH)
        voters._request(2, CODEC.encode_request(7, message))
        for _ in range(100):
            voters.pump(0.05)
            voters.refresh_view()
            if voters.tally.epochs_spent:
                break
        assert voters.tally.epochs_spent == 1 and voters.incarnation == 2, (voters.tally, voters.view)
        assert voters.tally.top_epoch == LAST_EPOCH and voters.view.epoch < LAST_EPOCH
        voters.probe()  # the new incarnation serves fresh clients
        text = voters.log_path.read_text()
        assert "Traceback" not in text
    finally:
        assert voters.close() == 0


def test_real_voters_report_a_node_that_died_as_a_finding(tmp_path):
    """The check can fail: a node gone by SIGKILL (no designed stop in its log) is a finding, not a restart."""
    voters = RealVoters(seed=1, workdir=tmp_path)
    try:
        voters.start()
        assert voters.proc is not None
        voters.proc.kill()
        voters.proc.wait()
        with pytest.raises(AssertionError, match=r"the node exited \(-9\)"):
            voters.probe()
        assert voters.incarnation == 1 and not voters.tally.designed_stops
        for _ in range(50):  # what a finding shows: the frames sent before it, even those that met no one
            voters.step()
            if voters.recent:
                break
        shown = voters.last_frames()
        assert shown[0] == "the last 1 frames sent, oldest first:" and "from voter" in shown[1], shown
        assert " bytes, " in shown[2] and shown[3].strip().startswith("hex: "), shown
    finally:
        voters.close()


def test_real_voters_start_a_node_stopped_by_design_again_on_a_fresh_data_dir(tmp_path):
    """A stop a KIP prescribes is counted and the node restarted: voter 2 announces itself leader, and
    answers node 1's Fetch with INVALID_CLUSTER_ID, on which KIP-595 stops the follower (exit 254)."""
    voters = RealVoters(seed=1, workdir=tmp_path)
    try:
        voters.start()
        first = voters.proc
        assert first is not None
        voters.outbound_link(2).send(CODEC.encode_request(1, BeginQuorumEpochRequest(None, 2, 1000)))
        deadline = time.monotonic() + 30
        while first.poll() is None and time.monotonic() < deadline:
            voters.pump(0.05)
            for link, cid, asked in list(voters.pending):
                if isinstance(asked, FetchRequest) and link.peer == 2:
                    voters.pending.remove((link, cid, asked))
                    answer = FetchResponse(int(ErrorCode.INVALID_CLUSTER_ID), 2, asked.current_leader_epoch, 0, 0)
                    link.send(CODEC.encode_response(cid, answer))
        assert first.wait(timeout=30) == 254
        voters.probe()
        assert voters.incarnation == 2 and voters.proc is not first and voters.proc.poll() is None
        assert voters.tally.designed_stops == {"(INVALID_CLUSTER_ID)": 1}
        assert (tmp_path / "data-2").is_dir()
    finally:
        voters.close()


def test_kchaos_fuzz_prints_counts_per_target_and_the_seed(capsys):
    assert main(["fuzz", "--budget", "30s", "--inputs", "200", "--seed", "77", "--target", "controller"]) == 0
    out = capsys.readouterr().out
    assert "seed 77" in out and "controller" in out and "200 inputs" in out


def test_kchaos_fuzz_real_node_ends_with_both_real_parts(capsys):
    assert main(["fuzz", "--inputs", "20", "--seed", "78", "--target", "broker", "--real-node", "30"]) == 0
    out = capsys.readouterr().out
    assert "real node (seed 78): 30 frames" in out and "real voters (seed 78): 30 frames to node 1" in out, out
    assert out.count("contract held") == 2, out


def test_kchaos_fuzz_refuses_an_unknown_target_in_one_line(capsys):
    assert main(["fuzz", "--budget", "1s", "--target", "nope"]) == 254
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--target nope" in err


def test_the_peers_target_reaches_the_deep_paths_of_the_quorum_core(tmp_path):
    """Its reason to exist: built from the node's state, its inputs make a follower truncate to a
    diverging epoch, copy and install a leader's snapshot, refuse damaged ones, win elections, and
    meet the stops the KIPs prescribe, within a few thousand inputs."""
    from collections import Counter

    from harness.fuzz.peers import PeersTarget

    actions: Counter[str] = Counter()
    warnings: list[str] = []
    stops = 0
    rng = random.Random("reach")
    for episode in range(3):
        target = PeersTarget(episode, tmp_path / str(episode))
        for _ in range(2000):
            node = target.node
            target(rng)
            if target.node is not node:  # a designed stop: the target started again
                stops += 1
                actions += node.outcome.actions
                warnings += node.outcome.warnings
        actions += target.node.outcome.actions
        warnings += target.node.outcome.warnings
    assert actions["TruncateLog"] and actions["ResetLog"] and actions["LoadSnapshot"], actions
    assert actions["WriteSnapshot"] and actions["HighWatermarkAdvanced"] and actions["PersistQuorumState"], actions
    assert any(" refused: " in w for w in warnings), warnings[:5]  # a damaged snapshot copy
    assert stops, "no designed stop: the target never played a leader cutting committed records"


def test_loyal_voters_let_node_1_lead_and_its_clients_reads_pass_the_read_barrier(tmp_path):
    """Half the peers episodes: voters 2 and 3 grant votes and fetch to its end, so node 1 leads,
    commits the clients' config changes and answers their reads once a read barrier completes (the
    unruly episodes seldom let it lead for long, and never reached the barrier's completion)."""
    from harness.fuzz.peers import PeersTarget
    from node.raft.records import ReadMarkerMessage, decode_control

    seed = next(s for s in range(100) if PeersTarget(s, tmp_path / f"probe-{s}").loyal)
    target = PeersTarget(seed, tmp_path / "loyal")
    node, rng, leading, completed = target.node, random.Random("loyal"), 0, []
    barriers = node.process.read_barrier

    def spy(on_done):  # every read barrier the controller starts, and how it ends
        barriers(lambda outcome: (completed.append(outcome.ok), on_done(outcome)))

    node.process.read_barrier = spy
    for _ in range(2000):
        target(rng)
        leading += target.node.raft.role.name == "LEADER"
    raft = target.node.raft
    markers = [
        r for b in raft.log.batches() if b.control for r in b.records if decode_control(r) == ReadMarkerMessage()
    ]
    assert target.node is node and leading > 1500, leading
    assert any(completed) and markers, (completed[:10], len(markers))
    assert raft.high_watermark > 100  # the clients' writes committed


def test_a_designed_stop_counts_only_for_what_voters_send():
    """A leader asking to cut committed records stops the node (as in Kafka): designed when a target
    plays the quorum's voters; the same Fatal on a node no voter talks to is a finding."""
    from harness.fuzz.inprocess import DesignedStop, Finding
    from node.raft.actions import Fatal

    node = NodeUnderTest.from_properties(runner.COMBINED, 1)
    stop = Fatal("leader asked to truncate to offset 3, below the high watermark 10")
    with pytest.raises(Finding):
        node._carry_out(stop)
    node.by_design_stops = 0
    with pytest.raises(DesignedStop):
        node._carry_out(stop)
    with pytest.raises(Finding):  # any other stop is a finding, whoever sent what caused it
        node._carry_out(Fatal("asked to truncate the log while it was being written"))
    assert node.by_design_stops == 1


def test_findings_of_one_kind_are_reported_once():
    kind = runner.finding_kind
    assert kind("Fatal: leader asked to truncate to offset 3, below the high watermark 10") == kind(
        "Fatal: leader asked to truncate to offset 40, below the high watermark 77"
    )
    assert kind("raised LogError('offset 4 outside [5, 6)') at log.py:66") == kind("raised LogError('x') at log.py:66")
    assert kind("raised LogError('x') at log.py:66") != kind("raised LogError('x') at log.py:84")  # two crash sites
    assert kind("elected leader 2 belongs to cluster abc-1, but this node's cluster is q9") == kind(
        "elected leader 3 belongs to cluster zz, but this node's cluster is x"
    )


def test_the_clients_target_gets_requests_past_the_controllers_first_checks(monkeypatch):
    """Its reason to exist: hinted with the image's ids and epochs, its AlterPartitions and config
    changes are accepted (error NONE for the partition or resource) and change the image, where
    sampled values stop at "unknown topic" or "stale broker epoch"."""
    from collections import Counter

    import node.raft.actions as A
    from harness.fuzz import inprocess
    from harness.fuzz.clients import ClientsTarget

    answers: Counter[tuple[str, int]] = Counter()
    carry_out = inprocess.NodeUnderTest._carry_out

    def spy(self, action):  # count the node's answers, per response type and per-item error code
        if isinstance(action, A.Respond):
            message = action.message
            items = [p for t in getattr(message, "topics", ()) or () for p in getattr(t, "partitions", ()) or ()]
            items += list(getattr(message, "responses", ()) or ())
            for item in items:
                answers[(type(message).__name__, int(item.error_code))] += 1
        return carry_out(self, action)

    monkeypatch.setattr(inprocess.NodeUnderTest, "_carry_out", spy)
    target = ClientsTarget(1)
    image = target.node.process.image
    assert len(image.brokers) == 3 and sorted(image.topics.values()) == ["t1", "t2"]  # the set-up
    rng = random.Random("clients")
    epochs: set[int] = set()
    for _ in range(3000):
        target(rng)
        image = target.node.process.image
        for topic_id in image.topics:
            epochs.update(p.partition_epoch for p in image.partitions(topic_id).values())
    assert answers[("AlterPartitionResponse", 0)] >= 5, answers
    assert answers[("IncrementalAlterConfigsResponse", 0)] >= 5, answers
    assert max(epochs) > 0 and image.config_resources, "nothing the requests asked for reached the image"
