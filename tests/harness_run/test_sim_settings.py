"""`--sut-setting` on the simulator: each key that means the same there reaches the simulated nodes'
own configs (Raft, controller, broker, snapshots), the run's quorum-progress header reads the same
timeouts, and a key the simulator cannot apply is refused before anything runs."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.db.kraft_settings import off_sim, sim_settings
from harness.runner import make_backend, run_test
from harness.test_spec import load_test
from tests.harness_run.helpers import sim_spec

SETTINGS = {
    "controller.quorum.election.timeout.ms": "1700",  # Kafka's spelling of a KIP-595 timeout
    "quorum.fetch.timeout.ms": "2500",  # KIP-595's
    "kchaos.raft.pre.vote.enable": "false",
    "broker.session.timeout.ms": "4000",
    "request.timeout.ms": "6000",
    "metadata.log.max.snapshot.interval.records": "7",
    "num.partitions": "3",
    "retry.backoff.ms": "150",
}


def test_each_key_maps_to_the_simulated_config_field_that_means_the_same() -> None:
    mapped = sim_settings(SETTINGS)
    assert mapped.raft == {"election_timeout_ms": 1700, "fetch_timeout_ms": 2500, "pre_vote": False}
    assert mapped.cluster == {
        "broker_session_timeout_ms": 4000,
        "request_timeout_ms": 6000,
        "snapshot_every_records": 7,
        "controller_options": {"num_partitions": 3},
        "broker_options": {"retry_backoff_ms": 150},
    }
    assert sim_settings({}).raft == {} and sim_settings({}).cluster == {}
    assert off_sim({**SETTINGS, "listeners": "x", "metadata.log.segment.bytes": "4096"}) == [
        "listeners",
        "metadata.log.segment.bytes",
    ]


def test_the_settings_reach_the_simulated_nodes_and_the_runs_own_header(tmp_path) -> None:
    spec = load_test(None, {"backend": "sim", "seed": 5, "time_limit_s": 3, "sut_settings": SETTINGS})
    backend = make_backend(spec, tmp_path)
    backend.setup()
    try:
        for node in backend.node_ids:
            backend.start(node)
        sim = backend.simulation
        assert sim.run_until_true(lambda: all(sim.process(n) is not None for n in sim.nodes), 5_000)
        raft = sim.raft(1).config
        assert (raft.election_timeout_ms, raft.fetch_timeout_ms, raft.pre_vote) == (1700, 2500, False)
        controller = sim.process(1).controller.config
        assert (controller.broker_session_timeout_ms, controller.num_partitions) == (4000, 3)
        cluster = sim.config.cluster  # what node/sim/components.py builds each broker's config from
        assert (cluster.request_timeout_ms, dict(cluster.broker_options)) == (6000, {"retry_backoff_ms": 150})
        assert cluster.snapshot_every_records == 7 and cluster.authorizer  # the run's own options kept
    finally:
        backend.teardown()
    result = run_test(spec, root=tmp_path / "runs", say=lambda _: None)
    header = json.loads((result.run.path / "commit-times.jsonl").read_text().splitlines()[0])
    assert header["fetch_timeout_ms"] == 2500  # quorum-progress judges silences by the nodes' own timeouts
    assert json.loads((result.run.path / "test.json").read_text())["sut_settings"] == SETTINGS


def test_without_settings_the_simulated_cluster_is_configured_as_before(tmp_path) -> None:
    """No setting adds nothing, so every seed replays the run it replayed before; `--no-pre-vote`
    (the test key) still turns pre-vote off, and a setting wins over it as on a real node."""
    from harness.backends.sim import run_cluster_options
    from node.sim.cluster import ClusterConfig

    backend = make_backend(sim_spec(seed=4), tmp_path)  # 3 controllers + 2 brokers
    assert backend.raft == {}
    assert backend.cluster_config == ClusterConfig(controllers=3, brokers=2, **run_cluster_options())
    assert make_backend(sim_spec(pre_vote=False), tmp_path).raft == {"pre_vote": False}
    on = sim_spec(pre_vote=False, sut_settings={"kchaos.raft.pre.vote.enable": "true"})
    assert make_backend(on, tmp_path).raft == {"pre_vote": True}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("listeners=BROKER://0.0.0.0:1", "'listeners' has no meaning on the simulator"),
        ("quorum.fetch.timeout.ms=soon", "quorum.fetch.timeout.ms: 'soon' is not an integer"),
        # below a real broker's 30 s lag time but not the simulated cluster's 3 s: it was an INVALID run
        (
            "kchaos.replica.heartbeat.interval.ms=4000",
            "kchaos.replica.heartbeat.interval.ms (4000) must be below replica.lag.time.max.ms (3000)",
        ),
    ],
)
def test_a_setting_the_simulator_cannot_apply_is_one_line_and_exit_254(tmp_path, capsys, setting, message) -> None:
    argv = ["run", "--backend", "sim", "--time-limit", "2", "--sut-setting", setting, "--results", str(tmp_path)]
    assert main(argv) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not list(tmp_path.iterdir())  # refused before any run directory was made
